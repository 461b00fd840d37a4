"""How the repository API opens transactions on the metastore, each handed out as the statements of
one scope: a repository's (`repo.store.Tx`, its reads `repo.reads.Reads`) or the lake's own
(`repo.lakestore.LakeTx`, `repo.reads.LakeReads`).

`read` and `write` are SQLAlchemy transactions, which every statement can use; `snapshot` is a read
transaction for the plain-SQL reads only, which on a SQLite metastore never loads SQLAlchemy (what
a metadata command uses). The SQLAlchemy statement modules load when a transaction first needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, TypeVar

from lakegc.metastore import Metastore, Query
from lakegc.repo.reads import LakeReads, Reads

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from lakegc.repo.lakestore import LakeTx
    from lakegc.repo.store import Tx

T = TypeVar("T")
R = TypeVar("R")


class Transactions(Generic[T, R]):
    """Read and write transactions over the metastore in one scope: `scope` makes its statements
    over a SQLAlchemy connection, `reads` its plain-SQL reads over a `Query`."""

    def __init__(self, metastore: Metastore, scope: Callable[[Connection], T], reads: Callable[[Query], R]):
        self.ms, self.scope, self.reads = metastore, scope, reads

    @contextmanager
    def read(self) -> Iterator[T]:
        with self.ms.read() as conn:
            yield self.scope(conn)

    @contextmanager
    def write(self) -> Iterator[T]:
        with self.ms.write() as conn:
            yield self.scope(conn)

    @contextmanager
    def snapshot(self) -> Iterator[R]:
        with self.ms.snapshot() as query:
            yield self.reads(query)


def of_repository(metastore: Metastore, repository: str) -> Transactions[Tx, Reads]:
    def scope(conn: Connection) -> Tx:
        from lakegc.repo.store import Tx

        return Tx(conn, repository)

    return Transactions(metastore, scope, lambda query: Reads(query, repository))


def of_lake(metastore: Metastore) -> Transactions[LakeTx, LakeReads]:
    def scope(conn: Connection) -> LakeTx:
        from lakegc.repo.lakestore import LakeTx

        return LakeTx(conn)

    return Transactions(metastore, scope, LakeReads)
