"""Why one object is kept or collected: `gc explain`.

A run decides for every object at once (`mark`); explain decides for one, with the same pieces, so
the two cannot drift apart:

- the same snapshot: the uncommitted references and the commit graph read in one transaction, in
  the run's order (`GcSource.references_to`, the run's `GcSource.snapshot` for one key);
- the same commit decision: `decide_commits` is what `active_commits` returns for a run, with the
  evidence the walks left (which branch keeps a commit and until when, when an expired one lapsed);
- the same rule for an object (`judge`): listed by a run (`repogc.listing.is_listed`), not younger
  than the min-age, and referenced neither by anything uncommitted nor by an entry of a commit that
  is active, under the retention of the entry's path (path rules) - else collected.

What explain looks up instead of marking: the object itself (one stat), its uncommitted references
and the commits holding it, by address in the metastore (`GcSource.references_to`: each commit
records its tree changes, so the paths the object was put at and their history tell which trees
hold it, without reading one). A repository with commits from before those records (schema v5)
is answered by reading its trees instead (`references.trees_holding`: each distinct range once, on
the driver). No listing, no Spark job, nothing written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import pyarrow.compute as pc

from lakegc.engine.runs import Run, RunFolder, RunState
from lakegc.errors import NotFound
from lakegc.repo.gc_source import GcSource, UncommittedRef
from lakegc.repo.model import CommitGraph
from lakegc.repogc.listing import is_listed
from lakegc.repogc.references import trees_holding
from lakegc.retention.active import ActiveCommits, decide_commits
from lakegc.retention.rules import Policies
from lakegc.storage import Storage, read_table
from lakegc.storage.base import ObjectInfo
from lakegc.timeutil import epoch_seconds


class Verdict(StrEnum):
    KEEP = "keep"
    COLLECT = "collect"
    DELETED = "deleted"  # a run already deleted it
    OUTSIDE = "outside"  # GC never touches it: not in the namespace, or not where a run lists


@dataclass(frozen=True)
class Reason:
    """One reason behind a verdict. `kind` says which fields it has (`FIELDS`):

    keep:    commit (commit, branch, path, retained_until), tag (tag, commit, path),
             staged (branch, path), copy (copied_at), token (branch, path, expires_at),
             young (mtime, min_age)
    collect: expired (commit, branch, path, expired_at), unreferenced ()
    outside: outside (why)

    `rule` (commit, expired) is the path rule whose retention decided, when one matched."""

    kind: str
    commit: str | None = None
    branch: str | None = None
    path: str | None = None
    tag: str | None = None
    retained_until: datetime | None = None
    expired_at: datetime | None = None
    copied_at: datetime | None = None
    expires_at: datetime | None = None
    mtime: datetime | None = None
    min_age: str | None = None
    rule: str | None = None
    why: str | None = None

    FIELDS = {
        "commit": ("commit", "branch", "path", "retained_until", "rule"),
        "tag": ("tag", "commit", "path"),
        "staged": ("branch", "path"),
        "copy": ("copied_at",),
        "token": ("branch", "path", "expires_at"),
        "young": ("mtime", "min_age"),
        "expired": ("commit", "branch", "path", "expired_at", "rule"),
        "unreferenced": (),
        "outside": ("why",),
    }

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind}
        for name in self.FIELDS[self.kind]:
            value = getattr(self, name)
            if name == "rule" and value is None:
                continue  # only where a path rule decided
            doc[name] = epoch_seconds(value) if isinstance(value, datetime) else value
        return doc


@dataclass(frozen=True)
class Explanation:
    """What `gc explain` found for one object: its verdict and every reason for it."""

    repository: str
    address: str  # the full location
    key: str | None  # the namespace key (None: outside the namespace)
    verdict: Verdict
    reasons: tuple[Reason, ...]
    deleted_by: str | None = None
    size: int | None = None
    mtime: datetime | None = None
    now: datetime | None = None
    policy: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "verdict": str(self.verdict),
            "reasons": [r.to_json() for r in self.reasons],
            "deleted_by": self.deleted_by,
            "repository": self.repository,
            "key": self.key,
            "size": self.size,
            "mtime": epoch_seconds(self.mtime) if self.mtime else None,
            "now": epoch_seconds(self.now) if self.now else None,
            "policy": self.policy,
        }


@dataclass(frozen=True)
class Holder:
    """An entry of a committed tree naming the object."""

    commit: str
    path: str


@dataclass(frozen=True)
class Facts:
    """Everything the verdict on one listed, present object depends on."""

    info: ObjectInfo
    uncommitted: Sequence[UncommittedRef]
    holders: Sequence[Holder]  # in the order reasons are given: newest commit first
    tags: Mapping[str, list[str]]  # commit -> its tags
    decisions: Sequence[ActiveCommits]  # per path class: [the branches' policies, then each path rule's]
    path_class: Callable[[str], int]  # 0: no path rule matches; k: the k-th rule
    rule_names: Sequence[str] = field(default_factory=list)  # the globs, by class - 1


def judge(facts: Facts, now: datetime, min_age: timedelta) -> tuple[Verdict, tuple[Reason, ...]]:
    """The verdict on a listed object that is present, and every reason for it (pure): kept when
    young, referenced by anything uncommitted, or held by an entry of a commit active under the
    retention of that entry's path; collected otherwise, as a run collects it."""
    keep: list[Reason] = []
    if facts.info.mtime >= now - min_age:
        keep.append(Reason("young", mtime=facts.info.mtime, min_age=_duration(min_age)))
    for ref in facts.uncommitted:
        if ref.source == "staged":
            keep.append(Reason("staged", branch=ref.branch, path=ref.path))
        elif ref.source == "copy":
            keep.append(Reason("copy", copied_at=ref.when))
        else:
            keep.append(Reason("token", branch=ref.branch, path=ref.path, expires_at=ref.when))
    expired: list[Reason] = []
    for holder in facts.holders:
        cls = facts.path_class(holder.path)
        decision = facts.decisions[cls]
        rule = facts.rule_names[cls - 1] if cls else None
        for tag in facts.tags.get(holder.commit, []):
            keep.append(Reason("tag", tag=tag, commit=holder.commit, path=holder.path))
        if holder.commit in decision.held:
            held = decision.held[holder.commit]
            keep.append(
                Reason("commit", commit=holder.commit, branch=held.branch, path=holder.path, rule=rule,
                       retained_until=held.until)
            )  # fmt: skip
        elif holder.commit not in decision.active:
            lapsed = decision.lapsed.get(holder.commit)
            expired.append(
                Reason("expired", commit=holder.commit, path=holder.path, rule=rule,
                       branch=lapsed.branch if lapsed else None, expired_at=lapsed.at if lapsed else None)
            )  # fmt: skip
    if keep:
        return Verdict.KEEP, tuple(keep)
    return Verdict.COLLECT, tuple(expired) or (Reason("unreferenced"),)


