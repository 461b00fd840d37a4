"""The one piece that moves a run: `Recorder` checks each transition, stamps the end time, tells
the run's log (`engine.runs.RunLog`) and writes summary.json, also when the run fails.

The report people read (report.html beside summary.json) is rendered once a run has ended: swept,
failed, a dry or mark-only run marked, or a sweep that stopped short and waits for the next
(`write_record`); a restore or purge that changes an ended run's figures renders it again. While a
run is under way only summary.json is rewritten, so a state change costs one small write.

It lives apart from `engine.runs` (the record and where it is kept) because it is the one place
that knows both the record and how it is shown (`engine.report`): neither imports the other.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lakegc.engine.report import render_report
from lakegc.engine.runs import (
    REPOSITORY,
    IllegalTransition,
    Run,
    RunFolder,
    RunLog,
    RunState,
    SweepIncomplete,
    check_transition,
)
from lakegc.errors import LakegcError
from lakegc.failures import cause
from lakegc.timeutil import utcnow

# The crash tests' hook: a run state at which the process that moved a run there stops itself.
STOP_AFTER = "LAKEGC_TEST_STOP_AFTER"


def write_record(folder: RunFolder, run: Run) -> None:
    """summary.json and the report people read, side by side (credentials masked in both)."""
    folder.write_summary(run)
    write_report(folder, run)


def write_report(folder: RunFolder, run: Run) -> None:
    """report.html alone, from the record as it is: for `gc show --html` on a run that has none
    yet (it never rewrites summary.json, which a run still under way may be writing)."""
    folder.storage.write(folder.key("report.html"), render_report(run.masked()).encode())


def ended(run: Run) -> bool:
    """Whether nothing more happens to the run in this process: it is swept or failed, marked
    and not to be swept, or sweeping with an error (stopped short: a later sweep goes on)."""
    if run.state in (RunState.SWEPT, RunState.FAILED):
        return True
    if run.state is RunState.MARKED:
        return run.dry_run or run.mark_only
    return run.state is RunState.SWEEPING and run.error is not None


class Recorder:
    """Moves a run through its states and keeps its record: in its log, as summary.json, and once
    it has ended as report.html, in its folder."""

    def __init__(self, log: RunLog, folder: RunFolder):
        self.log, self.folder = log, folder

    def start(self, run: Run, parameters: dict[str, Any] | None = None) -> None:
        run.location = self.folder.location
        self.log.create(run, parameters or {})

    def transition(self, run: Run, to: RunState) -> None:
        """Move `run` to `to`, but only from the state it is in: anything else is loud."""
        frm = run.state
        check_transition(run.run_id, frm, to)
        run.state = to
        if to in (RunState.SWEPT, RunState.FAILED) or (to is RunState.MARKED and (run.dry_run or run.mark_only)):
            run.finished_at = utcnow().isoformat()
        try:
            self.log.move(run, frm)
        except IllegalTransition:
            run.state = frm
            raise
        self.write(run)
        _stop_point(run.run_id, to)

    def update(self, run: Run) -> None:
        """Record `run`'s figures and error without moving it (a sweep that stopped short, a
        restore or purge of an ended run)."""
        self.log.move(run, run.state)
        self.write(run)

    def write(self, run: Run) -> None:
        """The folder's copy of the record: summary.json, and the report once the run has ended."""
        if ended(run):
            write_record(self.folder, run)
        else:
            self.folder.write_summary(run)

    @contextmanager
    def recording(self, run: Run) -> Iterator[None]:
        """Any failure inside marks the run failed, keeps the error, writes the record and
        re-raises (unexpected errors as one readable LakegcError line). A `SweepIncomplete`
        leaves the run where it is, recorded."""
        try:
            yield
        except SweepIncomplete as exc:
            run.error = str(exc)
            try:
                self.update(run)
            except IllegalTransition:  # closed meanwhile: the folder still says what happened
                write_record(self.folder, run)
            raise
        except BaseException as exc:
            run.error = cause(exc)
            try:
                self.transition(run, RunState.FAILED)
            except IllegalTransition:  # already closed (its lease was taken over): the first error is the one told
                write_record(self.folder, run)
            except Exception:  # the log cannot be written (a metastore down): the folder still says what happened
                write_record(self.folder, run)
                raise
            if isinstance(exc, Exception) and not isinstance(exc, LakegcError):
                what = "GC run" if run.kind == REPOSITORY else f"{run.kind} GC run"
                raise LakegcError(f"{what} {run.run_id} failed: {run.error}") from exc
            raise


def _stop_point(run_id: str, state: RunState) -> None:
    """With LAKEGC_TEST_STOP_AFTER=<state>, say so on stderr and stop (SIGSTOP) right after the run
    entered <state>: a crash test then kills the process exactly there, even between two steps
    that no phase line separates (a mark recorded as finished, a sweep not yet started)."""
    if os.environ.get(STOP_AFTER) == str(state):
        print(f"lakegc: run {run_id} is {state}; stopped ({STOP_AFTER})", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
