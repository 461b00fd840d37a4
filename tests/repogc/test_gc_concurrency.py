"""GC while the lake is in use: writer processes hammer a repository during GC rounds, two GC runs
meet on one repository (the lease), and a deferred sweep re-checks what was revived since its mark.

Every writer is a separate process (tests/support/concurrent_writer.py) with its own Lake on the shared
metastore, as real clients are; GC runs in this process on the session's Spark. The writers' test
runs on SQLite and on PostgreSQL (conftest's BOTH_BACKENDS).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from conftest import Env, one_error, snapshot

from lakegc.engine.runs import MetastoreRunLog, Run, RunState, new_run_id
from lakegc.errors import InvalidToken, ObjectGone
from lakegc.metastore import schema as t
from lakegc.repo.gc_source import COPY_RECORD_WINDOW
from lakegc.repo.model import AddressKind
from lakegc.repo.repository import Lake, Repository
from lakegc.repogc import lease as lease_mod
from lakegc.repogc.job import GcOptions, run_gc, sweep_run
from lakegc.repogc.lease import (
    HEARTBEAT,
    INTERRUPTED,
    INTERRUPTED_SWEEP,
    LEASE_TTL,
    Holder,
    Lease,
    LeaseLost,
    stale,
)
from lakegc.repogc.outputs import output_keys, run_prefix
from lakegc.repogc.runplan import resolve_policies
from lakegc.retention.active import CommitNode, active_commits
from lakegc.timeutil import utcnow

NAME = "repo"
REPO = f"lakegc://{NAME}"
WRITER = Path(__file__).parents[1] / "support" / "concurrent_writer.py"
HOST = socket.gethostname()


# -- helpers -------------------------------------------------------------------------------------
def data_keys(ns: Path) -> set[str]:
    return {k for k in snapshot(ns) if k.startswith("data/")}


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def spawn(env: Env, tmp: Path, label: str, *args: str) -> subprocess.Popen:
    """A writer process; its stdout and stderr go to files (no pipe to fill up)."""
    with open(tmp / f"{label}.out", "wb") as out, open(tmp / f"{label}.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), *args], stdout=out, stderr=err, env={**os.environ, **env.environ()}
        )
    proc.label, proc.out_path, proc.err_path = label, tmp / f"{label}.out", tmp / f"{label}.err"  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen, timeout: float = 120) -> dict[str, Any]:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.err_path.read_text()  # type: ignore[attr-defined]
    assert proc.returncode == 0, f"{proc.label} exited {proc.returncode}: {err[-3000:]}"  # type: ignore[attr-defined]
    return json.loads(proc.out_path.read_text())  # type: ignore[attr-defined]


def lakegc_process(env: Env, *args: str) -> subprocess.Popen:
    """`lakegc ARGS` as a separate process, output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "lakegc", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env.environ()},
    )


def leases(lake: Lake) -> list[sa.Row]:
    with lake.metastore.read() as conn:
        return conn.execute(sa.select(t.gc_leases)).all()


def put_lease(
    lake: Lake,
    run_id: str,
    host: str,
    pid: int,
    renewed_ago: timedelta,
    expires_in: timedelta,
    work_for: timedelta | None = None,
) -> None:
    """A lease row as another (possibly dead) GC process would have left it; `work_for`: a delete
    round it handed to a Spark Connect server may go on for that long."""
    now = utcnow()
    with lake.metastore.write() as conn:
        conn.execute(
            t.gc_leases.insert().values(
                repository=NAME,
                run_id=run_id,
                host=host,
                pid=pid,
                acquired_at=now - renewed_ago - timedelta(minutes=1),
                renewed_at=now - renewed_ago,
                expires_at=now + expires_in,
                work_until=None if work_for is None else now + work_for,
            )
        )


