"""Incremental runs (lakeFS's "optimized run"): what a run may skip because an
earlier run already looked at it, decided by pure functions.

Why skipping is safe. A slice is *settled* once no object can land in it any more and every object
that did was old enough to be listed. After a swept run B, every object still present in a slice B
had settled was referenced when B marked (or revived when B swept): everything else B listed there
was deleted. So at a later run such an object can only have become garbage by losing a reference it
had at B: it was in B's uncommitted snapshot, among B's revived candidates, or in the tree of a
commit that was active at B and is not now. Those *suspects* are looked up one by one (stat) in the
settled slices; every other slice, and the namespace root, is listed as in a clean run; the
candidates are then chosen exactly as a clean run chooses them. Commits that became active again
need nothing special: every run subtracts everything referenced now (lakeFS issue #5741 carried an
old "expired" verdict forward instead).

What incremental runs trust: objects land in a slice only within its write window (uploads while the
slice is current, token holders before the token expires, each finished within min-age, the same
assumption that makes min-age safe). An object written into an old slice by anything else is found
by the next clean run (`--clean`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lakegc.engine.runs import Run, RunState
from lakegc.repo.slices import SLICE_MAX_AGE, SliceWindow

if TYPE_CHECKING:
    from lakegc.repogc.refset import RefManifest
    from lakegc.repogc.trust import TrustRecord

# Room for clock differences between writers and GC, and for a write in flight when its slice closes.
SETTLE_MARGIN = timedelta(minutes=5)


@dataclass(frozen=True)
class Plan:
    mode: str  # "clean" | "incremental"
    reason: str  # why this mode, for the summary
    base: Run | None = None
    settled: frozenset[str] = frozenset()  # slices the base settled: not listed, only suspects stat'ed
    refs: RefManifest | None = None  # the base's reference set, moved forward instead of rebuilt
    trust: TrustRecord | None = None  # tree files an earlier run verified, trusted while unchanged


def settled(window: SliceWindow, now: datetime, min_age: timedelta) -> bool:
    """No object can land in the slice any more, and every one that did is older than this run's
    cutoff (now - min_age), even if its write took up to min-age to finish."""
    if window.writable_until is None:
        return False
    closed = window.created_at + SLICE_MAX_AGE + SETTLE_MARGIN <= now
    landed = window.writable_until + min_age + SETTLE_MARGIN <= now - min_age
    return closed and landed


def newly_settled(
    listed: list[str], windows: dict[str, SliceWindow], young: set[str], now: datetime, min_age: timedelta
) -> set[str]:
    """Slices this run listed completely (no object too young to list) that can never change again."""
    return {name for name in listed if name in windows and name not in young and settled(windows[name], now, min_age)}


def previous_run(runs: list[Run]) -> Run | None:
    """The newest run that finished deleting, failed, or stopped sweeping: dry runs delete nothing,
    and a run waiting for its deferred sweep has not started (a later sweep only ever deletes more
    garbage)."""
    for run in runs:  # newest first
        if not run.dry_run and run.state in (RunState.SWEPT, RunState.FAILED, RunState.SWEEPING):
            return run
    return None


def plan(
    runs: list[Run], clean: bool, policy: str, min_age_seconds: float, outputs_missing: Callable[[Run], list[str]]
) -> Plan:
    """Incremental from the previous run when it allows it; otherwise clean, saying why.

    `runs` are the repository's runs, newest first; `outputs_missing(run)` names the outputs of that
    run an incremental run needs but cannot find (empty when all are there)."""
    if clean:
        return Plan("clean", "--clean given")
    base = previous_run(runs)
    if base is None:
        return Plan("clean", "no previous run to build on")
    if base.state is RunState.FAILED:
        return Plan("clean", f"previous run {base.run_id} failed")
    if base.state is RunState.SWEEPING:  # its settled slices may still hold candidates it did not delete
        return Plan("clean", f"previous run {base.run_id} stopped before its sweep finished")
    restored = [r for r in runs if any(done["at"] > base.started_at for done in r.repo.restored)]
    if restored:  # objects back in slices the base settled: only a listing finds them again
        return Plan("clean", f"objects of run {restored[0].run_id} were restored since run {base.run_id}")
    if base.repo.policy != policy:
        return Plan("clean", f"retention rules changed since run {base.run_id}")
    if base.min_age_seconds != min_age_seconds:
        return Plan("clean", f"min-age changed since run {base.run_id}")
    missing = outputs_missing(base)
    if missing:
        return Plan("clean", f"run {base.run_id}'s report is incomplete (missing {', '.join(missing)})")
    return Plan("incremental", f"builds on run {base.run_id}", base)
