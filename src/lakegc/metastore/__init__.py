"""The metastore: one SQL database (SQLite by default, PostgreSQL for teams) holding every repository's metadata.

Writes, and reads of the tables' SQLAlchemy definitions, go through SQLAlchemy (`metastore.sql`),
loaded when first needed. The reads a metadata command makes are plain SQL (`repo.reads`), which
`Metastore.snapshot` runs on its own sqlite3 connection when the metastore is a SQLite file: a
`lakegc log` then starts in a third of the time SQLAlchemy's import alone would take.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from lakegc.errors import MetastoreError, first_line
from lakegc.metastore import base
from lakegc.metastore.base import SCHEMA_VERSION, Query, configure_sqlite
from lakegc.redact import mask_secrets
from lakegc.settings import configured_metastore, lakegc_home

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# A SQLite URL whose file SQLAlchemy would read exactly as written: no query, no escapes.
_PLAIN_SQLITE = re.compile(r"sqlite(?:\+pysqlite)?:///([^?#%]+)")


def default_url() -> str:
    """`LAKEGC_METASTORE`, else the settings file's `metastore`, else a SQLite file in lakegc's home."""
    return configured_metastore() or f"sqlite:///{lakegc_home() / 'lakegc.db'}"


def sqlite_file(url: str) -> str | None:
    """The database file of a SQLite URL (None for other databases and in-memory ones): a place no
    delete may touch."""
    plain = _plain_sqlite_file(url)
    if plain is not None:
        return plain
    from lakegc.metastore.sql import sqlite_database

    return sqlite_database(url)


def _plain_sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL that needs no parsing beyond its prefix (None: any other URL)."""
    found = _PLAIN_SQLITE.fullmatch(url)
    if found is None or found.group(1) == ":memory:":
        return None
    return os.path.abspath(found.group(1))


def _create_engine(url: str) -> Engine:
    from lakegc.metastore.sql import create_engine

    return create_engine(url)


class Metastore:
    """An engine plus the transaction discipline both databases need for concurrent writers:
    write transactions are serialized (the repository's compare-and-swap branch moves, staging
    upserts and the GC lease table rely on it), and a read transaction is one consistent snapshot."""

    def __init__(self, url: str | None = None, create: bool = True):
        """`create=False`: a SQLite database that does not exist yet is an error at first use, not
        a new empty metastore (a mistyped path must not read as "no repositories")."""
        self.url = url or default_url()
        self.create = create
        self._ready = False
        # A plain SQLite URL's file, fixed now: the sqlite3 reads and SQLAlchemy's engine (made on
        # first use, after a chdir maybe) must open the same database even when the URL is relative.
        self._sqlite = _plain_sqlite_file(self.url)
        if self._sqlite is None:
            self.engine  # noqa: B018 - a URL SQLAlchemy cannot use is refused now, not at first use
        self.file = self._sqlite or sqlite_file(self.url)  # the database file (None: not SQLite, in memory)

    @cached_property
    def engine(self) -> Engine:
        from lakegc.metastore.sql import engine_errors

        with engine_errors(self.url):
            return _create_engine(self.url if self._sqlite is None else f"sqlite:///{self._sqlite}")

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction. It takes the database-wide write lock up front (SQLite: BEGIN
        IMMEDIATE; PostgreSQL: an advisory lock), so writers queue and each sees what the one
        before it committed, instead of failing when a read lock would have to be upgraded."""
        from lakegc.metastore.sql import errors

        self.ensure_schema()
        with errors(self.url), self.engine.connect() as conn, conn.execution_options(lakegc_write=True).begin():
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot for several queries (on PostgreSQL it runs
        at REPEATABLE READ; its default, READ COMMITTED, takes a new snapshot for every statement)."""
        from lakegc.metastore.sql import errors

        self.ensure_schema()
        with errors(self.url), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Query]:
        """A read transaction for plain SQL (`repo.reads`), `read`'s consistent snapshot. On a
        SQLite file it is a sqlite3 connection of its own, configured as the engine's are, and
        SQLAlchemy is never loaded; on PostgreSQL it is `read`'s connection."""
        if self._sqlite is None:
            from lakegc.metastore.sql import text_query

            with self.read() as conn:
                yield text_query(conn)
            return
        if not self._ready:
            self._check_exists()
            if not os.path.exists(self._sqlite):
                self.ensure_schema()  # a new metastore (`create`): made through SQLAlchemy, as every write
        with self._sqlite_errors():  # mode=rw: a read never makes a database file where there was none
            conn = sqlite3.connect(
                f"file://{quote(self._sqlite)}?mode=rw",  # "//": no authority, whatever the path begins with
                uri=True,
                timeout=base.BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
            )
        try:
            with self._sqlite_errors():
                configure_sqlite(conn)
                if not self._ready and _version(conn) != SCHEMA_VERSION:
                    self.ensure_schema()  # a fresh or older database: `init`'s write path, through SQLAlchemy
                self._ready = True
                conn.execute("BEGIN")

            def query(sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
                with self._sqlite_errors():
                    return conn.execute(sql, params or {}).fetchall()

            yield query
            with self._sqlite_errors():
                conn.execute("COMMIT")
        finally:
            conn.close()

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        """sqlite3's failures as the SQLAlchemy path words them, so either says the same line: an
        operational one (locked, unreadable, no room) with the URL, as `metastore.sql.errors`; any
        other (a file that is not a database) as the CLI printed SQLAlchemy's."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise MetastoreError(f"metastore {mask_secrets(self.url)}: {first_line(exc, 1000)}") from None
        except sqlite3.DatabaseError as exc:
            raise MetastoreError(f"metastore: {first_line(exc, 1000)}") from None

    def ensure_schema(self) -> None:
        """Every command calls this first: a database already at our version costs one read; only
        a fresh or older one takes the write path of `init`."""
        if not self._ready:
            from lakegc.metastore.sql import current_version, errors

            self._check_exists()
            with errors(self.url), self.engine.connect() as conn, conn.begin():
                current = current_version(conn)
            if current == SCHEMA_VERSION:
                self._ready = True
            else:
                self.init()

    def init(self) -> int:
        """Create or migrate the schema; returns the version now in place. It runs as a write
        transaction, so processes that start at once on a fresh database create it one at a time."""
        from lakegc.metastore.sql import errors, init_schema

        self._make_folder()
        with errors(self.url), self.engine.connect() as conn, conn.execution_options(lakegc_write=True).begin():
            init_schema(conn, self.url)
        self._ready = True
        return SCHEMA_VERSION

    def _check_exists(self) -> None:
        database = self.file
        if database is None or os.path.exists(database):
            return
        if not self.create:
            raise MetastoreError(
                f"no metastore at {mask_secrets(self.url)} (no such file): check --metastore, LAKEGC_METASTORE "
                "or the settings file, or create it with `lakegc db init` or `lakegc repo create`"
            )
        self._make_folder()

    def _make_folder(self) -> None:
        database = self.file
        if database is None:
            return
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetastoreError(
                f"metastore {mask_secrets(self.url)}: cannot create its folder: {exc.strerror}"
            ) from None

    def ddl(self) -> str:
        from lakegc.metastore.sql import ddl

        return ddl(self.engine)


def _version(conn: sqlite3.Connection) -> int | None:
    """The schema version of a SQLite database (None: no schema yet)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone() is None:
        return None
    return conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]


__all__ = ["SCHEMA_VERSION", "Metastore", "Query", "default_url", "sqlite_file"]
