"""Storage (LocalStorage, keys, locations) and the metastore (schema, DDL, bad URLs)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from support.pgserver import PASSWORD_ROLE

from lakegc.errors import (
    InvalidArgument,
    LakegcError,
    MetastoreError,
    NamespaceError,
    ObjectNotFound,
    PathEscapesNamespace,
)
from lakegc.metastore import SCHEMA_VERSION, Metastore, default_url, schema
from lakegc.storage import LocalStorage, check_key, normalize_location, relative_to

TMP_PREFIX = ".lakegc-tmp-"  # what LocalStorage names its in-flight files


# ---------------------------------------------------------------------------------------------
# check_key
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["a", "a/b/c.parquet", "..a", "a..b", ".hidden", "a/.b", "dir/..../x", "a b/ü"],
    ids=[
        "plain",
        "nested",
        "leading-dots-in-name",
        "dots-inside-name",
        "hidden-file",
        "hidden-in-folder",
        "four-dots",
        "space-and-unicode",
    ],
)
def test_check_key_accepts_keys_inside_the_namespace(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize(
    "key",
    ["", "/", "/etc/passwd", "..", "../x", "a/../../x", "a/..", ".", "./a", "a/./b", "a//b", "a/", "//a", "a\x00b"],
    ids=[
        "empty",
        "slash",
        "absolute",
        "dotdot",
        "dotdot-first",
        "climbing",
        "dotdot-last",
        "dot",
        "dot-first",
        "dot-inside",
        "empty-component",
        "trailing-slash",
        "double-leading-slash",
        "nul",
    ],
)
def test_check_key_refuses_keys_that_could_escape(key: str) -> None:
    with pytest.raises(PathEscapesNamespace):
        check_key(key)


# ---------------------------------------------------------------------------------------------
# LocalStorage
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> LocalStorage:
    s = LocalStorage(tmp_path / "ns")
    s.prepare()
    return s


def test_write_then_read_returns_the_bytes_and_describes_the_object(store: LocalStorage) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    info = store.write("data/s1/obj", b"hello")
    assert info.key == "data/s1/obj"
    assert info.size == 5
    assert info.checksum == hashlib.md5(b"hello").hexdigest()
    assert before <= info.mtime <= datetime.now(UTC) + timedelta(seconds=5)
    assert store.read("data/s1/obj") == b"hello"
    with store.open_read("data/s1/obj") as f:
        assert f.read() == b"hello"
    assert store.exists("data/s1/obj")
    assert (store.root / "data/s1/obj").read_bytes() == b"hello"


def test_write_from_a_stream_larger_than_one_chunk(store: LocalStorage) -> None:
    payload = os.urandom((1 << 20) * 2 + 17)
    info = store.write("big", io.BytesIO(payload))
    assert store.read("big") == payload
    assert info.size == len(payload)
    assert info.checksum == hashlib.md5(payload).hexdigest()


def test_write_replaces_an_existing_object(store: LocalStorage) -> None:
    store.write("k", b"one")
    store.write("k", b"two!")
    assert store.read("k") == b"two!"
    assert [o.key for o in store.list()] == ["k"]


def test_failed_write_leaves_neither_object_nor_temp_file(store: LocalStorage) -> None:
    class Broken(io.RawIOBase):
        calls = 0

        def read(self, n: int = -1) -> bytes:
            self.calls += 1
            if self.calls > 1:
                raise OSError("disk on fire")
            return b"x" * 10

    with pytest.raises(OSError, match="disk on fire"):
        store.write("dir/k", Broken())
    assert not store.exists("dir/k")
    assert [p.name for p in (store.root / "dir").iterdir()] == []


@pytest.mark.parametrize(
    "key",
    ["missing", "dir/missing", "file/below-a-file", "dir"],
    ids=["missing", "missing-in-folder", "below-a-file", "a-folder"],
)
def test_reading_what_is_not_an_object_is_object_not_found(store: LocalStorage, key: str) -> None:
    store.write("file", b"x")
    store.write("dir/x", b"x")
    with pytest.raises(ObjectNotFound):
        store.read(key)
    assert not store.exists(key)


@pytest.mark.parametrize(
    "key", ["../outside", "/etc/passwd", "a/../../x", ""], ids=["dotdot", "absolute", "climbing", "empty"]
)
def test_every_operation_refuses_escaping_keys(store: LocalStorage, key: str) -> None:
    for op in (
        lambda: store.write(key, b"x"),
        lambda: store.read(key),
        lambda: store.exists(key),
        lambda: store.full_uri(key),
    ):
        with pytest.raises(PathEscapesNamespace):
            op()
    assert not (store.root.parent / "outside").exists()


KEYS = ["a-b", "a.c", "a/x", "a/y/z", "a0", "b/c/d", "data/s1/o1", "data/s1/o2", "data/s10/o", "data/s1-x", "top"]


def test_listing_is_recursive_and_in_key_order(store: LocalStorage) -> None:
    # Key order is what object stores return (S3 lists lexicographically); '-' and '.' sort before '/'.
    for k in reversed(KEYS):
        store.write(k, k.encode())
    listed = [o.key for o in store.list()]
    assert sorted(listed) == sorted(KEYS)
    assert listed == sorted(KEYS)


def test_listing_reports_size_and_mtime(store: LocalStorage) -> None:
    store.write("a/one", b"1")
    store.write("a/three", b"333")
    old = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
    os.utime(store.root / "a/one", (old, old))
    got = {o.key: o for o in store.list()}
    assert got["a/one"].size == 1 and got["a/three"].size == 3
    assert got["a/one"].mtime == datetime(2020, 1, 1, tzinfo=UTC)
    assert got["a/three"].mtime.tzinfo is not None


@pytest.mark.parametrize(
    "prefix, recursive, expected",
    [
        ("", False, ["a-b", "a.c", "a0", "top"]),
        ("a", True, ["a/x", "a/y/z"]),
        ("a/", True, ["a/x", "a/y/z"]),
        ("a/", False, ["a/x"]),
        ("data/s1/", True, ["data/s1/o1", "data/s1/o2"]),
        ("data/", False, ["data/s1-x"]),
        ("missing/", True, []),
        ("top", True, []),  # a prefix is a folder: a file of that name is not listed under it
    ],
    ids=[
        "root-not-recursive",
        "folder-without-slash",
        "folder",
        "folder-not-recursive",
        "slice",
        "files-beside-folders-not-recursive",
        "missing-folder",
        "file-as-prefix",
    ],
)
def test_listing_a_prefix(store: LocalStorage, prefix: str, recursive: bool, expected: list[str]) -> None:
    for k in KEYS:
        store.write(k, b"x")
    assert sorted(o.key for o in store.list(prefix, recursive=recursive)) == expected


def test_listing_refuses_an_escaping_prefix(store: LocalStorage) -> None:
    with pytest.raises(PathEscapesNamespace):
        list(store.list("../"))


def test_listing_skips_in_flight_temp_files(store: LocalStorage) -> None:
    store.write("data/s1/real", b"x")
    (store.root / f"{TMP_PREFIX}abc").write_bytes(b"partial")
    (store.root / "data/s1" / f"{TMP_PREFIX}def").write_bytes(b"partial")
    assert [o.key for o in store.list()] == ["data/s1/real"]
    assert [o.key for o in store.list("data/s1/")] == ["data/s1/real"]


def test_listing_never_follows_symlinks_out_of_the_namespace(tmp_path: Path, store: LocalStorage) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "victim").write_bytes(b"keep me")
    (outside / "sub" / "victim2").write_bytes(b"keep me")
    store.write("data/real", b"x")
    os.symlink(outside / "victim", store.root / "data" / "link-to-file")
    os.symlink(outside / "sub", store.root / "data" / "link-to-dir")
    assert [o.key for o in store.list()] == ["data/real"]


def test_list_of_a_missing_namespace_is_empty(tmp_path: Path) -> None:
    assert list(LocalStorage(tmp_path / "nope").list()) == []


def test_delete_many_reports_each_key_and_counts_missing_as_deleted(store: LocalStorage) -> None:
    store.write("data/a", b"1")
    store.write("data/b", b"2")
    store.write("keep", b"3")
    outcomes = store.delete_many(["data/a", "never-existed", "data/b", "data/a"])
    assert [(o.key, o.ok, o.error) for o in outcomes] == [
        ("data/a", True, None),
        ("never-existed", True, None),
        ("data/b", True, None),
        ("data/a", True, None),
    ]
    assert [o.key for o in store.list()] == ["keep"]


def test_delete_many_of_a_folder_fails_for_that_key_only(store: LocalStorage) -> None:
    store.write("dir/x", b"1")
    store.write("y", b"2")
    outcomes = store.delete_many(["dir", "y"])
    assert [(o.key, o.ok) for o in outcomes] == [("dir", False), ("y", True)]
    assert outcomes[0].error
    assert store.exists("dir/x") and not store.exists("y")


def test_delete_many_with_an_escaping_key_deletes_nothing_unrecorded(store: LocalStorage) -> None:
    """A batch holding a bad key must either be refused before anything is deleted, or report the bad
    key as failed alongside the others: never delete some keys and then raise, losing their outcomes
    (a failed run deletes nothing it did not record)."""
    store.write("data/a", b"1")
    try:
        outcomes = store.delete_many(["data/a", "../escape"])
    except PathEscapesNamespace:
        assert store.exists("data/a"), "data/a was deleted, then the batch raised and its outcome was lost"
    else:
        assert [(o.key, o.ok) for o in outcomes] == [("data/a", True), ("../escape", False)]


def test_delete_many_of_nothing_is_nothing(store: LocalStorage) -> None:
    assert store.delete_many([]) == []


def test_prepare_creates_the_folder_and_refuses_a_file(tmp_path: Path) -> None:
    LocalStorage(tmp_path / "x" / "y").prepare()
    assert (tmp_path / "x" / "y").is_dir()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NamespaceError):
        LocalStorage(tmp_path / "file").prepare()
    with pytest.raises(NamespaceError):
        LocalStorage(tmp_path / "file" / "below").prepare()


def test_full_uri_is_a_file_uri_under_the_namespace(store: LocalStorage) -> None:
    assert store.full_uri("data/s/o") == store.uri + "/data/s/o"
    assert relative_to(store.uri, store.full_uri("data/s/o")) == "data/s/o"
    assert normalize_location(store.uri) == store.uri


# ---------------------------------------------------------------------------------------------
# normalize_location / relative_to
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "location, expected",
    [
        ("file:///tmp/ns", "file:///tmp/ns"),
        ("file:///tmp/ns/", "file:///tmp/ns"),
        ("file://localhost/tmp/ns", "file:///tmp/ns"),
        ("/tmp/ns", "file:///tmp/ns"),
        ("/tmp/ns/", "file:///tmp/ns"),
        ("/tmp//ns", "file:///tmp/ns"),
        ("//tmp/ns", "file:///tmp/ns"),  # POSIX: '//tmp' is '/tmp' on Linux; one folder, one spelling
        ("/tmp/a b", "file:///tmp/a%20b"),
        ("file:///tmp/a%20b", "file:///tmp/a%20b"),
        ("/tmp/50%", "file:///tmp/50%25"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("s3://bucket/a/b/", "s3://bucket/a/b"),
        ("s3a://bucket/prefix", "s3://bucket/prefix"),
        ("s3n://bucket/prefix", "s3://bucket/prefix"),
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/", "s3://bucket"),
    ],
    ids=[
        "file-uri",
        "file-uri-trailing-slash",
        "file-uri-localhost",
        "absolute-path",
        "absolute-trailing-slash",
        "double-slash-inside",
        "double-leading-slash",
        "space",
        "quoted-space",
        "percent-sign",
        "s3",
        "s3-trailing",
        "s3-nested",
        "s3a",
        "s3n",
        "s3-bucket-only",
        "s3-bucket-slash",
    ],
)
def test_normalize_location_gives_one_canonical_spelling(location: str, expected: str) -> None:
    assert normalize_location(location) == expected
    assert normalize_location(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "location",
    [
        "",
        "relative/path",
        "./ns",
        "ns",
        "~/ns",
        "file://host/tmp/ns",
        "file:///tmp/../etc",
        "file:///tmp/ns/..",
        "/tmp/../etc",
        "/tmp/./ns",
        "file:///tmp/%2E%2E/etc",
        "s3://",
        "s3:///prefix",
        "s3://bucket/a/../b",
        "s3://bucket/./b",
        "http://host/ns",
        "gs://bucket/ns",
    ],
    ids=[
        "empty",
        "relative",
        "dot-relative",
        "bare-name",
        "tilde",
        "file-uri-remote-host",
        "file-uri-dotdot",
        "file-uri-trailing-dotdot",
        "path-dotdot",
        "path-dot",
        "file-uri-quoted-dotdot",
        "s3-no-bucket",
        "s3-empty-bucket",
        "s3-dotdot",
        "s3-dot",
        "http",
        "gcs",
    ],
)
def test_normalize_location_refuses_unusable_locations(location: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_location(location)


@pytest.mark.parametrize(
    "namespace, location, expected",
    [
        ("file:///ns", "file:///ns/data/s/o", "data/s/o"),
        ("file:///ns", "file:///ns/o", "o"),
        ("file:///ns", "file:///ns", None),
        ("file:///ns", "file:///ns2/o", None),
        ("file:///ns", "file:///other/o", None),
        ("file:///a/ns", "file:///a/o", None),
        ("s3://b/p", "s3://b/p/data/o", "data/o"),
        ("s3://b/p", "s3://b/pp/o", None),
        ("s3://b", "s3://b/o", "o"),
        ("s3://b", "s3://bb/o", None),
        ("s3://b/p", "file:///b/p/o", None),
    ],
    ids=[
        "inside",
        "at-root",
        "the-namespace-itself",
        "sibling-with-common-prefix",
        "elsewhere",
        "parent-folder",
        "s3-inside",
        "s3-sibling-prefix",
        "s3-bucket-root",
        "s3-sibling-bucket",
        "other-scheme",
    ],
)
def test_relative_to_gives_the_key_inside_the_namespace_or_none(
    namespace: str, location: str, expected: str | None
) -> None:
    assert relative_to(namespace, location) == expected


# ---------------------------------------------------------------------------------------------
# Metastore
# ---------------------------------------------------------------------------------------------

TABLES = [
    "repositories",
    "branches",
    "commits",
    "tags",
    "staged_entries",
    "copy_records",
    "gc_rules",
    "gc_runs",
    "slices",
    "address_tokens",
    "gc_leases",
]


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def test_init_creates_the_schema_and_is_idempotent(env) -> None:
    url = env.metastore
    assert Metastore(url).init() == SCHEMA_VERSION
    assert Metastore(url).init() == SCHEMA_VERSION
    ms = Metastore(url)
    assert ms.init() == SCHEMA_VERSION
    names = set(sa.inspect(ms.engine).get_table_names())
    assert set(TABLES) <= names
    with ms.read() as conn:
        versions = conn.execute(sa.select(schema.schema_version.c.version)).scalars().all()
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def _v1_database(url: str) -> None:
    """A metastore as lakegc with schema version 1 left it: slices without writable_until, no leases,
    no staging versions, no tree changes nor look-up by address."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        schema.metadata.create_all(conn)
        conn.exec_driver_sql("DROP TABLE gc_leases")
        conn.exec_driver_sql("DROP TABLE tree_changes")
        conn.exec_driver_sql("DROP TABLE access_keys")
        conn.exec_driver_sql("DROP TABLE users")
        conn.exec_driver_sql("DROP INDEX ix_staged_entries_address")
        conn.exec_driver_sql("DROP INDEX ix_copy_records_address")
        conn.exec_driver_sql("ALTER TABLE commits DROP COLUMN changes_recorded")
        conn.exec_driver_sql("ALTER TABLE slices DROP COLUMN writable_until")
        conn.exec_driver_sql("ALTER TABLE repositories DROP COLUMN staging_version")
        conn.exec_driver_sql("ALTER TABLE staged_entries DROP COLUMN version")
        conn.exec_driver_sql("ALTER TABLE copy_records DROP COLUMN version")
        conn.execute(schema.schema_version.insert().values(version=1, applied_at=datetime.now(UTC)))
    engine.dispose()


