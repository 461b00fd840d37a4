"""A repository's history: commits, merges, reverts and cherry-picks onto its branches, its log and
its diffs.

Mixed into `Repository` (`repo.repository`), whose state it reads; a module of its own because
moving branches through commits is one concern, what a branch holds and its refs others. A commit
or merge that would bring back an object a running sweep may delete is checked against the
sweep's fence (`repo.fence`) in the transaction that moves the branch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakegc.errors import ConcurrentUpdate, DirtyBranch, InvalidArgument, MergeConflict, NothingToCommit
from lakegc.repo import fence, graph
from lakegc.repo.merge import three_way
from lakegc.repo.model import Change, Changes, ChangeType, Commit, Entry, as_changes
from lakegc.repo.reads import Reads, entry_from_row
from lakegc.timeutil import utcnow
from lakegc.uri import validate_path

if TYPE_CHECKING:
    from lakegc.repo.store import Tx
    from lakegc.repo.transactions import Transactions
    from lakegc.repo.trees import TreeStore

_RETRIES = 8


class History:
    """The history operations of `Repository`, on its store and trees."""

    store: Transactions[Tx, Reads]
    trees: TreeStore

    def commit(
        self,
        branch: str,
        message: str,
        *,
        date: datetime | None = None,
        allow_empty: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> Commit:
        """Apply the branch's staging to its HEAD tree. Only the staged rows we read are cleared, so a
        write that lands while we commit stays staged for the next commit."""
        for _ in range(_RETRIES):
            with self.store.snapshot() as tx:
                head = tx.commit(tx.branch_head(branch))
                staged = tx.staged_rows(branch)
            if not staged and not allow_empty:
                raise NothingToCommit(f"nothing to commit on branch {branch!r} (use --allow-empty)")
            changes: Changes = {r.path: None if r.tombstone else entry_from_row(r) for r in staged}
            tree = self.trees.apply(head.metarange_id, changes) if changes else head.metarange_id
            commit = new_commit((head.id,), tree, message, date or utcnow(), metadata or {})
            with self.store.write() as tx:
                if not tx.move_branch(branch, head.id, commit, changes):
                    continue
                tx.clear_committed(branch, staged)
            return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving while committing; try again")

    def merge(
        self,
        source: str,
        dest: str,
        *,
        message: str | None = None,
        date: datetime | None = None,
        allow_empty: bool = False,
    ) -> Commit:
        """Three-way merge of `source` into branch `dest` from their best common ancestor; always a
        merge commit with parents (dest HEAD, source)."""
        for _ in range(_RETRIES):
            with self.store.snapshot() as tx:
                src_id, _ = tx.resolve(source)
                head = tx.commit(tx.branch_head(dest))
                _refuse_dirty(tx, dest, "merge into")
                parents, dates = tx.parents_and_dates()
                base_id = graph.merge_base(parents, dates, head.id, src_id)
                src = tx.commit(src_id)
                base = tx.commit(base_id) if base_id else None
            if base is None:
                raise InvalidArgument(f"{source!r} and {dest!r} have no common ancestor")
            to_apply = self._three_way(base, head, src)
            if not to_apply and not allow_empty:
                raise NothingToCommit(f"nothing to merge from {source!r} into {dest!r} (use --allow-empty)")
            tree = self.trees.apply(head.metarange_id, to_apply) if to_apply else head.metarange_id
            commit = new_commit(
                (head.id, src.id), tree, message or f"Merge '{source}' into '{dest}'", date or utcnow(), {}
            )
            with self.store.write() as tx:
                fence.check(tx, sources=[src.id])
                if tx.move_branch(dest, head.id, commit, to_apply):
                    return commit
        raise ConcurrentUpdate(f"branch {dest!r} kept moving while merging; try again")

    def revert(self, branch: str, ref: str, *, parent: int = 1, date: datetime | None = None) -> Commit:
        """A commit on `branch` that undoes what commit `ref` changed against its parent."""
        return self._replay(branch, ref, parent, undo=True, date=date)

    def cherry_pick(self, branch: str, ref: str, *, parent: int = 1, date: datetime | None = None) -> Commit:
        """A commit on `branch` that applies what commit `ref` changed against its parent (number
        `parent` for a merge commit), with `ref`'s message and metadata."""
        return self._replay(branch, ref, parent, undo=False, date=date)

    def _replay(self, branch: str, ref: str, parent: int, *, undo: bool, date: datetime | None) -> Commit:
        """Apply onto `branch` the change commit `ref` made against its parent number `parent`, or
        its inverse (`undo`), three-way from there. Entries come out of `ref` (a cherry-pick) or its
        parent (a revert): that commit is the one the fence must allow."""
        action = "revert" if undo else "cherry-pick"
        for _ in range(_RETRIES):
            with self.store.snapshot() as tx:
                target = tx.commit(tx.resolve(ref)[0])
                head = tx.commit(tx.branch_head(branch))
                _refuse_dirty(tx, branch, f"{action} on")
                if not 1 <= parent <= len(target.parents):
                    raise InvalidArgument(f"commit {target.id[:12]} has no parent number {parent}")
                before = tx.commit(target.parents[parent - 1])
            base, source = (target, before) if undo else (before, target)
            to_apply = self._three_way(base, head, source)
            if not to_apply:
                raise NothingToCommit(f"{action} of {target.id[:12]} changes nothing on {branch!r}")
            tree = self.trees.apply(head.metarange_id, to_apply)
            message, metadata = (f"Revert {target.id}", {}) if undo else (target.message, dict(target.metadata))
            commit = new_commit((head.id,), tree, message, date or utcnow(), metadata)
            with self.store.write() as tx:
                fence.check(tx, sources=[source.id])
                if tx.move_branch(branch, head.id, commit, to_apply):
                    return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving during the {action}; try again")

    def _three_way(self, base: Commit, ours: Commit, theirs: Commit) -> Changes:
        to_apply, conflicts = three_way(
            as_changes(self.trees.diff(base.metarange_id, ours.metarange_id)),
            as_changes(self.trees.diff(base.metarange_id, theirs.metarange_id)),
        )
        if conflicts:
            raise MergeConflict(conflicts)
        return to_apply

    def log(
        self,
        ref: str,
        amount: int | None = None,
        *,
        first_parent: bool = False,
        since: datetime | None = None,
        stop_at: str | None = None,
        paths: Sequence[str] = (),
        prefixes: Sequence[str] = (),
    ) -> list[Commit]:
        """The commits reachable from `ref`, newest first (never a parent before its child), at
        most `amount`: only first parents with `first_parent`, none older than `since`, none past
        commit `stop_at` (which is shown), and with `paths` or `prefixes` only those that changed
        one of them against their first parent: from the commits' recorded tree changes, or, while
        the repository has commits from before they were recorded, by comparing their trees."""
        for path in paths:
            validate_path(path)
        touched: set[str] | None = None
        with self.store.snapshot() as tx:
            if (paths or prefixes) and not tx.commits_without_changes():
                changes = [*tx.changes_at(list(paths)), *tx.changes_under(list(prefixes))]
                touched = {r.commit_id for r in changes}
            start, _ = tx.resolve(ref)
            stop = tx.resolve(stop_at)[0] if stop_at else None
            parents, dates = tx.parents_and_dates()
            walk = graph.first_parents(parents) if first_parent else parents
            ids = []
            for commit_id in graph.log_order(walk, dates, start):
                if amount is not None and len(ids) >= amount:
                    break
                if since is None or dates[commit_id] >= since:
                    ids.append(commit_id)
                if commit_id == stop:
                    break
            by_id = tx.commits(ids + [p for i in ids for p in parents[i][:1]])
        if touched is not None:
            ids = [i for i in ids if i in touched]
        elif paths or prefixes:
            ids = [i for i in ids if self._touches(by_id[i], by_id, paths, prefixes)]
        return [by_id[i] for i in ids]

    def _touches(
        self, commit: Commit, by_id: Mapping[str, Commit], paths: Sequence[str], prefixes: Sequence[str]
    ) -> bool:
        """Did `commit` change any of `paths`, or anything under `prefixes`, against its first parent?"""
        after = commit.metarange_id
        before = by_id[commit.parents[0]].metarange_id if commit.parents else None

        def at(tree: str | None, path: str) -> Entry | None:
            return None if tree is None else self.trees.get(tree, path)

        if any(at(before, p) != at(after, p) for p in paths):
            return True
        if not prefixes:
            return False
        if before is None:  # a root commit changed whatever its tree holds
            return any(next(self.trees.entries(after, p), None) is not None for p in prefixes)
        return any(c.path.startswith(tuple(prefixes)) for c in self.trees.diff(before, after))

    def diff(self, left: str, right: str | None = None, *, three_dot: bool = False) -> list[Change]:
        """Committed changes from `left` to `right` (with `three_dot`, from their merge base to
        `right`: what `right` did since it last met `left`); with no `right`, the uncommitted
        changes of branch `left`."""
        if right is not None:
            with self.store.snapshot() as tx:
                a, b = tx.resolve(left)[0], tx.resolve(right)[0]
                if three_dot:
                    parents, dates = tx.parents_and_dates()
                    a = graph.merge_base(parents, dates, a, b) or a
                a_tree, b_tree = tx.commit(a).metarange_id, tx.commit(b).metarange_id
            return self.trees.diff(a_tree, b_tree)
        with self.store.snapshot() as tx:
            head = tx.commit(tx.branch_head(left))
            staged = tx.staged_rows(left, ordered=True)
        changes = []
        for r in staged:
            before = self.trees.get(head.metarange_id, r.path)
            after = None if r.tombstone else entry_from_row(r)
            if before != after:
                kind = (
                    ChangeType.ADDED if before is None else ChangeType.REMOVED if after is None else ChangeType.CHANGED
                )
                changes.append(Change(r.path, kind, before, after))
        return changes


def new_commit(parents: tuple[str, ...], tree: str, message: str, date: datetime, metadata: dict[str, Any]) -> Commit:
    """Commit ids hash their content: the same parents, tree, message, metadata and date are the same commit."""
    payload = json.dumps([list(parents), tree, message, metadata, date.isoformat()], sort_keys=True)
    return Commit(hashlib.sha256(payload.encode()).hexdigest(), parents, tree, message, date, metadata)


def _refuse_dirty(tx: Reads, branch: str, action: str) -> None:
    if tx.has_staging(branch):
        raise DirtyBranch(f"cannot {action} branch {branch!r}: it has uncommitted changes (commit or reset first)")
