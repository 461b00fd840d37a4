"""The Spark session GC runs in: local mode by default, any master by URL, quiet unless asked.

A run on a small lake spends most of its time starting Spark, so the session is set up for a short
life: the driver JVM compiles with C1 only and maps its classes from a class-data archive
(`classdata`), Python workers fork from a daemon that has already imported what they run
(`workers`), and a GC run starts the JVM in the background while it does its preflight
(`SessionStart`). Each setting says what it saved, measured on the demo lake (20 objects) and on the
benchmark's 100K-object lake.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lakegc.engine import classdata

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.engine import warm

_LOG4J = Path(__file__).with_name("sparkconf") / "log4j2.properties"  # Spark's own logs quiet
_LOCAL_HEAP = "4g"
# C1 only: on the demo lake the C2 compiler's threads spent more CPU than anything else (15 of 40 s),
# and its faster code never paid that back: a 100K-object run took 32 s of CPU instead of 49 s.
_JIT = "-XX:TieredStopAtLevel=1"
_DRIVER_OPTIONS = "spark.driver.defaultJavaOptions"  # a user's spark.driver.extraJavaOptions adds to it


@dataclass
class _Launch:
    """One session to build: lakegc's defaults, the caller's conf (which wins), and the class-data
    options of the driver JVM (empty when the JVM is not ours to start or the caller set them)."""

    master: str | None
    conf: dict[str, str]
    defaults: dict[str, str]
    archive: classdata.Archive | None = None
    shared: list[str] = field(default_factory=list)


@dataclass
class _Recording:
    """A class-data archive this process's driver JVM writes as it exits."""

    archive: classdata.Archive
    tmp: Path
    java: str = ""
    classpath: str = ""


