"""A classic Spark session of this process's own: its JVM started here, in local mode by default or
on any master by URL, quiet unless asked.

A run on a small lake spends most of its time starting Spark, so the session is set up for a short
life: the driver JVM compiles with C1 only and maps its classes from a class-data archive
(`classdata`), and Python workers fork from a daemon that has already imported what they run
(`workers`). Each setting says what it saved, measured on the demo lake (20 objects) and on the
benchmark's 100K-object lake. A module of its own, apart from choosing which Spark a command runs
on (`engine.spark`), because the warm engine (`engine.warm`) starts its session here too, and
must not depend on the code that looks for it.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lakegc.engine import classdata
from lakegc.engine.tasks import classic_context

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG4J = Path(__file__).with_name("sparkconf") / "log4j2.properties"  # Spark's own logs quiet
_LOCAL_HEAP = "4g"
# C1 only: on the demo lake the C2 compiler's threads spent more CPU than anything else (15 of 40 s),
# and its faster code never paid that back: a 100K-object run took 32 s of CPU instead of 49 s.
_JIT = "-XX:TieredStopAtLevel=1"
_DRIVER_OPTIONS = "spark.driver.defaultJavaOptions"  # a user's spark.driver.extraJavaOptions adds to it


@dataclass
class Launch:
    """One session to build: lakegc's defaults, the caller's conf (which wins), and the class-data
    options of the driver JVM (empty when the JVM is not ours to start or the caller set them)."""

    master: str | None
    conf: dict[str, str]
    defaults: dict[str, str]
    archive: classdata.Archive | None = None
    shared: list[str] = field(default_factory=list)
    show_jvm_noise: bool = False  # --debug: everything the JVM prints reaches stderr


@dataclass
class _Recording:
    """A class-data archive this process's driver JVM writes as it exits."""

    archive: classdata.Archive
    tmp: Path
    java: str = ""
    classpath: str = ""


_may_record = False  # inside `command_scope`: something waits for the JVM at the end
_recording: _Recording | None = None
background: list[threading.Thread] = []  # sessions started by `spark.SessionStart`: `command_scope` waits for them


# What lakegc sets in every session it runs on, its own or a Spark Connect one.
SESSION_SQL = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Adaptive execution runs every shuffle stage of a query as a Spark job of its own (a clean
    # run was 24 jobs with it, 7 without) and re-plans between them; lakegc's plans size their own
    # shuffles (`spark.sql.shuffle.partitions`, `work_items`), so they are planned once.
    "spark.sql.adaptive.enabled": "false",
    # Address sets never go through the driver: a broadcast join would collect one there.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


def own_session(master: str | None, conf: dict[str, str]) -> SparkSession:
    """A classic session started here, with lakegc's defaults and the caller's `conf` on top."""
    return start(prepare(master, conf))


def prepare(master: str | None, conf: dict[str, str], show_jvm_noise: bool = False) -> Launch:
    """How this process's own session will be built (decided in the caller's thread: the class-data
    archive it maps or records is known at once)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **SESSION_SQL,
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
        kept = {key: value for key, value in defaults.items() if not given.contains(key)}
        return Launch(master, conf, kept, show_jvm_noise=show_jvm_noise)
    launch = Launch(master, conf, defaults, show_jvm_noise=show_jvm_noise)
    if _DRIVER_OPTIONS not in conf:
        launch.archive, launch.shared = _class_data(conf)
        defaults[_DRIVER_OPTIONS] = _driver_options(launch.shared)
    return launch


def _driver_options(shared: list[str]) -> str:
    """C1 only; Spark's logs quiet from the JVM's start (given as a file, not a conf folder on the
    class path: the JVM records no archive of a class path holding a folder); the class-data options."""
    return " ".join([_JIT, java_option(f"-Dlog4j2.configurationFile=file:{_LOG4J}"), *shared])


def start(launch: Launch) -> SparkSession:
    """The session `launch` describes; without the class-data archive if the JVM would not start with it."""
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


@contextmanager
def _filtered_jvm_stderr(show_jvm_noise: bool) -> Iterator[None]:
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


def _build(launch: Launch) -> SparkSession:
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
    with _filtered_jvm_stderr(launch.show_jvm_noise):
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
    for thread in background:  # a JVM still starting in the background may be the one recording
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


def java_option(option: str) -> str:
    """One JVM option in a Spark Java-options string, which Spark splits at spaces: quoted when it
    holds one (a path with a space in it)."""
    if not any(c.isspace() or c in "\"'\\" for c in option):
        return option
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'
