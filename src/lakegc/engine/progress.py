"""A run's phases: told to whoever shows progress as they start, and timed into the run's record."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakegc.engine.runs import Run


class Phase(Protocol):
    """Called as each phase of a run starts: its name and a detail (what it is about to do)."""

    def __call__(self, name: str, detail: str = "") -> None: ...


def no_progress(name: str, detail: str = "") -> None:
    """A Phase that shows nothing (the Python API's default)."""


class PhaseTimer:
    """Calls the phase callback and records how long each phase took in the run."""

    def __init__(self, run: Run, phase: Phase):
        self.run, self.phase = run, phase
        self.current: str | None = None
        self.started = time.monotonic()

    def __call__(self, name: str, detail: str = "") -> None:
        self.stop()
        self.current, self.started = name, time.monotonic()
        self.phase(name, detail)

    def stop(self) -> None:
        if self.current is not None:
            self.run.phases[self.current] = round(time.monotonic() - self.started, 3)
            self.current = None