_may_record = False  # inside `command_scope`: something waits for the JVM at the end
_recording: _Recording | None = None
_background: list[threading.Thread] = []  # sessions started by `SessionStart`


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Get (or reuse) the session. Workers must run this interpreter, which has lakegc installed.
    A master of the form `sc://HOST:PORT` is a Spark Connect server; with no master at all, a warm
    engine running under `LAKEGC_HOME` (`engine.warm`) is used when it answers at once."""
    active = _reusable(master, conf)
    if active is not None:
        return active
    return _begin(master, conf or {})()


class SessionStart:
    """`spark_session` in a background thread, so the JVM starts while the caller goes on with
    other work (a GC run's preflight: metastore reads, the lease, the plan); `result()` waits."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None):
        self._future: Future = Future()
        self._thread: threading.Thread | None = None
        active = _reusable(master, conf)
        if active is not None:
            self._future.set_result(active)
            return
        begin = _begin(master, conf or {})  # here: which Spark, and what the JVM records, is known at once
        self._thread = threading.Thread(target=self._run, args=(begin,), name="lakegc-spark-start", daemon=True)
        _background.append(self._thread)
        self._thread.start()

    def _run(self, begin: Callable[[], SparkSession]) -> None:
        try:
            self._future.set_result(begin())
        except BaseException as exc:
            self._future.set_exception(exc)

    def result(self) -> SparkSession:
        spark = self._future.result()
        if self._thread is not None and threading.current_thread() is threading.main_thread():
            _cancel_jobs_on_interrupt(spark)
        return spark


def _reusable(master: str | None, conf: dict[str, str] | None) -> SparkSession | None:
    """The active session, when the caller asks for no particular one (none before PySpark is loaded)."""
    if master is not None or conf or "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    connect = sys.modules.get("pyspark.sql.connect.session")  # a Connect session is active per thread only
    return SparkSession.getActiveSession() or (connect and connect.SparkSession._get_default_session())


def _begin(master: str | None, conf: dict[str, str]) -> Callable[[], SparkSession]:
    """How the session will be made, decided in the caller's thread: a Spark Connect server that
    `master` names; with no master, no `spark.master` and no spark-submit around us, the warm
    engine if one answers (said on stderr), falling back to a session of our own if it does not
    take this one at once; else a session of our own."""
    if master is not None and master.startswith("sc://"):
        return lambda: _connect(master, conf, first_answer=_REMOTE_FIRST_ANSWER)
    engine = None if master is not None or conf.get("spark.master") else _warm_engine()
    if engine is None:
        launch = _prepare(master, conf)
        return lambda: _start(launch)

    def warm_or_own() -> SparkSession:
        from lakegc.errors import LakegcError

        try:
            return _connect(engine.url, conf, first_answer=_WARM_FIRST_ANSWER)
        except LakegcError as exc:
            print(f"the warm engine was not used ({exc}): starting a session of this command's own", file=sys.stderr)
            return _start(_prepare(master, conf))

    return warm_or_own


_WARM_FIRST_ANSWER = 10.0  # seconds a warm engine has to take a session before a command starts its own
_REMOTE_FIRST_ANSWER = 120.0  # seconds a server given by address has (a serverless one may start first)


def _warm_engine() -> warm.Engine | None:
    """The warm engine recorded under `LAKEGC_HOME`, when it answers now (and spark-submit did not
    start us: its conf says where to run)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    from lakegc.engine import warm
    from lakegc.settings import lakegc_home

    home = lakegc_home()
    engine = warm.running(home)
    if engine is not None:
        print(f"using the warm engine at {engine.url} (lakegc engine status)", file=sys.stderr)
        warm.note_use(home, _command_name())
    return engine


def _command_name() -> str:
    """The running command's name (`lakegc gc run`), never its arguments; `api` outside the CLI."""
    try:
        import click

        context = click.get_current_context(silent=True)
    except ImportError:
        context = None
    return context.command_path if context is not None else "api"


# What lakegc sets in every session it runs on, its own or a Spark Connect one.
_SESSION_SQL = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Adaptive execution runs every shuffle stage of a query as a Spark job of its own (a clean
    # run was 24 jobs with it, 7 without) and re-plans between them; lakegc's plans size their own
    # shuffles (`spark.sql.shuffle.partitions`, `work_items`), so they are planned once.
    "spark.sql.adaptive.enabled": "false",
    # Address sets never go through the driver: a broadcast join would collect one there.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


def _connect(address: str, conf: dict[str, str], first_answer: float | None = None) -> SparkSession:
    """A Spark Connect session at `address`, set as lakegc's own sessions are (the user's `conf`
    on top). A server that does not take a connection at once is an error, never a wait: Connect's
    client would retry for minutes; with `first_answer`, neither is a server that takes the
    connection and then does not answer. The warm engine's own address, given without a token, is
    reached with the token its record holds, and only if the engine is ours (`warm.answers`)."""
    from pyspark.errors import PySparkException

    from lakegc.errors import InvalidArgument, LakegcError, first_line

    found = re.fullmatch(r"sc://([^:/;]+):(\d+)/?(;.*)?", address)
    if found is None:
        raise InvalidArgument(f"{_shown(address)!r} is not a Spark Connect address: sc://HOST:PORT")
    host, port, params = found.group(1), int(found.group(2)), found.group(3) or ""
    shown = f"sc://{host}:{port}"  # never the token
    try:
        with socket.create_connection((host, port), timeout=5):
            pass
    except OSError as exc:
        raise LakegcError(f"no Spark Connect server answers at {shown}: {exc.strerror or exc}") from None
    token = re.search(r";token=([^;]*)", params)
    if host in ("127.0.0.1", "localhost") and token is None:
        engine = _engine_at(port)
        builder = _loopback(port, engine.token) if engine is not None else _default(address)
    elif host in ("127.0.0.1", "localhost") and "use_ssl=true" not in params:
        builder = _loopback(port, token.group(1))  # type: ignore[union-attr]
    else:
        builder = _default(address)
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")  # the error that follows says it
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    _forget(ConnectSession)  # a new session for this address and token, never one made earlier for another
    spark = ConnectSession.builder.channelBuilder(builder).create()
    spark.client.set_retry_policies([_connect_retries(port if host in ("127.0.0.1", "localhost") else None)])
    try:
        try:
            _within(first_answer, lambda: spark.version)  # the first call: is the session taken?
        except PySparkException as exc:
            refused = first_line(exc, 300)
            raise LakegcError(f"the Spark Connect server at {shown} refused the session: {refused}") from None
        except TimeoutError:
            raise LakegcError(
                f"the Spark Connect server at {shown} did not answer within {first_answer:.0f} s"
            ) from None
        for key, value in {**_SESSION_SQL, **conf}.items():
            try:
                spark.conf.set(key, value)
            except PySparkException as exc:
                refused = exc.getCondition() or first_line(exc, 200)
                raise InvalidArgument(f"--conf {key}: the Spark Connect session refuses it ({refused})") from None
    except LakegcError:
        _forget(ConnectSession)  # a command that goes on with a session of its own must not find this one
        raise
    # What SparkSession.builder.remote() sets: PySpark's functions build Connect columns from now on.
    # Only once the session is taken, so a command that falls back to its own session stays classic.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return spark  # type: ignore[return-value]


def _forget(session_class: type) -> None:
    """Drop a Connect session from what PySpark hands out as the default and active one (its
    fields; PySpark has no call for it short of stopping, which waits on the server): one never
    taken, or one made earlier, which `getOrCreate` would hand back whatever address was asked."""
    session_class._default_session = None  # type: ignore[attr-defined]
    session_class._active_session.session = None  # type: ignore[attr-defined]


def _within(seconds: float | None, call: Callable[[], object]) -> object:
    """`call()`, raising TimeoutError if it has not returned after `seconds` (None: no limit). The
    call goes on in a daemon thread: what it waits on is a server that may never answer."""
    if seconds is None:
        return call()
    answer: Future = Future()

    def run() -> None:
        try:
            answer.set_result(call())
        except BaseException as exc:
            answer.set_exception(exc)

    threading.Thread(target=run, name="lakegc-connect-first-call", daemon=True).start()
    return answer.result(timeout=seconds)


def _loopback(port: int, token: str) -> object:
    """A channel to 127.0.0.1:`port` carrying `token` over gRPC's local credentials. PySpark uses
    those for the name `localhost` only, and then connects to whatever it resolves to first, [::1]
    on many machines, where another user's listener may wait: the address is pinned here."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class Loopback(DefaultChannelBuilder):
        @property
        def endpoint(self) -> str:
            return f"127.0.0.1:{port}"

    return Loopback(f"sc://localhost:{port}/;token={token}")


def _default(address: str) -> object:
    from pyspark.sql.connect.client import DefaultChannelBuilder

    return DefaultChannelBuilder(address)


def _connect_retries(loopback_port: int | None = None) -> object:
    """How long a Connect client keeps retrying a server that went away: about 15 s (five retries,
    backing off to 5 s), not Connect's default of ten minutes, so a run whose engine died fails
    (and is recorded failed) instead of hanging. On loopback, a retry goes only to a listener that
    is still this user's: after the engine's JVM dies its port is anyone's, and a resent plan
    carries the run's storage settings."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    from lakegc.engine import warm

    class Retries(DefaultPolicy):
        def can_retry(self, exception: BaseException) -> bool:
            ours = loopback_port is None or warm.listener_is_ours(loopback_port)
            return ours and super().can_retry(exception)

    return Retries(max_retries=5, max_backoff=5000)


def _engine_at(port: int) -> warm.Engine | None:
    """The warm engine recorded under `LAKEGC_HOME`, when it listens on `port` and is ours; an
    engine there that is not fit for this command (`warm.unfit`) is an error."""
    from lakegc.engine import warm
    from lakegc.errors import LakegcError
    from lakegc.settings import lakegc_home

    engine, why = warm.find(lakegc_home(), port)
    if engine is not None and why is not None:
        raise LakegcError(f"the warm engine at {engine.url} is not used: {why}")
    return engine


def _shown(address: str) -> str:
    return address.split(";", 1)[0]


def jobs_started(spark: SparkSession) -> Callable[[], int | None]:
    """A count of the Spark jobs the session has started so far: its status tracker's newest job
    id plus one (ids are sequential; no listener needed). Counts None where there is no tracker
    (a Spark Connect session)."""
    context = classic_context(spark)
    if context is None:
        return lambda: None
    tracker = context.statusTracker()

    def count() -> int | None:
        return max(tracker.getJobIdsForGroup(None), default=-1) + 1

    return count


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session's executors run at once, which every task count lakegc picks is a
    multiple of. In one place because a Spark Connect session has no SparkContext to ask: there it
    is the engine's `spark.default.parallelism` if set, else the cores of a local master, else half
    its shuffle partitions (lakegc's own sessions set those to twice the cores)."""
    context = classic_context(spark)
    if context is not None:
        return context.defaultParallelism
    given = spark.conf.get("spark.default.parallelism", None)
    if given:
        return int(given)
    local = local_cores(spark.conf.get("spark.master", None) or "")
    return local or max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 2) // 2)


def classic_context(spark: SparkSession) -> SparkContext | None:
    """The SparkContext of a classic session, for the little only a classic engine has (its job
    counts, its log level, the JVM it started); None for a Spark Connect session. The pipeline
    itself never needs one: it is DataFrames and `mapInArrow` only, so it runs on either."""
    return getattr(spark, "_sc", None)


def local_cores(master: str) -> int | None:
    """The task slots of a local master URL (`local`, `local[4]`, `local[*]`, `local[4,2]` with
    retries); None for any other master, whose executors only the cluster knows."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master.strip())
    if found is None:
        return None
    slots = found.group(1)
    if slots is None:
        return 1
    return (os.cpu_count() or 1) if slots == "*" else max(1, int(slots))


def work_items(spark: SparkSession, count: int, tasks: int) -> DataFrame:
    """Rows 0..count-1 (column `id`) spread over at most `tasks` tasks, for work a task's function
    looks up by index in a list it carries (folders to list, files to read). Not `createDataFrame`
    of the list, whose rows go through a Python RDD, which forks a second Python worker daemon of
    its own, nor a `repartition`, a shuffle and so one more job and stage: on the demo lake each
    Spark job costs a tenth of a second or more, whatever it holds. A short list gets fewer tasks
    (`task_count`)."""
    return spark.range(0, count, 1, task_count(count, tasks, parallelism(spark)))


ITEMS_PER_TASK = 8  # below this many items a task, a list is spread over fewer tasks (never fewer than the cores)


def task_count(count: int, tasks: int, cores: int) -> int:
    """How many tasks `count` items get when `tasks` are asked for on `cores` task slots. Each task
    costs tens of milliseconds whatever it holds (measured through the warm engine: a stage of 8
    tasks of one folder each took 0.3 s on 2 cores, of 2 tasks 0.1 s), so a short list is spread
    over as many tasks as give each ITEMS_PER_TASK, but never fewer than one per core: an item may
    be a folder of a million objects, and the cores are there anyway."""
    fewer = -(-count // ITEMS_PER_TASK)
    return max(1, min(count, tasks, max(fewer, cores)))


def _prepare(master: str | None, conf: dict[str, str]) -> _Launch:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **_SESSION_SQL,
        "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 2))),
        "spark.sql.adaptive.autoBroadcastJoinThreshold": "-1",
        "spark.python.daemon.module": "lakegc.workers",  # imports once, not in every worker
        "spark.executor.extraJavaOptions": java_option(f"-Dlog4j2.configurationFile=file:{_LOG4J}"),
    }
    if (master or conf.get("spark.master") or "local").startswith("local"):
        # Local mode: one JVM is driver and executors. At 1M objects Spark's default 1g heap spent
        # a third of the run collecting garbage (benchmarks/).
        defaults["spark.driver.memory"] = _LOCAL_HEAP
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its --conf and spark-defaults.conf win
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the JVM spark-submit started, whose conf SparkConf() reads
        given = SparkConf()
        return _Launch(master, conf, {key: value for key, value in defaults.items() if not given.contains(key)})
    launch = _Launch(master, conf, defaults)
    if _DRIVER_OPTIONS not in conf:
        launch.archive, launch.shared = _class_data(conf)
        defaults[_DRIVER_OPTIONS] = _driver_options(launch.shared)
    return launch


def _driver_options(shared: list[str]) -> str:
    """C1 only; Spark's logs quiet from the JVM's start (given as a file, not a conf folder on the
    class path: the JVM records no archive of a class path holding a folder); the class-data options."""
    return " ".join([_JIT, java_option(f"-Dlog4j2.configurationFile=file:{_LOG4J}"), *shared])


def _start(launch: _Launch) -> SparkSession:
    try:
        return _build(launch)
    except Exception:
        from pyspark import SparkContext

        if not launch.shared or SparkContext._gateway is not None:
            raise
        # The JVM did not start with the archive (unreadable, or a class path it cannot record):
        # start it as if there were none, and let a later command write a new one.
        global _recording
        if _recording is not None:
            _recording.tmp.unlink(missing_ok=True)
            _recording = None
        if launch.archive is not None and (installed := launch.archive.installed()) is not None:
            installed.unlink(missing_ok=True)
        launch.shared = []
        launch.defaults[_DRIVER_OPTIONS] = _driver_options([])
        return _build(launch)


# What the JVM prints about itself that tells a lakegc user nothing (the JDK's notices as Spark's
# launcher starts it): dropped from its stderr, as Spark's own log lines are by its log4j2 file.
_JVM_NOISE = re.compile(
    r"^WARNING: (Using incubator modules|A terminally deprecated method|sun\.misc\.Unsafe::|"
    r"Please consider reporting this|.* will be removed in a future release)"
)
show_jvm_noise = False  # --debug: everything the JVM prints reaches stderr


@contextmanager
def _filtered_jvm_stderr() -> Iterator[None]:
    """While the driver JVM is launched, hand it a pipe for its stderr (it keeps it for its whole
    life, and its Python workers inherit it in turn): a thread copies every line to this process's
    stderr but the JVM's notices (`_JVM_NOISE`). Only the JVM's stderr goes through the pipe; this
    process writes its own (an `error:` line of a failed preflight, say) straight to its stderr."""
    if show_jvm_noise or "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit the JVM is not ours
        yield
        return
    import pyspark.java_gateway as gateway

    try:
        read_end, write_end = os.pipe()
        target = os.dup(2)
    except OSError:  # no stderr at all: nothing to filter
        yield
        return
    threading.Thread(target=_copy_lines, args=(read_end, target), name="lakegc-jvm-stderr", daemon=True).start()
    launch = gateway.Popen
    gateway.Popen = lambda command, **kwargs: launch(command, **{**kwargs, "stderr": write_end})
    try:
        yield
    finally:
        gateway.Popen = launch
        os.close(write_end)


def _copy_lines(source: int, target: int) -> None:
    with os.fdopen(source, "rb") as lines, os.fdopen(target, "wb", buffering=0) as out:
        for line in iter(lines.readline, b""):
            if not _JVM_NOISE.match(line.decode("utf-8", "replace")):
                out.write(line)


def _build(launch: _Launch) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("lakegc")  # also under spark-submit, which names it after the script
    for key, value in launch.defaults.items():
        builder = builder.config(key, value)
    if launch.master:
        builder = builder.master(launch.master)
    elif "spark.master" not in launch.conf and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]")  # not under spark-submit, which brings its own master
    for key, value in launch.conf.items():
        builder = builder.config(key, value)
    with _filtered_jvm_stderr():
        spark = builder.getOrCreate()
    context = classic_context(spark)  # this builder made a classic session: it has one
    assert context is not None
    context.setLogLevel("ERROR")
    if _recording is not None and not _recording.java:  # what checking the archive takes, from the JVM itself
        system = context._jvm.System  # type: ignore[union-attr]
        _recording.java = os.path.join(system.getProperty("java.home"), "bin", "java")
        _recording.classpath = system.getProperty("java.class.path")
    return spark


def _class_data(conf: dict[str, str]) -> tuple[classdata.Archive | None, list[str]]:
    """The driver JVM's class-data options: map the machine's archive, or (inside `command_scope`,
    when there is none) write one at exit."""
    global _recording
    if _recording is not None:
        return None, []
    from pyspark.find_spark_home import _find_spark_home

    spark_home = Path(_find_spark_home())
    archive = classdata.archive_for(spark_home, dict(os.environ))
    if archive is None:
        return None, []
    installed = archive.installed()
    if installed is not None:
        return archive, [java_option(f"-XX:SharedArchiveFile={installed}"), classdata.QUIET]
    if not _may_record or not classdata.can_record(spark_home, dict(os.environ), conf):
        return archive, []
    try:
        archive.folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return archive, []
    archive.clear_stale()
    _recording = _Recording(archive, archive.new_tmp())
    return archive, [java_option(f"-XX:ArchiveClassesAtExit={_recording.tmp}"), classdata.QUIET]


@contextmanager
def command_scope() -> Iterator[None]:
    """Around a whole command (the CLI): if a session started inside records a class-data archive,
    its JVM writes it on exit, which happens here, at the end: Spark is stopped, the JVM told to
    exit (its stdin closed) and waited for, and the archive checked and installed. Once per machine
    and Spark version; every other command ends as before."""
    global _may_record, _recording
    _may_record = True
    try:
        yield
    finally:
        _may_record = False
        recording, _recording = _recording, None
        if recording is not None:
            _finish(recording)


def _finish(recording: _Recording) -> None:
    from pyspark import SparkContext

    sys.stdout.flush()  # the command's output first: the JVM takes a while to write the archive
    for thread in _background:  # a JVM still starting in the background may be the one recording
        thread.join()
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None or not recording.java:
        recording.tmp.unlink(missing_ok=True)
        return
    if sys.stderr.isatty():
        print("lakegc: saving Spark's classes for faster starts (once)...", file=sys.stderr, flush=True)
    with suppress(Exception):  # a JVM in trouble writes no archive that passes the check below
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
    try:
        proc.stdin.close()
        proc.wait(timeout=300)
    except BaseException:  # interrupted, or a JVM that will not exit: no archive this time
        recording.tmp.unlink(missing_ok=True)
        raise
    if proc.returncode == 0 and recording.tmp.exists():
        recording.archive.install(recording.tmp, recording.java, recording.classpath)
    else:
        recording.tmp.unlink(missing_ok=True)


def _cancel_jobs_on_interrupt(spark: SparkSession) -> None:
    """What PySpark does for a session made in the main thread, and skips for one made elsewhere:
    Ctrl-C cancels the running Spark jobs before it interrupts the caller (on Spark Connect too)."""

    def interrupted(*_: object) -> None:
        with suppress(Exception):  # a server already gone: the interrupt is what matters
            spark.interruptAll()
        raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, interrupted)


def java_option(option: str) -> str:
    """One JVM option in a Spark Java-options string, which Spark splits at spaces: quoted when it
    holds one (a path with a space in it)."""
    if not any(c.isspace() or c in "\"'\\" for c in option):
        return option
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'
