"""The metastore through SQLAlchemy: its engines (the write discipline of each database), the
schema's creation and migrations, and database errors as one line. Loaded by the first write, or
the first read of a database `Metastore.snapshot` does not open itself: SQLAlchemy is a third of a
second of a command's start, which a `log` or an `fs stat` on SQLite never pays."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable

from lakegc.errors import MetastoreError, first_line
from lakegc.metastore import schema
from lakegc.metastore.base import SCHEMA_VERSION, Query, configure_sqlite
from lakegc.redact import mask_secrets
from lakegc.timeutil import utcnow


def _v2_slice_write_window(conn: Connection) -> None:
    """Slices remember until when objects may land in them (incremental GC skips settled slices)."""
    column_type = schema.UtcDateTime().impl.compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE slices ADD COLUMN writable_until {column_type}")


def _v4_staging_version(conn: Connection) -> None:
    """Staged entries and copy records carry the repository's staging version when written, so a GC sweep re-checks
    only what changed since its mark. Rows from before stay NULL: older than any mark made since."""
    conn.exec_driver_sql("ALTER TABLE repositories ADD COLUMN staging_version BIGINT NOT NULL DEFAULT 0")
    conn.exec_driver_sql("ALTER TABLE staged_entries ADD COLUMN version BIGINT")
    conn.exec_driver_sql("ALTER TABLE copy_records ADD COLUMN version BIGINT")


def _v5_tree_changes(conn: Connection) -> None:
    """Commits record their tree changes from now on (tree_changes, a new table); older commits keep
    NULL, so `gc explain` knows the record is not whole. Staged entries and copy records get an index
    by address, for the same look-up."""
    conn.exec_driver_sql("ALTER TABLE commits ADD COLUMN changes_recorded BOOLEAN")
    for index in (*schema.staged_entries.indexes, *schema.copy_records.indexes):
        if index.name in ("ix_staged_entries_address", "ix_copy_records_address"):
            index.create(conn)


def _v7_lease_work_until(conn: Connection) -> None:
    """A lease remembers the last delete deadline its run handed to a Spark Connect server (`repogc.lease`).
    A database older than the lease table got it whole from create_all."""
    if "work_until" in {column["name"] for column in sa.inspect(conn).get_columns("gc_leases")}:
        return
    column_type = schema.UtcDateTime().impl.compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE gc_leases ADD COLUMN work_until {column_type}")


# version -> the step that brings a database at version - 1 to it. New tables need no step:
# create_all adds them; columns added to existing tables do. Any schema change bumps the version.
MIGRATIONS = {2: _v2_slice_write_window, 4: _v4_staging_version, 5: _v5_tree_changes, 7: _v7_lease_work_until}


def sqlite_database(url: str) -> str | None:
    """The database file of a SQLite URL as SQLAlchemy reads it (None for other databases,
    in-memory ones and URLs it cannot parse)."""
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return os.path.abspath(parsed.database)


def current_version(conn: Connection) -> int | None:
    """The schema version a database is at (None: no schema yet)."""
    if not sa.inspect(conn).has_table(schema.schema_version.name):
        return None
    return conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()


def init_schema(conn: Connection, url: str) -> None:
    """Create or migrate the schema in `conn`'s write transaction."""
    fresh = not sa.inspect(conn).has_table(schema.schema_version.name)
    schema.metadata.create_all(conn, checkfirst=True)
    current = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar() or 0
    if current > SCHEMA_VERSION:
        raise MetastoreError(
            f"metastore {mask_secrets(url)} has schema version {current}, newer than this "
            f"lakegc understands ({SCHEMA_VERSION}): upgrade lakegc"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        if not fresh and version in MIGRATIONS:
            MIGRATIONS[version](conn)
        conn.execute(schema.schema_version.insert().values(version=version, applied_at=utcnow()))


def ddl(engine: Engine) -> str:
    statements = []
    for table in schema.metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=engine.dialect)).strip() + ";")
        statements += [str(CreateIndex(ix).compile(dialect=engine.dialect)).strip() + ";" for ix in table.indexes]
    return "\n\n".join(statements) + "\n"