def test_a_version_1_metastore_is_migrated_and_keeps_its_data(env, tmp_path: Path) -> None:
    url = env.metastore
    env.home.mkdir()
    _v1_database(url)
    created = datetime(2024, 1, 1, tzinfo=UTC)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            schema.repositories.insert().values(
                name="old", storage_namespace=(tmp_path / "ns").as_uri(), default_branch="main", created_at=created
            )
        )
        conn.exec_driver_sql(
            "INSERT INTO slices (repository, name, created_at, objects) "
            "VALUES ('old', '8295609600', '2024-01-01 00:00:00', 3)"
        )
    engine.dispose()

    ms = Metastore(url)
    assert ms.init() == SCHEMA_VERSION == 7
    assert {"gc_leases", "gc_fences", "tree_changes", "users", "access_keys"} <= set(
        sa.inspect(ms.engine).get_table_names()
    )
    assert "changes_recorded" in {c["name"] for c in sa.inspect(ms.engine).get_columns("commits")}
    for table, index in (("staged_entries", "ix_staged_entries_address"), ("copy_records", "ix_copy_records_address")):
        assert index in {ix["name"] for ix in sa.inspect(ms.engine).get_indexes(table)}
    assert "writable_until" in {c["name"] for c in sa.inspect(ms.engine).get_columns("slices")}
    assert "work_until" in {c["name"] for c in sa.inspect(ms.engine).get_columns("gc_leases")}
    for table in ("staged_entries", "copy_records"):
        assert "version" in {c["name"] for c in sa.inspect(ms.engine).get_columns(table)}
    with ms.read() as conn:
        assert conn.execute(sa.select(schema.schema_version.c.version)).scalars().all() == [1, 2, 3, 4, 5, 6, 7]
        row = conn.execute(sa.select(schema.slices)).one()
        assert conn.execute(sa.select(schema.repositories.c.staging_version)).scalar_one() == 0
    assert (row.name, row.objects, row.writable_until) == ("8295609600", 3, None)  # unknown: never settled
    assert Metastore(url).init() == SCHEMA_VERSION  # and again: nothing left to do


