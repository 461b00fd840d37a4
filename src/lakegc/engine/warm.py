"""The warm engine (`lakegc engine start|status|stop`): one long-lived lakegc process that holds a
classic Spark session, with lakegc's session settings, and serves it to commands over Spark Connect
on 127.0.0.1.

Why a lakegc process and not Spark's own `start-connect-server.sh`: Spark's Connect server turns
artifact isolation on for every client session whatever it is told, which gives each session its
own Python worker daemon (started and importing pyarrow, pandas and lakegc again: 2 to 4 s a run)
and recompiles every generated plan. A classic session carrying the Connect plugin with isolation
off keeps one daemon, built from `lakegc.workers`, whose workers every run reuses, and the JVM's
compiled code. The price: what one client uploads, every client sees; this engine is one user's,
on their machine, bound to loopback.

The engine writes `engine.json` under `LAKEGC_HOME` (address, pid, start, and the token a client
must show: readable by its owner only) once it answers, and removes it when it stops. Any local
user can reach a loopback port, and a Spark Connect client runs what Python it likes on the
engine, so the engine takes only clients that present that token (Spark Connect's pre-shared
token, given to the engine's JVM in its environment, never on a command line). A command finds the
engine there (`running`), and uses it only if its port answers at once: an engine that is gone or
stuck is never waited for.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from lakegc.engine.pids import alive as _alive
from lakegc.errors import InvalidArgument, LakegcError

RECORD = "engine.json"
LOG = "engine.log"
USES = "engine-uses.log"  # one line per command that ran on the engine: what `status` counts
DEFAULT_PORT = 15002  # Spark Connect's own
_MODULE = "lakegc.engine.warm"
_TOKEN_ENV = "LAKEGC_ENGINE_TOKEN"  # how `start` hands the engine process its token
_SPARK_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # what Spark Connect's server reads it from
_ANSWER_SECONDS = 0.5  # how long a command waits for the engine's port before starting its own session


@dataclass(frozen=True)
class Engine:
    """A running engine, as its record says."""

    port: int
    pid: int
    started_at: str
    version: str
    token: str

    @property
    def url(self) -> str:
        """The address to show and to give `--remote` (the token is found in the record)."""
        return f"sc://127.0.0.1:{self.port}"

    @property
    def client_url(self) -> str:
        """The address a client connects with: the token as a bearer token, over gRPC's local
        credentials (which PySpark uses for `localhost` only; anything else would be TLS)."""
        return f"sc://localhost:{self.port}/;token={self.token}"


def record_path(home: Path) -> Path:
    return home / RECORD


def read_record(home: Path) -> Engine | None:
    """The engine the record names, or None (no record, or one that cannot be read)."""
    try:
        return Engine(**json.loads(record_path(home).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def answers(engine: Engine, timeout: float = _ANSWER_SECONDS) -> bool:
    """The engine's process is alive and its port takes a connection within `timeout`."""
    if not _alive(engine.pid):
        return False
    try:
        with socket.create_connection(("127.0.0.1", engine.port), timeout=timeout):
            return True
    except OSError:
        return False


def running(home: Path) -> Engine | None:
    """The engine to use: recorded under `home` and answering now; else None."""
    engine = read_record(home)
    return engine if engine is not None and answers(engine) else None


def note_use(home: Path, what: str) -> None:
    """Count one command run on the engine (best effort: a count, never a reason to fail)."""
    try:
        with open(home / USES, "a") as f:
            f.write(f"{datetime.now(UTC).isoformat()} {what}\n")
    except OSError:
        pass


def uses_since(home: Path, started_at: str) -> int:
    try:
        lines = (home / USES).read_text().splitlines()
    except OSError:
        return 0
    return sum(1 for line in lines if line.split(" ", 1)[0] >= started_at)


def start(home: Path, port: int | None, conf: dict[str, str], wait_seconds: float = 300) -> Engine:
    """Start the engine as a process of its own (it outlives this command) and wait until it answers."""
    current = read_record(home)
    if current is not None and answers(current):
        raise InvalidArgument(f"an engine is already running at {current.url} (pid {current.pid}): lakegc engine stop")
    chosen = port if port is not None else _free_port(DEFAULT_PORT)
    if not _port_free(chosen):
        raise InvalidArgument(f"port {chosen} on 127.0.0.1 is in use: choose another with --port")
    home.mkdir(parents=True, exist_ok=True)
    record_path(home).unlink(missing_ok=True)
    command = [sys.executable, "-m", _MODULE, str(chosen), json.dumps(conf)]
    environ = {**os.environ, _TOKEN_ENV: secrets.token_urlsafe(32)}
    with open(home / LOG, "ab") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=environ,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        engine = read_record(home)
        if engine is not None and engine.pid == proc.pid and answers(engine):
            return engine
        if proc.poll() is not None:
            raise LakegcError(f"the engine did not start (exit {proc.returncode}): {_last_line(home / LOG)}")
        time.sleep(0.2)
    proc.terminate()
    raise LakegcError(f"the engine did not answer within {wait_seconds:.0f} s: {_last_line(home / LOG)}")


def stop(home: Path, wait_seconds: float = 60) -> Engine | None:
    """Stop the engine the record names (only if that pid is a lakegc engine); None if none runs."""
    engine = read_record(home)
    if engine is None:
        return None
    if not _alive(engine.pid) or not _is_engine(engine.pid):
        record_path(home).unlink(missing_ok=True)  # it died without cleaning up
        return None
    os.kill(engine.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_seconds
    while _alive(engine.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(engine.pid):
        os.kill(engine.pid, signal.SIGKILL)
    record_path(home).unlink(missing_ok=True)
    return engine


def session_conf(port: int, conf: dict[str, str]) -> dict[str, str]:
    """The engine session's settings beyond lakegc's usual ones: the Connect plugin on loopback,
    and artifact isolation off (the module's docstring says why); the user's `conf` wins."""
    return {
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.artifact.isolation.enabled": "false",
        **conf,
    }


def serve(home: Path, port: int, conf: dict[str, str]) -> None:
    """The engine process: start the session, write the record, wait for SIGTERM or SIGINT."""
    from lakegc import __version__
    from lakegc.engine.spark import spark_session

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    token = os.environ.pop(_TOKEN_ENV)
    os.environ[_SPARK_TOKEN_ENV] = token  # for the JVM about to start: its environment, not its command line
    spark = spark_session("local[*]", session_conf(port, conf))
    spark.range(1).count()  # the JVM's first query compiled before the first command comes
    engine = Engine(port, os.getpid(), datetime.now(UTC).isoformat(), __version__, token)
    tmp = record_path(home).with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:  # the token's owner only
        f.write(json.dumps(asdict(engine)))
    tmp.replace(record_path(home))
    print(f"engine up at {engine.url} (pid {engine.pid})", flush=True)
    try:
        while not stopping.wait(1):
            pass
    finally:
        record = read_record(home)
        if record is not None and record.pid == engine.pid:
            record_path(home).unlink(missing_ok=True)
        spark.stop()
    return True


def _is_engine(pid: int) -> bool:
    """The process is a lakegc engine (so a recycled pid is never signalled)."""
    try:
        return _MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return sys.platform != "linux"  # no /proc: trust the record


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port(preferred: int) -> int:
    if _port_free(preferred):
        return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no log"


if __name__ == "__main__":
    from lakegc.settings import lakegc_home

    serve(lakegc_home(), int(sys.argv[1]), json.loads(sys.argv[2]))
