"""The deletion guard: where a command that deletes may delete, decided before anything is listed.

Every delete path (repository GC, `catalog gc`, `iceberg gc`, and any connector after them) names
the root it cleans and the places it must never touch, and calls `check_root` first. Locations are
compared as they *really* are: a local path after resolving every symlink (a namespace reached
through a symlink into another one is that other one), an object-store location as its normalised
`s3://bucket/prefix` (`s3a://`, `s3n://` and trailing slashes are the same place). String prefixes
are not containment: `/lake/ns2` does not lie inside `/lake/ns`.

A root is refused when it is the filesystem root, a home folder (or holds one), or when it holds,
equals or lies inside a protected place: a metastore or catalog database file, another
repository's namespace, another table's location, lakegc's own home. The per-object half of the
guard lives in the storage backends (a local delete never follows a symlink out of its root, see
`LocalStorage.delete_many`).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import unquote, urlparse

from lakegc.errors import InvalidArgument, UnsafeLocation
from lakegc.storage import normalize_location, relative_to


@dataclass(frozen=True)
class Protected:
    """A place a delete must stay out of: `what` names it in the refusal ("repository 'lake'")."""

    what: str
    location: str  # normalised: file:///abs/path or s3://bucket/prefix
    inside_ok: bool = False  # a root inside it is fine (lakegc's home: only holding it is a risk)


def real_location(location: str) -> str:
    """The location as it really is: normalised, and for a local path with every symlink resolved
    (also in a path that does not exist yet: its existing part is resolved)."""
    normal = normalize_location(location)
    if not normal.startswith("file://"):
        return normal
    return Path(os.path.realpath(unquote(urlparse(normal).path))).as_uri()


def within(outer: str, inner: str) -> bool:
    """Is `inner` the same place as `outer` or below it (both normalised or real)?"""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def home_folders() -> frozenset[str]:
    """Every account's home folder, as real file URIs: the machine's own, and the current user's
    even when it is not in the password database."""
    homes = {p.pw_dir for p in pwd.getpwall() if p.pw_dir and p.pw_dir != "/"} | {str(Path.home())}
    return frozenset(real_location(h) for h in homes if h.startswith("/"))


def root_problem(root: str, what: str, homes: Iterable[str], protected: Iterable[Protected]) -> str | None:
    """Why `root` (real) must not be cleaned, or None. Pure: the caller resolved every location."""
    if root in ("file:///", "file://"):
        return f"{what} {root} is the filesystem root"
    for home in homes:
        if within(root, home):
            return f"{what} {root} is or holds the home folder {home}"
    for place in protected:
        if within(root, place.location):
            return f"{what} {root} holds {place.what} ({place.location})"
        if within(place.location, root) and not place.inside_ok:
            return f"{what} {root} lies inside {place.what} ({place.location})"
    return None


def check_root(location: str, what: str, protected: Iterable[Protected]) -> str:
    """Refuse (UnsafeLocation, one line) a root a delete must not clean; returns its real location."""
    root = real_location(location)
    resolved = [Protected(p.what, real, p.inside_ok) for p in protected if (real := _real_or_none(p.location))]
    problem = root_problem(root, what, home_folders() if root.startswith("file://") else (), resolved)
    if problem is not None:
        raise UnsafeLocation(f"refusing to clean {problem}: nothing was listed or deleted")
    return root


def namespace_overlap(location: str, others: Iterable[Protected]) -> str | None:
    """Why a new namespace may not be created at `location`: it equals, holds or lies inside
    another one, as written or as it really is (through symlinks). None when it may."""
    real = real_location(location)
    for other in others:
        other_real = real_location(other.location)
        for mine, theirs in ((location, other.location), (real, other_real)):
            if within(mine, theirs) or within(theirs, mine):
                shown = other.location if other_real == other.location else f"{other.location}, really {other_real}"
                return f"namespace {location} overlaps {other.what} ({shown})"
    return None


def namespace_key_of(namespace: str, location: str) -> str | None:
    """The key `location` (normalised) names in `namespace`, as written or through symlinks (an
    alias folder linked to the namespace, a symlinked file inside it), or None when it lies outside."""
    key = relative_to(namespace, location)
    if key is None and location.startswith("file://") and namespace.startswith("file://"):
        key = relative_to(real_location(namespace), real_location(location))
    return key


def _real_or_none(location: str) -> str | None:
    """A protected place on a store lakegc cannot address (`gs://`, `abfs://`) cannot overlap a root it can."""
    try:
        return real_location(location)
    except InvalidArgument:
        return None


def sqlite_file(url: str) -> str | None:
    """The database file of a SQLite URL (None for other databases and in-memory ones)."""
    import sqlalchemy as sa

    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return os.path.abspath(parsed.database)
