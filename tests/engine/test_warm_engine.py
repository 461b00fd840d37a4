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
import socket
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

from lakegc import __version__
from lakegc.engine import warm
from lakegc.errors import LakegcError
from lakegc.timeutil import utcnow

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


def test_progress_counts_the_engines_tasks(runs):
    """Progress on a Connect session comes from the server's reports (a handler), not a tracker:
    a job of 4 slow tasks (and the count's own stage of 1) is seen running, from a thread of its own
    (as the progress bar's)."""
    script = """
import threading, time
from lakegc.cli.progress import _spark_tasks
from lakegc.engine.spark import spark_session
spark = spark_session(ADDRESS)
seen = []
def watch():
    while not done.is_set():
        seen.append(_spark_tasks()); time.sleep(0.1)
def slow(batches):
    import time
    for batch in batches:
        time.sleep(3)
        yield batch
done = threading.Event()
_spark_tasks()  # registers the handler with the session
threading.Thread(target=watch, daemon=True).start()
spark.range(0, 4, 1, 4).mapInArrow(slow, "id long").count()
done.set()
print(max((s for s in seen if s), default=None))
""".replace("ADDRESS", repr(runs.address))
    home = {"LAKEGC_HOME": str(runs.record.parent)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env={**os.environ, **home}
    )
    assert proc.returncode == 0, proc.stderr
    finished, total = json.loads(proc.stdout.strip().replace("(", "[").replace(")", "]"))
    assert total == 5 and 0 <= finished < total, proc.stdout


# -- an engine that is gone, stuck, or not ours ---------------------------------------------------
@pytest.fixture
def home(tmp_path: Path) -> Env:
    env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
    env.home.mkdir()
    return env


def write_record(
    env: Env, pid: int, port: int, version: str = "0", token: str = "t", environment: str | None = None
) -> Path:
    """A record as an engine writes it (this user's, 0600), started from this environment unless said."""
    record = env.home / warm.RECORD
    fields = {"port": port, "pid": pid, "started_at": "2026-01-01T00:00:00+00:00", "version": version}
    fields |= {"token": token, "environment": warm.storage_environment() if environment is None else environment}
    record.write_text(json.dumps(fields))
    record.chmod(0o600)
    return record


@pytest.mark.parametrize("planted", ["readable-by-others", "another-users", "a-symlink"])
def test_a_record_that_is_not_ours_alone_is_no_engine(home, tmp_path, planted):
    """A shared or careless LAKEGC_HOME: a record others may read, write or have put there (or a
    symlink to one) would hand our token to whatever port it names. None is read."""
    record = write_record(home, os.getpid(), free_port(), version=__version__)
    assert warm.read_record(home.home) is not None
    if planted == "readable-by-others":
        record.chmod(0o644)
    elif planted == "another-users":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(record, 65534, 65534)
    else:
        target = tmp_path / "elsewhere.json"
        record.replace(target)
        record.symlink_to(target)
    assert warm.read_record(home.home) is None and warm.running(home.home) is None
    assert lakegc(home, "engine", "stop").stdout.strip() == "engine: not running"


