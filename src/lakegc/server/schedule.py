"""`lakegc serve --gc-every DURATION`: the server also collects every repository on a schedule.

One thread runs the rounds: each repository in turn, as `lakegc gc run` would (its settings'
min-age and rules, recorded and listed as any run), on the Spark the server was given: the warm
engine with `--engine`, else a session of the server's own, started by the first round and kept
for the next ones. Either way Spark's start is paid once, not every hour. A run that fails or is
refused (another run holds the repository's lease) is said on stderr and the round goes on; the
next round tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from lakegc.failures import cause
from lakegc.repo.repository import Lake


@dataclass(frozen=True)
class Outcome:
    """One repository's run in a round, as said on stderr."""

    repository: str
    run_id: str | None
    state: str
    deleted: int = 0
    error: str | None = None

    def line(self) -> str:
        if self.error is not None:
            return f"lakegc serve: gc {self.repository}: {self.error}"
        return f"lakegc serve: gc {self.repository}: {self.state}, {self.deleted} deleted (run {self.run_id})"


def gc_round(lake: Lake, master: str | None, min_age: timedelta, conf: dict[str, str]) -> list[Outcome]:
    """Collect every repository once, in name order; a failure is one repository's outcome."""
    from lakegc.repogc.job import GcOptions, run_gc

    outcomes = []
    for info in sorted(lake.repositories(), key=lambda r: r.name):
        try:
            run = run_gc(lake, info.name, GcOptions(min_age=min_age, master=master, conf=conf))
            outcomes.append(Outcome(info.name, run.run_id, str(run.state), run.num_deleted))
        except Exception as exc:  # noqa: BLE001 - one repository's failure never stops the schedule
            outcomes.append(Outcome(info.name, None, "failed", error=cause(exc)))
    return outcomes


@dataclass
class Schedule:
    """The thread running the rounds; `stop()` lets the round under way finish (a run is never cut
    off by the server stopping: its lease and fence end as a run's do) within `wait` seconds."""

    thread: threading.Thread
    stopping: threading.Event

    def stop(self, wait: float = 300) -> None:
        self.stopping.set()
        self.thread.join(wait)


def start_schedule(
    lake: Lake,
    every: timedelta,
    master: str | None,
    min_age: timedelta,
    conf: dict[str, str],
    say: Callable[[str], None],
) -> Schedule:
    """Run `gc_round` now and then every `every` in a thread of its own."""
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            for outcome in gc_round(lake, master, min_age, conf):
                say(outcome.line())
            stopping.wait(every.total_seconds())

    thread = threading.Thread(target=loop, name="lakegc-gc-schedule", daemon=True)
    thread.start()
    return Schedule(thread, stopping)
