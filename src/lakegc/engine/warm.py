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

The engine writes `engine.json` under `LAKEGC_HOME` (address, pid, version, and the token a
client must show: readable by its owner only) once it answers, and removes it when it stops or its
JVM dies. Any local user can reach a loopback port, and a Spark Connect client runs what Python it
likes on the engine, so the engine takes only clients that present that token (Spark Connect's
pre-shared token, given to the engine's JVM in its environment, never on a command line). The
token goes only where it cannot leak: a record that is ours (owned by this user, no one else may
read or write it, not a symlink), sent over gRPC's local credentials to 127.0.0.1 (never a name
that may resolve to [::1]), to a port whose listener is this user's. A command finds the engine
there (`running`), and uses it only if it is this lakegc's version and its port answers at once:
an engine that is gone, stuck or another version is never waited for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lakegc.engine.pids import alive as _alive
from lakegc.errors import InvalidArgument, LakegcError

RECORD = "engine.json"
LOCK = "engine.lock"  # held by `start`: two starts at once make one engine
LOG = "engine.log"
USES = "engine-uses.log"  # one line per command that ran on the engine: what `status` counts
DEFAULT_PORT = 15002  # Spark Connect's own
_MODULE = "lakegc.engine.warm"
_TOKEN_ENV = "LAKEGC_ENGINE_TOKEN"  # how `start` hands the engine process its token
_CONF_ENV = "LAKEGC_ENGINE_CONF"  # and its session's --conf (JSON), never on its command line
_SPARK_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # what Spark Connect's server reads it from
_ANSWER_SECONDS = 0.5  # how long a command waits for the engine's port before starting its own session


@dataclass(frozen=True)
class Engine:
    """A running engine, as its record says."""

    port: int
    pid: int
    started_at: str
    version: str
    token: str = field(repr=False)
    environment: str = ""  # `storage_environment()` of the shell that started it

    @property
    def url(self) -> str:
        """The address to show and to give `--remote` (the token is found in the record)."""
        return f"sc://127.0.0.1:{self.port}"


def record_path(home: Path) -> Path:
    return home / RECORD


