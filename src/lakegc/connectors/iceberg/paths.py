"""File locations as Iceberg metadata writes them and as a listing finds them, compared the way
Iceberg's orphan-file removal does (pure functions).

Metadata may spell a location differently from the store's listing: `s3a://` or `s3n://` for
`s3://`, another authority for the same bucket, `file:/` for `file:///`. Files are matched on their
path; the scheme (after s3a/s3n -> s3) and the authority must then agree, or the metadata side must
leave them out. Paths are compared as written, never URL-decoded: FileIO stores a file under the
path its metadata spells, so a partition value pyiceberg escapes (`ts=10%3A00`) is a literal `%3A`
in the store, and decoding either side would part a file from its reference. A path that matches with a different scheme or authority is a *prefix mismatch*:
it may be the same file reached another way, or another file; `PrefixMismatch` says what to do.
"""

from __future__ import annotations

import posixpath
import re
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

    def same_prefix(self, referenced: "Location") -> bool:
        """Whether a listed file (self) is the file `referenced` names, given their paths agree;
        what the metadata leaves out matches anything."""
        return ((not referenced.scheme or referenced.scheme == self.scheme)
                and (not referenced.authority or referenced.authority == self.authority))


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
    own name starts so."""
    *folders, name = key.split("/")
    if name[:1] in ("_", "."):
        return True
    return any(part[:1] in ("_", ".") and not ("=" in part and part.split("=", 1)[0] in partition_fields)
               for part in folders)