def fake_run(lake: Lake, state: RunState) -> str:
    """A run row in `state`, as a GC process that is gone would have left it (no outputs)."""
    now = utcnow()
    run_id = new_run_id(now)
    summary = Run(
        run_id,
        "repository",
        NAME,
        RunState.MARKING,
        False,
        now.isoformat(),
        now.isoformat(),
        0.0,
        details={"policy": "no rules: keep every commit"},
    )
    store = MetastoreRunLog(lake.metastore, NAME)
    store.create(summary, {"cutoffs": [], "default_cutoff": None, "min_age_seconds": 0.0, "now": now.isoformat()})
    for step in {
        RunState.MARKING: [],
        RunState.MARKED: [RunState.MARKED],
        RunState.SWEEPING: [RunState.MARKED, RunState.SWEEPING],
    }[state]:
        frm, summary.state = summary.state, step
        store.move(summary, frm)
    return run_id


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def output_rows(repo: Repository, run_id: str, name: str) -> list[dict[str, Any]]:
    return [
        row
        for key in output_keys(repo.storage, run_id, name)
        for row in pq.read_table(io.BytesIO(repo.storage.read(key))).to_pylist()
    ]


def small_garbage(env: Env) -> tuple[Lake, Repository, dict[str, str]]:
    """main: c1 (a v1) -> c2 (a v2), then an overwritten staged draft. With --default-cutoff 1, A1 is
    expired garbage; D1 is uncommitted garbage under any policy."""
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    repo = lake.repository(NAME)
    keys = {"A1": repo.upload("main", "a", b"a v1").address}
    repo.commit("main", "c1")
    keys["A2"] = repo.upload("main", "a", b"a v2").address
    repo.commit("main", "c2")
    keys["D1"] = repo.upload("main", "draft", b"draft 1").address
    keys["D2"] = repo.upload("main", "draft", b"draft 2").address
    time.sleep(0.05)  # every object strictly older than the next run's cutoff with --min-age 0s
    return lake, repo, keys


# -- the lease: one GC per repository at a time ------------------------------------------------------
def wait_for_lease(lake: Lake, proc: subprocess.Popen, timeout: float = 120) -> sa.Row:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = leases(lake)
        if rows:
            return rows[0]
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(
                f"the first GC ended before it was seen holding the lease: {proc.returncode} {err.decode()[-2000:]}"
            )
        time.sleep(0.05)
    pytest.fail("the first GC never took the lease")


def test_second_gc_on_the_repository_is_refused_while_the_first_holds_the_lease(env, cli, spark):
    lake, repo, keys = small_garbage(env)
    marked = cli("gc", "run", REPO, "--mark-only", "--min-age", "0s", "--default-cutoff", "1", "--json").json()
    assert sorted(c["address"] for c in output_rows(repo, marked["run_id"], "candidates")) == sorted(
        [keys["A1"], keys["D1"]]
    )
    before = data_keys(env.namespace())

    first = lakegc_process(env, "gc", "run", REPO, "--min-age", "0s", "--json")  # no rules: every commit stays
    try:
        holder = wait_for_lease(lake, first)
        second = cli("gc", "run", REPO, "--min-age", "0s", "--json", ok=False)
        sweep = cli("gc", "sweep", REPO, marked["run_id"], "--json", ok=False)
        assert first.poll() is None, "the first run ended before the others were tried: nothing was proven"
    finally:
        out, err = first.communicate(timeout=240)
    assert (holder.host, holder.pid) == (HOST, first.pid)
    message = one_error(second, f"GC run {holder.run_id}", f"pid {first.pid}", "try again later", json_cmd=True)
    assert message.startswith("error: repository 'repo' is being collected")
    one_error(sweep, f"GC run {holder.run_id}", f"pid {first.pid}", json_cmd=True)

    assert first.returncode == 0, err.decode()[-3000:]
    summary = json.loads(out)
    assert (summary["run_id"], summary["state"], summary["num_deleted"]) == (holder.run_id, "swept", 1)
    assert leases(lake) == []
    # the refused run and sweep left nothing behind: no run, no output, no deletion
    assert before - data_keys(env.namespace()) == {keys["D1"]}
    runs = {r["run_id"]: r for r in cli("gc", "runs", REPO, "--json").json()}
    assert {k: r["state"] for k, r in runs.items()} == {marked["run_id"]: "marked", holder.run_id: "swept"}
    assert not [
        o.key
        for o in repo.storage.list(run_prefix(marked["run_id"]))
        if o.key.split("/")[3] in ("to_delete", "deleted", "revived", "recheck")
    ]

    # once the lease is free, the deferred sweep and a new run go ahead
    swept = cli("gc", "sweep", REPO, marked["run_id"], "--json").json()
    assert (swept["state"], swept["num_deleted"], swept["num_revived"]) == ("swept", 2, 0)  # D1 was already gone
    assert data_keys(env.namespace()) == {keys["A2"], keys["D2"]}
    assert cli("gc", "run", REPO, "--min-age", "0s", "--json").json()["state"] == "swept"
    assert leases(lake) == []