def explain_key(
    source: GcSource,
    key: str | None,
    address: str,
    policies: Policies,
    now: datetime,
    min_age: timedelta,
    runs: Iterable[Run],
    folder_of: Callable[[str], RunFolder],
) -> Explanation:
    """Explain the object at namespace key `key` (None: `address` is outside the namespace) of the
    repository `source`, as a run started at `now` with `policies` and `min_age` would judge it.
    `runs` (newest first) and their folders tell which run deleted an object that is gone."""

    def explained(verdict: Verdict, reasons: Iterable[Reason], **more: Any) -> Explanation:
        return Explanation(
            source.name, address, key, verdict, tuple(reasons), now=now, policy=policies.described, **more
        )

    if key is None:
        return explained(Verdict.OUTSIDE, [Reason("outside", why="not in the repository's namespace")])
    if not is_listed(key):
        why = "lakegc's own metadata" if key.startswith("_lakegc/") else "not under data/<slice>/ or the namespace root"
        return explained(Verdict.OUTSIDE, [Reason("outside", why=f"{why}: GC never lists it")])
    info = source.storage.stat(key)
    if info is None:
        run_id = deleted_by(key, runs, folder_of)
        if run_id is None:
            raise NotFound(f"no object at {address}: the namespace does not hold it and no run deleted it")
        return explained(Verdict.DELETED, [], deleted_by=run_id)
    refs = source.references_to(now, key)
    uncommitted, graph = refs.uncommitted, refs.graph
    held = refs.holders if refs.holders is not None else _commits_holding(graph, key, source.storage)
    holders = sorted(
        (Holder(commit, path) for commit, paths in held.items() for path in paths),
        key=lambda h: (-graph.commits[h.commit].created.timestamp(), h.commit, h.path),
    )  # newest commit first
    classes = policies.classes()
    facts = Facts(
        info,
        uncommitted,
        holders,
        _tags_of(graph),
        [decide_commits(graph.commits, graph.branches, policy_of, graph.tags) for policy_of in classes],
        policies.path_class,
        [rule.glob for rule in policies.path_rules],
    )
    verdict, reasons = judge(facts, now, min_age)
    return explained(verdict, reasons, size=info.size, mtime=info.mtime)


def _commits_holding(graph: CommitGraph, key: str, storage: Storage) -> dict[str, list[str]]:
    """Commit -> the paths at which its tree holds `key`, by reading every distinct range of the
    repository: for repositories with commits from before their changes were recorded."""
    trees = trees_holding(storage, set(graph.metaranges.values()), key)
    return {commit: trees[tree] for commit, tree in graph.metaranges.items() if tree in trees}


def _tags_of(graph: CommitGraph) -> dict[str, list[str]]:
    tags: dict[str, list[str]] = {}
    for name, commit in sorted(graph.tag_names.items()):
        tags.setdefault(commit, []).append(name)
    return tags


def deleted_by(key: str, runs: Iterable[Run], folder_of: Callable[[str], RunFolder]) -> str | None:
    """The newest run whose `deleted/` output says it deleted `key` (None: no run did)."""
    for run in runs:
        if run.state not in (RunState.SWEEPING, RunState.SWEPT, RunState.FAILED) or run.dry_run:
            continue
        folder = folder_of(run.run_id)
        for part in folder.parts("deleted"):
            table = read_table(folder.storage, part)
            if pc.any(pc.and_(pc.equal(table["address"], key), pc.fill_null(table["deleted"], False))).as_py():
                return run.run_id
    return None


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
