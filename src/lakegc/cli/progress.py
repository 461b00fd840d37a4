"""Progress of a long command on stderr: its phases as they start, and Spark's tasks as they finish.

On a terminal the phases are a live list, each with its elapsed time and, while Spark works on it,
`[done/all tasks]`. In a pipe or a log each phase is one line as it starts (nothing is redrawn or
wrapped), and with `-v` a line of task counts every few seconds while a phase runs. `-q` shows
nothing. `--json` keeps progress on stderr (stdout holds only the JSON), except under spark-submit,
which merges the driver's stderr into its stdout.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from lakegc.cli import output
from lakegc.engine.progress import Phase
from lakegc.redact import shown

_POLL_SECONDS = 0.5
_LOG_EVERY_SECONDS = 5.0


def _spark_tasks() -> tuple[int, int] | None:
    """(finished, all) tasks of the stages Spark is running now, or None when it runs none. A
    classic session is asked; a Spark Connect one reports to a handler (`_connect_tasks`)."""
    pyspark = sys.modules.get("pyspark")
    context = getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)
    if context is None:
        return _connect_tasks()
    try:
        tracker = context.statusTracker()
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    except Exception:  # the JVM stopping, a job ending as we ask: no count this time
        return None
    stages = [s for s in stages if s is not None]
    if not stages:
        return None
    return sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages)


_connect_progress: dict[str, tuple[int, int] | None] = {}  # the latest the server reported
_handled: set[int] = set()  # Connect sessions the handler is registered with


def _connect_tasks() -> tuple[int, int] | None:
    """What the active Spark Connect session's server last reported of its running stages (the
    server sends progress with a query's results; the handler keeps the latest)."""
    connect = sys.modules.get("pyspark.sql.connect.session")  # its active session is per thread: the default one
    session = connect.SparkSession._get_default_session() if connect is not None else None
    if session is None:
        return None
    if id(session) not in _handled:
        _handled.add(id(session))
        session.registerProgressHandler(_on_connect_progress)
    return _connect_progress.get("tasks")


def _on_connect_progress(stages: object, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
    running = [s for s in (stages or []) if not s.done]  # type: ignore[attr-defined]
    _connect_progress["tasks"] = (
        None
        if done or not running
        else (sum(s.num_completed_tasks for s in running), sum(s.num_tasks for s in running))
    )


def quiet_for(as_json: bool) -> bool:
    """No progress: `-q`, or `--json` under spark-submit (its stderr ends up in stdout)."""
    return output.verbosity() == 0 or (as_json and "PYSPARK_GATEWAY_PORT" in os.environ)


@contextmanager
def progress(title: str, *, as_json: bool = False) -> Iterator[Phase]:
    """A Phase callback for a command's run, shown as the module says."""
    quiet = quiet_for(as_json)
    terminal = output.err_console.is_terminal and not quiet
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=output.err_console,
        transient=False,
        disable=not terminal,
    ) as bar:
        current: list[tuple[int, str]] = []  # (task, line) of the phase running
        stop = threading.Event()

        def watch() -> None:
            last_log = float("-inf")  # in a log: the first count as soon as Spark has one, then every few seconds
            while not stop.wait(_POLL_SECONDS):
                tasks = _spark_tasks()
                if not current or tasks is None:
                    continue
                task, line = current[-1]
                counts = f"[{tasks[0]}/{tasks[1]} tasks]"
                if terminal:
                    bar.update(task, description=f"{line} {counts}")
                elif output.verbosity() > 1 and not quiet and time.monotonic() - last_log >= _LOG_EVERY_SECONDS:
                    last_log = time.monotonic()
                    output.err_console.print(f"  {counts}", markup=False, highlight=False, soft_wrap=True)

        # Task counts are shown on a terminal, and in a log with -v: only then ask Spark for them.
        watcher = threading.Thread(target=watch, name="lakegc-progress", daemon=True)
        if terminal or (output.verbosity() > 1 and not quiet):
            watcher.start()

        def phase(name: str, detail: str = "") -> None:
            if current:
                bar.update(current[-1][0], description=current[-1][1], completed=1, total=1)
            line = shown(f"{title}: {name}" + (f" ({detail})" if detail else ""))
            current.append((bar.add_task(line, total=None), line))
            if not terminal and not quiet:
                output.err_console.print(line, markup=False, highlight=False, soft_wrap=True)

        try:
            yield phase
        finally:
            stop.set()
            if watcher.is_alive():
                watcher.join()
            if current:
                bar.update(current[-1][0], description=current[-1][1], completed=1, total=1)