@contextmanager
def engine_errors(url: str) -> Iterator[None]:
    """A URL SQLAlchemy cannot make an engine of, as one line."""
    try:
        yield
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError, ImportError) as exc:
        raise MetastoreError(f"invalid metastore URL {mask_secrets(url)!r}: {exc}") from None


def text_query(conn: Connection) -> Query:
    """`Metastore.snapshot`'s plain SQL on a SQLAlchemy connection (PostgreSQL's; `:name` parameters
    become the driver's)."""

    def query(sql: str, params: Mapping[str, Any] | None = None) -> Sequence[Sequence[Any]]:
        return conn.execute(sa.text(sql), dict(params or {})).all()

    return query


def starts_with(column: sa.ColumnElement[str], prefix: str) -> sa.ColumnElement[bool]:
    """`column` starts with `prefix`, exactly, as `repo.reads._starting` says it in plain SQL: SQLite's
    LIKE ignores ASCII case, so `like`/`startswith` would take "A/" for "a/"."""
    return sa.and_(column >= prefix, sa.func.substr(column, 1, len(prefix)) == prefix)


def sql_url(url: str) -> sa.URL:
    """A SQLAlchemy URL with our PostgreSQL driver: psycopg 3, not SQLAlchemy's default psycopg2."""
    parsed = sa.engine.make_url(url)
    return parsed.set(drivername="postgresql+psycopg") if parsed.drivername == "postgresql" else parsed


def create_engine(url: str) -> Engine:
    """The engine of a SQLite or PostgreSQL URL, with its database's write discipline (`Metastore`)."""
    parsed = sql_url(url)
    if parsed.get_backend_name() == "postgresql":
        return _postgresql_engine(parsed)
    if parsed.get_backend_name() != "sqlite":  # the write discipline above is built and tested for these two only
        raise ValueError(
            f"unsupported database {parsed.get_backend_name()!r}: the metastore runs on SQLite "
            "(sqlite:///PATH) or PostgreSQL (postgresql+psycopg://USER@HOST/DB)"
        )
    engine = sa.create_engine(parsed, connect_args={"timeout": 60})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        configure_sqlite(dbapi_conn)  # BEGIN is ours, below

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("lakegc_write") else "BEGIN")

    return engine


_PG_NO_PRIVILEGE = "42501"  # SQLSTATE insufficient_privilege

# pg_advisory_xact_lock key of lakegc's write lock (b"lakegc" as an integer). Advisory locks are
# per database, so two metastores on one server do not wait for each other.
_PG_WRITE_LOCK = int.from_bytes(b"lakegc", "big")


def _postgresql_engine(url: sa.URL) -> Engine:
    """SQLite's discipline on PostgreSQL. A write transaction first takes a transaction-scoped
    advisory lock and stays READ COMMITTED, so each statement after the lock sees every earlier
    writer's commit (REPEATABLE READ would keep the snapshot taken before the wait). A read
    transaction is REPEATABLE READ: one snapshot, as SQLite's deferred BEGIN gives. Lock waits give
    up after 60 s, as SQLite's busy timeout does."""
    engine = sa.create_engine(url, pool_pre_ping=True, connect_args={"options": "-c lock_timeout=60s"})

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("lakegc_write"):
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_WRITE_LOCK})")
        else:
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    return engine


@contextmanager
def errors(url: str) -> Iterator[None]:
    """Database failures (server down, wrong password, unknown database, no right to create the
    schema) become one readable line, with the password kept out of it. Other errors are bugs."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if not isinstance(exc, sa.exc.OperationalError) and getattr(exc.orig, "sqlstate", None) != _PG_NO_PRIVILEGE:
            raise
        raise MetastoreError(f"metastore {mask_secrets(url)}: {first_line(exc.orig, 1000)}") from None
