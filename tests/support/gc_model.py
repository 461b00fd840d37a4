"""A reference model of lakegc's garbage collection, written from the spec (docs/design.md,
"What is live"), not from the code: it imports nothing from `lakegc.repogc`.

It is deliberately brute force. Where the planner prunes walks that an earlier walk already covered,
the model walks the whole first-parent chain from every starting point and takes the union, so it is
correct by reading, and any difference from the planner is a bug in one of them.

Active commits (lakeFS semantics):
- starting points: every branch HEAD, and every dangling leaf (a commit that is no commit's FIRST
  parent and no branch's HEAD);
- with `threshold = now - retention` of the starting point's branch (the default retention for a
  dangling leaf): a HEAD is always active; a parent on the chain is active iff its child on the chain
  was created strictly after the threshold (that child was HEAD `days` ago, so its parent was the
  HEAD then); a dangling leaf is active iff it was created after the threshold (a hypothetical HEAD
  with the leaf's date sits on top of it);
- second parents are never followed; tagged commits are active.
Nessie-style policies: `Count(n)` keeps the first n commits of the chain, HEAD first (for a dangling
leaf the hypothetical HEAD is the first of them); `Since(date)` keeps like a retention reaching back to
that date; `All()` keeps the whole chain.

Deleted objects:
    listed (data/ and the namespace root, never _lakegc/), last modified before now - min_age
  - addresses in the trees of active commits
  - uncommitted references: staged addresses of every branch, addresses of copy records made
    within the last COPY_RECORD_WINDOW, addresses of tokens that have not expired

Copy records guard the race between a shallow copy and GC's snapshot of staging; the copy's own
staged entry (or, once committed, its commit) is the lasting reference, so a record older than a day
no longer counts (decided in ac58aaf; the design once said "until committed").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

COPY_RECORD_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Commit:
    parents: tuple[str, ...]  # first parent first
    created: datetime


# -- retention policies -------------------------------------------------------------------------


@dataclass(frozen=True)
class Days:
    """lakeFS: keep what was reachable from the HEAD at some moment of the last `days` days."""

    days: float


@dataclass(frozen=True)
class Since:
    """Like Days, with the threshold given as a date."""

    threshold: datetime


@dataclass(frozen=True)
class Count:
    """Keep the first `n` commits of the first-parent chain, HEAD first."""

    n: int


@dataclass(frozen=True)
class All:
    """Keep every commit of the chain."""


Policy = Days | Since | Count | All
# branch name (None for a dangling leaf) -> its policy
Retention = Callable[[str | None], Policy]


def path_rule_index(path: str, globs: list[str]) -> int:
    """Path rules (gitignore-style globs, first match wins): 0 when none matches, else the 1-based
    index of the first that does. Written from the spec, segment by segment: `**` is any number of
    whole segments (a trailing `/**` at least one), `*`, `?` and `[...]` match within one; a glob
    with no `/` but a trailing one matches at any depth; a glob matching a folder matches everything
    in it."""
    parts = path.split("/")
    for index, glob in enumerate(globs, 1):
        body = glob.rstrip("/")
        anchored = "/" in body
        pattern = body.lstrip("/").split("/")
        if len(pattern) > 1 and pattern[-1] == "**":  # a trailing /** is everything inside: one segment at least
            pattern[-1:] = ["*", "**"]
        starts = [0] if anchored else range(len(parts))
        # the glob matches the path or any folder above it, from the root or (unanchored) any depth
        if any(_segments_match(pattern, parts[s:end]) for s in starts for end in range(s + 1, len(parts) + 1)):
            return index
    return 0


def _segments_match(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_segments_match(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _segments_match(pattern[1:], parts[1:])


def retention_from_rules(rules: Mapping | None) -> Retention:
    """lakeFS JSON rules (`{"default_retention_days", "branches": [{"branch_id", "retention_days"}]}`);
    no rules at all keeps every commit."""
    if rules is None:
        return lambda _branch: All()
    per_branch = {r["branch_id"]: r["retention_days"] for r in rules["branches"]}
    return lambda branch: Days(per_branch.get(branch, rules["default_retention_days"]))


# -- active commits -----------------------------------------------------------------------------


def first_parent_chain(commits: Mapping[str, Commit], start: str) -> list[str]:
    """`start`, its first parent, that one's first parent, ... down to a root."""
    chain = [start]
    while commits[chain[-1]].parents:
        chain.append(commits[chain[-1]].parents[0])
    return chain