@pytest.mark.parametrize(
    ("version", "environment", "said"),
    [
        ("0.0.1", None, "it runs lakegc 0.0.1, this is"),  # its workers import that version's lakegc
        (
            __version__,
            "another shell's",
            "it was started with other storage settings",
        ),  # its executors are another identity
    ],
)
def test_an_engine_unfit_for_the_command_is_not_used_and_says_why(
    home, capsys, monkeypatch, version, environment, said
):
    """An engine of another lakegc version, or started where storage settings differ (another
    AWS_PROFILE or endpoint: the marker checked on one store, keys deleted on another), is not
    used; given by --remote it is an error."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        write_record(home, os.getpid(), port, version=version, environment=environment)
        monkeypatch.setenv("LAKEGC_HOME", str(home.home))
        assert warm.running(home.home) is None
        err = capsys.readouterr().err
        assert f"the warm engine at sc://127.0.0.1:{port} is not used: {said}" in err
        from lakegc.engine.connect import _engine_at

        with pytest.raises(LakegcError, match=said):
            _engine_at(port)


def test_the_token_never_reaches_a_listener_that_is_not_ours(home):
    """The engine's JVM died and another user took its port: the record still names it, and a
    command (finding the engine, or given --remote sc://127.0.0.1:PORT) must not send the token
    there. The impostor records every byte it receives."""
    if os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists():
        pytest.skip("a listener of another user needs root (and a Python that user may run)")
    port = free_port()
    impostor = subprocess.Popen(
        [SYSTEM_PYTHON, "-c", IMPOSTOR, str(port)], user=65534, group=65534, stdout=subprocess.PIPE, cwd="/"
    )
    try:
        assert impostor.stdout is not None and impostor.stdout.readline().strip() == b"listening"
        token = "the-engine-token-" + "x" * 24
        write_record(home, os.getpid(), port, version=__version__, token=token)
        assert not warm.listener_is_ours(port) and warm.running(home.home) is None
        make_cli(home)("repo", "create", REPO, str(home.namespace()))
        found = lakegc(home, "gc", "run", REPO, "--dry-run", timeout=120)  # finds no engine: its own session
        assert found.exit_code == 0 and USING not in found.stderr, found.stderr
        given = lakegc(home, "gc", "run", REPO, "--dry-run", "--remote", f"sc://127.0.0.1:{port}", timeout=60)
        assert given.exit_code != 0
    finally:
        impostor.kill()
        heard = impostor.communicate()[0]
    assert heard, "nothing reached the impostor: the attack was not tried"
    assert token.encode() not in heard


SYSTEM_PYTHON = "/usr/bin/python3"
IMPOSTOR = """
import socket, sys, threading
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
print("listening", flush=True)
lock = threading.Lock()
def keep(conn):
    while True:
        data = conn.recv(65536)
        if not data:
            return
        with lock:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
while True:
    conn, _ = server.accept()
    threading.Thread(target=keep, args=(conn,), daemon=True).start()
"""


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


@pytest.mark.slow
def test_a_client_killed_while_the_engine_deletes_keeps_its_lease_until_the_round_is_over(tmp_path):
    """The attack that kept the engine out of 0.7: a Connect server runs a client's jobs on after
    the client is killed, so a killed run's delete round goes on. Its lease must not be taken over
    (and its fence lifted) while that round may still delete: a classic run's dead pid frees its
    lease after three missed heartbeats, this one's does not, and the next run goes ahead once the
    lease has run out, then deletes exactly the garbage that is left."""
    import sqlalchemy as sa

    from lakegc.metastore import Metastore
    from lakegc.metastore import schema as t
    from lakegc.repogc.lease import HEARTBEAT, LEASE_TTL

    env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
    keys = build_lake(env)
    garbage = {keys[name] for name in EXPIRED | UNCOMMITTED}
    before = set(snapshot(env.namespace()))
    assert lakegc(env, "engine", "start", "--port", str(free_port())).exit_code == 0
    metastore = Metastore(env.metastore)

    def lease() -> sa.Row | None:
        with metastore.read() as conn:
            return conn.execute(sa.select(t.gc_leases)).first()

    run = subprocess.Popen(  # slow deletes: the round outlasts the kill below
        [sys.executable, "-m", "lakegc", "gc", "run", REPO, "--max-delete-rate", "0.5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env.environ()},
    )
    try:
        deadline = time.monotonic() + 300
        while (held := lease()) is None or held.work_until is None:
            assert run.poll() is None and time.monotonic() < deadline, "the run never handed a round to the engine"
            time.sleep(0.1)
        run.kill()  # kill -9: no release, no interrupt
        run.wait()
        time.sleep((3 * HEARTBEAT).total_seconds() + 2)  # a classic dead holder's lease is free by now
        refused = lakegc(env, "gc", "run", REPO, "--json")
        assert refused.stderr.startswith(USING)
        refused = CliResult(refused.exit_code, refused.stdout, refused.stderr.split("\n", 1)[1])
        one_error(refused, f"being collected by GC run {held.run_id}", "try again later", json_cmd=True)
        while lease() is not None and lease().expires_at > utcnow():  # noqa: ASYNC110 - polling a row
            time.sleep(1)
        assert time.monotonic() - deadline < LEASE_TTL.total_seconds()  # it ran out: never held for ever
        again = lakegc(env, "gc", "run", REPO, "--json")
    finally:
        run.kill()
        lakegc(env, "engine", "stop")
    assert again.exit_code == 0, again.stderr
    assert before - set(snapshot(env.namespace())) == garbage


def test_serve_with_the_engine_collects_every_repository_on_its_schedule(tmp_path):
    """`serve --engine --gc-every`: the server starts the engine (none runs), collects each
    repository in turn at once, each run recorded as `gc run`'s, says so on stderr, and stops the
    engine it started when it stops."""
    from lakegc.server.launch import serving

    env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
    keys = build_lake(env)
    cli = make_cli(env)
    cli("repo", "create", "lakegc://other", (tmp_path / "other-ns").as_uri())
    garbage = {keys[name] for name in EXPIRED | UNCOMMITTED}
    before = set(snapshot(env.namespace()))
    with serving({**os.environ, **env.environ()}, "--engine", "--gc-every", "1h", timeout=300) as served:
        deadline = time.monotonic() + 300
        while {r["state"] for r in cli("gc", "runs", REPO, "--json").json()} != {"swept"}:  # the second, by name
            assert served.process.poll() is None and time.monotonic() < deadline, "no scheduled run finished"
            time.sleep(0.5)
        assert warm.running(env.home) is not None
    said = served.process.stderr.read()
    runs = cli("gc", "runs", REPO, "--json").json()
    assert [(r["state"], r["num_deleted"]) for r in runs] == [("swept", len(garbage))]
    assert before - set(snapshot(env.namespace())) == garbage
    assert "lakegc serve: starting the warm engine" in said and "GC runs on the warm engine at sc://127.0.0.1:" in said
    assert f"lakegc serve: gc repo: swept, {len(garbage)} deleted (run {runs[0]['run_id']})" in said
    assert "lakegc serve: gc other: swept, 0 deleted" in said
    assert warm.read_record(env.home) is None  # the engine it started is stopped


@pytest.mark.parametrize(
    ("every", "needle"), [("banana", "banana"), ("0s", "a schedule needs a positive duration"), ("-1h", "-1h")]
)
def test_a_wrong_gc_every_is_one_error_line_before_anything_starts(home, every, needle):
    result = lakegc(home, "serve", "--engine", "--gc-every", every, "--port", str(free_port()), timeout=60)
    one_error(result, needle)
    assert warm.read_record(home.home) is None  # no engine was started for it


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    """Spark's own Connect server, started as an operator would (`start-connect-server.sh` of the
    installed pyspark, local[2], on a free loopback port), its Python workers this interpreter."""
    import pyspark

    sbin = Path(pyspark.__file__).parent / "sbin"
    port = free_port()
    environ = {
        **os.environ,
        "SPARK_HOME": str(sbin.parent),
        "SPARK_PID_DIR": str(tmp_path / "pids"),
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_IDENT_STRING": f"lakegc-test-{port}",
        "PYSPARK_PYTHON": sys.executable,
    }
    started = subprocess.run(
        [
            str(sbin / "start-connect-server.sh"),
            "--master",
            "local[2]",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 180
        while not warm.listener_is_ours(port):
            assert time.monotonic() < deadline, "the Connect server never listened: " + "".join(
                p.read_text(errors="replace")[-2000:] for p in (tmp_path / "logs").glob("*")
            )
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(sbin / "stop-connect-server.sh")], env=environ, capture_output=True, timeout=120)


@pytest.mark.slow
def test_a_run_on_sparks_own_connect_server_deletes_what_a_session_of_its_own_does(tmp_path, connect_server):
    """--remote to a server lakegc did not start (no token, another process's Spark): the same
    objects found and deleted as by a session of the command's own, on twins of one lake."""
    template = Env(
        tmp_path / "template" / "home",
        f"sqlite:///{tmp_path / 'template' / 'home' / 'lakegc.db'}",
        tmp_path / "template",
    )
    keys = build_lake(template)
    twins = {mode: clone_lake(template.home, template.namespace(), tmp_path / mode) for mode in ("own", "remote")}
    before = set(snapshot(template.namespace()))
    own = lakegc(twins["own"], "gc", "run", REPO, "--json")
    remote = lakegc(twins["remote"], "gc", "run", REPO, "--remote", connect_server, "--json")
    mine, theirs = (
        outcome(twins["own"], before, summary_of(own, "own session"), 0),
        outcome(twins["remote"], before, summary_of(remote, "Spark's Connect server"), 0),
    )
    assert theirs.deleted == mine.deleted == {keys[name] for name in EXPIRED | UNCOMMITTED}
    assert theirs.candidates == mine.candidates and theirs.after == mine.after
    assert USING not in remote.stderr


def test_an_engine_that_takes_the_connection_but_never_answers_is_left_for_a_session_of_its_own(home):
    """A stuck engine (its port open, its process alive, nothing ever answered): the command waits
    10 s for the session, says the engine was not used and why, and runs on a Spark of its own."""
    port = free_port()
    stuck = subprocess.Popen([sys.executable, "-c", IMPOSTOR, str(port)], stdout=subprocess.PIPE)
    try:
        assert stuck.stdout is not None and stuck.stdout.readline().strip() == b"listening"
        write_record(home, stuck.pid, port, version=__version__)
        make_cli(home)("repo", "create", REPO, str(home.namespace()))
        result = lakegc(home, "gc", "run", REPO, "--dry-run", "--json", timeout=240)
    finally:
        stuck.kill()
        stuck.wait()
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith(USING)
    assert "the warm engine was not used (the spark connect server at sc://127.0.0.1:" in result.stderr.lower()
    assert "did not answer within 10 s" in result.stderr
    assert json.loads(result.stdout)["state"] == "marked"