def test_a_newer_metastore_is_refused(env) -> None:
    url = env.metastore
    ms = Metastore(url)
    ms.init()
    with ms.write() as conn:
        conn.execute(schema.schema_version.insert().values(version=SCHEMA_VERSION + 1, applied_at=datetime.now(UTC)))
    with pytest.raises(MetastoreError, match="newer than this lakegc understands"):
        Metastore(url).init()


def test_first_use_creates_the_schema(env) -> None:
    ms = Metastore(env.metastore)
    with ms.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.repositories)).scalar() == 0


def test_a_failing_write_transaction_leaves_nothing(env) -> None:
    ms = Metastore(env.metastore)
    with pytest.raises(RuntimeError), ms.write() as conn:
        conn.execute(
            schema.repositories.insert().values(
                name="r1", storage_namespace="file:///x", default_branch="main", created_at=datetime.now(UTC)
            )
        )
        raise RuntimeError("boom")
    with ms.read() as conn:
        assert conn.execute(sa.select(schema.repositories.c.name)).all() == []


def test_timestamps_come_back_utc_aware(env) -> None:
    """Also on PostgreSQL, whose test server's session time zone is not UTC."""
    ms = Metastore(env.metastore)
    when = datetime(2024, 2, 3, 4, 5, 6, 789, tzinfo=timezone(timedelta(hours=3)))
    with ms.write() as conn:
        conn.execute(
            schema.repositories.insert().values(
                name="r1", storage_namespace="file:///x", default_branch="main", created_at=when
            )
        )
    with ms.read() as conn:
        got = conn.execute(sa.select(schema.repositories.c.created_at)).scalar()
    assert got == when and got.utcoffset() == timedelta(0)