def dangling_leaves(commits: Mapping[str, Commit], heads: Iterable[str]) -> set[str]:
    first_parents = {c.parents[0] for c in commits.values() if c.parents}
    return set(commits) - first_parents - set(heads)


def _threshold(policy: Days | Since, now: datetime) -> datetime:
    return now - timedelta(days=policy.days) if isinstance(policy, Days) else policy.threshold


def active_from(commits: Mapping[str, Commit], start: str, is_head: bool, policy: Policy, now: datetime) -> set[str]:
    """The commits one starting point keeps, walking its whole first-parent chain."""
    chain = first_parent_chain(commits, start)
    if isinstance(policy, All):
        return set(chain)
    if isinstance(policy, Count):
        # a dangling leaf has a hypothetical HEAD above it, which takes the first place
        return set(chain[: policy.n] if is_head else chain[: max(policy.n - 1, 0)])
    threshold = _threshold(policy, now)
    active = set()
    if is_head or commits[start].created > threshold:
        active.add(start)
    for child, parent in zip(chain, chain[1:]):
        if commits[child].created > threshold:
            active.add(parent)
    return active


def active_set(
    commits: Mapping[str, Commit],
    branches: Mapping[str, str],
    retention: Retention,
    now: datetime,
    tags: Iterable[str] = (),
) -> set[str]:
    """Union over every starting point, plus tagged commits."""
    active = set(tags) & set(commits)
    for branch, head in branches.items():
        active |= active_from(commits, head, True, retention(branch), now)
    for leaf in dangling_leaves(commits, branches.values()):
        active |= active_from(commits, leaf, False, retention(None), now)
    return active


# -- deleted objects ----------------------------------------------------------------------------


def listed(key: str) -> bool:
    """What GC lists: objects in the slices of `data/` (`data/<slice>/...`) and the namespace root's
    own files; never `_lakegc/`."""
    return (key.startswith("data/") and key.count("/") >= 2) or "/" not in key


def expected_deletions(
    objects: Mapping[str, datetime],
    now: datetime,
    min_age: timedelta,
    active: Iterable[str],
    trees: Mapping[str, Iterable[str]],
    staged: Iterable[str] = (),
    copies: Iterable[tuple[str, datetime]] = (),
    tokens: Mapping[str, datetime] | None = None,
    committed: set[str] | None = None,
) -> set[str]:
    """`objects`: namespace key -> last modified; `trees`: commit -> namespace keys of its entries
    (addresses outside the namespace left out); `copies`: (address, when copied) of every copy
    record; `tokens`: address -> expiry. `committed` (with path rules: `committed_keys`) replaces
    what `active` and `trees` say commits hold."""
    cutoff = now - min_age
    candidates = {key for key, mtime in objects.items() if listed(key) and mtime < cutoff}
    if committed is None:
        committed = {address for commit in active for address in trees[commit]}
    recent_copies = {address for address, copied in copies if copied > now - COPY_RECORD_WINDOW}
    live_tokens = {address for address, expires in (tokens or {}).items() if expires > now}
    return candidates - committed - set(staged) - recent_copies - live_tokens


def committed_keys(
    entries: Mapping[str, Iterable[tuple[str, str]]], active_by_class: list[set[str]], globs: list[str]
) -> set[str]:
    """With path rules: the keys of entries (commit -> (path, key)) whose commit is active under the
    rule of the entry's path (`active_by_class[0]`: no rule matched, the branches' own retention)."""
    return {
        key
        for commit, pairs in entries.items()
        for path, key in pairs
        if commit in active_by_class[path_rule_index(path, globs)]
    }
