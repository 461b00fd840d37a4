"""What both ways into the metastore share (`Metastore.snapshot`'s sqlite3 connections and
SQLAlchemy's engines, `metastore.sql`): the schema version, the shape of a plain-SQL query, and
the settings of every SQLite connection."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

# 3: gc_fences (a new table: create_all adds it, no step needed); 4: staging versions; 5: tree changes;
# 6: users and access keys (new tables); 7: a lease's delete deadline on a Spark Connect server
SCHEMA_VERSION = 7

# How long a SQLite statement waits for another connection's lock before it fails (PostgreSQL: its
# lock_timeout, the same 60 s).
BUSY_TIMEOUT_MS = 60_000


class Query(Protocol):
    """Plain SQL with `:name` parameters, run in an open read transaction: its rows as tuples."""

    def __call__(self, sql: str, params: Mapping[str, Any] | None = None) -> Sequence[Sequence[Any]]: ...


def configure_sqlite(conn: sqlite3.Connection) -> None:
    """Every SQLite connection of the metastore: transactions begun by us (BEGIN for a read, BEGIN
    IMMEDIATE for a write), the busy timeout, WAL (readers never wait for the writer) and foreign keys."""
    conn.isolation_level = None
    cur = conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _switch_to_wal(cur)
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _switch_to_wal(cur: sqlite3.Cursor, patience: float = 60.0) -> None:
    """Put the database in WAL mode (a no-op once it is). On a fresh file the switch needs the
    exclusive lock, and SQLite answers "database is locked" at once, without its busy timeout, when
    another connection holds a write lock meanwhile (processes starting together on a new
    metastore). So we wait for it here, as the busy timeout would."""
    deadline = time.monotonic() + patience
    pause = 0.01
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
