"""The lake's own metadata in the metastore: its repositories and the token secret.

`LakeTx` is one transaction over the lake's own tables, opened as a repository's are
(`repo.transactions`), with the plain-SQL reads of `repo.reads.LakeReads`; `of` hands a
repository's statements (`repo.store.Tx`) the same transaction, which is how a repository is
created with its first commit and branch at once. Apart from a repository's statements because
`Lake` (`repo.repository`) is its only user and a repository's statements never need it.
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lakegc.metastore import schema as t
from lakegc.metastore.sql import text_query
from lakegc.repo.model import RepositoryInfo
from lakegc.repo.reads import LakeReads
from lakegc.repo.store import Tx


class LakeTx(LakeReads):
    """One transaction over the lake's own tables: its repositories and the token secret."""

    def __init__(self, conn: Connection):
        super().__init__(text_query(conn))
        self.conn = conn

    def of(self, repository: str) -> Tx:
        """A repository's statements in this same transaction."""
        return Tx(self.conn, repository)

    def insert_repository(self, info: RepositoryInfo) -> None:
        self.conn.execute(
            t.repositories.insert().values(
                name=info.name,
                storage_namespace=info.storage_namespace,
                default_branch=info.default_branch,
                created_at=info.created_at,
            )
        )

    def delete_repository(self, name: str) -> None:
        """Every row of the repository, then the repository (its namespace and data stay)."""
        for table in (
            t.gc_fences,
            t.gc_leases,
            t.gc_runs,
            t.gc_rules,
            t.address_tokens,
            t.copy_records,
            t.slices,
            t.staged_entries,
            t.tags,
            t.branches,
            t.tree_changes,
            t.commits,
        ):
            self.conn.execute(table.delete().where(table.c.repository == name))
        self.conn.execute(t.repositories.delete().where(t.repositories.c.name == name))

    def token_secret(self) -> bytes:
        value = self.conn.execute(sa.select(t.settings.c.value).where(t.settings.c.key == "token_secret")).scalar()
        if value is None:
            value = secrets.token_hex(32)
            self.conn.execute(t.settings.insert().values(key="token_secret", value=value))
        return bytes.fromhex(value)
