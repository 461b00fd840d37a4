"""Crash safety: a GC killed with SIGKILL at any point deletes nothing it did not record, leaves a
`failed` (or resumable `marked`) run behind, and the next run converges to what an uninterrupted
run leaves.

One template lake is built per test process (committed, tagged, staged and copied live objects;
expired, overwritten, reset, deleted-branch and abandoned-upload garbage made through the CLI; and
thousands of unreferenced files written straight into `data/<slice>/` folders and the namespace
root, so that deleting them takes measurable time). Every test works on an exact clone of it (same
keys, same mtimes, same metastore rows), so the end state of each test can be compared key for key
with a twin clone collected by one uninterrupted run.

Each kill test starts `lakegc gc run` (or `lakegc gc sweep`) as a separate process in a session of
its own, follows the phase lines it prints on stderr, and SIGKILLs every process of that session
(the CLI, the Spark JVM, and the pyspark daemon and workers, which sit in a process group of their
own) at its kill point. Points no phase line marks (a mark just recorded, a sweep just started or
just finished) are hit exactly: the process is told (LAKEGC_TEST_STOP_AFTER) to stop itself the
moment its run enters that state. Then it checks safety (live objects all there and readable;
whatever disappeared was among the killed run's recorded candidates and in its `to_delete/` list;
the killed run is left `marking`, `marked`, `sweeping` or, killed after its last delete, `swept`),
recovers with the next `lakegc gc run` (retried while the dead holder's lease is still fresh), and
checks convergence (the namespace equals the twin's exactly; the killed run is now `failed`
"interrupted", or still `marked` and sweepable, or `swept` and the next run's base).

Some tests kill several runs in a row on one lake before recovering. Others kill runs that build
on an earlier one: `based` is a lake an earlier run swept and whose slices it settled, so the runs
after it are incremental, and its twin is an uninterrupted incremental run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from conftest import CliResult, Env, clone_lake, make_cli

from lakegc.engine.recorder import STOP_AFTER
from lakegc.metastore import schema as t
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
Cli = Callable[..., CliResult]
RULES = {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 7}]}
JUNK_SLICES = ("8200000001", "8200000002", "8200000003")  # unreferenced files nobody ever uploaded
JUNK_PER_SLICE = 2_500
JUNK_AT_ROOT = 25
# The phase lines of a clean `gc run`, in order (the CLI prints "GC repo: <phase> (<detail>)").
PHASES = (
    "listing the namespace",
    "snapshotting uncommitted references",
    "choosing active commits",
    "reading committed trees",
    "writing candidates",
    "re-checking and deleting candidates",
)
SWEEP_PHASE = PHASES[-1]
LOOKUP_PHASE = "looking up what lost a reference since the base run"  # runs that build on an earlier one


def stopped_line(state: str) -> str:
    """What a GC process started with `stop_after=state` prints when it stops (lakegc.engine.runs)."""
    return f"is {state}; stopped ({STOP_AFTER})"


LEASE_WAIT = 40.0  # the dead holder's lease is taken over 3 heartbeats (6 s) after its last renewal
RUN_TIMEOUT = 300.0


# -- the template lake and its clones --------------------------------------------------------------
@dataclass(frozen=True)
class Template:
    root: Path  # home/ (the SQLite metastore) and ns/ (the namespace)
    live: frozenset[str]  # namespace keys that every run must keep
    garbage: frozenset[str]  # namespace keys that a run must collect
    junk: frozenset[str]  # the part of `garbage` written straight into JUNK_SLICES
    reads: tuple[tuple[str, str], ...]  # (lakegc:// URI, content) that must read back after any run
    base: str | None = None  # a run that already swept the lake (the next runs may build on it)


@dataclass
class Lake:
    """One clone of the template: its own metastore and namespace."""

    env: Env
    cli: Cli

    @property
    def ns(self) -> Path:
        return self.env.namespace()


def local(uri: str) -> Path:
    assert uri.startswith("file:///"), uri
    return Path(unquote(urlparse(uri).path))


def namespace_keys(ns: Path) -> set[str]:
    """Every object of the namespace except GC's own metadata under `_lakegc/`."""
    return {
        p.relative_to(ns).as_posix()
        for p in ns.rglob("*")
        if p.is_file() and not p.relative_to(ns).as_posix().startswith("_lakegc/")
    }