TAKEOVERS = [
    pytest.param("gc-host-elsewhere", None, timedelta(minutes=3), -timedelta(minutes=2), id="other-host-expired"),
    pytest.param(
        HOST,
        "dead",
        3 * HEARTBEAT + timedelta(seconds=1),
        LEASE_TTL - 4 * HEARTBEAT,
        id="this-host-dead-pid-missed-3-heartbeats",
    ),
]


@pytest.mark.parametrize("host, pid, renewed_ago, expires_in", TAKEOVERS)
def test_stale_lease_is_taken_over_and_the_runs_it_left_are_closed(env, cli, spark, host, pid, renewed_ago, expires_in):
    lake, repo, keys = small_garbage(env)
    done = cli("gc", "run", REPO, "--mark-only", "--min-age", "0s", "--json").json()  # finished: stays as it is
    marking, sweeping = fake_run(lake, RunState.MARKING), fake_run(lake, RunState.SWEEPING)
    put_lease(lake, marking, host, dead_pid() if pid == "dead" else 4_000_000, renewed_ago, expires_in)

    summary = cli("gc", "run", REPO, "--min-age", "0s", "--json").json()

    assert (summary["state"], summary["num_deleted"]) == ("swept", 1)
    assert data_keys(env.namespace()) == {keys["A1"], keys["A2"], keys["D2"]}
    assert leases(lake) == []
    runs = {r["run_id"]: r for r in cli("gc", "runs", REPO, "--json").json()}
    assert {k: r["state"] for k, r in runs.items()} == {
        done["run_id"]: "marked",
        marking: "failed",  # a mark starts over in a new run
        sweeping: "sweeping",  # a sweep can be continued (gc sweep): it stays, marked interrupted
        summary["run_id"]: "swept",
    }
    for run_id, state, error in ((marking, "failed", INTERRUPTED), (sweeping, "sweeping", INTERRUPTED_SWEEP)):
        assert runs[run_id]["error"] == error and error.startswith("interrupted")
        assert (runs[run_id]["finished_at"] is not None) == (state == "failed")
        written = json.loads(repo.storage.read(run_prefix(run_id) + "summary.json"))
        assert (written["state"], written["error"]) == (state, error)
    assert runs[done["run_id"]]["error"] is None
    one_error(cli("gc", "sweep", REPO, marking, ok=False), "failed", "only a marked run, or one whose sweep stopped")


REFUSALS = [
    pytest.param("gc-host-elsewhere", "dead", timedelta(0), LEASE_TTL, None, id="other-host-live"),
    pytest.param(
        "gc-host-elsewhere",
        "dead",
        timedelta(minutes=10),
        timedelta(seconds=20),
        None,
        id="other-host-not-renewed-but-not-expired",
    ),  # its pid means nothing here
    pytest.param(HOST, "alive", timedelta(minutes=10), timedelta(seconds=30), None, id="this-host-pid-alive"),
    pytest.param(HOST, "dead", timedelta(0), LEASE_TTL, None, id="this-host-dead-pid-just-renewed"),
    # as this-host-dead-pid-missed-3-heartbeats, which is taken over, but its run handed a delete
    # round to a Spark Connect server, whose jobs go on without it: only expiry frees the lease
    pytest.param(
        HOST,
        "dead",
        3 * HEARTBEAT + timedelta(seconds=1),
        LEASE_TTL - 4 * HEARTBEAT,
        timedelta(seconds=20),
        id="this-host-dead-pid-its-connect-round-going",
    ),
]


