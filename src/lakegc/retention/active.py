"""Which commits stay active: lakeFS's retention semantics as a pure function over the commit graph.

Starting points are every branch HEAD and every dangling leaf (a commit that is no commit's first
parent and no branch's HEAD: what deleted branches and resets leave behind). From each, we walk the
first-parent chain:
- a HEAD is always active;
- a parent is active when its child on the chain was created after the threshold, because that
  child was then HEAD: the commit that was HEAD `days` ago stays, along with everything newer;
- the walk goes on to the root, past old commits (with backdated, out-of-order dates a newer stretch
  further down still keeps its parents);
- a dangling leaf walks as if a hypothetical HEAD with the leaf's own date sat on top of it, so the
  leaf itself is active only when created after the threshold;
- second parents are not followed: their own branches' HEADs cover them.
A commit reached from several starting points keeps the longest retention, whatever the order of
the walks (see `_walk_threshold`). Tagged commits are active too (lakeFS ignores tags; users asked
otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from lakegc.retention.rules import KeepAll, KeepCount, PolicyOf

_BEGINNING = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class CommitNode:
    parents: tuple[str, ...]
    created: datetime


def dangling_leaves(commits: Mapping[str, CommitNode], heads: Iterable[str]) -> list[str]:
    first_parents = {c.parents[0] for c in commits.values() if c.parents}
    head_set = set(heads)
    return sorted(c for c in commits if c not in first_parents and c not in head_set)


def active_commits(
    commits: Mapping[str, CommitNode], branches: Mapping[str, str], policy_of: PolicyOf, tagged: Iterable[str] = ()
) -> set[str]:
    """`branches` maps branch name -> HEAD commit id. Returns the ids of the active commits."""
    active: set[str] = set(tagged) & commits.keys()
    walked: dict[str, datetime] = {}  # commit -> lowest threshold its parent edge was judged with
    starts: list[tuple[str | None, str]] = sorted((b, c) for b, c in branches.items())
    starts += [(None, leaf) for leaf in dangling_leaves(commits, branches.values())]
    for branch, start in starts:
        policy = policy_of(branch)
        if branch is not None:
            active.add(start)
        if isinstance(policy, KeepCount):
            active |= _walk_count(commits, start, policy.count - (branch is None))
            continue
        threshold = _BEGINNING if isinstance(policy, KeepAll) else policy.threshold
        if branch is None and commits[start].created > threshold:  # the hypothetical HEAD above the
            active.add(start)  # leaf, created when the leaf was
        active |= _walk_threshold(commits, start, threshold, walked)
    return active


def _walk_threshold(
    commits: Mapping[str, CommitNode], start: str, threshold: datetime, walked: dict[str, datetime]
) -> set[str]:
    """Mark parents along the first-parent chain. A commit whose parent edge an earlier walk already
    judged with a threshold as low or lower needs no second look: that walk marked everything this
    one would (a lower threshold keeps more). Pruning at the commit, not at its parent, is what makes
    the result independent of walk order; lakeFS prunes at the parent, so a parent reached by an old
    branch first can miss the newer child that should keep it."""
    found: set[str] = set()
    node = start
    while True:
        if walked.get(node, datetime.max.replace(tzinfo=UTC)) <= threshold:
            return found
        walked[node] = threshold
        commit = commits[node]
        if not commit.parents:
            return found
        parent = commit.parents[0]
        if commit.created > threshold:
            found.add(parent)
        node = parent


def _walk_count(commits: Mapping[str, CommitNode], start: str, count: int) -> set[str]:
    """The first `count` commits of the first-parent chain from `start` (inclusive)."""
    found: set[str] = set()
    node: str | None = start
    while node is not None and len(found) < count:
        found.add(node)
        parents = commits[node].parents
        node = parents[0] if parents else None
    return found