def set_mtime(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


class Builder:
    """Builds a template lake through the CLI: a repository with RULES, objects, dated commits."""

    def __init__(self, root: Path):
        self.env = Env(root / "home", f"sqlite:///{root / 'home' / 'lakegc.db'}", root)
        self.cli = make_cli(self.env)
        self.ns = self.env.namespace()
        self.now = utcnow()
        self.cli("repo", "create", REPO, str(self.ns))
        self.cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))

    def put(self, branch: str, path: str, content: str) -> str:
        doc = self.cli("fs", "upload", f"{REPO}/{branch}/{path}", "--source", "-", "--json", input=content).json()
        return local(doc["physical_address"]).relative_to(self.ns).as_posix()

    def commit(self, branch: str, days: float) -> str:
        date = (self.now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self.cli("commit", f"{REPO}/{branch}", "-m", f"{days} days ago", "--date", date, "--json").json()["id"]

    def write_junk(self) -> set[str]:
        """Unreferenced files nobody uploaded, in JUNK_SLICES (folders the metastore never heard of)
        and the namespace root: enough of them that deleting takes a while."""
        junk = set()
        for name in JUNK_SLICES:
            folder = self.ns / "data" / name
            folder.mkdir(parents=True)
            for i in range(JUNK_PER_SLICE):
                (folder / f"junk-{i:05d}").write_bytes(b"junk %d" % i)
                junk.add(f"data/{name}/junk-{i:05d}")
        for i in range(JUNK_AT_ROOT):
            (self.ns / f"stray-{i:03d}").write_bytes(b"stray")
            junk.add(f"stray-{i:03d}")
        return junk

    def age(self, keys: set[str]) -> None:
        """Older than the default min-age (24 h): three days."""
        for key in keys:
            set_mtime(self.ns / key, self.now - timedelta(days=3))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("crash-template")
    build = Builder(root)
    cli, ns, put, commit = build.cli, build.ns, build.put, build.commit
    live: dict[str, str] = {}
    garbage: dict[str, str] = {}
    # A token that runs out within a second: the object its holder wrote and never linked is garbage.
    token = cli("fs", "get-address", f"{REPO}/main/direct/abandoned", "--ttl", "1s", "--json").json()

    # main, 7 days kept: c0 (tagged) -> c1 (expired: its own objects are garbage) -> c2 -> c3 (HEAD)
    live["keep"] = put("main", "keep", "kept by every commit")
    live["tagged"] = put("main", "tagged", "only the tag keeps this")
    c0 = commit("main", 20)
    cli("tag", "create", f"{REPO}/v0", f"{REPO}/{c0}")
    cli("fs", "rm", f"{REPO}/main/tagged")
    garbage["a1"] = put("main", "a", "a, only in the expired commit")
    garbage["old"] = put("main", "old", "old, only in the expired commit")
    commit("main", 15)
    live["a2"] = put("main", "a", "a, second version")
    cli("fs", "rm", f"{REPO}/main/old")
    for i in range(10):
        live[f"part{i}"] = put("main", f"table/part-{i}", f"table part {i}")
    commit("main", 10)
    live["b"] = put("main", "b", "b at HEAD")
    commit("main", 2)

    # Uncommitted: live staging and a shallow copy on dev; an overwritten draft; reset and deleted branches.
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    garbage["draft1"] = put("dev", "draft", "draft, overwritten")
    live["draft2"] = put("dev", "draft", "draft, staged")
    cli("fs", "cp", f"{REPO}/main/a", f"{REPO}/dev/a-copy")
    for branch, finish in (("scratch", "reset"), ("abandoned", "delete")):
        cli("branch", "create", f"{REPO}/{branch}", "--source", f"{REPO}/main")
        for i in range(2):
            garbage[f"{branch}{i}"] = put(branch, f"tmp/{i}", f"{branch} {i}")
        cli("branch", finish, f"{REPO}/{branch}", "--yes")
    direct = local(token["physical_address"])
    direct.parent.mkdir(parents=True, exist_ok=True)
    direct.write_text("written, never linked")
    garbage["direct"] = direct.relative_to(ns).as_posix()

    junk = build.write_junk()
    build.age(namespace_keys(ns))
    time.sleep(max(0.0, token["expires_at"] + 1.1 - time.time()))

    keys = namespace_keys(ns)
    assert set(live.values()) | set(garbage.values()) | junk == keys
    reads = (
        ("main/keep", "kept by every commit"),
        ("v0/tagged", "only the tag keeps this"),
        ("main/a", "a, second version"),
        ("main/b", "b at HEAD"),
        ("main/table/part-7", "table part 7"),
        ("dev/draft", "draft, staged"),
        ("dev/a-copy", "a, second version"),
    )
    return Template(
        root,
        frozenset(live.values()),
        frozenset(garbage.values()) | frozenset(junk),
        frozenset(junk),
        tuple((f"{REPO}/{ref}", content) for ref, content in reads),
    )


@pytest.fixture(scope="module")
def based(tmp_path_factory: pytest.TempPathFactory, spark) -> Template:
    """A lake an earlier run (`base`) swept, uninterrupted: aged three days, its slices' write
    windows too, so that the base settled them. Then objects in those settled slices lose their
    last reference (a tag deleted, a branch reset, another deleted): a run that builds on the base
    finds them only through the base's records. And junk lands in folders no run has seen."""
    build = Builder(tmp_path_factory.mktemp("crash-based"))
    cli, ns, put, commit = build.cli, build.ns, build.put, build.commit
    live = {"keep": put("main", "keep", "kept by every commit")}
    tagged = put("main", "tagged", "only the tag keeps this, until it goes")
    cli("tag", "create", f"{REPO}/v0", f"{REPO}/{commit('main', 20)}")
    cli("fs", "rm", f"{REPO}/main/tagged")
    put("main", "a", "a, only in an expired commit: the base run deletes it")
    commit("main", 15)
    live["a2"] = put("main", "a", "a, second version")
    for i in range(10):
        live[f"part{i}"] = put("main", f"table/part-{i}", f"table part {i}")
    commit("main", 10)
    live["b"] = put("main", "b", "b at HEAD")
    commit("main", 2)
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    garbage = {"tagged": tagged, "draft": put("dev", "draft", "draft, staged at the base run, reset after it")}
    cli("fs", "cp", f"{REPO}/main/a", f"{REPO}/dev/a-copy")
    cli("branch", "create", f"{REPO}/abandoned", "--source", f"{REPO}/main")
    for i in range(2):
        garbage[f"abandoned{i}"] = put("abandoned", f"tmp/{i}", f"abandoned {i}")
    build.age(namespace_keys(ns))
    engine = sa.create_engine(build.env.metastore)
    try:
        with engine.begin() as conn:
            old = build.now - timedelta(days=3)
            conn.execute(sa.update(t.slices).values(created_at=old, writable_until=old))
    finally:
        engine.dispose()

    base = cli("gc", "run", REPO, "--json").json()
    assert (base["state"], base["num_deleted"]) == ("swept", 1)
    settled = json.loads((ns / "_lakegc" / "gc" / base["run_id"] / "settled_slices.json").read_text())
    assert settled and {key.split("/")[1] for key in garbage.values()} <= set(settled)
    cli("tag", "delete", f"{REPO}/v0", "--yes")
    cli("branch", "reset", f"{REPO}/dev", "--yes")
    cli("branch", "delete", f"{REPO}/abandoned", "--yes")
    junk = build.write_junk()
    build.age(junk)

    assert set(live.values()) | set(garbage.values()) | junk == namespace_keys(ns)
    reads = (
        ("main/keep", "kept by every commit"),
        ("main/a", "a, second version"),
        ("main/b", "b at HEAD"),
        ("main/table/part-7", "table part 7"),
    )
    return Template(
        build.env.root,
        frozenset(live.values()),
        frozenset(garbage.values()) | frozenset(junk),
        frozenset(junk),
        tuple((f"{REPO}/{ref}", content) for ref, content in reads),
        base["run_id"],
    )


def clone(template: Template, dest: Path) -> Lake:
    env = clone_lake(template.root / "home", template.root / "ns", dest)
    return Lake(env, make_cli(env))


@pytest.fixture(scope="module")
def twin(template: Template, tmp_path_factory: pytest.TempPathFactory, spark) -> set[str]:
    """What one uninterrupted run leaves of the template: exactly its live objects."""
    lake = clone(template, tmp_path_factory.mktemp("crash-twin"))
    summary = lake.cli("gc", "run", REPO, "--json").json()
    assert summary["state"] == "swept"
    assert summary["num_deleted"] == len(template.garbage)
    after = namespace_keys(lake.ns)
    assert after == template.live
    return after


@pytest.fixture
def lake(template: Template, tmp_path: Path, spark) -> Lake:
    return clone(template, tmp_path / "lake")


@pytest.fixture(scope="module")
def based_twin(based: Template, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What one uninterrupted run leaves of `based`: it builds on the base run and, through the
    base's records, finds and deletes exactly the garbage."""
    lake = clone(based, tmp_path_factory.mktemp("crash-based-twin"))
    summary = lake.cli("gc", "run", REPO, "--json").json()
    assert (summary["state"], summary["mode"], summary["base_run_id"]) == ("swept", "incremental", based.base)
    assert summary["num_rechecked"] == len(based.garbage - based.junk)
    assert summary["num_deleted"] == len(based.garbage)
    after = namespace_keys(lake.ns)
    assert after == based.live
    return after


@pytest.fixture
def based_lake(based: Template, tmp_path: Path) -> Lake:
    return clone(based, tmp_path / "lake")


# -- a GC process and its session ------------------------------------------------------------------
def session_processes(sid: int) -> dict[int, tuple[str, int]]:
    """pid -> (state, process group) of every process in session `sid` (zombies included)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == sid:
            found[int(entry)] = (fields[0], int(fields[2]))
    return found


class GcProcess:
    """`lakegc ARGS` in a new session, its stderr lines collected as they come."""

    def __init__(self, env: Env, *args: str, stop_after: str | None = None):
        """`stop_after`: a run state; the process stops itself the moment it moves its run there,
        printing `stopped_line(state)` (lakegc.engine.recorder.STOP_AFTER), for a kill at exactly that point."""
        self.started = time.monotonic()
        hook = {STOP_AFTER: stop_after} if stop_after else {}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakegc", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, **env.environ(), **hook},
            start_new_session=True,
        )
        self.sid = self.proc.pid
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self.killed_at: float | None = None
        self.dead = False
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def wait_for_line(self, needle: str, timeout: float = RUN_TIMEOUT) -> bool:
        """Wait until a stderr line contains `needle`: False if the process ended without one."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {needle!r} line after {timeout:.0f}s: {self.stderr[-20:]}") from None
            if line is None:
                self.lines.put(None)
                return False
            if needle in line:
                return True

    def kill(self) -> None:
        """SIGKILL every process of the session: the CLI and the Spark JVM share its group; the
        pyspark daemon and its workers make a group of their own. Then make sure none is left."""
        if self.dead:
            return  # once the whole session is gone, its ids may belong to someone else
        self.killed_at = self.elapsed()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.sid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            running = {pid: group for pid, (state, group) in session_processes(self.sid).items() if state != "Z"}
            if not running:
                break
            assert time.monotonic() < deadline, f"still running after SIGKILL: {running}"
            for group in set(running.values()):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            time.sleep(0.05)
        self.proc.wait(timeout=30)
        self.dead = True

    def assert_no_process_left(self) -> None:
        deadline = time.monotonic() + 10
        while session_processes(self.sid):
            assert time.monotonic() < deadline, f"left behind: {session_processes(self.sid)}"
            time.sleep(0.1)


@pytest.fixture
def spawn() -> Iterator[Callable[..., GcProcess]]:
    """Start GC processes; whatever happens in the test, none of them survives it."""
    started: list[GcProcess] = []

    def start(env: Env, *args: str, stop_after: str | None = None) -> GcProcess:
        started.append(GcProcess(env, *args, stop_after=stop_after))
        return started[-1]

    yield start
    for gc in started:
        gc.kill()
        gc.assert_no_process_left()


# -- what a killed run left, and the run after it --------------------------------------------------
def parquet_addresses(ns: Path, run_id: str, output: str) -> set[str] | None:
    """The addresses of a run's output (`candidates`, `to_delete`), None when it has no part."""
    parts = sorted((ns / "_lakegc" / "gc" / run_id / output).glob("*.parquet"))
    if not parts:
        return None
    return {
        a
        for part in parts
        for a in pq.read_table(io.BytesIO(part.read_bytes()), columns=["address"]).column("address").to_pylist()
    }


def runs(lake: Lake) -> list[dict[str, Any]]:
    return lake.cli("gc", "runs", REPO, "--json").json()


def lease_holders(lake: Lake) -> list[str]:
    """The run ids holding a GC lease on the repository (at most one)."""
    engine = sa.create_engine(lake.env.metastore)
    try:
        with engine.connect() as conn:
            return list(
                conn.execute(sa.select(t.gc_leases.c.run_id).where(t.gc_leases.c.repository == "repo")).scalars()
            )
    finally:
        engine.dispose()


@dataclass
class Killed:
    """What a kill left: the run (None if it was killed before it was recorded) and the objects gone."""

    run: dict[str, Any] | None
    gone: set[str]
    candidates: set[str] | None
    to_delete: set[str] | None
    figures: dict[str, Any] = field(default_factory=dict)


def check_safe(lake: Lake, template: Template, gc: GcProcess, earlier: Sequence[Killed] = ()) -> Killed:
    """Right after the kill: no live object touched, nothing gone that the run did not record, and
    the run left in a working (or resumable) state. `earlier`: what the kills before this one, on
    the same lake, left (their runs are closed by now, or still marked)."""
    gc.assert_no_process_left()
    keys = namespace_keys(lake.ns)
    assert keys <= template.live | template.garbage
    assert template.live <= keys, f"live objects gone: {sorted(template.live - keys)[:5]}"
    for uri, content in template.reads:
        assert lake.cli("fs", "cat", uri).stdout == content
    gone = set(template.live | template.garbage) - keys - set().union(*(k.gone for k in earlier))
    # the earlier kills' runs: closed as failed by the next lease holder, unless they had
    # finished their mark (still marked: sweepable), begun their sweep (still sweeping: to be
    # continued) or finished it (swept)
    closed = {
        k.run["run_id"]: {"marked": "marked", "swept": "swept", "sweeping": "sweeping"}.get(k.run["state"], "failed")
        for k in earlier
        if k.run is not None
    }
    recorded = runs(lake)
    states = {r["run_id"]: r["state"] for r in recorded}
    if template.base is not None:
        assert states[template.base] == "swept"
    new = [r for r in recorded if r["run_id"] not in {*closed, template.base}]
    assert len(new) <= 1
    run = new[0] if new else None
    candidates = to_delete = None
    if run is None:
        assert not gone, "objects deleted by a run that was never recorded"
    else:
        assert run["state"] in ("marking", "marked", "sweeping", "swept"), run
        assert {run_id: states[run_id] for run_id in closed} == closed
        candidates = parquet_addresses(lake.ns, run["run_id"], "candidates")
        to_delete = parquet_addresses(lake.ns, run["run_id"], "to_delete")
        if candidates is not None:
            assert candidates <= template.garbage, "a live object among the candidates"
        if gone:
            assert run["state"] in ("sweeping", "swept"), run
            assert candidates is not None and gone <= candidates
            assert to_delete is not None and gone <= to_delete, "deleted before it was recorded in to_delete/"
        if to_delete is not None:
            assert candidates is not None and to_delete <= candidates
    held = lease_holders(lake)
    assert len(held) <= 1 and (run is None or held == [run["run_id"]])  # the lease is stale, not gone
    figures = {
        "killed_at_s": round(gc.killed_at or 0.0, 1),
        "state": run and run["state"],
        "lease_left": bool(held),
        "gone": len(gone),
        "candidates": None if candidates is None else len(candidates),
        "to_delete": None if to_delete is None else len(to_delete),
    }
    return Killed(run, gone, candidates, to_delete, figures)


def spawn_when_free(
    spawn: Callable[..., GcProcess], lake: Lake, needle: str, stop_after: str | None = None
) -> GcProcess:
    """`gc run` in its own process, started again while the last killed run's lease is still
    fresh, until one prints a line with `needle`."""
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        gc = spawn(lake.env, "gc", "run", REPO, stop_after=stop_after)
        if gc.wait_for_line(needle):
            return gc
        gc.proc.wait(timeout=RUN_TIMEOUT)
        assert any("is being collected by GC run" in line for line in gc.stderr), gc.stderr[-20:]
        assert time.monotonic() < deadline, f"lease never taken over: {gc.stderr[-5:]}"
        time.sleep(0.5)


# Kill points: the stderr line to wait for and the run state to stop at (None: kill on the line).
KILL_POINTS: dict[str, tuple[str, str | None]] = {
    "listing": (PHASES[0], None),
    "looking up": (LOOKUP_PHASE, None),
    "marked": (stopped_line("marked"), "marked"),
    "sweeping": (stopped_line("sweeping"), "sweeping"),
    "mid-sweep": (SWEEP_PHASE, None),  # then as soon as some junk is gone
    "swept": (stopped_line("swept"), "swept"),
}


def kill_at(spawn: Callable[..., GcProcess], lake: Lake, point: str) -> GcProcess:
    """Start `gc run` (again, while a killed run's lease is still fresh) and kill it at `point`."""
    needle, stop_after = KILL_POINTS[point]
    gc = spawn_when_free(spawn, lake, needle, stop_after)
    if point == "mid-sweep":
        kill_once_junk_goes(gc, lake.ns)
    else:
        gc.kill()
    return gc


def next_run(lake: Lake) -> dict[str, Any]:
    """`gc run` again, retried while the dead run's lease is still fresh."""
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        result = lake.cli("gc", "run", REPO, "--json", ok=False)
        if result.exit_code == 0:
            return result.json()
        assert "is being collected by GC run" in result.stderr, result.stderr
        assert time.monotonic() < deadline, f"lease never taken over: {result.stderr}"
        time.sleep(0.5)


def check_converged(lake: Lake, template: Template, twin: set[str], *killed: Killed) -> dict[str, Any]:
    """The next run succeeds, the namespace ends exactly as the twin's, and the killed runs are
    closed (or still marked, and then sweepable: the namespace stays the twin's)."""
    started = time.monotonic()
    summary = next_run(lake)
    assert summary["state"] == "swept", summary
    assert summary["num_failed"] == 0
    assert summary["num_deleted"] == len(template.garbage - set().union(*(k.gone for k in killed)))
    assert namespace_keys(lake.ns) == twin == template.live
    assert lease_holders(lake) == []
    for uri, content in template.reads:
        assert lake.cli("fs", "cat", uri).stdout == content
    for each in killed:
        if each.run is None:
            continue
        run = next(r for r in runs(lake) if r["run_id"] == each.run["run_id"])
        if each.run["state"] == "marked":
            # Killed between its mark and its sweep: still marked, so it can be swept (nothing left to delete).
            assert run["state"] == "marked"
            swept = lake.cli("gc", "sweep", REPO, run["run_id"], "--json").json()
            assert swept["state"] == "swept" and swept["num_failed"] == 0
            assert namespace_keys(lake.ns) == twin
        elif each.run["state"] == "swept":
            # Killed after its last delete: a finished run, and the base of the next one.
            assert run["state"] == "swept" and run["error"] is None
            assert (summary["mode"], summary["base_run_id"]) == ("incremental", run["run_id"])
        elif each.run["state"] == "sweeping":
            # Killed while sweeping: still sweeping, marked interrupted, and `gc sweep` finishes it
            # (the next run deleted the rest: what it finds gone counts as deleted, nothing more goes).
            assert run["state"] == "sweeping" and run["error"].startswith("interrupted"), run
            assert summary["mode"] == "clean", summary  # a stopped sweep is no base
            swept = lake.cli("gc", "sweep", REPO, run["run_id"], "--json").json()
            assert swept["state"] == "swept" and swept["num_failed"] == 0 and swept["error"] is None
            assert swept["num_deleted"] == len(each.to_delete or each.candidates or ())
            assert namespace_keys(lake.ns) == twin
        else:
            assert run["state"] == "failed", run
            assert run["error"].startswith("interrupted"), run
            on_disk = json.loads((lake.ns / "_lakegc" / "gc" / run["run_id"] / "summary.json").read_text())
            assert (on_disk["state"], on_disk["error"]) == ("failed", run["error"])
    figures = (
        killed[0].figures
        if len(killed) == 1
        else {"states": [each.figures["state"] for each in killed], "gone": [each.figures["gone"] for each in killed]}
    )
    return {
        **figures,
        "next_run_deleted": summary["num_deleted"],
        "converged": len(twin),
        "next_run_s": round(time.monotonic() - started, 1),
    }


def report(name: str, figures: dict[str, Any]) -> None:
    print(f"\n[crash] {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def junk_left(ns: Path) -> int:
    return sum(len(os.listdir(ns / "data" / name)) for name in JUNK_SLICES)


def kill_mid_sweep(gc: GcProcess, ns: Path, fraction: float = 0.2) -> None:
    """Once the sweep phase began, kill as soon as some (not all) junk objects are gone."""
    assert gc.wait_for_line(SWEEP_PHASE), gc.stderr[-20:]
    kill_once_junk_goes(gc, ns, fraction)


def kill_once_junk_goes(gc: GcProcess, ns: Path, fraction: float = 0.2) -> None:
    """Kill a sweeping process as soon as `fraction` of the junk objects (not all) are gone."""
    total = len(JUNK_SLICES) * JUNK_PER_SLICE
    deadline = time.monotonic() + RUN_TIMEOUT
    while junk_left(ns) > total * (1 - fraction):
        assert gc.proc.poll() is None, f"the sweep ended before the kill: {gc.stderr[-10:]}"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gc.kill()


# -- kill points -----------------------------------------------------------------------------------
def test_killed_while_listing(lake, template, twin, spawn):
    gc = spawn(lake.env, "gc", "run", REPO)
    assert gc.wait_for_line(PHASES[0]), gc.stderr[-20:]
    gc.kill()
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "marking"
    assert not killed.gone
    report("listing", check_converged(lake, template, twin, killed))


@pytest.mark.slow  # the mid-sweep kills cover the sweep phase in the default run
def test_killed_after_mark(lake, template, twin, spawn):
    gc = spawn(lake.env, "gc", "run", REPO)
    assert gc.wait_for_line(SWEEP_PHASE), gc.stderr[-20:]
    gc.kill()
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "sweeping"
    assert killed.candidates == template.garbage  # the mark had finished
    assert not killed.gone
    report("after mark", check_converged(lake, template, twin, killed))


@pytest.mark.slow  # a GC process killed and converged: the second CI step
def test_killed_mid_sweep(lake, template, twin, spawn):
    gc = spawn(lake.env, "gc", "run", REPO)
    kill_mid_sweep(gc, lake.ns)
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "sweeping"
    assert 0 < len(killed.gone) < len(template.garbage), "the kill was not mid-sweep"
    report("mid-sweep", check_converged(lake, template, twin, killed))


def recorded_deletes(ns: Path, run_id: str) -> list[str]:
    """Every address a run's delete records say is gone, once per record (a sweep that goes on
    after a kill adds records of its own)."""
    parts = sorted((ns / "_lakegc" / "gc" / run_id / "deleted").rglob("*.parquet"))
    tables = [pq.read_table(io.BytesIO(p.read_bytes()), columns=["address", "deleted"]) for p in parts]
    return [a for t in tables for a, ok in zip(*t.to_pydict().values(), strict=True) if ok]


@pytest.mark.slow  # a GC process killed, then continued: the second CI step
def test_a_sweep_killed_mid_way_is_continued_by_gc_sweep(lake, template, twin, spawn):
    """Killed halfway through its deletes, the run stays `sweeping`; `gc sweep RUN` goes on from its
    records: the namespace ends as the twin's, every candidate recorded gone, and only the batches
    in flight at the kill (at most one per task) are tried twice."""
    gc = spawn(lake.env, "gc", "run", REPO)
    kill_mid_sweep(gc, lake.ns)
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "sweeping"
    assert 0 < len(killed.gone) < len(template.garbage), "the kill was not mid-sweep"
    before = recorded_deletes(lake.ns, killed.run["run_id"])
    assert set(before) <= killed.gone  # a record is written after its batch, never before
    deadline = time.monotonic() + LEASE_WAIT
    while True:  # the dead sweeper's lease is taken over first
        result = lake.cli("gc", "sweep", REPO, killed.run["run_id"], "--json", ok=False)
        if result.exit_code == 0:
            break
        assert "is being collected by GC run" in result.stderr, result.stderr
        assert time.monotonic() < deadline
        time.sleep(0.5)
    swept = result.json()
    assert swept["state"] == "swept" and swept["num_failed"] == 0 and swept["error"] is None
    assert swept["num_deleted"] == len(template.garbage)
    assert namespace_keys(lake.ns) == twin == template.live
    after = recorded_deletes(lake.ns, killed.run["run_id"])
    assert set(after) == template.garbage and len(after) == len(set(after))  # each recorded gone once
    tried_twice = len(killed.gone) - len(before)  # gone at the kill, its batch's record not yet written
    assert tried_twice <= 2 * 1_000, tried_twice  # 2 tasks, a batch of 1,000 each in flight at most
    for uri, content in template.reads:
        assert lake.cli("fs", "cat", uri).stdout == content
    report(
        "continued by gc sweep",
        {
            "gone_at_kill": len(killed.gone),
            "recorded_at_kill": len(before),
            "tried_twice": tried_twice,
            "continued_deleted": swept["num_deleted"],
        },
    )


@pytest.mark.slow
def test_deferred_sweep_killed_mid_sweep(lake, template, twin, spawn):
    marked = lake.cli("gc", "run", REPO, "--mark-only", "--json").json()
    assert marked["state"] == "marked" and marked["num_candidates"] == len(template.garbage)
    gc = spawn(lake.env, "gc", "sweep", REPO, marked["run_id"])
    kill_mid_sweep(gc, lake.ns)
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["run_id"] == marked["run_id"]
    assert killed.run["state"] == "sweeping"
    assert 0 < len(killed.gone) < len(template.garbage), "the kill was not mid-sweep"
    report("gc sweep mid-sweep", check_converged(lake, template, twin, killed))


@pytest.mark.parametrize(
    "seed", [14, pytest.param(7, marks=pytest.mark.slow), pytest.param(20, marks=pytest.mark.slow)]
)
def test_killed_at_a_random_point(lake, template, twin, spawn, seed):
    """A seeded random point: some seconds into Spark's start, or some time after a random phase began."""
    rng = random.Random(seed)
    anchor = rng.choice([None, *PHASES])
    delay = rng.uniform(0, 8.0) if anchor is None else rng.uniform(0, 2.0)
    gc = spawn(lake.env, "gc", "run", REPO)
    if anchor is not None:
        assert gc.wait_for_line(anchor), gc.stderr[-20:]
    time.sleep(delay)
    assert gc.proc.poll() is None, f"the run ended before its kill point ({anchor!r} + {delay:.1f}s)"
    gc.kill()
    killed = check_safe(lake, template, gc)
    report(f"random seed {seed}: {anchor or 'start'} + {delay:.1f}s", check_converged(lake, template, twin, killed))


@pytest.mark.slow  # a GC process killed and converged: the second CI step
def test_killed_between_mark_and_sweep(lake, template, twin, spawn):
    """Killed the moment its mark is recorded, where no phase line falls: the run stays `marked`
    (not interrupted work: a deferred sweep may still come), the next run converges, and the marked
    run can still be swept, deleting nothing more."""
    gc = spawn(lake.env, "gc", "run", REPO, stop_after="marked")
    assert gc.wait_for_line(stopped_line("marked")), gc.stderr[-20:]
    gc.kill()
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "marked"
    assert killed.candidates == template.garbage and killed.to_delete is None and not killed.gone
    report("between mark and sweep", check_converged(lake, template, twin, killed))


@pytest.mark.slow
def test_killed_after_its_last_delete(lake, template, twin, spawn):
    """Killed once recorded `swept`, before it let go of its lease: the next run waits for the
    lease, builds on the killed run (a finished one), and has nothing left to delete."""
    gc = spawn(lake.env, "gc", "run", REPO, stop_after="swept")
    assert gc.wait_for_line(stopped_line("swept")), gc.stderr[-20:]
    gc.kill()
    killed = check_safe(lake, template, gc)
    assert killed.run is not None and killed.run["state"] == "swept"
    assert killed.gone == killed.to_delete == killed.candidates == template.garbage
    report("after its last delete", check_converged(lake, template, twin, killed))


@pytest.mark.slow
def test_killed_at_several_points_in_a_row(lake, template, twin, spawn):
    """One lake, four runs killed in a row, each started while the last one's lease was still
    held: while listing, the moment its mark is recorded, the moment its sweep is recorded (before
    its re-check), and halfway through its deletes. The run after them ends exactly as the twin."""
    killed: list[Killed] = []
    for point in ("listing", "marked", "sweeping", "mid-sweep"):
        killed.append(check_safe(lake, template, kill_at(spawn, lake, point), killed))
    assert [k.run and k.run["state"] for k in killed] == ["marking", "marked", "sweeping", "sweeping"]
    assert not any(k.gone for k in killed[:3]) and 0 < len(killed[3].gone) < len(template.garbage)
    report("several points in a row", check_converged(lake, template, twin, *killed))


@pytest.mark.parametrize(
    "points",
    [
        ("looking up",),
        pytest.param(("marked", "mid-sweep"), marks=pytest.mark.slow),
        pytest.param(("swept",), marks=pytest.mark.slow),
    ],
    ids="+".join,
)
def test_killed_runs_that_build_on_an_earlier_run(based, based_twin, based_lake, spawn, points):
    """Runs that build on the base (incremental: they look up, in the slices it settled, what lost
    a reference since) killed: while looking up; the moment its mark is recorded, then the next
    run (a marked run is no base: it builds on the base too) halfway through its deletes; after
    its last delete. The run after them ends exactly as the uninterrupted twin."""
    killed: list[Killed] = []
    for point in points:
        killed.append(check_safe(based_lake, based, kill_at(spawn, based_lake, point), killed))
        assert killed[-1].run is not None
        assert (killed[-1].run["mode"], killed[-1].run["base_run_id"]) == ("incremental", based.base)
    report(f"building on a run, {'+'.join(points)}", check_converged(based_lake, based, based_twin, *killed))
