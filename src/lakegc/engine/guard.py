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

import pwd
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lakegc.errors import InvalidArgument, UnsafeLocation
from lakegc.storage import real_location, within


@dataclass(frozen=True)
class Protected:
    """A place a delete must stay out of: `what` names it in the refusal ("repository 'lake'")."""

    what: str
    location: str  # normalised: file:///abs/path or s3://bucket/prefix
    inside_ok: bool = False  # a root inside it is fine (lakegc's home: only holding it is a risk)
    holding_ok: bool = False  # a root holding it is fine (a warehouse run keeps a namespace whole)


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
        if within(root, place.location) and not (place.holding_ok and root != place.location):
            return f"{what} {root} holds {place.what} ({place.location})"
        if within(place.location, root) and not place.inside_ok:
            return f"{what} {root} lies inside {place.what} ({place.location})"
    return None


def check_root(
    location: str, what: str, protected: Iterable[Protected], refusal: str = "clean", outcome: str = ""
) -> str:
    """Refuse (UnsafeLocation, one line) a root a delete must not clean; returns its real location.
    `refusal` and `outcome` word the line for a caller that is not about to clean (`repo create`
    refuses to *use* a namespace, and creates nothing)."""
    root = real_location(location)
    resolved = [
        Protected(p.what, real, p.inside_ok, p.holding_ok) for p in protected if (real := _real_or_none(p.location))
    ]
    problem = root_problem(root, what, home_folders() if root.startswith("file://") else (), resolved)
    if problem is not None:
        raise UnsafeLocation(f"refusing to {refusal} {problem}: {outcome or 'nothing was listed or deleted'}")
    return root


def _real_or_none(location: str) -> str | None:
    """A protected place on a store lakegc cannot address (`gs://`, `abfs://`) cannot overlap a root it can."""
    try:
        return real_location(location)
    except InvalidArgument:
        return None
