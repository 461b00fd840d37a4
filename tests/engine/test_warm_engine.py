"""The warm engine (`lakegc engine start|status|stop`, `engine.warm`): a local Spark Connect server
that commands use instead of starting Spark, finding and deleting exactly what a session of their
own does; `--remote` to reach it (or any Connect server) by address; an engine that is gone, not
answering, or a record that names someone else's process, never waited for and never signalled.

One small lake (the cluster tests' lake) is built once and cloned into twins: A collected by a
command with a session of its own, B by a command that finds the running engine, C by `--remote`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import CliResult, Env, clone_lake, make_cli, one_error, snapshot
from support.loopback import free_port
from test_spark_cluster import EXPIRED, REPO, UNCOMMITTED, Outcome, build_lake, outcome, summary_of

from lakegc.engine import warm

USING = "using the warm engine at sc://127.0.0.1:"


def lakegc(env: Env, *args: str, timeout: float = 600, home: Path | None = None) -> CliResult:
    """`lakegc ARGS` as its own process, as users and scripts run it (with another `LAKEGC_HOME`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "lakegc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env.environ(), **({"LAKEGC_HOME": str(home)} if home else {})},
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Runs:
    keys: dict[str, str]
    own: Outcome
    engine: Outcome
    remote: Outcome
    engine_stderr: str
    own_stderr: str
    status: dict
    address: str
    record: Path
    record_mode: int
    engine_command_line: bytes
    stranger: CliResult
    outputs: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("warm-engine")
    template = Env(
        root / "template" / "home", f"sqlite:///{root / 'template' / 'home' / 'lakegc.db'}", root / "template"
    )
    keys = build_lake(template)
    twins = {mode: clone_lake(template.home, template.namespace(), root / mode) for mode in ("own", "engine", "remote")}
    before = set(snapshot(template.namespace()))
    port = free_port()
    started = lakegc(twins["engine"], "engine", "start", "--port", str(port))
    assert started.exit_code == 0, started.stderr
    address = started.stdout.strip()
    try:
        own = lakegc(twins["own"], "gc", "run", REPO, "--json")
        by_engine = lakegc(twins["engine"], "gc", "run", REPO, "--json")
        # the same user with the engine's LAKEGC_HOME, another metastore: the record holds the token
        by_remote = lakegc(twins["remote"], "gc", "run", REPO, "--remote", address, "--json", home=twins["engine"].home)
        status = lakegc(twins["engine"], "engine", "status", "--json")
        record = twins["engine"].home / warm.RECORD
        pid = json.loads(record.read_text())["pid"]
        stranger = lakegc(twins["remote"], "gc", "run", REPO, "--dry-run", "--remote", address, timeout=120)
        yield Runs(
            keys,
            outcome(twins["own"], before, summary_of(own, "own session"), 0),
            outcome(twins["engine"], before, summary_of(by_engine, "engine"), 0),
            outcome(twins["remote"], before, summary_of(by_remote, "--remote"), 0),
            by_engine.stderr,
            own.stderr,
            json.loads(status.stdout),
            address,
            record,
            record.stat().st_mode & 0o777,
            Path(f"/proc/{pid}/cmdline").read_bytes(),
            stranger,
            "".join(r.stdout + r.stderr for r in (started, own, by_engine, by_remote, status)),
        )
    finally:
        lakegc(twins["engine"], "engine", "stop")


def test_engine_start_prints_its_loopback_address_and_status_counts_what_it_served(runs):
    assert runs.address.startswith("sc://127.0.0.1:")
    assert runs.status["up"] is True and runs.status["url"] == runs.address
    assert runs.status["commands_served"] == 1  # the run that found it (--remote came from elsewhere)
    assert runs.status["pid"] > 0 and runs.status["uptime_s"] >= 0


def test_the_engine_takes_only_clients_that_show_its_token(runs):
    """Any local user reaches a loopback port, and a Connect client runs what Python it likes: the
    engine wants the token its record holds, a record only its owner reads, a token on no command
    line and in no output."""
    token = json.loads(runs.record.read_text())["token"]
    assert len(token) >= 32
    assert runs.record_mode == 0o600
    assert token.encode() not in runs.engine_command_line
    assert token not in runs.outputs
    one_error(runs.stranger, "refused the session")  # --remote from a home without the record
    assert token not in runs.stranger.stderr


def test_a_command_finds_the_running_engine_and_says_so(runs):
    assert runs.engine_stderr.startswith(USING), runs.engine_stderr
    assert USING not in runs.own_stderr


@pytest.mark.parametrize("mode", ["engine", "remote"])
def test_a_run_on_the_engine_finds_and_deletes_what_a_session_of_its_own_does(runs, mode):
    run = getattr(runs, mode)
    assert run.candidates == runs.own.candidates and run.candidates
    assert run.deleted == runs.own.deleted and run.deleted
    assert run.after == runs.own.after  # the same keys, sizes, mtimes and contents left
    assert (run.summary["state"], run.summary["num_failed"], run.summary["error"]) == ("swept", 0, None)
    fields = ("num_candidates", "candidates_by_reason", "num_deleted", "bytes_deleted", "num_listed")
    assert {k: run.summary[k] for k in fields} == {k: runs.own.summary[k] for k in fields}
    assert run.summary["spark_jobs"] is None  # a Connect session has no job tracker: not counted, not wrong


# -- an engine that is gone, stuck, or not ours ---------------------------------------------------
@pytest.fixture
def home(tmp_path: Path) -> Env:
    env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
    env.home.mkdir()
    return env


def write_record(env: Env, pid: int, port: int) -> None:
    (env.home / warm.RECORD).write_text(
        json.dumps({"port": port, "pid": pid, "started_at": "2026-01-01T00:00:00+00:00", "version": "0", "token": "t"})
    )


def test_a_record_naming_another_process_is_never_signalled(home):
    """A stale record whose pid now belongs to someone else: `engine stop` leaves that process be."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        write_record(home, other.pid, free_port())
        result = lakegc(home, "engine", "stop")
        assert result.exit_code == 0 and "not running" in result.stdout
        time.sleep(0.5)
        assert other.poll() is None  # still alive
        assert not (home.home / warm.RECORD).exists()
    finally:
        other.kill()


def test_an_engine_that_does_not_answer_is_not_waited_for(home):
    """A record whose process is alive but whose port takes no connection: the command starts its
    own session at once and says nothing about an engine."""
    write_record(home, os.getpid(), free_port())  # alive (this process), and nothing listens there
    assert warm.running(home.home) is None
    make_cli(home)("repo", "create", REPO, str(home.namespace()))
    result = lakegc(home, "gc", "run", REPO, "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    assert USING not in result.stderr
    status = lakegc(home, "engine", "status", "--json")
    assert json.loads(status.stdout) == {"up": False}


def test_a_garbled_record_means_no_engine(home):
    (home.home / warm.RECORD).write_text("{not json")
    assert warm.read_record(home.home) is None and warm.running(home.home) is None
    assert lakegc(home, "engine", "stop").stdout.strip() == "engine: not running"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--remote", "sc://127.0.0.1:1"], "no spark connect server answers at sc://127.0.0.1:1"),
        (["--remote", "localhost:15002"], "a spark connect address is sc://host:port"),
        (["--remote", "sc://127.0.0.1:1", "--master", "local[1]"], "--master and --remote both given"),
    ],
)
def test_a_wrong_remote_is_one_error_line_at_once(home, flags, needle):
    make_cli(home)("repo", "create", REPO, str(home.namespace()))
    started = time.monotonic()
    result = lakegc(home, "gc", "run", REPO, "--dry-run", *flags, timeout=60)
    one_error(result, needle)
    assert time.monotonic() - started < 60  # never a wait on Connect's retries (a hang guard)


def test_lakegc_remote_must_be_a_connect_address(home):
    make_cli(home)("repo", "create", REPO, str(home.namespace()))
    env = {**os.environ, **home.environ(), "LAKEGC_REMOTE": "http://127.0.0.1:15002"}
    command = [sys.executable, "-m", "lakegc", "gc", "run", REPO, "--dry-run"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    one_error(CliResult(proc.returncode, proc.stdout, proc.stderr), "LAKEGC_REMOTE", "sc://HOST:PORT")


def test_an_engine_killed_mid_run_fails_the_run_and_the_next_run_converges(tmp_path):
    """The engine's whole process group killed while a run reads the trees: the run fails at once
    with one error line (never Connect's ten minutes of retries), is recorded failed, deleted
    nothing, and the next run (a session of its own) deletes exactly the garbage."""
    env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
    keys = build_lake(env)
    garbage = {keys[name] for name in EXPIRED | UNCOMMITTED}
    before = set(snapshot(env.namespace()))
    assert lakegc(env, "engine", "start", "--port", str(free_port())).exit_code == 0
    engine = warm.read_record(env.home)
    assert engine is not None
    run = subprocess.Popen(
        [sys.executable, "-m", "lakegc", "gc", "run", REPO],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env.environ()},
    )
    try:
        lines = []
        for line in run.stderr:  # progress, one line a phase
            lines.append(line)
            if "reading committed trees" in line:
                os.killpg(engine.pid, signal.SIGKILL)  # the engine, its JVM and its Python workers
                break
        killed = time.monotonic()
        rest = run.stderr.read()
        run.wait(120)
        assert time.monotonic() - killed < 90
    finally:
        run.kill()
    result = CliResult(run.returncode, run.stdout.read(), "".join(lines[1:]) + rest)  # lines[0]: using the engine
    one_error(result, "failed", "the spark connect server went away")
    assert set(snapshot(env.namespace())) >= before  # nothing deleted
    runs = make_cli(env)("gc", "runs", REPO, "--json").json()
    assert [r["state"] for r in runs] == ["failed"]
    again = lakegc(env, "gc", "run", REPO, "--json")  # the engine is gone: a session of its own, said nothing
    assert again.exit_code == 0, again.stderr
    assert USING not in again.stderr
    assert before - set(snapshot(env.namespace())) == garbage
