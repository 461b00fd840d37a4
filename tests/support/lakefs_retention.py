"""Which commits of a lakeFS repository its garbage collection keeps ("active"), decided as lakeFS
decides it (pkg/graveler/retention/active_commits.go, starting_point_iterator.go and
pkg/graveler/ref/commit_ordered_iterator.go in lakeFS's source), and the ids lakeFS makes (xid).

The rules, as lakeFS applies them:
- starting points are every branch HEAD (hidden branches too) and every "ancestry leaf": a commit
  that is no commit's first parent (a dangling commit, say of a deleted branch), merged in commit-id
  order; a leaf that is also a HEAD is taken once, as the HEAD;
- a branch HEAD is always active; its retention is its branch's rule, else the default;
- walking down the first-parent line from a starting point, a commit's PARENT is active when the
  commit (the child) was created after `now - retention days`: so every commit inside the period is
  active, and so is the first one before it (the one a child inside the period replaced);
- a dangling leaf gets a hypothetical HEAD created when the leaf was: the leaf is active if it is
  itself inside the DEFAULT retention period, and the walk goes on from it;
- a commit already reached on a path whose threshold is as old or older (a longer retention) stops
  the walk: that path's decision wins.
"""

from __future__ import annotations

import base64
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

UNIX_YEAR_4000 = 64060588800  # lakeFS's pivot for ids whose order is the reverse of time


@dataclass(frozen=True)
class CommitNode:
    """What retention reads of a commit: its parents (first = main line) and when it was made."""

    parents: tuple[str, ...]
    created: datetime
    version: int = 1  # lakeFS's CommitVersionParentSwitch: older commits (0) name the main parent last

    @property
    def main_parent(self) -> str:
        if not self.parents:
            return ""
        return self.parents[0] if self.version >= 1 else self.parents[-1]


def ancestry_leaves(commits: Mapping[str, CommitNode]) -> set[str]:
    """Commits that are no commit's first parent (ref.getAllFirstParents: a two-parent commit of
    version 0 counts its second parent as the first)."""
    first_parents = set()
    for node in commits.values():
        if node.parents:
            index = 1 if node.version < 1 and len(node.parents) > 1 else 0
            first_parents.add(node.parents[index])
    return set(commits) - first_parents


def _starting_points(commits: Mapping[str, CommitNode], branches: Mapping[str, str]) -> list[tuple[str, str]]:
    """(commit id, branch or "") in lakeFS's merged order: heads and leaves by commit id, a leaf that
    is some branch's HEAD dropped in favour of the HEAD."""
    heads = sorted((commit, branch) for branch, commit in branches.items())
    head_ids = {commit for commit, _ in heads}
    leaves = [(commit, "") for commit in sorted(ancestry_leaves(commits)) if commit not in head_ids]
    return sorted(heads + leaves, key=lambda point: point[0])


def active_commits(
    commits: Mapping[str, CommitNode],
    branches: Mapping[str, str],
    default_retention_days: int,
    branch_retention_days: Mapping[str, int],
    now: datetime | None = None,
) -> set[str]:
    """The ids of the commits lakeFS's GC keeps. `branches` maps every branch (hidden ones too) to
    its HEAD commit id."""
    now = now or datetime.now(UTC)
    processed: dict[str, datetime] = {}
    active: set[str] = set()
    for start, branch in _starting_points(commits, branches):
        node = commits[start]
        days = default_retention_days
        if branch:
            days = branch_retention_days.get(branch, default_retention_days)
            active.add(start)
        else:  # a dangling leaf: a hypothetical HEAD, made when the leaf was, above it
            node = CommitNode((start,), node.created)
        threshold = now - timedelta(days=days)
        if branch:
            processed[start] = threshold
        while node.main_parent:
            parent = node.main_parent
            if parent in processed and not processed[parent] > threshold:
                break  # reached before with a retention as long or longer: that decision stands
            if node.created > threshold:
                active.add(parent)
            node = commits[parent]
            processed[parent] = threshold
    return active


class _Xid:
    """lakeFS's unique ids (github.com/rs/xid): 4 bytes of seconds, 3 of machine, 2 of process, 3
    of counter, in lowercase base32hex: 20 characters."""

    def __init__(self) -> None:
        self._machine = secrets.token_bytes(3)
        self._counter = int.from_bytes(secrets.token_bytes(3), "big")
        self._lock = threading.Lock()

    def new(self, seconds: int | None = None) -> str:
        with self._lock:
            self._counter = (self._counter + 1) % (1 << 24)
            counter = self._counter
        seconds = int(datetime.now(UTC).timestamp()) if seconds is None else seconds
        raw = (
            (seconds % (1 << 32)).to_bytes(4, "big")
            + self._machine
            + (os.getpid() % (1 << 16)).to_bytes(2, "big")
            + counter.to_bytes(3, "big")
        )
        return base64.b32hexencode(raw).decode().rstrip("=").lower()

    def descending(self, when: datetime | None = None) -> str:
        """An id whose order is the reverse of time: lakeFS's GC run ids and data partitions."""
        now = int((when or datetime.now(UTC)).timestamp())
        return self.new(UNIX_YEAR_4000 - now)


XID = _Xid()


def xid_time(value: str) -> datetime:
    """The time an xid was made at (its first 4 bytes)."""
    raw = base64.b32hexdecode(value.upper() + "====")
    return datetime.fromtimestamp(int.from_bytes(raw[:4], "big"), UTC)