@pytest.mark.parametrize("host, pid, renewed_ago, expires_in, work_for", REFUSALS)
def test_live_lease_refuses_gc_runs_and_sweeps(env, cli, host, pid, renewed_ago, expires_in, work_for):
    lake, repo, keys = small_garbage(env)
    marked = fake_run(lake, RunState.MARKED)
    holder = new_run_id(utcnow())
    put_lease(lake, holder, host, dead_pid() if pid == "dead" else os.getpid(), renewed_ago, expires_in, work_for)
    before_leases, before = leases(lake), snapshot(env.namespace())

    for args in (
        ("gc", "run", REPO, "--min-age", "0s"),
        ("gc", "run", REPO, "--dry-run"),
        ("gc", "sweep", REPO, marked),
    ):
        one_error(cli(*args, "--json", ok=False), f"being collected by GC run {holder}", f"on {host}", json_cmd=True)

    assert leases(lake) == before_leases
    assert snapshot(env.namespace()) == before
    assert [(r.run_id, r.state) for r in MetastoreRunLog(lake.metastore, NAME).list()] == [(marked, RunState.MARKED)]


NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
US, SECOND, MINUTE = timedelta(microseconds=1), timedelta(seconds=1), timedelta(minutes=1)


def holder_at(host: str, renewed_ago: timedelta, expires_in: timedelta, work_for: timedelta | None = None) -> Holder:
    return Holder("run", host, 1234, NOW - renewed_ago, NOW + expires_in, None if work_for is None else NOW + work_for)


@pytest.mark.parametrize(
    "holder, pid_alive, expected",
    [
        pytest.param(holder_at("other", timedelta(0), timedelta(0)), True, True, id="expires-now"),
        pytest.param(holder_at("other", timedelta(0), US), True, False, id="expires-in-1us"),
        pytest.param(holder_at("other", timedelta(0), -US), True, True, id="expired-1us-ago"),
        pytest.param(holder_at("other", timedelta(hours=1), US), False, False, id="other-host-dead-pid-not-expired"),
        pytest.param(holder_at("me", 3 * HEARTBEAT, LEASE_TTL), False, True, id="this-host-dead-missed-3-heartbeats"),
        pytest.param(holder_at("me", 3 * HEARTBEAT - US, LEASE_TTL), False, False, id="this-host-dead-just-under-3"),
        pytest.param(holder_at("me", timedelta(hours=1), US), True, False, id="this-host-alive-not-expired"),
        pytest.param(holder_at("me", timedelta(hours=1), timedelta(0)), True, True, id="this-host-alive-expired"),
        # a run on a Spark Connect server: its jobs outlive its dead process, so only expiry frees it
        pytest.param(holder_at("me", MINUTE, US, 20 * SECOND), False, False, id="connect-dead-round-going"),
        pytest.param(holder_at("me", MINUTE, US, -US), False, False, id="connect-dead-round-over"),
        pytest.param(holder_at("me", MINUTE, -US, 20 * SECOND), False, True, id="connect-expired"),
    ],
)
def test_stale_at_its_boundaries(holder, pid_alive, expected):
    assert stale(holder, NOW, "me", pid_alive) is expected


