"""Which Spark a command runs on: a Spark Connect server it names, the warm engine when it names none
and one answers, else a classic session of its own (`engine.classic`), quiet unless asked.

A run on a small lake spends most of its time starting Spark, so a GC run starts the JVM in the
background while it does its preflight (`SessionStart`), and a command that names no Spark uses the
warm engine's session (`engine.warm`) when one runs. This module asks the warm engine and the
Connect channel (`engine.connect`); neither asks it, so the engine starts its own session without
coming back here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from typing import TYPE_CHECKING

from lakegc.engine import classic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegc.engine import warm

show_jvm_noise = False  # --debug: everything the JVM prints reaches stderr


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
        classic.background.append(self._thread)
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
        from lakegc.engine.connect import connect_session

        return lambda: connect_session(master, conf, first_answer=_REMOTE_FIRST_ANSWER)
    engine = None if master is not None or conf.get("spark.master") else _warm_engine()
    if engine is None:
        launch = classic.prepare(master, conf, show_jvm_noise)
        return lambda: classic.start(launch)

    def warm_or_own() -> SparkSession:
        from lakegc.engine.connect import connect_session
        from lakegc.errors import LakegcError

        try:
            return connect_session(engine.url, conf, first_answer=_WARM_FIRST_ANSWER)
        except LakegcError as exc:
            print(f"the warm engine was not used ({exc}): starting a session of this command's own", file=sys.stderr)
            return classic.start(classic.prepare(master, conf, show_jvm_noise))

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


def _cancel_jobs_on_interrupt(spark: SparkSession) -> None:
    """What PySpark does for a session made in the main thread, and skips for one made elsewhere:
    Ctrl-C cancels the running Spark jobs before it interrupts the caller (on Spark Connect too)."""

    def interrupted(*_: object) -> None:
        with suppress(Exception):  # a server already gone: the interrupt is what matters
            spark.interruptAll()
        raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, interrupted)
