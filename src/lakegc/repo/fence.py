"""The fence between a running sweep and writers that could bring an expired commit back.

A sweep deletes objects that, when it re-checked them, only expired commits referenced. A writer
acting meanwhile could make one of those commits count again (a branch or tag onto it, a branch
whose retention reaches back to it) or copy its entries into a new tree or into staging (a merge
from it, a revert to it, `fs cp` out of it), and its objects would be deleted under a live ref.

So a sweep first raises a fence: in ONE write transaction it reads the commit graph, decides which
commits are active now under the run's policies, and stores the others that the mark did not count
either (`expired`: the only commits the objects it may delete belong to). Every writer that moves a
ref or copies entries calls `check` inside its own write transaction. Write transactions are
serialised (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock), so each writer comes either
before the fence (and the sweep's re-check, which reads the metastore after the fence, sees and
protects what it did) or after it (and sees the fence). Correctness never depends on timing:

- a ref created or moved after the fence is refused when it would make any `expired` commit
  active again (the pure `active_commits` decides, with the run's own policies and "now");
- a merge from, a revert to, a copy out of an `expired` commit is refused;
- a commit, a merge or a revert moves a branch onto a new child of its HEAD: the HEAD was active,
  its new tree holds the HEAD's entries, staged ones (the re-check protects those staged before
  the fence; later ones are new uploads, tokens' fresh addresses, or copies that passed `check`)
  and a merge source's or revert target's (checked): never an object the sweep deletes.

The fence comes down when the sweep ends, however it ends. A sweeper that dies leaves it up until
the next run takes the lease over; the dead sweeper cannot delete any more by then, since every
delete batch checks the deadline its lease guaranteed (see `sweep`). `gc set-config` and
`delete-config` are refused while a fence stands: the sweep decided under the rules it read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakegc.errors import LakegcError
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from lakegc.repo.store import Tx
    from lakegc.retention.rules import Policies


class FencedByGc(LakegcError):
    """A change refused because a running sweep may be deleting what it would bring back."""


def raise_fence(
    tx: Tx, run_id: str, marked_active: set[str], params: dict[str, Any], marked_by_rule: Sequence[set[str]] = ()
) -> list[set[str]]:
    """Raise the fence of a sweep, in the write transaction `tx`; returns the commits active now,
    per path class (the branches' policies, then each path rule's; the re-check protects them).
    `params` are the run's recorded parameters (cutoffs, default_cutoff, now); `marked_by_rule` the
    commits the mark found active under each path rule (missing ones count as none: safe)."""
    from lakegc.retention.active import active_commits

    graph = tx.commit_graph()
    classes = _policies(tx, params).classes()
    marked = [marked_active, *(_nth(marked_by_rule, k) for k in range(len(classes) - 1))]
    active = [active_commits(graph.commits, graph.branches, of, graph.tags) for of in classes]
    expired = [sorted(set(graph.commits) - now - then) for now, then in zip(active, marked)]
    kept = {k: params[k] for k in ("cutoffs", "default_cutoff", "now")}
    if len(classes) > 1:
        kept["expired_by_class"] = expired
    tx.put_fence(run_id, sorted({c for e in expired for c in e}), kept, utcnow())
    return active


def _nth(sets: Sequence[set[str]], k: int) -> set[str]:
    return sets[k] if k < len(sets) else set()


def check(
    tx: Tx, *, sources: Iterable[str] = (), branch: tuple[str, str] | None = None, rules_change: bool = False
) -> None:
    """Refuse, inside a writer's transaction, a change that could bring back what a running sweep
    may delete: entries taken out of `sources` (commit ids), the ref `branch` (name, commit)
    created or moved, or a change of the retention rules."""
    row = tx.fence_row()
    if row is None:
        return
    expired = set(row.expired)
    why = f"GC run {row.run_id} is deleting objects of expired commits of {tx.repository!r}"
    if rules_change:
        raise FencedByGc(f"{why}: change the GC rules once it has finished (`gc runs` shows it)")
    for commit_id in sources:
        if commit_id in expired:
            raise FencedByGc(f"{why}, and commit {commit_id[:12]} is one of them: try again once the run has finished")
    if branch is not None:
        from lakegc.retention.active import active_commits  # the rules' models: only while a fence stands

        name, commit_id = branch
        graph = tx.commit_graph()
        heads = {**graph.branches, name: commit_id}
        by_class = [set(e) for e in row.parameters.get("expired_by_class", [])] or [expired]
        classes = _policies(tx, row.parameters).classes()
        revived = set().union(
            *(active_commits(graph.commits, heads, of, graph.tags) & gone for of, gone in zip(classes, by_class))
        )
        if revived:
            raise FencedByGc(
                f"{why}: branch {name!r} at {commit_id[:12]} would keep {len(revived)} of them "
                f"(e.g. {min(revived)[:12]}); try again once the run has finished"
            )


def _policies(tx: Tx, params: dict[str, Any]) -> Policies:
    """The run's policies, from its recorded parameters and the stored rules (unchanged while the
    fence stands)."""
    import json

    from lakegc.retention.rules import parse_rules, resolve_policies

    doc = tx.gc_rules_doc()
    rules = None if doc is None else parse_rules(json.dumps(doc))
    return resolve_policies(
        rules, tuple(params["cutoffs"]), params["default_cutoff"], datetime.fromisoformat(params["now"])
    )
