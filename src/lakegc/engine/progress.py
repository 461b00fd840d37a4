"""A run's phases: told to whoever shows progress as they start, and timed into the run's record."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakegc.engine.runs import Run


class Phase(Protocol):
    """Called as each phase of a run starts: its name and a detail (what it is about to do)."""

    def __call__(self, name: str, detail: str = "") -> None: ...


def no_progress(name: str, detail: str = "") -> None:
    """A Phase that shows nothing (the Python API's default)."""


Jobs = Callable[[], "int | None"]  # Spark jobs started so far (`engine.tasks.jobs_started`), None: not counted


class PhaseTimer:
    """Calls the phase callback and records in the run how long each phase took and, given a
    `jobs` count, how many Spark jobs it started (each job costs a tenth of a second or more,
    whatever it holds: the count says where a run's fixed cost goes)."""

    def __init__(self, run: Run, phase: Phase, jobs: Jobs | None = None):
        self.run, self.phase, self.jobs = run, phase, jobs
        self.current: str | None = None
        self.started = time.monotonic()
        self.jobs_before: int | None = None

    def __call__(self, name: str, detail: str = "") -> None:
        self.stop()
        self.current, self.started = name, time.monotonic()
        self.jobs_before = self.jobs() if self.jobs else None
        self.phase(name, detail)

    def stop(self) -> None:
        if self.current is not None:
            self.run.phases[self.current] = round(time.monotonic() - self.started, 3)
            now = self.jobs() if self.jobs else None
            if now is not None and self.jobs_before is not None:
                self.run.phase_jobs[self.current] = now - self.jobs_before
                self.run.spark_jobs = sum(self.run.phase_jobs.values())
            self.current = None
