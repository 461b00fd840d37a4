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
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lakegc.retention.rules import KeepAll, KeepCount, KeepSince, Policy, PolicyOf

_BEGINNING = datetime.min.replace(tzinfo=UTC)
_END = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class CommitNode:
    parents: tuple[str, ...]
    created: datetime


@dataclass(frozen=True, slots=True)
class Held:
    """Why a commit is active: the walk that keeps it (its branch; None for a dangling commit) and
    until when it stays retained if nothing changes (None: as long as nothing changes, for a HEAD,
    a NONE or count policy or a retention reaching back to a fixed date)."""

    branch: str | None
    until: datetime | None


@dataclass(frozen=True, slots=True)
class Lapsed:
    """Why a commit is expired: the walk that judged it last (its branch; None for a dangling commit)
    and when it stopped being retained (None when the policy says no moment: a count or a date)."""

    branch: str | None
    at: datetime | None


@dataclass
class ActiveCommits:
    """The decision for every commit: `active` (what GC keeps), and for each the evidence a walk
    left: `held` for active commits a branch or dangling walk keeps (tagged-only ones have none),
    `lapsed` for the expired ones."""

    active: set[str]
    held: dict[str, Held] = field(default_factory=dict)
    lapsed: dict[str, Lapsed] = field(default_factory=dict)
    tagged: set[str] = field(default_factory=set)


def dangling_leaves(commits: Mapping[str, CommitNode], heads: Iterable[str]) -> list[str]:
    first_parents = {c.parents[0] for c in commits.values() if c.parents}
    head_set = set(heads)
    return sorted(c for c in commits if c not in first_parents and c not in head_set)


def active_commits(
    commits: Mapping[str, CommitNode], branches: Mapping[str, str], policy_of: PolicyOf, tagged: Iterable[str] = ()
) -> set[str]:
    """`branches` maps branch name -> HEAD commit id. Returns the ids of the active commits."""
    return decide_commits(commits, branches, policy_of, tagged).active


def decide_commits(
    commits: Mapping[str, CommitNode], branches: Mapping[str, str], policy_of: PolicyOf, tagged: Iterable[str] = ()
) -> ActiveCommits:
    """Active commits with their evidence: the one decision GC runs make (`active_commits`) and
    `gc explain` shows."""
    tags = set(tagged) & commits.keys()
    result = ActiveCommits(set(tags), tagged=tags)
    walked: dict[str, datetime] = {}  # commit -> lowest threshold its parent edge was judged with
    starts: list[tuple[str | None, str]] = sorted((b, c) for b, c in branches.items())
    starts += [(None, leaf) for leaf in dangling_leaves(commits, branches.values())]
    for branch, start in starts:
        policy = policy_of(branch)
        if branch is not None:
            _hold(result, start, Held(branch, None))
        if isinstance(policy, KeepCount):
            _walk_count(result, commits, branch, start, policy.count - (branch is None))
            continue
        threshold = _BEGINNING if isinstance(policy, KeepAll) else policy.threshold
        if branch is None:  # the hypothetical HEAD above the leaf, created when the leaf was
            _judge(result, start, commits[start].created, branch, policy, threshold)
        _walk_threshold(result, commits, branch, start, policy, threshold, walked)
    return result


def _walk_threshold(
    result: ActiveCommits,
    commits: Mapping[str, CommitNode],
    branch: str | None,
    start: str,
    policy: Policy,
    threshold: datetime,
    walked: dict[str, datetime],
) -> None:
    """Judge parents along the first-parent chain. A commit whose parent edge an earlier walk already
    judged with a threshold as low or lower needs no second look: that walk kept everything this one
    would, each for as long or longer (a lower threshold keeps more). Pruning at the commit, not at
    its parent, is what makes the result independent of walk order; lakeFS prunes at the parent, so
    a parent reached by an old branch first can miss the newer child that should keep it."""
    node = start
    while True:
        if walked.get(node, _END) <= threshold:
            return
        walked[node] = threshold
        commit = commits[node]
        if not commit.parents:
            return
        parent = commit.parents[0]
        _judge(result, parent, commit.created, branch, policy, threshold)
        node = parent


def _judge(
    result: ActiveCommits, commit: str, child_created: datetime, branch: str | None, policy: Policy, threshold: datetime
) -> None:
    """A commit whose child on the walk's chain was created at `child_created`: it was HEAD until
    then, so it is retained while the threshold lies before that moment."""
    retention = policy.retention if isinstance(policy, KeepSince) else None
    moment = child_created + retention if retention is not None else None
    if child_created > threshold:
        _hold(result, commit, Held(branch, moment))
    else:
        _lapse(result, commit, Lapsed(branch, moment))


def _hold(result: ActiveCommits, commit: str, held: Held) -> None:
    """Keep the evidence that retains the longest (None: for as long as nothing changes)."""
    result.active.add(commit)
    result.lapsed.pop(commit, None)
    known = result.held.get(commit)
    if known is None or (known.until is not None and (held.until is None or held.until > known.until)):
        result.held[commit] = held


def _lapse(result: ActiveCommits, commit: str, lapsed: Lapsed) -> None:
    if commit in result.active:
        return
    known = result.lapsed.get(commit)
    if known is None or (lapsed.at is not None and (known.at is None or lapsed.at > known.at)):
        result.lapsed[commit] = lapsed


def _walk_count(
    result: ActiveCommits, commits: Mapping[str, CommitNode], branch: str | None, start: str, count: int
) -> None:
    """Keep the first `count` commits of the first-parent chain from `start` (inclusive); the rest of
    the chain lapsed, down to where another walk already found it lapsed."""
    node: str | None = start
    kept = 0
    while node is not None:
        if kept < count:
            _hold(result, node, Held(branch, None))
            kept += 1
        elif node in result.lapsed:  # another count walk went on from here
            return
        else:
            _lapse(result, node, Lapsed(branch, None))
        parents = commits[node].parents
        node = parents[0] if parents else None
