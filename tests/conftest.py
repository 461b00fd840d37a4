"""Shared fixtures: every test gets its own metastore and folders, and drives the real CLI.

The metastore is SQLite, and for the modules (or single tests) listed in BOTH_BACKENDS also a fresh
database on a real PostgreSQL server started for the test process: those tests run once per
backend, with ids `[sqlite]` and `[postgresql]`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import sqlalchemy as sa
import typer.testing
from support.pgserver import PgServer, find_binaries
from support.s3server import FaultProxy, Faults, MotoServer, aws_env
from typer.testing import CliRunner

import lakegc.metastore as metastore
from lakegc.cli.main import app
from lakegc.metastore import schema
from lakegc.repo.repository import Lake

pytest_plugins = ["support.lakegc_server"]  # `server` (`lakegc serve` as a real process) and `sdk`

# Run on SQLite and on PostgreSQL: whole modules, or "module.py::name" for the tests of a module named
# so or using a fixture so named. Every such test whose fixtures need `backend` (through `env`,
# `module_env`, ...) is parametrized over BACKENDS.
# (The bad-input tables of test_cli_errors.py check argument handling and stay on SQLite: they
# add two minutes on PostgreSQL and would prove nothing more.)
BOTH_BACKENDS = {
    "test_cli_repo_refs.py",
    "test_cli_objects.py",
    "test_cli_history.py",
    "test_graph_merge.py",
    "test_storage_metastore.py",
    "test_gc_cli.py::life",
    "test_gc_cli.py::test_failed_run_is_recorded_deletes_nothing_and_a_rerun_converges",
    "test_gc_scenarios.py::worked_example",
    "test_gc_scenarios.py::mixed",  # the scenarios, not every GC test there
    "test_gc_concurrency.py::test_gc_rounds_while_writer_processes_hammer_the_repository",
}
BACKENDS = ["sqlite", "postgresql"]

# A warm engine or Spark Connect server of the machine's user must never serve a test's run: the
# tests' own home (tests that need one set theirs) and no LAKEGC_REMOTE, for every worker.
os.environ.pop("LAKEGC_REMOTE", None)
os.environ["LAKEGC_HOME"] = tempfile.mkdtemp(prefix="lakegc-tests-home-")

# typer rebuilds the click command tree on every in-process invoke (about half of each call's
# cost); build it once per process. The commands run exactly as they would otherwise.
_build_command = typer.testing._get_command
_COMMAND = _build_command(app)
typer.testing._get_command = lambda typer_app: _COMMAND if typer_app is app else _build_command(typer_app)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Env:
    """One isolated lakegc world: a metastore URL, a home, and a place for namespaces."""

    home: Path
    metastore: str
    root: Path

    def namespace(self, name: str = "ns") -> Path:
        return self.root / name

    def lake(self) -> Lake:
        return Lake(self.metastore)

    def environ(self) -> dict[str, str]:
        return {"LAKEGC_HOME": str(self.home), "LAKEGC_METASTORE": self.metastore}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = Path(metafunc.definition.path).name
    names = {module, *(f"{module}::{name}" for name in (metafunc.function.__name__, *metafunc.fixturenames))}
    if "backend" in metafunc.fixturenames and names & BOTH_BACKENDS:
        # module scope: a module-scoped fixture (a GC scenario, say) is built once per backend
        metafunc.parametrize("backend", BACKENDS, scope="module")


@pytest.fixture(scope="session")
def backend() -> str:
    """The metastore backend; tests listed in BOTH_BACKENDS get each of BACKENDS instead."""
    return "sqlite"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server per test process (per xdist worker), started on first use. Without
    the binaries this fails: a PostgreSQL test that silently skipped would prove nothing."""
    bindir = find_binaries()
    if bindir is None:
        pytest.fail("PostgreSQL server binaries not found: install Debian's postgresql package", pytrace=False)
    server = PgServer(bindir)
    try:
        server.start()
    except RuntimeError as exc:
        server.remove()
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.remove()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The SQLAlchemy URL of a fresh, empty PostgreSQL database."""
    return pg_server.create_database()


def new_metastore(request: pytest.FixtureRequest, backend: str, home: Path) -> str:
    """A fresh metastore URL: a SQLite file in `home`, or a new database on the test server."""
    if backend == "postgresql":
        return request.getfixturevalue("pg_server").create_database()
    return f"sqlite:///{home / 'lakegc.db'}"


@pytest.fixture
def env(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Env:
    home = tmp_path / "home"
    return Env(home, new_metastore(request, backend, home), tmp_path)


def patch_short_lock_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests that run one command at a time: any lock wait can only be a command deadlocking
    on itself, so wait 0.3 s instead of the production 60 s and fail fast."""
    monkeypatch.setattr(metastore.base, "BUSY_TIMEOUT_MS", 300)  # every SQLite connection's, SQLAlchemy's or not
    original = metastore._create_engine

    def create_engine(url: str) -> sa.engine.Engine:
        engine = original(url)
        if engine.dialect.name == "postgresql":

            @sa.event.listens_for(engine, "connect")
            def _short_lock_timeout(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
                dbapi_conn.execute("SET lock_timeout = '300ms'")
                dbapi_conn.commit()  # a session setting, not part of the next transaction

        return engine

    monkeypatch.setattr(metastore, "_create_engine", create_engine)


@pytest.fixture
def short_lock_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_short_lock_wait(monkeypatch)


def make_cli(env: Env) -> Callable[..., CliResult]:
    """Run the real CLI in-process: `cli("fs", "cat", uri)`; `ok=True` asserts exit 0."""
    runner = CliRunner()

    def run(*args: str, input: bytes | str | None = None, ok: bool = True) -> CliResult:
        result = runner.invoke(app, list(args), input=input, env=env.environ(), catch_exceptions=False)
        out = CliResult(result.exit_code, result.stdout, result.stderr)
        if ok:
            assert out.exit_code == 0, f"lakegc {' '.join(args)} -> {out.exit_code}: {out.stderr}"
        return out

    return run


@pytest.fixture
def cli(env: Env) -> Callable[..., CliResult]:
    return make_cli(env)


@pytest.fixture
def sh(env: Env) -> Callable[..., CliResult]:
    """Run `lakegc` as a separate process, as users and scripts do."""

    def run(*args: str, input: bytes | None = None) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "lakegc", *args],
            input=input,
            capture_output=True,
            env={**os.environ, **env.environ()},
            timeout=600,
        )  # a hang guard, not a speed check
        return CliResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