def test_ddl_creates_every_table_of_the_design(env) -> None:
    ddl = Metastore(env.metastore).ddl()
    for table in TABLES:
        assert f"CREATE TABLE {table} (" in ddl, table
    assert ddl.count("CREATE TABLE") == len(schema.metadata.tables)
    assert all(s.strip().endswith(";") for s in ddl.strip().split("\n\n"))


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "nosuchdb://host/db",
        "postgresql+nosuchdriver://user:hunter2@host/db",
        "sqlite+nosuchdriver:///x.db",
        "postgresql://user:hunter2@127.0.0.1:1/db",  # nothing listening
        "postgresql+psycopg://user:hunter2@127.0.0.1:1/db",
    ],
    ids=[
        "not-a-url",
        "unknown-dialect",
        "unknown-driver",
        "unknown-sqlite-driver",
        "unreachable-postgresql",
        "unreachable-postgresql-psycopg",
    ],
)
def test_a_bad_metastore_url_is_a_metastore_error_without_the_password(url: str) -> None:
    with pytest.raises(MetastoreError) as info:
        Metastore(url).init()
    assert isinstance(info.value, LakegcError)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("where", ["below-a-file", "a-folder", "in-proc"], ids=str)
def test_a_sqlite_path_that_cannot_be_created_is_a_metastore_error(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_bytes(b"not a folder")
    path = {
        "below-a-file": tmp_path / "file" / "lakegc.db",
        "a-folder": tmp_path,
        "in-proc": Path("/proc/lakegc-test-no-such-dir/lakegc.db"),
    }[where]
    with pytest.raises(MetastoreError):
        Metastore(_url(path)).init()
    assert (tmp_path / "file").read_bytes() == b"not a folder"


def test_default_url_follows_lakegc_metastore_then_lakegc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEGC_METASTORE", raising=False)
    monkeypatch.setenv("LAKEGC_HOME", str(tmp_path / "home"))
    assert default_url() == f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}"
    monkeypatch.setenv("LAKEGC_METASTORE", "sqlite:////elsewhere/x.db")
    assert default_url() == "sqlite:////elsewhere/x.db"


