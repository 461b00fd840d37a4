"""The metastore: one SQL database (SQLite by default, any SQLAlchemy URL) holding every repository's metadata."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable

from lakegc.errors import MetastoreError, first_line
from lakegc.metastore import schema
from lakegc.redact import mask_secrets
from lakegc.settings import lakegc_home, load_settings
from lakegc.timeutil import utcnow

# 3: gc_fences (a new table: create_all adds it, no step needed); 4: staging versions; 5: tree changes;
# 6: users and access keys (new tables); 7: a lease's delete deadline on a Spark Connect server
SCHEMA_VERSION = 7


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


def default_url() -> str:
    """`LAKEGC_METASTORE`, else the settings file's `metastore`, else a SQLite file in lakegc's home."""
    return load_settings().metastore or f"sqlite:///{lakegc_home() / 'lakegc.db'}"


def sqlite_file(url: str) -> str | None:
    """The database file of a SQLite URL (None for other databases and in-memory ones): a place no
    delete may touch."""
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return os.path.abspath(parsed.database)


class Metastore:
    """An engine plus the transaction discipline both databases need for concurrent writers:
    write transactions are serialized (the repository's compare-and-swap branch moves, staging
    upserts and the GC lease table rely on it), and a read transaction is one consistent snapshot."""

    def __init__(self, url: str | None = None, create: bool = True):
        """`create=False`: a SQLite database that does not exist yet is an error at first use, not
        a new empty metastore (a mistyped path must not read as "no repositories")."""
        self.url = url or default_url()
        self.create = create
        try:
            self.engine = _create_engine(self.url)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError, ImportError) as exc:
            raise MetastoreError(f"invalid metastore URL {mask_secrets(self.url)!r}: {exc}") from None
        self._ready = False

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction. It takes the database-wide write lock up front (SQLite: BEGIN
        IMMEDIATE; PostgreSQL: an advisory lock), so writers queue and each sees what the one
        before it committed, instead of failing when a read lock would have to be upgraded."""
        self.ensure_schema()
        with _errors(self.url), self.engine.connect() as conn, conn.execution_options(lakegc_write=True).begin():
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot for several queries (on PostgreSQL it runs
        at REPEATABLE READ; its default, READ COMMITTED, takes a new snapshot for every statement)."""
        self.ensure_schema()
        with _errors(self.url), self.engine.connect() as conn, conn.begin():
            yield conn

    def ensure_schema(self) -> None:
        """Every command calls this first: a database already at our version costs one read; only
        a fresh or older one takes the write path of `init`."""
        if not self._ready:
            self._check_exists()
            with _errors(self.url), self.engine.connect() as conn, conn.begin():
                current = (
                    conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
                    if sa.inspect(conn).has_table(schema.schema_version.name)
                    else None
                )
            if current == SCHEMA_VERSION:
                self._ready = True
            else:
                self.init()

    def init(self) -> int:
        """Create or migrate the schema; returns the version now in place. It runs as a write
        transaction, so processes that start at once on a fresh database create it one at a time."""
        self._make_folder()
        with _errors(self.url), self.engine.connect() as conn, conn.execution_options(lakegc_write=True).begin():
            fresh = not sa.inspect(conn).has_table(schema.schema_version.name)
            schema.metadata.create_all(conn, checkfirst=True)
            current = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar() or 0
            if current > SCHEMA_VERSION:
                raise MetastoreError(
                    f"metastore {mask_secrets(self.url)} has schema version {current}, newer than this "
                    f"lakegc understands ({SCHEMA_VERSION}): upgrade lakegc"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                if not fresh and version in MIGRATIONS:
                    MIGRATIONS[version](conn)
                conn.execute(schema.schema_version.insert().values(version=version, applied_at=utcnow()))
        self._ready = True
        return SCHEMA_VERSION

    def _check_exists(self) -> None:
        database = sqlite_file(self.url)
        if database is None or os.path.exists(database):
            return
        if not self.create:
            raise MetastoreError(
                f"no metastore at {mask_secrets(self.url)} (no such file): check --metastore, LAKEGC_METASTORE "
                "or the settings file, or create it with `lakegc db init` or `lakegc repo create`"
            )
        self._make_folder()

    def _make_folder(self) -> None:
        database = sqlite_file(self.url)
        if database is None:
            return
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetastoreError(
                f"metastore {mask_secrets(self.url)}: cannot create its folder: {exc.strerror}"
            ) from None

    def ddl(self) -> str:
        statements = []
        for table in schema.metadata.sorted_tables:
            statements.append(str(CreateTable(table).compile(dialect=self.engine.dialect)).strip() + ";")
            statements += [
                str(CreateIndex(ix).compile(dialect=self.engine.dialect)).strip() + ";" for ix in table.indexes
            ]
        return "\n\n".join(statements) + "\n"


def sql_url(url: str) -> sa.URL:
    """A SQLAlchemy URL with our PostgreSQL driver: psycopg 3, not SQLAlchemy's default psycopg2."""
    parsed = sa.engine.make_url(url)
    return parsed.set(drivername="postgresql+psycopg") if parsed.drivername == "postgresql" else parsed


def _create_engine(url: str) -> Engine:
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
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=60000")
        _switch_to_wal(cur)
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("lakegc_write") else "BEGIN")

    return engine


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
def _errors(url: str) -> Iterator[None]:
    """Database failures (server down, wrong password, unknown database, no right to create the
    schema) become one readable line, with the password kept out of it. Other errors are bugs."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if not isinstance(exc, sa.exc.OperationalError) and getattr(exc.orig, "sqlstate", None) != _PG_NO_PRIVILEGE:
            raise
        raise MetastoreError(f"metastore {mask_secrets(url)}: {first_line(exc.orig, 1000)}") from None