@pytest.fixture
def repo_uri(env: Env, cli: Callable[..., CliResult]) -> str:
    """A fresh repository `lakegc://repo` with default branch main."""
    cli("repo", "create", "lakegc://repo", str(env.namespace()))
    return "lakegc://repo"


@pytest.fixture
def put(env: Env, cli: Callable[..., CliResult]) -> Callable[[str, bytes | str], dict[str, Any]]:
    """Upload content through the CLI: `put("lakegc://repo/main/a.txt", b"data")` -> stat JSON."""

    def upload(uri: str, content: bytes | str) -> dict[str, Any]:
        return cli("fs", "upload", uri, "--source", "-", "--json", input=content).json()

    return upload


def one_error(result: CliResult, *needles: str, json_cmd: bool = False) -> str:
    """A user-facing error: exit 1, exactly one `error: ` line on stderr and it comes last (the
    lines before it, if any, are the progress of the phases that ran), no traceback."""
    assert result.exit_code == 1, f"exit {result.exit_code}, stdout={result.stdout!r} stderr={result.stderr!r}"
    lines = result.stderr.rstrip("\n").split("\n")
    assert [line for line in lines if line.startswith("error")] == lines[-1:], (
        f"expected one last error line, got {result.stderr!r}"
    )
    assert all(PROGRESS.match(line) for line in lines[:-1]), f"not progress lines: {result.stderr!r}"
    lines = lines[-1:]
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.stderr
    # tmp paths carry the test's name: never let them satisfy a needle
    message = re.sub(r"[^\s'\"]*pytest-of-[^\s'\"]*", "<tmp>", lines[0]).lower()
    for needle in needles:
        assert needle.lower() in message, f"{needle!r} not in {lines[0]!r}"
    if json_cmd:
        assert result.stdout == "", f"stdout must stay empty on error, got {result.stdout!r}"
    return lines[0]