def test_concurrent_first_use_creates_the_schema_once(env) -> None:
    """Processes that start at once on a fresh database: one creates the schema, the others wait."""
    start = time.time() + 2  # all past their imports, then init at the same moment
    code = (
        "import sys, time; from lakegc.metastore import Metastore; "
        "time.sleep(max(0, float(sys.argv[2]) - time.time())); print(Metastore(sys.argv[1]).init())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, env.metastore, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert results == [(0, f"{SCHEMA_VERSION}\n", "")] * 4
    with Metastore(env.metastore).read() as conn:
        versions = conn.execute(sa.select(schema.schema_version.c.version)).scalars().all()
    assert sorted(versions) == list(range(1, SCHEMA_VERSION + 1))


def test_first_use_waits_for_a_writer_holding_a_fresh_sqlite_file(tmp_path: Path) -> None:
    """The race behind a CI failure: switching a fresh SQLite file to WAL needs the exclusive lock,
    and SQLite answers "database is locked" at once, without its busy timeout, while another
    connection holds a write lock. First use must wait for it, not fail."""
    import sqlite3

    path = tmp_path / "lakegc.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE elsewhere (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO elsewhere VALUES (1)")
    release = threading.Timer(1.0, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        assert Metastore(_url(path)).init() == SCHEMA_VERSION
    finally:
        release.join()
        holder.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_read_transaction_is_one_snapshot(env) -> None:
    ms, other = Metastore(env.metastore), Metastore(env.metastore)
    count = sa.select(sa.func.count()).select_from(schema.repositories)
    with ms.read() as conn:
        assert conn.execute(count).scalar() == 0
        with other.write() as writer:
            writer.execute(
                schema.repositories.insert().values(
                    name="r1", storage_namespace="file:///x", default_branch="main", created_at=datetime.now(UTC)
                )
            )
        assert conn.execute(count).scalar() == 0  # committed meanwhile, but not in this snapshot
    with ms.read() as conn:
        assert conn.execute(count).scalar() == 1


def test_writers_queue_and_each_sees_what_the_one_before_committed(env) -> None:
    """A second writer waits for the first, then reads its commit (a compare-and-swap relies on it)."""
    first, second = Metastore(env.metastore), Metastore(env.metastore)
    first.init()
    holding, seen = threading.Event(), []

    def write_second() -> None:
        holding.wait()
        with second.write() as conn:
            seen.append(conn.execute(sa.select(schema.settings.c.value).where(schema.settings.c.key == "k")).scalar())
            conn.execute(schema.settings.update().where(schema.settings.c.key == "k").values(value=seen[-1] + "2"))

    thread = threading.Thread(target=write_second)
    thread.start()
    with first.write() as conn:
        conn.execute(schema.settings.insert().values(key="k", value="1"))
        holding.set()
        time.sleep(0.5)  # the second writer is waiting for the lock by now
        assert seen == []
    thread.join(timeout=30)
    assert seen == ["1"]
    with first.read() as conn:
        assert conn.execute(sa.select(schema.settings.c.value)).scalar() == "12"


def test_names_and_paths_sort_by_bytes_as_on_sqlite(env, tmp_path: Path) -> None:
    """The PostgreSQL test server sorts text by an English locale: lakegc must not depend on it."""
    from lakegc.repo.repository import Lake

    lake = Lake(env.metastore)
    repos = ["ab", "a-c", "aa", "a0"]
    for name in repos:
        lake.create_repository(name, (tmp_path / name).as_uri())
    assert [r.name for r in lake.repositories()] == sorted(repos)
    repo = lake.repository("ab")
    names = ["b", "B", "a_b", "a-b", "a.b", "A", "_"]
    for name in names:
        repo.create_branch(name, "main")
        repo.create_tag(f"t{name}", "main")
    assert [b.name for b in repo.branches()] == sorted([*names, "main"])
    assert [t.name for t in repo.tags()] == sorted(f"t{n}" for n in names)
    paths = ["a/b", "a.txt", "a-b", "B", "a b", "a", "ab", "A/z"]
    for path in paths:
        repo.upload("main", path, b"x")
    assert [c.path for c in repo.diff("main")] == sorted(paths)
    assert [e.path for e in repo.list("main")] == sorted(paths)


def test_the_postgresql_test_server_sorts_text_by_locale(pg_url: str) -> None:
    """What the test above guards against: without COLLATE "C", this server does not sort by bytes."""
    values = "('B'), ('a'), ('a/b'), ('a.txt')"
    with sa.create_engine(pg_url).connect() as conn:
        got = conn.exec_driver_sql(f"SELECT x FROM (VALUES {values}) v(x) ORDER BY x").scalars().all()
    assert got != sorted(got)


def test_a_postgresql_url_without_a_driver_uses_psycopg(pg_url: str) -> None:
    ms = Metastore(pg_url.replace("postgresql+psycopg://", "postgresql://"))
    assert ms.init() == SCHEMA_VERSION and ms.engine.dialect.driver == "psycopg"


@pytest.mark.parametrize("failure", ["server-down", "wrong-password", "unknown-database", "no-right-to-create-tables"])
def test_postgresql_failures_are_one_readable_line_without_the_password(pg_server, failure: str) -> None:
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [PASSWORD_ROLE]).fetchone():
            conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD 'right'")
    url, needle = {
        "server-down": ("postgresql+psycopg://x:hunter2@127.0.0.1:1/db", "connection refused"),
        "wrong-password": (
            f"postgresql://{PASSWORD_ROLE}:hunter2@127.0.0.1:{pg_server.port}/postgres",
            "password authentication failed",
        ),
        "unknown-database": (pg_server.url("no_such_db").replace("postgres@", "postgres:hunter2@"), "does not exist"),
        "no-right-to-create-tables": (
            f"postgresql://{PASSWORD_ROLE}:right@127.0.0.1:{pg_server.port}/postgres",
            "permission denied",
        ),
    }[failure]
    with pytest.raises(MetastoreError) as info:
        Metastore(url).init()
    message = str(info.value)
    assert needle in message.lower() and "\n" not in message, message
    assert "hunter2" not in message and ":***@" in message


