"""The repository's metadata in the metastore: the SQL statements the repository runs, in one place
with its plain-SQL reads (`repo.reads`, which a `Tx` is too).

A `Tx` is one open transaction over a repository, read or write (`repo.transactions` opens them),
and offers the statements the repository API (`repository.py`) composes: it decides nothing, and the
API never writes SQL. Writers get the metastore's discipline (`Metastore.write`): write transactions
are serialised, so a compare-and-set of a branch HEAD, a staging version bump or the sweep's fence
check sees every write before it.

The statements about the lake as a whole (its repositories, the token secret) are `repo.lakestore`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lakegc.errors import AlreadyExists
from lakegc.metastore import schema as t
from lakegc.metastore.sql import starts_with, text_query
from lakegc.repo.model import Changes, Commit, CommitGraph, Entry
from lakegc.repo.reads import Reads, StagedRow
from lakegc.retention.active import CommitNode

_INSERT_BATCH = 10_000  # rows per INSERT statement


class Tx(Reads):
    """One transaction over one repository's metadata: the reads of `Reads`, in this transaction,
    and the statements that write or that GC runs."""

    def __init__(self, conn: Connection, repository: str):
        super().__init__(text_query(conn), repository)
        self.conn = conn

    def _of(self, table: sa.Table) -> sa.ColumnElement[bool]:
        return table.c.repository == self.repository

    # -- refs ---------------------------------------------------------------
    def commit_graph(self) -> CommitGraph:
        rows = self.conn.execute(
            sa.select(t.commits.c.id, t.commits.c.parents, t.commits.c.creation_date, t.commits.c.metarange_id).where(
                self._of(t.commits)
            )
        ).all()
        return CommitGraph(
            {r.id: CommitNode(tuple(r.parents), r.creation_date) for r in rows},
            {r.id: r.metarange_id for r in rows},
            self.branch_heads(),
            {tag.name: tag.commit_id for tag in self.tags()},
        )

    def metaranges(self) -> set[str]:
        return set(
            self.conn.execute(sa.select(t.commits.c.metarange_id).where(self._of(t.commits)).distinct()).scalars()
        )

    def insert_commit(self, commit: Commit, changes: Changes) -> None:
        """Record `commit` with `changes`, the edits that turn its first parent's tree (the empty
        tree for a root commit) into its own: `tree_changes`, which `gc explain` looks objects up in."""
        exists = self.conn.execute(
            sa.select(t.commits.c.id).where(self._of(t.commits), t.commits.c.id == commit.id)
        ).first()
        if exists:
            return  # the same content: the same parents and tree, so the same changes
        self.conn.execute(
            t.commits.insert().values(
                repository=self.repository,
                id=commit.id,
                parents=list(commit.parents),
                metarange_id=commit.metarange_id,
                message=commit.message,
                metadata=commit.metadata,
                creation_date=commit.creation_date,
                changes_recorded=True,
            )
        )
        rows = [
            {
                "repository": self.repository,
                "commit_id": commit.id,
                "path": path,
                "address": None if entry is None else entry.address,
                "address_kind": None if entry is None else str(entry.address_kind),
            }
            for path, entry in changes.items()
        ]
        for start in range(0, len(rows), _INSERT_BATCH):
            self.conn.execute(t.tree_changes.insert(), rows[start : start + _INSERT_BATCH])

    def move_branch(self, branch: str, expected_head: str, commit: Commit, changes: Changes) -> bool:
        """Compare-and-set of the branch HEAD, recording the commit (and `changes`, see
        `insert_commit`) only when it wins: a commit that lost the race would be an orphan GC has to
        keep as a dangling leaf."""
        moved = self.conn.execute(
            t.branches.update()
            .where(
                self._of(t.branches),
                t.branches.c.name == branch,
                t.branches.c.head == expected_head,
            )
            .values(head=commit.id)
        ).rowcount
        if moved:
            self.insert_commit(commit, changes)
        return bool(moved)

    def insert_branch(self, name: str, commit_id: str) -> None:
        self.conn.execute(t.branches.insert().values(repository=self.repository, name=name, head=commit_id))

    def delete_branch(self, name: str) -> None:
        """The branch and its staging."""
        self.clear_staging(name)
        self.conn.execute(t.branches.delete().where(self._of(t.branches), t.branches.c.name == name))

    def refuse_taken_ref_name(self, name: str) -> None:
        for table, kind in ((t.branches, "branch"), (t.tags, "tag")):
            if self.conn.execute(sa.select(table.c.name).where(self._of(table), table.c.name == name)).first():
                raise AlreadyExists(f"a {kind} named {name!r} already exists in {self.repository!r}")

    def insert_tag(self, name: str, commit_id: str) -> None:
        self.conn.execute(t.tags.insert().values(repository=self.repository, name=name, commit_id=commit_id))

    def delete_tag(self, name: str) -> bool:
        return bool(self.conn.execute(t.tags.delete().where(self._of(t.tags), t.tags.c.name == name)).rowcount)

    # -- staging ------------------------------------------------------------
    def _staging_of(self, branch: str) -> sa.ColumnElement[bool]:
        return sa.and_(self._of(t.staged_entries), t.staged_entries.c.branch == branch)

    def next_staging_version(self) -> int:
        """A new staging version for what this write stages or copies (writers queue on one lock,
        so versions follow the order of the writes): a GC sweep re-checks only what was staged or
        copied after its mark."""
        repo = t.repositories
        self.conn.execute(
            repo.update().where(repo.c.name == self.repository).values(staging_version=repo.c.staging_version + 1)
        )
        return self.conn.execute(sa.select(repo.c.staging_version).where(repo.c.name == self.repository)).scalar_one()

    def stage(self, branch: str, entry: Entry, version: int | None = None) -> None:
        self.unstage(branch, entry.path)
        version = version if version is not None else self.next_staging_version()
        self.conn.execute(
            t.staged_entries.insert().values(
                repository=self.repository,
                branch=branch,
                path=entry.path,
                address=entry.address,
                address_kind=str(entry.address_kind),
                size=entry.size,
                checksum=entry.checksum,
                mtime=entry.mtime,
                metadata=entry.metadata,
                tombstone=False,
                version=version,
            )
        )

    def stage_deletion(self, branch: str, path: str) -> None:
        self.conn.execute(
            t.staged_entries.insert().values(repository=self.repository, branch=branch, path=path, tombstone=True)
        )

    def unstage(self, branch: str, path: str) -> None:
        self.conn.execute(t.staged_entries.delete().where(self._staging_of(branch), t.staged_entries.c.path == path))

    def clear_staging(self, branch: str, prefix: str = "") -> int:
        """Drop the branch's staged changes (those whose path starts with `prefix`); how many."""
        where = [self._staging_of(branch)]
        if prefix:
            where.append(starts_with(t.staged_entries.c.path, prefix))
        return self.conn.execute(t.staged_entries.delete().where(*where)).rowcount

    def clear_committed(self, branch: str, rows: list[StagedRow]) -> None:
        """Drop exactly the staged rows a commit read, not what was staged while it committed: one
        statement, executed for every row (a commit may clear 100,000s)."""
        if rows:
            self.conn.execute(
                t.staged_entries.delete().where(
                    self._staging_of(branch),
                    t.staged_entries.c.path == sa.bindparam("p"),
                    t.staged_entries.c.address.is_not_distinct_from(sa.bindparam("a")),
                    t.staged_entries.c.tombstone == sa.bindparam("tomb"),
                ),
                [{"p": r.path, "a": r.address, "tomb": r.tombstone} for r in rows],
            )

    def record_copy(self, address: str, when: datetime, version: int) -> None:
        self.conn.execute(
            t.copy_records.insert().values(
                repository=self.repository, address=address, created_at=when, version=version
            )
        )

    # -- slices -------------------------------------------------------------
    def newest_slice(self) -> sa.Row | None:
        return self.conn.execute(
            sa.select(t.slices).where(self._of(t.slices)).order_by(t.slices.c.name).limit(1)
        ).first()

    def open_slice(self, name: str, now: datetime, writable_until: datetime) -> None:
        self.conn.execute(
            t.slices.insert().values(
                repository=self.repository, name=name, created_at=now, objects=1, writable_until=writable_until
            )
        )

    def count_into_slice(self, name: str, writable_until: datetime) -> None:
        """One more object in the slice, which stays writable until the later of its window and
        `writable_until` (an unknown window stays unknown)."""
        self.conn.execute(
            t.slices.update()
            .where(self._of(t.slices), t.slices.c.name == name)
            .values(
                objects=t.slices.c.objects + 1,
                writable_until=sa.case(
                    (t.slices.c.writable_until.is_(None), None),
                    (t.slices.c.writable_until > writable_until, t.slices.c.writable_until),
                    else_=writable_until,
                ),
            )
        )

    def slice_rows(self) -> list[sa.Row]:
        return self.conn.execute(
            sa.select(t.slices.c.name, t.slices.c.created_at, t.slices.c.writable_until).where(self._of(t.slices))
        ).all()

    # -- address tokens -----------------------------------------------------
    def issue_token(self, address: str, branch: str, path: str, expires: datetime, *, now: datetime) -> None:
        """Record an address handed out; expired ones go (nothing redeems or protects them), so
        clients asking for addresses they never link do not grow the table without end."""
        self.conn.execute(
            t.address_tokens.delete().where(self._of(t.address_tokens), t.address_tokens.c.expires_at <= now)
        )
        self.conn.execute(
            t.address_tokens.insert().values(
                repository=self.repository, address=address, branch=branch, path=path, expires_at=expires
            )
        )

    def issued_token(self, address: str) -> sa.Row | None:
        """The unredeemed token issued for `address` (branch, path, expires_at), if any."""
        tokens = t.address_tokens.c
        return self.conn.execute(
            sa.select(tokens.branch, tokens.path, tokens.expires_at).where(
                self._of(t.address_tokens), tokens.address == address
            )
        ).first()

    def redeem_token(self, address: str) -> bool:
        """Tokens are single-use: redeeming deletes the issued row (in the transaction that stages)."""
        return bool(
            self.conn.execute(
                t.address_tokens.delete().where(self._of(t.address_tokens), t.address_tokens.c.address == address)
            ).rowcount
        )

    # -- GC rules -----------------------------------------------------------
    def gc_rules_doc(self) -> dict[str, Any] | None:
        return self.conn.execute(sa.select(t.gc_rules.c.rules).where(self._of(t.gc_rules))).scalar()

    def set_gc_rules_doc(self, doc: dict[str, Any]) -> None:
        self.delete_gc_rules()
        self.conn.execute(t.gc_rules.insert().values(repository=self.repository, rules=doc))

    def delete_gc_rules(self) -> bool:
        return bool(self.conn.execute(t.gc_rules.delete().where(self._of(t.gc_rules))).rowcount)

    # -- what GC reads ------------------------------------------------------
    def staging_version(self) -> int:
        return self.conn.execute(
            sa.select(t.repositories.c.staging_version).where(t.repositories.c.name == self.repository)
        ).scalar_one()

    def uncommitted_addresses(
        self, now: datetime, copy_window: Any, since: int | None, *, detail: bool = False, key: str | None = None
    ) -> list[tuple[str, Any]]:
        """Streams of (address, kind) rows: staged entries (not tombstones), copy records younger
        than `copy_window`, unexpired tokens; with `since`, only what was staged or copied after
        that staging version (tokens: all, they are few). With `detail`, each row also has the
        branch, the path and the moment that says why it counts (copied at, token expiry). With
        `key`, only the rows that may name that namespace key: those naming it, and staged entries
        with a full address (an alias of the namespace may name it: the caller decides)."""
        staged, copies, tokens = t.staged_entries.c, t.copy_records.c, t.address_tokens.c
        staged_where = [self._of(t.staged_entries), staged.tombstone.is_(False)]
        copied_where = [self._of(t.copy_records), copies.created_at > now - copy_window]
        token_where = [self._of(t.address_tokens), tokens.expires_at > now]
        if since is not None:
            staged_where.append(staged.version > since)
            copied_where.append(copies.version > since)
        if key is not None:
            named = sa.and_(staged.address_kind == "relative", staged.address == key)
            staged_where.append(sa.or_(named, staged.address_kind == "full"))
            copied_where.append(copies.address == key)
            token_where.append(tokens.address == key)
        none = sa.null()
        columns = {
            "staged": [staged.address, staged.address_kind],
            "copy": [copies.address, sa.literal("relative")],
            "token": [tokens.address, sa.literal("relative")],
        }
        if detail:
            columns["staged"] += [staged.branch, staged.path, none]
            columns["copy"] += [none, none, copies.created_at]
            columns["token"] += [tokens.branch, tokens.path, tokens.expires_at]
        streaming = self.conn.execution_options(stream_results=True)
        where = {"staged": staged_where, "copy": copied_where, "token": token_where}
        return [(source, streaming.execute(sa.select(*columns[source]).where(*where[source]))) for source in columns]

    def changes_naming(self, key: str) -> list[sa.Row]:
        """(commit_id, path, address, address_kind) of every recorded change that may put the
        namespace key `key` in a tree: those naming it, and those with a full address (which may
        name it through an alias of the namespace: the caller decides)."""
        c = t.tree_changes.c
        columns = (c.commit_id, c.path, c.address, c.address_kind)
        relative = sa.select(*columns).where(self._of(t.tree_changes), c.address_kind == "relative", c.address == key)
        full = sa.select(*columns).where(self._of(t.tree_changes), c.address_kind == "full")
        return [*self.conn.execute(relative), *self.conn.execute(full)]

    def fence_row(self) -> sa.Row | None:
        return self.conn.execute(sa.select(t.gc_fences).where(self._of(t.gc_fences))).first()

    def put_fence(self, run_id: str, expired: list[str], parameters: dict[str, Any], raised_at: datetime) -> None:
        self.drop_fence()
        self.conn.execute(
            t.gc_fences.insert().values(
                repository=self.repository, run_id=run_id, expired=expired, parameters=parameters, raised_at=raised_at
            )
        )

    def drop_fence(self, run_id: str | None = None) -> None:
        where = [self._of(t.gc_fences)] + ([t.gc_fences.c.run_id == run_id] if run_id is not None else [])
        self.conn.execute(t.gc_fences.delete().where(*where))