def read_record(home: Path) -> Engine | None:
    """The engine the record names, or None: no record, one that cannot be read, or one that is not
    this user's alone (a record planted in a shared home would send our token to its port)."""
    try:
        fd = os.open(record_path(home), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        facts = os.fstat(fd)
        if facts.st_uid != os.geteuid() or facts.st_mode & 0o077:
            return None
        with os.fdopen(fd, closefd=False) as f:
            engine = Engine(**json.loads(f.read()))
        return engine if isinstance(engine.port, int) and isinstance(engine.pid, int) else None
    except (OSError, ValueError, TypeError):
        return None
    finally:
        os.close(fd)


def answers(engine: Engine, timeout: float = _ANSWER_SECONDS) -> bool:
    """The engine's process is alive, the listener on its port is this user's, and the port takes a
    connection within `timeout`."""
    if not _alive(engine.pid) or not listener_is_ours(engine.port):
        return False
    try:
        with socket.create_connection(("127.0.0.1", engine.port), timeout=timeout):
            return True
    except OSError:
        return False


def listener_is_ours(port: int) -> bool:
    """The socket listening on 127.0.0.1:`port` belongs to this user (Linux's socket table says
    whose it is; elsewhere there is nothing to read, and the record's own checks stand alone).
    After an engine's JVM dies, its port is anyone's to take: the token must not follow it there."""
    tables = []
    for name in ("tcp", "tcp6"):  # a JVM listens on an IPv6 socket, 127.0.0.1 mapped into it
        with contextlib.suppress(OSError):
            tables.append(Path(f"/proc/net/{name}").read_text())
    if not tables:
        return sys.platform != "linux"
    wanted = {f"0100007F:{port:04X}", f"0000000000000000FFFF00000100007F:{port:04X}"}
    for line in "\n".join(tables).splitlines():
        fields = line.split()
        if len(fields) > 7 and fields[1] in wanted and fields[3] == "0A":  # 0A: listening
            return int(fields[7]) == os.geteuid()
    return False


def find(home: Path, port: int | None = None) -> tuple[Engine | None, str | None]:
    """The engine recorded under `home` (listening on `port`, when given) that answers now, and why
    this command must not use it (`unfit`, None if it may); (None, None) when there is none."""
    engine = read_record(home)
    if engine is None or (port is not None and engine.port != port) or not answers(engine):
        return None, None
    return engine, unfit(engine)


def running(home: Path) -> Engine | None:
    """The engine a command uses when it names no Spark: found and fit; else None. An unfit engine
    is said on stderr and left alone."""
    engine, why = find(home)
    if engine is not None and why is not None:
        print(f"the warm engine at {engine.url} is not used: {why}", file=sys.stderr)
        return None
    return engine


def unfit(engine: Engine) -> str | None:
    """Why a run of this command must not go to `engine`, or None. Its Python workers import the
    lakegc it started with (another version's run would not be this one's), and its executors reach
    storage with the credentials and endpoints of the shell that started it: a command whose
    storage settings differ would check one store's marker and have another's keys deleted."""
    from lakegc import __version__

    if engine.version != __version__:
        return f"it runs lakegc {engine.version}, this is {__version__} (lakegc engine stop, then lakegc engine start)"
    if engine.environment != storage_environment():
        return "it was started with other storage settings (AWS_* variables or AWS config files): start it from here"
    return None


def storage_environment() -> str:
    """A digest of what decides where and as whom the executors reach storage: the AWS_* variables
    and the AWS config and credentials files they name (or the default ones)."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(k for k in os.environ if k.startswith("AWS_")):
        digest.update(f"{name}={os.environ[name]}\0".encode())
    aws = Path.home() / ".aws"
    for variable, default in (
        ("AWS_CONFIG_FILE", aws / "config"),
        ("AWS_SHARED_CREDENTIALS_FILE", aws / "credentials"),
    ):
        with contextlib.suppress(OSError):
            digest.update(Path(os.environ.get(variable) or default).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def note_use(home: Path, what: str) -> None:
    """Count one command run on the engine (best effort: a count, never a reason to fail). `what`
    is a command's name, never its arguments (they may hold a password)."""
    try:
        fd = os.open(home / USES, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a") as f:
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
    """Start the engine as a process of its own (it outlives this command) and wait until it
    answers. One start at a time per home (a lock): two at once would make two engines and one record."""
    home.mkdir(parents=True, exist_ok=True)
    with _start_lock(home):
        return _start(home, port, conf, wait_seconds)


@contextlib.contextmanager
def _start_lock(home: Path) -> Iterator[None]:
    fd = os.open(home / LOCK, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _start(home: Path, port: int | None, conf: dict[str, str], wait_seconds: float) -> Engine:
    current = read_record(home)
    if current is not None and answers(current):
        raise InvalidArgument(f"an engine is already running at {current.url} (pid {current.pid}): lakegc engine stop")
    chosen = port if port is not None else _free_port(DEFAULT_PORT)
    if not _port_free(chosen):
        raise InvalidArgument(f"port {chosen} on 127.0.0.1 is in use: choose another with --port")
    record_path(home).unlink(missing_ok=True)
    command = [sys.executable, "-m", _MODULE, str(chosen)]  # the conf by the environment: it may hold secrets
    environ = {**os.environ, _TOKEN_ENV: secrets.token_urlsafe(32), _CONF_ENV: json.dumps(conf)}
    log_fd = os.open(home / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(log_fd, "ab") as log:
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
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # the engine and the JVM it started
    raise LakegcError(f"the engine did not answer within {wait_seconds:.0f} s: {_last_line(home / LOG)}")


def stop(home: Path, wait_seconds: float = 60) -> Engine | None:
    """Stop the engine the record names (only if that pid is a lakegc engine: a recycled pid is
    never signalled); None if none runs. The engine leads a process group of its own (its JVM is in
    it), so a stop that has to force it kills the group."""
    engine = read_record(home)
    if engine is None:
        return None
    if not _alive(engine.pid):
        record_path(home).unlink(missing_ok=True)  # it died without cleaning up
        return None
    if not _is_engine(engine.pid):
        if sys.platform == "linux":
            record_path(home).unlink(missing_ok=True)  # the pid is another process's now
            return None
        raise LakegcError(
            f"cannot tell whether pid {engine.pid} is the engine here: stop it yourself (kill {engine.pid})"
        )
    try:
        os.kill(engine.pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_seconds
        while _alive(engine.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(engine.pid):
            os.killpg(engine.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        raise LakegcError(f"the engine (pid {engine.pid}) is another user's: it cannot be stopped from here") from None
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
    from lakegc.engine.classic import own_session

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    token = os.environ.pop(_TOKEN_ENV)
    os.environ[_SPARK_TOKEN_ENV] = token  # for the JVM about to start: its environment, not its command line
    spark = own_session("local[*]", session_conf(port, conf))
    spark.range(1).count()  # the JVM's first query compiled before the first command comes
    engine = Engine(port, os.getpid(), datetime.now(UTC).isoformat(), __version__, token, storage_environment())
    tmp = record_path(home).with_name(f"{RECORD}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:  # the token's owner only
        f.write(json.dumps(asdict(engine)))
    tmp.replace(record_path(home))
    print(f"engine up at {engine.url} (pid {engine.pid})", flush=True)
    jvm = _jvm_process(spark)
    try:
        while not stopping.wait(1):
            if jvm is not None and jvm.poll() is not None:
                print(f"the engine's JVM exited ({jvm.returncode}): the engine stops", flush=True)
                break
    finally:
        record = read_record(home)
        if record is not None and record.pid == engine.pid:
            record_path(home).unlink(missing_ok=True)
        if jvm is None or jvm.poll() is None:
            spark.stop()


def _jvm_process(spark: object) -> subprocess.Popen | None:
    """The JVM PySpark started for the engine's session (its gateway keeps the process handle)."""
    from lakegc.engine.tasks import classic_context

    context = classic_context(spark)  # type: ignore[arg-type]
    gateway = getattr(context, "_gateway", None)
    return getattr(gateway, "proc", None)


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

    serve(lakegc_home(), int(sys.argv[1]), json.loads(os.environ.pop(_CONF_ENV, "{}")))
