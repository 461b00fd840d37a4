"""Plain values of the repository model: entries, commits, refs, changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakegc.retention.active import CommitNode  # the retention model: only GC and writers load it


class AddressKind(StrEnum):
    RELATIVE = "relative"  # a key inside the repository's namespace
    FULL = "full"  # a full URI outside it (linked or imported), never collected


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    address: str
    address_kind: AddressKind
    size: int
    checksum: str
    mtime: datetime
    metadata: str | None = None  # user metadata as JSON text, so entries stay hashable


@dataclass(frozen=True, slots=True)
class Precondition:
    """What a path must hold for a write to it to go ahead (HTTP's `If-None-Match: *` and
    `If-Match: ETAG`): decided in the write's own transaction, so no other writer slips between."""

    absent: bool = False
    checksum: str | None = None

    def holds(self, current: Entry | None) -> bool:
        if self.absent and current is not None:
            return False
        if self.checksum is None:
            return True
        return current is not None and current.checksum.strip('"') == self.checksum.strip('"')


@dataclass(frozen=True, slots=True)
class Commit:
    id: str
    parents: tuple[str, ...]
    metarange_id: str
    message: str
    creation_date: datetime
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Branch:
    name: str
    head: str


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    commit_id: str


@dataclass(frozen=True, slots=True)
class RepositoryInfo:
    name: str
    storage_namespace: str
    default_branch: str
    created_at: datetime


class ChangeType(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    type: ChangeType
    left: Entry | None
    right: Entry | None


@dataclass(frozen=True)
class CommitGraph:
    """The commit graph as retention reads it: commits (parents and dates), their trees, branch
    HEADs and tagged commits. Small: the driver of a GC run holds it whole."""

    commits: dict[str, CommitNode]
    metaranges: dict[str, str]  # commit id -> metarange id
    branches: dict[str, str]  # branch -> HEAD commit id
    tag_names: dict[str, str]  # tag -> commit id

    @property
    def tags(self) -> list[str]:
        """The tagged commit ids."""
        return list(self.tag_names.values())


# A set of edits to a tree: path -> new entry, or None to remove the path.
Changes = dict[str, Entry | None]


def as_changes(diff: list[Change]) -> Changes:
    """A diff as the edits that turn its left tree into its right one."""
    return {c.path: c.right for c in diff}