# ---------------------------------------------------------------------------------------------
# Slices: where objects land, and until when
# ---------------------------------------------------------------------------------------------


def _slice_rows(lake, name: str) -> list:  # type: ignore[no-untyped-def]
    with lake.metastore.read() as conn:
        return conn.execute(
            sa.select(schema.slices).where(schema.slices.c.repository == name).order_by(schema.slices.c.name)
        ).all()


def test_a_slice_remembers_the_latest_time_an_object_may_land_in_it(env, tmp_path: Path, monkeypatch) -> None:
    import lakegc.repo.objects as objects
    from lakegc.repo.repository import Lake
    from lakegc.repo.slices import DATA_PREFIX, SLICE_MAX_AGE

    clock = [datetime(2030, 1, 1, 12, 0, tzinfo=UTC)]
    monkeypatch.setattr(objects, "utcnow", lambda: clock[0])  # where a slice is chosen for an upload
    lake = Lake(env.metastore)
    lake.create_repository("sl", (tmp_path / "ns").as_uri())
    repo = lake.repository("sl")

    entry = repo.upload("main", "a", b"1")
    [row] = _slice_rows(lake, "sl")
    assert entry.address.startswith(f"{DATA_PREFIX}{row.name}/")
    assert row.writable_until == clock[0] and row.objects == 1

    clock[0] += timedelta(minutes=10)
    claims = repo.get_physical_address("main", "b", ttl=timedelta(hours=3))  # a token holder may write until expiry
    [row] = _slice_rows(lake, "sl")
    assert claims.address.startswith(f"{DATA_PREFIX}{row.name}/")
    assert row.writable_until == clock[0] + timedelta(hours=3) and row.objects == 2

    clock[0] += timedelta(minutes=10)
    repo.upload("main", "c", b"3")  # a later upload does not shorten the window
    [row] = _slice_rows(lake, "sl")
    assert row.writable_until == clock[0] - timedelta(minutes=10) + timedelta(hours=3)

    clock[0] += SLICE_MAX_AGE  # the slice is closed: the next object opens a new one
    repo.upload("main", "d", b"4")
    newest, first = _slice_rows(lake, "sl")  # names sort newest first
    assert newest.name < first.name and newest.writable_until == clock[0] and newest.objects == 1
    assert first.objects == 3
