"""File locations as Iceberg metadata writes them and as a listing finds them, compared the way
Iceberg's orphan-file removal does (pure functions).

Metadata may spell a location differently from the store's listing: `s3a://` or `s3n://` for
`s3://`, another authority for the same bucket, `file:/` for `file:///`. Files are matched on their
path; the scheme (after s3a/s3n -> s3) and the authority must then agree, or the metadata side must
leave them out. Paths are compared as written, never URL-decoded: FileIO stores a file under the
path its metadata spells, so a partition value pyiceberg escapes (`ts=10%3A00`) is a literal `%3A`
in the store, and decoding either side would part a file from its reference. A path that matches
with a different scheme or authority is a *prefix mismatch*:
it may be the same file reached another way, or another file; `PrefixMismatch` says what to do.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3"}


class PrefixMismatch(StrEnum):
    ERROR = "error"  # stop before deleting anything, naming the prefixes (the safe default)
    IGNORE = "ignore"  # keep such files: they are probably referenced
    DELETE = "delete"  # delete them: they are not the file the metadata names


@dataclass(frozen=True)
class Location:
    scheme: str
    authority: str
    path: str

    def same_prefix(self, referenced: Location) -> bool:
        """Whether a listed file (self) is the file `referenced` names, given their paths agree;
        what the metadata leaves out matches anything."""
        return (not referenced.scheme or referenced.scheme == self.scheme) and (
            not referenced.authority or referenced.authority == self.authority
        )


_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?://([^/]*))?(.*)", re.DOTALL)


def parse_location(uri: str) -> Location:
    """`scheme://authority/path`, `scheme:/path` or a bare path (a local file), with the scheme
    mapped and lower-cased, the authority lower-cased, and repeated slashes and dot segments folded.
    `?` and `#` are part of the path, as in a store's keys."""
    match = None if uri.startswith("/") else _URI.fullmatch(uri)
    if match is None:
        scheme, authority, path = "file", "", uri
    else:
        scheme, authority, path = match.group(1).lower(), (match.group(2) or "").lower(), match.group(3)
        scheme = EQUAL_SCHEMES.get(scheme, scheme)
    path = posixpath.normpath("/" + re.sub("/+", "/", path).lstrip("/"))
    return Location(scheme, authority, path)


def within(location: Location, root: Location) -> bool:
    """`location` is `root` or lies under it (same scheme and authority)."""
    same_store = location.scheme == root.scheme and location.authority == root.authority
    return same_store and (location.path == root.path or location.path.startswith(root.path.rstrip("/") + "/"))


def overlap(a: Location, b: Location) -> bool:
    """Two table locations share files when one lies within the other."""
    return within(a, b) or within(b, a)


def hidden(key: str, partition_fields: frozenset[str]) -> bool:
    """Iceberg leaves alone what writers hide: a path component starting with `_` or `.` (`_SUCCESS`,
    `.crc` files, `_temporary/`), unless it is a partition folder `<field>=<value>` of a field whose
    own name starts so. `partition_fields` must be the fields of the table the file belongs to
    (`owners_partition_fields`): another table's `_field` says nothing about this table's folders."""
    *folders, name = key.split("/")
    if name[:1] in ("_", "."):
        return True
    return any(
        part[:1] in ("_", ".") and not ("=" in part and part.split("=", 1)[0] in partition_fields) for part in folders
    )


def owners_partition_fields(key: str, scopes: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The partition field names that may un-hide a folder on `key`'s path, as Iceberg's
    DeleteOrphanFiles does with the partition specs (all of them) of the one table it cleans.
    `scopes` maps the key prefix of each collected table location under the listed root ("" for
    the root itself, `b/c/` for a table at `root/b/c`) to its tables' partition field names; the
    file belongs to the innermost location holding it, and the fields are those of the tables
    at exactly that location (their union, when several share it: any of them may have written
    there). A key no scope holds gets none."""
    owner = max((prefix for prefix in scopes if key.startswith(prefix)), key=len, default=None)
    return scopes[owner] if owner is not None else frozenset()


# -- tables inside tables --------------------------------------------------------------------------
# A table's location may hold another table's (a sub-folder, or a warehouse-wide table above its
# siblings): the other table's files, orphans included, are its own business, never the holder's.
# Locations here are *real* ones (symlinks resolved, `real_location`), so a nested table is found
# however its location is spelled.


def relation(a: Location, b: Location) -> str:
    """How `a` stands to `b`: "same", "inside" (a lies under b), "holds" (b lies under a) or "apart"."""
    if within(a, b):
        return "same" if within(b, a) else "inside"
    return "holds" if within(b, a) else "apart"


def nested_locations(root: Location, others: Iterable[Location]) -> list[Location]:
    """The locations strictly under `root`, outermost only (one nested inside another goes with
    it), sorted: the subtrees a listing of `root` leaves out. A location equal to `root` is not
    nested: that table shares the root, and its references protect its files there."""
    inner = {o for o in others if relation(o, root) == "inside"}
    return sorted((o for o in inner if not any(relation(o, p) == "inside" for p in inner)), key=lambda o: o.path)


def key_prefix(root: Location, nested: Location) -> str:
    """The key prefix (`b/c/`) of a location nested under `root`, as a listing of `root` spells keys."""
    return nested.path[len(root.path.rstrip("/")) + 1 :] + "/"


def listing_plan(targets: Iterable[Location], others: Iterable[Location]) -> list[tuple[Location, list[Location]]]:
    """The locations to list (shortest first) and, for each, the other tables' locations nested
    in it to leave out. A target inside another target's location is covered by that listing,
    unless a location left out of it holds the target: then the target is listed on its own."""
    others = list(others)
    plan: list[tuple[Location, list[Location]]] = []
    for target in sorted(set(targets), key=lambda t: (len(t.path), t.scheme, t.authority, t.path)):
        covered = any(within(target, root) and not any(within(target, o) for o in out) for root, out in plan)
        if not covered:
            plan.append((target, nested_locations(target, others)))
    return plan


def symlink_conflict(written_a: Location, real_a: Location, written_b: Location, real_b: Location) -> bool:
    """Two table locations overlap once symlinks are resolved, but not as they are written: one is,
    or is reached through, a symlink into the other. Such a pair is refused, not collected: its
    files are named by one path in one table's metadata and found under another by the other's
    listing, so no reference could protect them."""
    real = relation(real_a, real_b)
    return real != "apart" and relation(written_a, written_b) != real