PROGRESS = re.compile(
    r"^(GC \S+|sweep \S+|simulating retentions for \S+|catalog GC|iceberg GC|delta GC|lakeFS GC|warehouse GC"
    r"|GC demo): [a-z]"
)  # a phase's line (cli.progress)


def heads(cli: Callable[..., CliResult], repo: str = "lakegc://repo") -> dict[str, str]:
    """Branch name -> HEAD commit id, through the CLI."""
    return {b["id"]: b["commit_id"] for b in cli("branch", "list", repo, "--json").json()}


@pytest.fixture(scope="session")
def spark():
    """One local Spark for the whole test process (each xdist worker has its own): GC runs made
    through the in-process CLI reuse it."""
    from lakegc.engine.spark import spark_session

    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


def age_objects(namespace: Path, when: datetime, prefix: str = "data/") -> int:
    """Set the mtime of every object under `prefix` of a local namespace to `when`, as if the lake
    had lived that long (GC never collects objects younger than its min-age). Returns how many."""
    count = 0
    for path in (namespace / prefix).rglob("*"):
        if path.is_file():
            os.utime(path, (when.timestamp(), when.timestamp()))
            count += 1
    return count


def clone_lake(home: Path, ns: Path, dest: Path) -> Env:
    """An exact twin of a SQLite lake under `dest`: the namespace as hard links (same keys and mtimes
    in a fraction of a copy's time; GC only unlinks objects and writes new files, so twins never
    affect each other), the metastore through SQLite's backup API, the repository pointed at the
    new namespace."""
    env = Env(dest / "home", f"sqlite:///{dest / 'home' / 'lakegc.db'}", dest)
    shutil.copytree(ns, env.namespace(), symlinks=True, copy_function=os.link)
    env.home.mkdir(parents=True)
    source, target = sqlite3.connect(home / "lakegc.db"), sqlite3.connect(env.home / "lakegc.db")
    try:
        source.backup(target)
        target.execute("UPDATE repositories SET storage_namespace = ?", (env.namespace().as_uri(),))
        target.commit()
    finally:
        source.close()
        target.close()
    return env


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `root`: size, mtime (ns) and content hash, to prove nothing changed."""
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): (
            p.stat().st_size,
            p.stat().st_mtime_ns,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- an S3-API server on loopback (moto) behind a fault-injecting proxy ---------------------------
@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxy]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    proxy = FaultProxy(server.port)
    yield proxy
    proxy.stop()
    server.stop()


@dataclass
class Bucket:
    name: str
    client: Any  # a plain boto3 client, straight to the server: the test's own eyes
    faults: Faults
    endpoint: str

    @property
    def ns(self) -> str:
        return f"s3://{self.name}/lake"

    def keys(self, prefix: str = "") -> set[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", ())}

    def put(self, key: str, body: bytes = b"x") -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=body)

    def key_of(self, physical_address: str) -> str:
        """A lake object's key relative to the namespace."""
        return physical_address.removeprefix(self.ns + "/")


@pytest.fixture
def bucket(s3: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A fresh bucket, and this process's AWS variables pointing at the proxy."""
    s3.faults.reset()
    for key, value in aws_env(s3.endpoint).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")  # failures that never heal should fail in seconds
    name = f"b-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3.upstream,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=name)
    return Bucket(name, client, s3.faults, s3.endpoint)


def forget_tree_changes(env: Env) -> None:
    """Make every commit look as one made before schema v5: no recorded tree changes."""
    engine = sa.create_engine(env.metastore)
    with engine.begin() as conn:
        conn.execute(schema.commits.update().values(changes_recorded=None))
        conn.execute(schema.tree_changes.delete())
    engine.dispose()