def test_exactly_one_of_several_processes_racing_for_the_lease_gets_it(env, tmp_path):
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    go = tmp_path / "go"
    procs = [
        spawn(
            env,
            tmp_path,
            f"lease{i}",
            "lease",
            env.metastore,
            NAME,
            f"run-{i}",
            "--go",
            str(go),
            "--ready",
            str(tmp_path / f"ready{i}"),
            "--hold",
            "5",
        )
        for i in range(4)
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{i}").exists() for i in range(4)):  # all up, waiting for the go
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "lease processes did not start"
        time.sleep(0.05)
    go.touch()
    results = [finish(p) for p in procs]
    winners = [r["run_id"] for r in results if r["acquired"]]
    assert len(winners) == 1, results
    for r in results:
        if not r["acquired"]:
            assert f"GC run {winners[0]}" in r["error"], r
    assert leases(lake) == []


def test_a_lease_renews_while_held_and_a_taken_over_holder_stops(env, monkeypatch):
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    monkeypatch.setattr(lease_mod, "HEARTBEAT", timedelta(seconds=0.1))
    with Lease(lake.metastore, NAME, "run-a") as first:
        acquired = renewed = leases(lake)[0]
        deadline = time.monotonic() + 10
        while renewed.renewed_at == acquired.renewed_at and time.monotonic() < deadline:
            time.sleep(0.05)
            renewed = leases(lake)[0]
        assert renewed.renewed_at > acquired.renewed_at and renewed.expires_at > acquired.expires_at
        first.check()
        with lake.metastore.write() as conn:  # as if this process had stalled past its lease
            conn.execute(t.gc_leases.update().values(expires_at=utcnow() - timedelta(seconds=1)))
        with Lease(lake.metastore, NAME, "run-b"):
            with pytest.raises(LeaseLost, match="run-a lost its lease"):
                first.check()
            first.release()  # the old holder's release leaves the new lease alone
            assert [r.run_id for r in leases(lake)] == ["run-b"]
    assert leases(lake) == []


def test_run_that_loses_its_lease_before_deleting_deletes_nothing(env, spark):
    lake, repo, keys = small_garbage(env)
    before = snapshot(env.namespace())

    def phase(name: str, detail: str = "") -> None:
        if name.startswith("re-checking"):  # another host takes the repository over
            with lake.metastore.write() as conn:
                conn.execute(t.gc_leases.update().values(run_id="run-elsewhere", host="gc-host-elsewhere"))

    with pytest.raises(LeaseLost, match="lost its lease"):
        run_gc(lake, NAME, GcOptions(min_age=timedelta(0)), phase=phase, spark=spark)

    assert data_keys(env.namespace()) == {k for k in before if k.startswith("data/")}
    (run,) = MetastoreRunLog(lake.metastore, NAME).list()
    assert run.state is RunState.FAILED and "lost its lease" in (run.error or "")
    assert [r["address"] for r in output_rows(repo, run.run_id, "to_delete")] == [keys["D1"]]
    assert output_keys(repo.storage, run.run_id, "deleted") == []
    assert [r.run_id for r in leases(lake)] == ["run-elsewhere"]


# -- a deferred sweep re-checks what other processes revived since the mark ------------------------
def test_deferred_sweep_keeps_what_other_processes_revived_after_the_mark(env, cli, spark, tmp_path):
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    repo = lake.repository(NAME)
    keys: dict[str, str] = {}
    commits: dict[str, str] = {}
    # main: c1..c4 write p0..p3 (vN), c5 only p0 and p1. Keeping 1 commit, c5 stays; c1..c4 expire.
    for n in range(1, 6):
        for p in range(4 if n < 5 else 2):
            keys[f"v{n}p{p}"] = repo.upload("main", f"p{p}", f"v{n} p{p}".encode()).address
        commits[f"c{n}"] = repo.commit("main", f"c{n}").id
    repo.create_branch("side", "main")
    keys["D1"] = repo.upload("side", "draft", b"draft 1").address
    keys["D2"] = repo.upload("side", "draft", b"draft 2").address
    repo.create_branch("scratch", "main")
    keys["S"] = repo.upload("scratch", "s", b"scratch").address
    repo.reset_branch("scratch")
    repo.create_branch("w9", "main")  # the traffic writer's branch
    time.sleep(0.05)

    marked = run_gc(lake, NAME, GcOptions(mark_only=True, min_age=timedelta(0), default_cutoff="1"), spark=spark)
    expired = {f"v{n}p{p}" for n in range(1, 5) for p in range(4)} - {"v4p2", "v4p3"}  # c5 still has those
    candidates = {r["address"]: r["reason"] for r in output_rows(repo, marked.run_id, "candidates")}
    assert candidates == {**{keys[k]: "expired" for k in expired}, keys["D1"]: "uncommitted", keys["S"]: "uncommitted"}

    # Only what the API allows can reference a candidate again; an address cannot just be linked.
    token = repo.get_physical_address("side", "linked")
    for bad in (None, repo.sign(token)):
        with pytest.raises(InvalidToken):
            repo.link("side", "linked", keys["v2p1"], 7, "c0ffee", token=bad)

    stop = tmp_path / "stop"
    traffic = spawn(env, tmp_path, "traffic", "hammer", env.metastore, NAME, "9", "--stop", str(stop), "--seed", "9")
    try:
        time.sleep(1)
        revivers = [
            spawn(
                env,
                tmp_path,
                "branch-and-tag",
                "ops",
                env.metastore,
                NAME,
                json.dumps(
                    [
                        ["create_branch", "revived", commits["c1"]],  # v1 p0..p3
                        ["create_tag", "keep-c3", commits["c3"]],  # v3 p0..p3
                    ]
                ),
            ),
            spawn(
                env,
                tmp_path,
                "copy-and-revert",
                "ops",
                env.metastore,
                NAME,
                json.dumps(
                    [
                        ["copy", commits["c2"], "p0", "side", "restored-p0"],  # v2 p0, staged
                        ["revert", "main", commits["c5"]],  # p0, p1 back to v4
                    ]
                ),
            ),
        ]
        results = [finish(p) for p in revivers]
        swept = sweep_run(lake, NAME, marked.run_id, spark=spark)  # while the traffic goes on
        assert traffic.poll() is None
    finally:
        stop.touch()
        report = finish(traffic)

    revived = {f"v1p{p}" for p in range(4)} | {f"v3p{p}" for p in range(4)} | {"v2p0", "v4p0", "v4p1"}
    assert (swept.state, swept.repo.num_revived, swept.num_deleted, swept.num_failed) == (
        RunState.SWEPT,
        len(revived),
        len(candidates) - len(revived),
        0,
    )
    assert sorted(r["address"] for r in output_rows(repo, marked.run_id, "revived")) == sorted(keys[k] for k in revived)
    assert data_keys(env.namespace()) >= {keys[k] for k in keys.keys() - {"v2p1", "v2p2", "v2p3", "D1", "S"}}
    for k in ("v2p1", "v2p2", "v2p3", "D1", "S"):
        assert not repo.storage.exists(keys[k]), k
    # the revived ones read back where they were revived; c5's own objects expired after the mark and stay
    for p in range(4):
        assert repo.read("revived", f"p{p}") == f"v1 p{p}".encode()
        assert repo.read("keep-c3", f"p{p}") == f"v3 p{p}".encode()
    assert repo.read("side", "restored-p0") == b"v2 p0"
    assert [repo.read("main", f"p{p}") for p in range(4)] == [b"v4 p0", b"v4 p1", b"v4 p2", b"v4 p3"]
    assert repo.read(results[1]["results"][1], "p0") == b"v4 p0"
    assert repo.read(commits["c5"], "p0") == b"v5 p0"
    for p in (1, 2, 3):
        with pytest.raises(ObjectGone):
            repo.read(commits["c2"], f"p{p}")
    # and the traffic that went on during the sweep lost nothing
    assert report["errors"] == [] and report["total_ops"] > 0
    read_every_entry(repo, "w9")
    read_every_entry(repo, "main")
    print(
        f"\n[re-validation] {len(candidates)} candidates, {swept.repo.num_revived} revived, "
        f"{swept.num_deleted} deleted; "
        f"traffic during the sweep: {report['total_ops']} ops"
    )


# -- acceptance: GC rounds while writer processes hammer the repository (last: Spark is warm by then) --
WRITERS = 4
MIN_AGE = timedelta(seconds=6)  # far longer than an upload takes from its write to its staging
POLICY = "3"  # keep the newest 3 commits of every first-parent chain: commits expire all the time
MIN_WRITING = timedelta(seconds=30)  # GC rounds go on at least this long after the writers started


def must_live(repo: Repository, now: datetime) -> dict[str, str]:
    """Every namespace address GC must keep, and why: the entries of every commit active under the
    policy (on today's graph: nobody branches from old commits, so under a count policy a commit
    active now was active at every earlier mark too), staged entries, fresh copy records, live tokens."""
    policy_of = resolve_policies(repo.gc_source(), (), POLICY, now).policy_of
    with repo.ms.read() as conn:
        of = lambda table: table.c.repository == NAME  # noqa: E731
        commits = conn.execute(sa.select(t.commits).where(of(t.commits))).all()
        branches = dict(conn.execute(sa.select(t.branches.c.name, t.branches.c.head).where(of(t.branches))).all())
        tagged = list(conn.execute(sa.select(t.tags.c.commit_id).where(of(t.tags))).scalars())
        staged = conn.execute(
            sa.select(t.staged_entries).where(of(t.staged_entries), t.staged_entries.c.tombstone.is_(False))
        ).all()
        copies = (
            conn.execute(
                sa.select(t.copy_records.c.address).where(
                    of(t.copy_records), t.copy_records.c.created_at > now - COPY_RECORD_WINDOW
                )
            )
            .scalars()
            .all()
        )
        tokens = (
            conn.execute(
                sa.select(t.address_tokens.c.address).where(of(t.address_tokens), t.address_tokens.c.expires_at > now)
            )
            .scalars()
            .all()
        )
    graph = {c.id: CommitNode(tuple(c.parents), c.creation_date) for c in commits}
    active = active_commits(graph, branches, policy_of, tagged)
    live: dict[str, str] = {}
    metaranges = {c.id: c.metarange_id for c in commits}
    for commit_id in sorted(active):
        for entry in repo.trees.entries(metaranges[commit_id]):
            assert entry.address_kind is AddressKind.RELATIVE
            live.setdefault(entry.address, f"entry {entry.path} of active commit {commit_id[:12]}")
    for row in staged:
        live.setdefault(row.address, f"staged {row.branch}/{row.path}")
    for address in copies:
        live.setdefault(address, "copy record")
    for address in tokens:
        live.setdefault(address, "live address token")
    return live


def read_every_entry(repo: Repository, ref: str) -> int:
    """Read every path of a ref through the API; the content must match its entry."""
    count = 0
    for entry in repo.list(ref):
        data = repo.read(ref, entry.path)  # ObjectGone if GC took it
        assert (len(data), md5(data)) == (entry.size, entry.checksum), f"{ref}/{entry.path}: content changed"
        count += 1
    return count


@pytest.mark.slow  # 40 s per backend of writer processes against GC rounds: the second CI step
def test_gc_rounds_while_writer_processes_hammer_the_repository(env, spark, tmp_path):
    started = time.monotonic()
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    repo = lake.repository(NAME)
    for i in range(WRITERS):
        repo.create_branch(f"w{i}", "main")
    stop = tmp_path / "stop"
    writers = [
        spawn(
            env,
            tmp_path,
            f"w{i}",
            "hammer",
            env.metastore,
            NAME,
            str(i),
            "--stop",
            str(stop),
            "--seed",
            str(1000 + i),
            "--pause",
            "0.03",
        )
        for i in range(WRITERS)
    ]
    rounds: list[Run] = []
    timings: list[float] = []

    def timed(gc: Callable[[], Run]) -> Run:
        begun = time.monotonic()
        summary = gc()
        timings.append(round(time.monotonic() - begun, 1))
        return summary

    try:
        time.sleep(MIN_AGE.total_seconds() + 2)  # the first garbage is old enough to collect
        options = GcOptions(min_age=MIN_AGE, default_cutoff=POLICY)
        rounds.append(timed(lambda: run_gc(lake, NAME, options, spark=spark)))  # clean: the first run
        marked = timed(lambda: run_gc(lake, NAME, replace(options, mark_only=True, clean=True), spark=spark))
        assert (marked.state, marked.num_deleted) == (RunState.MARKED, 0)
        rounds.append(timed(lambda: run_gc(lake, NAME, options, spark=spark)))  # incremental on the first
        rounds.append(timed(lambda: sweep_run(lake, NAME, marked.run_id, spark=spark)))  # swept later, re-checked
        while time.monotonic() - started < MIN_WRITING.total_seconds():  # a fast machine gets more rounds
            rounds.append(timed(lambda: run_gc(lake, NAME, options, spark=spark)))
        still_writing = [w.label for w in writers if w.poll() is None]  # type: ignore[attr-defined]
    finally:
        stop.touch()
        reports = [finish(w) for w in writers]
    gc_seconds = time.monotonic() - started

    # the writers overlapped every round, and never failed to read their own branch back
    assert len(still_writing) == WRITERS, "a writer stopped before the GC rounds ended"
    assert [r["errors"] for r in reports] == [[]] * WRITERS
    total_ops = sum(r["total_ops"] for r in reports)

    # every round swept, and between them they collected both kinds of garbage
    assert [(r.state, r.num_failed) for r in rounds] == [(RunState.SWEPT, 0)] * len(rounds)
    assert [r.mode for r in (rounds[0], marked, rounds[1])] == ["clean", "clean", "incremental"]
    assert sum(r.repo.num_revived for r in rounds) == 0, (
        "nothing is revived without branching from old commits: a run marked an object still in flight"
    )
    reasons: dict[str, int] = {}
    for r in [*rounds, marked]:
        for reason, n in r.candidates_by_reason.items():
            reasons[reason] = reasons.get(reason, 0) + n
    assert reasons.get("expired", 0) > 0 and reasons.get("uncommitted", 0) > 0, reasons
    deleted: dict[str, str] = {}
    for r in rounds:
        for row in output_rows(repo, r.run_id, "deleted"):
            assert row["deleted"], row
            deleted.setdefault(row["address"], r.run_id)
    assert len(deleted) >= 50, f"only {len(deleted)} objects collected: GC hardly ran against aged garbage"
    assert not [a for a in deleted if repo.storage.exists(a)]

    # what must live does, and every HEAD, staged entry and tag reads back through the API
    live = must_live(repo, utcnow())
    for report in reports:
        for token in report["live_tokens"]:
            live.setdefault(token["address"], "abandoned live token")
    gone = {a: (why, deleted.get(a)) for a, why in live.items() if not repo.storage.exists(a)}
    assert gone == {}, f"{len(gone)} live objects gone (why live, deleted by run): {list(gone.items())[:10]}"
    assert not live.keys() & deleted.keys()
    read = sum(read_every_entry(repo, b.name) for b in repo.branches())
    read += sum(read_every_entry(repo, tag.name) for tag in repo.tags())

    official = {c for r in reports for c in r["commits"]}
    with repo.ms.read() as conn:
        all_commits = set(conn.execute(sa.select(t.commits.c.id)).scalars())
    print(
        f"\n[acceptance] {WRITERS} writers, {total_ops} ops, {len(rounds)} GC rounds + 1 mark-only "
        f"({gc_seconds:.0f}s of writing, GC steps {timings}s); {len(deleted)} objects deleted ({reasons}); "
        f"{len(live)} live objects verified, {read} entries read back through heads and tags; "
        f"{len(all_commits)} commits "
        f"({len(all_commits - official) - 1} never returned by the API); "
        f"ops: {json.dumps([r['ops'] for r in reports])}"
    )
