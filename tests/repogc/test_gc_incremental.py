"""Incremental GC runs (lakegc.repogc.incremental): a run that does not list the slices its
base run settled, and only looks up the objects there that may have lost a reference since, must
delete exactly what a clean run would.

(a) Pure functions: `settled`, `newly_settled`, `previous_run` and `plan`, at their exact boundaries.
(b) Scenarios on a fake clock: each reason to fall back to a clean run, which runs may be a base, a
    settled slice skipped and its suspects found, candidates revived by a sweep, a commit that expired
    and became active again (lakeFS issue #5741), young objects and late token writes that keep a
    slice open.
(c) The acceptance property: random histories with GC runs in between; at every step a clean dry run
    and the default run (incremental when allowed) on the same state at the same fake time must choose
    the same candidates, for the same reasons, equal to the reference model's (tests/gc_model.py), and
    the default run must delete exactly those.

Slices only settle an hour after they open, so time comes from a fake clock (the `clock` fixture):
every lakegc module's `utcnow` is replaced by one that starts a day ahead of real time and moves only
when a test moves it. Objects the tests write get their mtime set to the fake time of the write.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import support.gc_model as model
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st
from test_gc_model_hypothesis import RandomOps, namespace_files, run_output, tree_keys, uncommitted_references

import lakegc.repogc.lease  # noqa: F401  (loaded before the clock fixture patches every lakegc module)
import lakegc.timeutil
from lakegc.engine.runs import MetastoreRunLog, Run, RunState
from lakegc.errors import LakegcError
from lakegc.repo.repository import Lake, Repository
from lakegc.repo.slices import SLICE_MAX_AGE, SliceWindow
from lakegc.repogc.incremental import SETTLE_MARGIN, Plan, newly_settled, plan, previous_run, settled
from lakegc.repogc.job import GcOptions, plan_run, run_gc, sweep_run
from lakegc.repogc.outputs import BASE_OUTPUTS, SETTLED
from lakegc.repogc.refset import RefManifest, StateUnusable, TreeChange, part_of
from lakegc.repogc.runplan import resolve_policies
from lakegc.retention.rules import GcRules

HOUR = timedelta(hours=1)
MIN_AGE_0 = GcOptions(min_age=timedelta(0))


# ================================================================================================
# The fake clock
# ================================================================================================


class Clock:
    """A fake `utcnow`: whole seconds, a day ahead of real time (so files written for real are in its
    past), moving only when told."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.now = (_real_utcnow() + timedelta(days=1)).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        assert delta >= timedelta(0)
        self.now += delta


_real_utcnow = lakegc.timeutil.utcnow


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    patched = [
        name
        for name, module in list(sys.modules.items())
        if name.startswith("lakegc") and getattr(module, "utcnow", None) is _real_utcnow
    ]
    for name in patched:
        monkeypatch.setattr(sys.modules[name], "utcnow", fake)
    assert {"lakegc.repogc.job", "lakegc.engine.recorder", "lakegc.repogc.lease", "lakegc.repo.repository"} <= set(
        patched
    )
    return fake


# ================================================================================================
# (a) pure functions
# ================================================================================================

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
US = timedelta(microseconds=1)


def window(created: datetime, until: datetime | None, name: str = "s") -> SliceWindow:
    return SliceWindow(name, created, until)


@pytest.mark.parametrize("min_age", [timedelta(0), timedelta(minutes=30), timedelta(hours=24)])
def test_a_slice_settles_exactly_when_it_is_closed_and_its_last_write_is_old_enough(min_age):
    closes = T0 + SLICE_MAX_AGE + SETTLE_MARGIN  # no upload lands after the slice's hour (plus margin)
    assert settled(window(T0, T0), closes + 2 * min_age, min_age)
    assert not settled(window(T0, T0), closes - US, timedelta(0))

    # the last permitted write (a token's expiry) may take min-age to finish, and must then be older
    # than the run's cutoff (now - min-age): writable_until + min-age + margin <= now - min-age
    until = T0 + 5 * HOUR
    lands = until + min_age + SETTLE_MARGIN + min_age
    assert settled(window(T0, until), lands, min_age)
    assert not settled(window(T0, until), lands - US, min_age)
    # both conditions must hold: a late window does not make a young slice settled, nor the reverse
    young = T0 + 10 * HOUR
    assert not settled(window(young, T0), young + SLICE_MAX_AGE + SETTLE_MARGIN - US, min_age)
    assert settled(window(young, T0), young + SLICE_MAX_AGE + SETTLE_MARGIN, min_age) is (
        young + SLICE_MAX_AGE + SETTLE_MARGIN >= T0 + SETTLE_MARGIN + 2 * min_age
    )


def test_a_slice_with_an_unknown_window_never_settles():
    """Slices from schema v1 have no writable_until: they are listed by every run."""
    assert not settled(window(T0, None), T0 + timedelta(days=3650), timedelta(0))


def test_newly_settled_needs_a_complete_listing_a_known_window_and_a_settled_window():
    now = T0 + 3 * HOUR
    windows = {
        "old": window(T0, T0, "old"),
        "young-objects": window(T0, T0, "young-objects"),
        "open": window(now - HOUR, now - HOUR, "open"),
        "v1": window(T0, None, "v1"),
    }
    listed = ["old", "young-objects", "open", "v1", "unknown-to-the-metastore", ""]
    assert newly_settled(listed, windows, {"young-objects"}, now, timedelta(0)) == {"old"}
    assert newly_settled(["young-objects"], windows, set(), now, timedelta(0)) == {"young-objects"}
    assert newly_settled([], windows, set(), now, timedelta(0)) == set()  # only what this run listed
    # min-age counts twice: 3h after its last write, a slice settles with a min-age up to (3h - 5min) / 2
    longest = (3 * HOUR - SETTLE_MARGIN) / 2
    assert newly_settled(["old"], windows, set(), now, longest) == {"old"}
    assert newly_settled(["old"], windows, set(), now, longest + US) == set()


def summary(
    run_id: str,
    state: RunState = RunState.SWEPT,
    *,
    dry_run: bool = False,
    mark_only: bool = False,
    policy: str = "P",
    min_age_seconds: float = 0.0,
) -> Run:
    return Run(
        run_id,
        "repository",
        "repo",
        state,
        dry_run,
        T0.isoformat(),
        T0.isoformat(),
        min_age_seconds,
        mark_only=mark_only,
        details={"policy": policy},
    )


def test_previous_run_is_the_newest_non_dry_run_that_swept_failed_or_stopped_sweeping():
    runs = [
        summary("1", RunState.MARKED, mark_only=True),  # awaiting its deferred sweep
        summary("2", dry_run=True, state=RunState.MARKED),
        summary("3", RunState.FAILED, dry_run=True),  # a failed dry run deleted nothing either
        summary("4", RunState.MARKING),
        summary("5", RunState.SWEEPING),  # a sweep that stopped (budget, crash, store errors)
        summary("6", RunState.SWEPT, mark_only=True),  # a mark-only run swept later: finished
        summary("7", RunState.FAILED),
        summary("8"),
    ]
    assert previous_run(runs).run_id == "5"
    assert previous_run(runs[5:]).run_id == "6"
    assert previous_run(runs[6:]).run_id == "7"
    assert previous_run(runs[:4]) is None
    assert previous_run([]) is None


def test_a_stopped_sweep_or_a_restore_since_the_base_makes_the_next_run_clean():
    """A base whose sweep stopped left candidates in slices it settled, and a restore puts objects
    back in such slices: an incremental run would never list them again."""
    stopped = summary("5", RunState.SWEEPING)
    chosen = plan([stopped], False, "P", 0.0, lambda run: [])
    assert (chosen.mode, chosen.reason) == ("clean", "previous run 5 stopped before its sweep finished")
    base = summary("6")
    restored = summary("4", RunState.SWEPT)
    restored.repo.restored = [{"at": (T0 + timedelta(hours=1)).isoformat(), "path": None, "num_restored": 3}]
    chosen = plan([base, restored], False, "P", 0.0, lambda run: [])
    assert (chosen.mode, chosen.reason) == ("clean", "objects of run 4 were restored since run 6")
    restored.repo.restored = [{"at": (T0 - timedelta(hours=1)).isoformat(), "path": None, "num_restored": 3}]
    assert plan([base, restored], False, "P", 0.0, lambda run: []).mode == "incremental"


def test_plan_gives_each_reason_in_order():
    missing: list[str] = []
    asked: list[str] = []

    def outputs_missing(run: Run) -> list[str]:
        asked.append(run.run_id)
        return missing

    ok = [summary("b", policy="P", min_age_seconds=60.0), summary("a")]
    assert plan(ok, True, "P", 60.0, outputs_missing) == Plan("clean", "--clean given")
    assert plan([], False, "P", 60.0, outputs_missing) == Plan("clean", "no previous run to build on")
    assert plan([summary("d", dry_run=True)], False, "P", 60.0, outputs_missing).reason == "no previous run to build on"
    assert asked == []  # nothing to check on disk yet
    chosen = plan(ok, False, "P", 60.0, outputs_missing)
    assert chosen == Plan("incremental", "builds on run b", ok[0]) and chosen.settled == frozenset()
    assert asked == ["b"]

    failed = [summary("f", RunState.FAILED, policy="other", min_age_seconds=1.0), *ok]
    assert plan(failed, False, "P", 60.0, outputs_missing) == Plan("clean", "previous run f failed")
    assert plan(ok, False, "Q", 1.0, outputs_missing) == Plan("clean", "retention rules changed since run b")
    assert plan(ok, False, "P", 61.0, outputs_missing) == Plan("clean", "min-age changed since run b")
    assert plan(ok, False, "P", 0.0, outputs_missing).reason == "min-age changed since run b"
    missing[:] = ["summary.json", SETTLED]
    assert plan(ok, False, "P", 60.0, outputs_missing) == Plan(
        "clean", f"run b's report is incomplete (missing summary.json, {SETTLED})"
    )
    assert plan(ok, True, "Q", 0.0, outputs_missing).reason == "--clean given"  # --clean wins over all


# ================================================================================================
# helpers for runs on the fake clock
# ================================================================================================


@dataclass
class Lakeside:
    """One repository on the fake clock, with helpers to write objects at fake times and run GC."""

    lake: Lake
    repo: Repository
    ns: Path
    clock: Clock
    spark: Any

    @classmethod
    def create(cls, root: Path, clock: Clock, spark: Any) -> Lakeside:
        lake = Lake(f"sqlite:///{root / 'lakegc.db'}")
        lake.create_repository("repo", str(root / "ns"))
        return cls(lake, lake.repository("repo"), root / "ns", clock, spark)

    def touch(self, key: str, when: datetime | None = None) -> str:
        """Give an object the mtime of its (fake) write."""
        ns = int((when or self.clock.now).timestamp()) * 10**9
        os.utime(self.ns / key, ns=(ns, ns))
        return key

    def upload(self, branch: str, path: str, data: bytes = b"x") -> str:
        return self.touch(self.repo.upload(branch, path, data).address)

    def run(self, options: GcOptions = MIN_AGE_0, **changes: Any) -> Run:
        return run_gc(self.lake, "repo", replace(options, **changes), spark=self.spark)

    def candidates(self, run: Run) -> dict[str, str]:
        return {row["address"]: row["reason"] for row in run_output(self.ns, run.run_id, "candidates")}

    def deleted(self, run: Run) -> set[str]:
        rows = run_output(self.ns, run.run_id, "deleted")
        assert all(row["deleted"] and row["error"] is None for row in rows), rows
        return {row["address"] for row in rows}

    def settled_by(self, run: Run) -> set[str]:
        return set(json.loads((self.ns / "_lakegc" / "gc" / run.run_id / SETTLED).read_text()))

    def slice_of(self, key: str) -> str:
        return key.split("/")[1]

    def exists(self, key: str) -> bool:
        return (self.ns / key).is_file()

    def run_compared(self, options: GcOptions = MIN_AGE_0) -> Run:
        """A clean dry run, then the default run on the same state at the same fake time: both choose
        the same candidates for the same reasons."""
        clean = self.run(options, clean=True, dry_run=True)
        run = self.run(options)
        assert clean.started_at == run.started_at and clean.mode == "clean"
        assert self.candidates(run) == self.candidates(clean)
        return run


@pytest.fixture
def lakeside(tmp_path: Path, clock: Clock, spark) -> Lakeside:
    return Lakeside.create(tmp_path, clock, spark)


def mode(run: Run) -> tuple[str, str, str | None]:
    return run.mode, run.repo.mode_reason, run.repo.base_run_id


# ================================================================================================
# (b) scenarios
# ================================================================================================


def test_each_reason_to_run_clean_and_which_runs_may_be_a_base(lakeside: Lakeside, clock: Clock):
    ls = lakeside
    store = MetastoreRunLog(ls.lake.metastore, "repo")
    ls.upload("main", "a")
    ls.repo.commit("main", "c1")

    r1 = ls.run()
    assert mode(r1) == ("clean", "no previous run to build on", None)
    assert (r1.repo.num_slices_skipped, r1.repo.num_rechecked) == (0, 0)
    clock.advance(HOUR)
    r2 = ls.run(clean=True)
    assert mode(r2) == ("clean", "--clean given", None)

    # dry runs may be incremental but are never a base; nor is a mark-only run awaiting its sweep
    clock.advance(HOUR)
    d3 = ls.run(dry_run=True)
    assert mode(d3) == ("incremental", f"builds on run {r2.run_id}", r2.run_id)
    clock.advance(HOUR)
    m4 = ls.run(mark_only=True)
    assert m4.state == "marked" and mode(m4) == ("incremental", f"builds on run {r2.run_id}", r2.run_id)
    clock.advance(HOUR)
    r5 = ls.run()
    assert mode(r5) == ("incremental", f"builds on run {r2.run_id}", r2.run_id)

    # the policy changed (rules stored); then the min-age
    ls.repo.set_gc_rules(GcRules.model_validate({"default_retention_days": 7, "branches": []}))
    clock.advance(HOUR)
    r6 = ls.run()
    assert mode(r6) == ("clean", f"retention rules changed since run {r5.run_id}", None)
    options = GcOptions(min_age=timedelta(hours=2))
    clock.advance(HOUR)
    r7 = ls.run(options)
    assert mode(r7) == ("clean", f"min-age changed since run {r6.run_id}", None)
    # cutoffs given for a run replace the stored rules: another policy
    with_cutoffs = replace(options, default_cutoff="7d")
    cutoffs_policy = resolve_policies(ls.repo.gc_source(), (), "7d", clock.now)
    assert (
        plan_run(store, ls.repo.gc_source(), with_cutoffs, cutoffs_policy).reason
        == f"retention rules changed since run {r7.run_id}"
    )

    # any output an incremental run reads, missing from the base run's folder
    base_dir = ls.ns / "_lakegc" / "gc" / r7.run_id
    policy = resolve_policies(ls.repo.gc_source(), (), None, clock.now)
    chosen = plan_run(store, ls.repo.gc_source(), options, policy)
    assert (chosen.mode, chosen.base.run_id, chosen.settled) == ("incremental", r7.run_id, frozenset(ls.settled_by(r7)))
    for name in BASE_OUTPUTS:
        aside = ls.ns.parent / "aside"
        (base_dir / name).rename(aside)
        chosen = plan_run(store, ls.repo.gc_source(), options, policy)
        assert (chosen.mode, chosen.reason, chosen.base) == (
            "clean",
            f"run {r7.run_id}'s report is incomplete (missing {name})",
            None,
        )
        aside.rename(base_dir / name)
    (base_dir / "active_commits.json").unlink()
    clock.advance(HOUR)
    r8 = ls.run(options)
    assert mode(r8) == ("clean", f"run {r7.run_id}'s report is incomplete (missing active_commits.json)", None)

    # a failed run: committed trees cannot be read while it runs (a new commit's tree must be read)
    ls.upload("main", "b")
    ls.repo.commit("main", "c2")
    metaranges, aside = ls.ns / "_lakegc" / "metaranges", ls.ns.parent / "metaranges-aside"
    metaranges.rename(aside)
    clock.advance(HOUR)
    with pytest.raises(LakegcError):
        ls.run(options)
    aside.rename(metaranges)
    [failed] = [r for r in store.list() if r.state == "failed"]
    assert failed.repo.base_run_id == r8.run_id  # it was incremental: failing is what makes the next one clean
    clock.advance(HOUR)
    r10 = ls.run(options)
    assert mode(r10) == ("clean", f"previous run {failed.run_id} failed", None)
    assert [r.run_id for r in store.list() if r.state == "marked" and not r.dry_run] == [m4.run_id]  # still waiting


def test_a_settled_slice_is_not_listed_and_what_lost_its_reference_there_is_deleted(lakeside: Lakeside, clock: Clock):
    """An object staged at run 1 in a slice that run 1 settled, reset before run 2 two hours later:
    run 2 does not list the slice, looks the object up, and deletes it."""
    ls = lakeside
    kept = ls.upload("main", "kept")
    ls.repo.commit("main", "c1")
    staged = ls.upload("main", "staged")
    old = ls.slice_of(staged)
    clock.advance(2 * HOUR)

    r1 = ls.run()
    assert ls.settled_by(r1) == {old} and r1.repo.num_slices_listed == 1 and r1.num_candidates == 0
    ls.repo.reset_branch("main")
    fresh = ls.upload("main", "fresh")  # a new slice, listed by run 2
    assert ls.slice_of(fresh) != old
    clock.advance(2 * HOUR)

    r2 = ls.run()
    assert mode(r2) == ("incremental", f"builds on run {r1.run_id}", r1.run_id)
    assert (r2.repo.num_slices_skipped, r2.repo.num_slices_listed, r2.repo.num_rechecked) == (1, 1, 1)
    assert r2.num_listed == 1  # only `fresh`: the settled slice was not listed
    assert ls.candidates(r2) == {staged: "uncommitted"} and ls.deleted(r2) == {staged}
    assert not ls.exists(staged) and ls.exists(kept) and ls.exists(fresh)
    assert ls.settled_by(r2) == {old, ls.slice_of(fresh)}  # settled stays settled; the new one joins


def test_a_commit_that_expired_and_became_active_again_keeps_its_objects(lakeside: Lakeside, clock: Clock):
    """lakeFS issue #5741: c1 expires at run 1 (count policy 1), but its object survives, staged on
    another branch by a shallow copy. Then that staging goes, and a branch made from c1 makes c1
    active again: the incremental run must keep the object."""
    ls = lakeside
    options = replace(MIN_AGE_0, default_cutoff="1")
    x = ls.upload("main", "a", b"x")
    c1 = ls.repo.commit("main", "c1")
    ls.upload("main", "a", b"y")
    ls.repo.commit("main", "c2")
    ls.repo.create_branch("dev", "main")
    ls.repo.copy(c1.id, "a", "dev", "copy-of-a")
    z = ls.upload("dev", "z")  # staged at run 1 and reset later: lost its reference for good
    clock.advance(2 * HOUR)

    r1 = ls.run(options)
    assert r1.repo.expired_commits == 2 and r1.num_candidates == 0  # c1 and the initial commit; x is staged
    assert ls.slice_of(x) in ls.settled_by(r1) and ls.slice_of(z) == ls.slice_of(x)

    ls.repo.reset_branch("dev")
    clock.advance(25 * HOUR)  # the copy record protects x for a day
    ls.repo.create_branch("revived", c1.id)
    r2 = ls.run_compared(options)
    assert r2.mode == "incremental" and r2.repo.num_slices_skipped == 1 and r2.repo.num_slices_listed == 0
    assert r2.repo.num_rechecked == 1  # z; x is referenced again and is not even looked up
    assert ls.candidates(r2) == {z: "uncommitted"} and ls.deleted(r2) == {z}
    assert ls.exists(x) and ls.repo.read("revived", "a") == b"x"

    ls.repo.delete_branch("revived")  # c1 expires again: now x is committed garbage
    clock.advance(HOUR)
    r3 = ls.run_compared(options)
    assert r3.mode == "incremental" and r3.repo.num_rechecked == 1
    assert ls.candidates(r3) == {x: "expired"} and ls.deleted(r3) == {x}


def test_candidates_a_sweep_revived_are_looked_up_by_the_next_run(lakeside: Lakeside, clock: Clock):
    """A mark-only run marks x (in expired commit c1); before its sweep, a branch from c1 revives x.
    When that branch goes, nothing else remembers x: only the base run's revived output does."""
    ls = lakeside
    options = replace(MIN_AGE_0, default_cutoff="1")
    x = ls.upload("main", "a", b"x")
    c1 = ls.repo.commit("main", "c1")
    ls.upload("main", "a", b"y")
    ls.repo.commit("main", "c2")
    clock.advance(2 * HOUR)

    m1 = ls.run(options, mark_only=True)
    assert ls.candidates(m1) == {x: "expired"} and ls.slice_of(x) in ls.settled_by(m1)
    ls.repo.create_branch("revived", c1.id)
    swept = sweep_run(ls.lake, "repo", m1.run_id, spark=ls.spark)
    assert (swept.state, swept.repo.num_revived, swept.num_deleted) == ("swept", 1, 0)
    assert [row["address"] for row in run_output(ls.ns, m1.run_id, "revived")] == [x]

    ls.repo.delete_branch("revived")
    clock.advance(HOUR)
    r2 = ls.run_compared(options)
    assert mode(r2) == ("incremental", f"builds on run {m1.run_id}", m1.run_id)
    assert (r2.repo.num_slices_skipped, r2.repo.num_rechecked) == (1, 1)
    assert ls.candidates(r2) == {x: "expired"} and ls.deleted(r2) == {x}


def test_a_slice_stays_open_while_an_object_may_still_land_in_it(lakeside: Lakeside, clock: Clock):
    """Run 1 sees three closed slices (more than an hour old), each with an old object, and settles
    none of them: in s1 a token handed out earlier may still be used; in s3 an upload started just
    before the slice closed may still be in flight (it may take min-age); in s2 an object is younger
    than min-age (whatever the window says). All three objects then land or age and are garbage:
    run 2 must list those slices to find them."""
    ls = lakeside
    options = replace(MIN_AGE_0, min_age=HOUR)
    start = clock.now
    early = ls.upload("main", "early")
    claims = ls.repo.get_physical_address("main", "late", ttl=5 * HOUR)  # may write until start + 5h
    s1 = ls.slice_of(early)
    assert ls.slice_of(claims.address) == s1
    ls.repo.commit("main", "early")
    clock.advance(HOUR)
    odd = ls.upload("main", "odd")
    s2 = ls.slice_of(odd)
    ls.repo.reset_branch("main")  # odd is abandoned
    clock.advance(HOUR)
    anchor = ls.upload("main", "anchor")
    s3 = ls.slice_of(anchor)
    ls.repo.commit("main", "anchor")
    clock.advance(timedelta(minutes=59))
    in_flight = f"data/{ls.repo._current_slice()}/in-flight"  # an upload starts in s3, just before it closes
    assert ls.slice_of(in_flight) == s3
    started = clock.now
    clock.advance(timedelta(minutes=21))
    ls.touch(odd, clock.now - timedelta(minutes=10))  # younger than min-age: it must not be taken for settled

    r1 = ls.run(options)  # start + 3h20: s1, s2, s3 are closed
    assert r1.repo.num_slices_listed == 3 and ls.settled_by(r1) == set() and ls.candidates(r1) == {}
    clock.advance(timedelta(minutes=20))
    ls.repo.storage.write(in_flight, b"slow")  # the upload finishes (within min-age), never staged
    ls.touch(in_flight, started)
    ls.repo.storage.write(claims.address, b"late")  # the token holder writes (token still live), never links
    ls.touch(claims.address)
    clock.advance(timedelta(hours=3, minutes=30))  # start + 7h10: the token expired; s1 settles now

    r2 = ls.run_compared(options)
    assert mode(r2) == ("incremental", f"builds on run {r1.run_id}", r1.run_id)
    assert (r2.repo.num_slices_skipped, r2.repo.num_slices_listed) == (0, 3)
    assert ls.candidates(r2) == {claims.address: "uncommitted", odd: "uncommitted", in_flight: "uncommitted"}
    assert ls.deleted(r2) == {claims.address, odd, in_flight}
    assert ls.exists(early) and ls.exists(anchor)
    assert ls.settled_by(r2) == {s1, s2, s3} and clock.now - start == timedelta(hours=7, minutes=10)


# ================================================================================================
# (c) acceptance: at every step, the incremental run chooses what a clean run chooses
# ================================================================================================

NAMES = ["main", "dev", "feat", "old"]
PATHS = ["a", "b", "d/e"]  # few: overwrites are common
MAX_OBJECTS = 30  # per history
MAX_COMMITS = 14
HOURS_AGO = [0, 2, 12, 22, 23, 26, 48]  # commit dates: 1-day retentions expire some of them as time goes on
TTLS = [timedelta(hours=-1), timedelta(minutes=30), HOUR, 2 * HOUR, timedelta(hours=24)]
TICKS = [timedelta(0), timedelta(minutes=20), HOUR, 2 * HOUR, 3 * HOUR]

# One policy and one min-age per history: changing either makes the next run clean.
POLICIES: dict[str, tuple[GcOptions, dict | None, model.Retention]] = {
    "count 2": (GcOptions(default_cutoff="2"), None, lambda _b: model.Count(2)),
    "count 1, main=3": (
        GcOptions(cutoffs=("main=3",), default_cutoff="1"),
        None,
        lambda b: model.Count(3) if b == "main" else model.Count(1),
    ),
    "1d, feat=2": (
        GcOptions(cutoffs=("feat=2",), default_cutoff="1d"),
        None,
        lambda b: model.Count(2) if b == "feat" else model.Days(1),
    ),
    "rules 1d, main 2d": (
        GcOptions(),
        {"default_retention_days": 1, "branches": [{"branch_id": "main", "retention_days": 2}]},
        None,
    ),
    "rules 0d": (GcOptions(), {"default_retention_days": 0, "branches": []}, None),
    "no rules": (GcOptions(), None, lambda _b: model.All()),
}


@dataclass
class World(Lakeside, RandomOps):
    """A repository changed at random on the fake clock, GC'd after each step, and what the test
    knows about it."""

    paths: ClassVar[list[str]] = PATHS
    options: GcOptions = MIN_AGE_0
    retention: model.Retention = lambda _b: model.All()
    commits: dict[str, model.Commit] = field(default_factory=dict)
    trees: dict[str, set[str]] = field(default_factory=dict)  # commit -> namespace keys (cached)
    pending: list[tuple[Any, bool]] = field(default_factory=list)  # tokens whose holder writes later
    writes: int = 0
    log: list[str] = field(default_factory=list)
    noted: int = 0
    settled_files: dict[str, set[str]] = field(default_factory=dict)  # slice -> its files once settled
    last_run: Run | None = None
    rules_changed: bool = False  # the policy changed since the last run (test_many_histories.py changes it)

    # -- changes ------------------------------------------------------------------------------
    def op_upload(self, b: int, p: int, branch: str | None = None) -> None:
        if self.writes >= MAX_OBJECTS:
            return
        branch, path = branch or self.branch(b), self.path(p)
        key = self.upload(branch, path, f"{branch}/{path}/{self.writes}".encode())
        self.writes += 1
        self.log.append(f"upload {branch}:{path} -> {key}")

    def commits_made(self) -> int:
        """Commits made so far (of this history: test_many_histories.py counts its own)."""
        return len(self.commits)

    def commit_choices(self) -> list[str]:
        """The commits a branch or tag may start from (maybe an expired one: it revives)."""
        return list(self.commits)

    def op_commit(self, b: int, p: int, hours_ago: int, as_staged: bool) -> None:
        if self.commits_made() >= MAX_COMMITS:
            return
        branch = self.branch(b)
        if not as_staged:
            self.op_upload(0, p, branch)
        commit = self.repo.commit(
            branch, f"commit {len(self.commits)}", date=self.clock.now - hours_ago * HOUR, allow_empty=True
        )
        self.record(commit)
        self.log.append(f"commit {branch} dated {hours_ago}h ago -> {commit.id[:8]}")

    def op_rm(self, b: int, p: int) -> None:
        branch = self.branch(b)
        paths = [e.path for e in self.repo.list(branch)]
        if paths:
            path = paths[p % len(paths)]
            self.repo.remove(branch, path)
            self.log.append(f"rm {branch}:{path}")

    def op_branch(self, n: int, c: int) -> None:
        name = self.prefix + NAMES[1:][n % (len(NAMES) - 1)]
        if name not in {b.name for b in self.repo.branches()}:
            choices = self.commit_choices()
            source = choices[c % len(choices)]
            self.repo.create_branch(name, source)
            self.log.append(f"branch {name} from {source[:8]}")

    def op_merge(self, s: int, d: int, hours_ago: int) -> None:
        source, dest = self.branch(s), self.branch(d)
        if source != dest and self.commits_made() < MAX_COMMITS:
            commit = self.repo.merge(
                source,
                dest,
                message=f"merge {len(self.commits)}",
                date=self.clock.now - hours_ago * HOUR,
                allow_empty=True,
            )
            self.record(commit)
            self.log.append(f"merge {source} into {dest} dated {hours_ago}h ago -> {commit.id[:8]}")

    def op_tag(self, c: int) -> None:
        choices = self.commit_choices()
        commit = choices[c % len(choices)]
        tag = self.repo.create_tag(f"{self.prefix}tag-{self.writes}-{len(self.log)}", commit)
        self.log.append(f"tag {tag.name} at {commit[:8]}")

    def op_revert(self, b: int, c: int) -> None:
        """A commit on a branch undoing what an earlier commit changed (maybe one of another
        branch's, or an expired one: its parent's entries come back)."""
        if self.commits_made() >= MAX_COMMITS:
            return
        branch, choices = self.branch(b), self.commit_choices()
        target = choices[c % len(choices)]
        commit = self.repo.revert(branch, target, date=self.clock.now)
        self.record(commit)
        self.log.append(f"revert {target[:8]} on {branch} -> {commit.id[:8]}")

    def op_untag(self, t: int) -> None:
        tags = sorted(tag.name for tag in self.repo.tags() if tag.name.startswith(self.prefix))
        if tags:
            self.repo.delete_tag(tags[t % len(tags)])
            self.log.append(f"untag {tags[t % len(tags)]}")

    def op_token(self, b: int, p: int, ttl: int, how: str) -> None:
        """A client writing straight to storage: it gets an address and a token, and writes the object
        now or later (any time before the token expires), then links it or not; or never writes."""
        if self.writes >= MAX_OBJECTS:
            return
        branch, path = self.branch(b), self.path(p)
        claims = self.repo.get_physical_address(branch, path, ttl=TTLS[ttl])
        self.writes += 1
        self.log.append(f"token {how} ttl {TTLS[ttl]} {branch}:{path} -> {claims.address}")
        if how in ("later", "later-link"):
            self.pending.append((claims, how == "later-link"))
        elif how != "never":
            self.write_token(claims, link=how == "link")

    def write_token(self, claims, link: bool) -> None:
        data = f"direct {claims.address}".encode()
        self.repo.storage.write(claims.address, data)
        self.touch(claims.address)
        if link:
            self.repo.link(
                claims.branch,
                claims.path,
                claims.address,
                len(data),
                hashlib.md5(data).hexdigest(),
                token=self.repo.sign(claims),
            )

    def op_late(self) -> None:
        """The oldest pending token holder writes now, if its token is still live."""
        if self.pending:
            claims, link = self.pending.pop(0)
            if self.clock.now < claims.expires_at:
                self.log.append(f"late write{' and link' if link else ''} {claims.address}")
                self.write_token(claims, link)
            else:
                self.log.append(f"token of {claims.address} expired unwritten")

    def op_stray(self, n: int, where: str) -> None:
        """An upload abandoned before it was staged (into the current slice), or a file in the root."""
        if self.writes >= MAX_OBJECTS:
            return
        name = f"{self.prefix}stray-{self.writes}" if where == "slice" else f"{self.prefix}stray-{n % 3}"
        key = f"data/{self.repo._current_slice()}/{name}" if where == "slice" else name
        self.repo.storage.write(key, b"stray")
        self.touch(key)
        self.writes += 1
        self.log.append(f"stray {key}")

    def op_tick(self, i: int) -> None:
        self.clock.advance(TICKS[i])
        self.log.append(f"clock +{TICKS[i]} -> {self.clock.now:%H:%M}")

    # -- what the model says ----------------------------------------------------------------
    def references(self) -> tuple[set[str], list, dict[str, datetime], dict[str, str], list[str]]:
        staged, copies, tokens = uncommitted_references(self)  # type: ignore[arg-type]
        branches = {b.name: b.head for b in self.repo.branches()}
        return staged, copies, tokens, branches, [tag.commit_id for tag in self.repo.tags()]

    def tree(self, commit_id: str) -> set[str]:
        if commit_id not in self.trees:
            self.trees[commit_id] = tree_keys(self, commit_id)  # type: ignore[arg-type]
        return self.trees[commit_id]

    def slice_files(self, name: str) -> set[str]:
        return {
            f"data/{name}/{p.relative_to(self.ns / 'data' / name).as_posix()}"
            for p in (self.ns / "data" / name).rglob("*")
            if p.is_file() and not p.name.startswith(".lakegc-tmp-")
        }

    def sweep(self, marked: Run) -> Run:
        """Sweep a mark-only run (test_many_histories.py sweeps in stops and continues)."""
        return sweep_run(self.lake, "repo", marked.run_id, spark=self.spark)

    # -- one GC step --------------------------------------------------------------------------
    def gc_step(self, between: list[tuple] | None, tally: Counter) -> None:
        note(
            "\n".join(self.log[self.noted :])
            + f"\n-- GC at {self.clock.now:%H:%M}"
            + (" (mark only)" if between is not None else "")
        )
        self.noted = len(self.log)
        for name, files in self.settled_files.items():  # nothing lands in a slice once it settled
            assert self.slice_files(name) <= files, f"an object landed in settled slice {name}"
        before = namespace_files(self.ns)
        staged, copies, tokens, branches, tags = self.references()
        dirs = set(self.repo.storage.list_dirs("data/"))

        clean = self.run(self.options, clean=True, dry_run=True)
        real = self.run(self.options, mark_only=between is not None)
        assert clean.started_at == real.started_at
        now, min_age = self.clock.now, self.options.min_age

        # modes, and what was listed
        assert mode(clean)[:2] == ("clean", "--clean given") and clean.repo.num_slices_listed == len(dirs)
        base = self.last_run
        if base is None:
            assert mode(real) == ("clean", "no previous run to build on", None)
            base_settled: set[str] = set()
        elif self.rules_changed:  # a policy changed since the base: the run starts over, and says why
            assert mode(real) == ("clean", f"retention rules changed since run {base.run_id}", None)
            base_settled = set()
        else:
            assert mode(real) == ("incremental", f"builds on run {base.run_id}", base.run_id)
            base_settled = self.settled_by(base)
        assert real.repo.num_slices_skipped == len(base_settled & dirs)
        assert real.repo.num_slices_listed == len(dirs) - real.repo.num_slices_skipped
        assert self.settled_by(real) >= base_settled

        # the candidates: the incremental run's = the clean run's = the model's
        active = model.active_set(self.commits, branches, self.retention, now, tags)
        trees = {c: self.tree(c) for c in self.commits}
        expected = model.expected_deletions(before, now, min_age, active, trees, staged, copies, tokens)
        in_expired = {key for c in set(self.commits) - active for key in trees[c]}
        candidates = self.candidates(real)
        assert candidates == self.candidates(clean)
        assert reference_set(self.ns, real.run_id) == reference_set(self.ns, clean.run_id)  # moved forward == rebuilt
        assert candidates == {key: "expired" if key in in_expired else "uncommitted" for key in expected}
        assert real.num_candidates == len(expected) and real.repo.active_commits == len(active)

        revived: set[str] = set()
        if between is not None:  # changes between the mark and its sweep may revive candidates
            assert real.state == "marked"
            for op in between:
                self.apply(op)
            note("\n".join(self.log[self.noted :]) + "\n-- sweep")
            self.noted = len(self.log)
            staged, copies, tokens, branches, tags = self.references()
            active_then = model.active_set(self.commits, branches, self.retention, now, tags)
            referenced = (
                {key for c in active_then for key in self.tree(c)}
                | staged
                | {a for a, made in copies if made > now - model.COPY_RECORD_WINDOW}
                | {a for a, expires in tokens.items() if expires > now}
            )
            revived = set(candidates) & referenced
            real = self.sweep(real)
            assert {row["address"] for row in run_output(self.ns, real.run_id, "revived")} == revived
        assert (real.state, real.repo.num_revived, real.num_failed) == ("swept", len(revived), 0)
        deleted = self.deleted(real)
        assert deleted == set(candidates) - revived and real.num_deleted == len(deleted)
        after = namespace_files(self.ns)
        assert set(before) - set(after) == deleted

        for name in self.settled_by(real) - set(self.settled_files):
            self.settled_files[name] = self.slice_files(name)
        self.last_run, self.rules_changed = real, False
        self.clock.advance(timedelta(seconds=1))  # the next run starts later (run ids sort by start)

        incremental = real.mode == "incremental"
        counts = {
            "incremental": incremental,
            "slices skipped": real.repo.num_slices_skipped > 0,
            "suspects rechecked": real.repo.num_rechecked > 0,
            "deleted by incremental": incremental and bool(deleted),
            "expired by incremental": incremental and "expired" in candidates.values(),
            "revived": bool(revived),
            "reference set carried": incremental and carried_files(self.ns, real.run_id) > 0,
        }
        for name, hit in counts.items():
            if hit:
                event(name)
                tally[name] += 1


def reference_set(ns: Path, run_id: str) -> tuple[list, list, list, list]:
    """A run's persisted reference set as sorted rows: (trees, active trees, ranges, addresses),
    whichever runs' files its manifest names."""
    doc = json.loads((ns / "_lakegc" / "gc" / run_id / "refs" / "manifest.json").read_text())

    def rows(keys: list[str]) -> list[tuple]:
        return sorted(tuple(row.values()) for key in keys for row in pq.read_table(ns / key).to_pylist())

    addresses: Counter = Counter()
    part_of: dict[str, str] = {}
    for name, keys in doc["parts"].items():  # a part's layers add up
        for address, n in rows(keys):
            assert part_of.setdefault(address, name) == name, f"{address} is in two parts' files"
            addresses[address] += n
    return doc["metaranges"], doc["active"], rows(doc["ranges"]), sorted(addresses.items())


def carried_files(ns: Path, run_id: str) -> int:
    """How many files of a run's reference set it carried forward from earlier runs unchanged."""
    doc = json.loads((ns / "_lakegc" / "gc" / run_id / "refs" / "manifest.json").read_text())
    own = f"_lakegc/gc/{run_id}/"
    return sum(not key.startswith(own) for keys in doc["parts"].values() for key in keys)


def check_history(spark, clock: Clock, policy: str, min_age_minutes: int, steps: list, tally: Counter) -> None:
    clock.reset()
    root = Path(tempfile.mkdtemp(prefix="lakegc-inc-"))
    try:
        options, rules, retention = POLICIES[policy]
        w = World.create(root, clock, spark)
        w.options = replace(options, min_age=timedelta(minutes=min_age_minutes))
        w.retention = retention or model.retention_from_rules(rules)
        if rules is not None:
            w.repo.set_gc_rules(GcRules.model_validate(rules))
        w.record(w.repo.resolve("main")[0])
        note(f"policy {policy}, min-age {min_age_minutes} min")
        for ops, hours, between in steps:
            for op in ops:
                w.apply(op)
            clock.advance(hours * HOUR)
            w.gc_step(between, tally)
        tally["histories"] += 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


idx = st.integers(0, 20)
ARGUMENTS = {
    "upload": st.tuples(idx, idx),  # branch, path
    "commit": st.tuples(idx, idx, st.sampled_from(HOURS_AGO), st.sampled_from([False, False, True])),
    "rm": st.tuples(idx, idx),
    "branch": st.tuples(idx, idx),  # name, source commit (any: an expired one revives)
    "merge": st.tuples(idx, idx, st.sampled_from(HOURS_AGO)),
    "reset": st.tuples(idx),
    "delete": st.tuples(idx),
    "copy": st.tuples(idx, idx, idx, idx),
    "tag": st.tuples(idx),
    "untag": st.tuples(idx),
    "revert": st.tuples(idx, idx),  # branch, the commit to undo
    "token": st.tuples(
        idx,
        idx,
        st.sampled_from([0, 1, 2, 3, 3, 4]),
        st.sampled_from(["link", "unlinked", "later", "later-link", "never"]),
    ),
    "late": st.tuples(),
    "stray": st.tuples(idx, st.sampled_from(["slice", "root"])),
    "tick": st.tuples(st.sampled_from(range(len(TICKS)))),
}
KINDS = (
    ["upload"] * 3
    + ["commit"] * 4
    + ["token"] * 2
    + ["late"] * 2
    + ["reset"] * 2
    + ["tick", "merge", "rm", "branch", "delete", "copy", "tag", "untag", "stray", "revert"]
)
operations = st.sampled_from(KINDS).flatmap(lambda kind: ARGUMENTS[kind].map(lambda args: (kind, *args)))
# between a mark and its sweep: mostly changes that may revive a candidate
revivals = st.sampled_from(["branch", "branch", "tag", "reset", "delete", "copy", "upload"]).flatmap(
    lambda kind: ARGUMENTS[kind].map(lambda args: (kind, *args))
)
# (changes, hours the clock then moves, and None for a run or the changes between a mark-only run and its
# sweep); a day now and then lets tokens, copy records and 1-day retentions expire
gc_steps = st.tuples(
    st.lists(operations, min_size=2, max_size=10),
    st.sampled_from([0, 1, 2, 3, 3, 25]),
    st.sampled_from([False, False, False, True]).flatmap(
        lambda mark_only: st.lists(revivals, max_size=3) if mark_only else st.none()
    ),
)
histories = dict(
    policy=st.sampled_from(["count 2", "count 1, main=3", *sorted(POLICIES)]),
    min_age_minutes=st.sampled_from([0, 0, 0, 30, 60]),
    steps=st.tuples(st.lists(operations, min_size=4, max_size=12), st.sampled_from([1, 2, 2, 3]), st.none()).flatmap(
        lambda first: st.lists(gc_steps, min_size=2, max_size=5).map(lambda rest: [first, *rest])
    ),
)

# A history that hits everything: a slice settled at run 1, skipped by runs 2-4; run 2 finds a reset
# draft and an expired object through its suspects; run 3 is swept after a branch revived one of its
# candidates, which run 4 then finds through run 3's revived output.
EVERYTHING = dict(
    policy="count 2",
    min_age_minutes=0,
    steps=[
        ([("upload", 0, 0), ("commit", 0, 0, 22, True), ("upload", 0, 1)], 2, None),
        (
            [("reset", 0), ("upload", 0, 0), ("commit", 0, 0, 12, True), ("upload", 0, 0), ("commit", 0, 0, 2, True)],
            0,
            None,
        ),
        ([("upload", 0, 0), ("commit", 0, 0, 0, True)], 2, [("branch", 0, 2)]),
        ([("delete", 0)], 1, None),
    ],
)
NOT_VACUOUS = {
    "incremental",
    "slices skipped",
    "suspects rechecked",
    "deleted by incremental",
    "expired by incremental",
    "revived",
    "reference set carried",
}


def check_many_histories(spark, clock: Clock, max_examples: int) -> Counter:
    tally: Counter = Counter()

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
    @given(**histories)
    @example(**EVERYTHING)
    def check(policy, min_age_minutes, steps):
        check_history(spark, clock, policy, min_age_minutes, steps, tally)

    check()
    assert set(tally) >= NOT_VACUOUS, tally
    return tally


@pytest.mark.slow  # 80 s of property runs: the second CI step keeps the first within its 12 minutes
def test_incremental_runs_delete_exactly_what_clean_runs_would(spark, clock):
    """Two random histories and the pinned one (the slow variant below runs 60)."""
    check_many_histories(spark, clock, max_examples=2)


@pytest.mark.soak
def test_incremental_runs_delete_exactly_what_clean_runs_would_many_histories(spark, clock):
    """The same property on 60 histories (a quarter of an hour), on demand: `./dev test -m soak`."""
    tally = check_many_histories(spark, clock, max_examples=60)
    assert tally["histories"] >= 50


# ================================================================================================
# (c) the reference set an incremental run moves forward, and the sweep's re-check by version
# ================================================================================================


def refs_doc(ls: Lakeside, run: Run) -> dict:
    return json.loads((ls.ns / "_lakegc" / "gc" / run.run_id / "refs" / "manifest.json").read_text())


def written_rows(ls: Lakeside, run: Run) -> int:
    """Address rows a run wrote itself (the rest of its set it carried forward)."""
    own = f"_lakegc/gc/{run.run_id}/"
    return sum(
        pq.read_metadata(ls.ns / key).num_rows
        for keys in refs_doc(ls, run)["parts"].values()
        for key in keys
        if key.startswith(own)
    )


def test_an_incremental_run_writes_only_what_a_change_moved(lakeside: Lakeside, clock: Clock):
    """Nothing changed: every file of the set is carried. One commit adding one object: the run
    writes a row per entry of the ranges that commit added (not the slice, not the tree), and the
    set, its layers summed, equals the one a clean run builds."""
    ls = lakeside
    for i in range(3000):
        ls.repo.upload("main", f"old/{i:05d}", b"o")
    c1 = ls.repo.commit("main", "c1")
    assert len(ls.repo.trees.ranges(c1.metarange_id)) > 1
    for path in ls.ns.rglob("*"):
        if path.is_file() and "_lakegc" not in path.parts:
            ls.touch(str(path.relative_to(ls.ns)))
    clock.advance(2 * HOUR)
    r1 = ls.run()
    assert written_rows(ls, r1) == 3000
    clock.advance(2 * HOUR)
    r2 = ls.run_compared()
    assert r2.mode == "incremental" and written_rows(ls, r2) == 0
    assert refs_doc(ls, r2)["parts"] == refs_doc(ls, r1)["parts"]

    ls.upload("main", "old/99999")  # sorts last: only the last range changes
    c2 = ls.repo.commit("main", "c2")
    added = set(ls.repo.trees.ranges(c2.metarange_id)) - set(ls.repo.trees.ranges(c1.metarange_id))
    clock.advance(2 * HOUR)
    r3 = ls.run_compared()
    assert r3.mode == "incremental" and written_rows(ls, r3) == sum(r.count for r in added) < 3000
    clean = ls.run(clean=True, dry_run=True)
    assert reference_set(ls.ns, r3.run_id) == reference_set(ls.ns, clean.run_id)


def test_a_reference_set_that_cannot_be_used_makes_the_run_clean_and_says_why(lakeside: Lakeside, clock: Clock):
    ls = lakeside
    ls.upload("main", "a")
    ls.repo.commit("main", "c1")
    store = MetastoreRunLog(ls.lake.metastore, "repo")
    policy = resolve_policies(ls.repo.gc_source(), (), None, clock.now)
    r1 = ls.run()
    prefix = f"run {r1.run_id}'s reference set cannot be used: "
    manifest = ls.ns / "_lakegc" / "gc" / r1.run_id / "refs" / "manifest.json"
    good = manifest.read_bytes()

    def reason() -> str:
        chosen = plan_run(store, ls.repo.gc_source(), MIN_AGE_0, policy)
        assert chosen.mode == "clean" and chosen.refs is None and chosen.settled == frozenset()
        return chosen.reason

    manifest.write_bytes(good[:-7])  # truncated, or rewritten in any way: not what the run recorded
    assert reason() == prefix + "its reference manifest is not the one its run recorded"
    manifest.unlink()
    assert reason() == f"run {r1.run_id}'s report is incomplete (missing refs/manifest.json)"
    manifest.write_bytes(good)
    doc = json.loads(good)
    [part] = [k for keys in doc["parts"].values() for k in keys]
    (ls.ns / part).rename(ls.ns.parent / "aside")
    assert reason() == prefix + f"1 file(s) of its reference set are missing (e.g. {part})"
    (ls.ns.parent / "aside").rename(ls.ns / part)
    assert plan_run(store, ls.repo.gc_source(), MIN_AGE_0, policy).mode == "incremental"


def test_a_manifest_naming_a_tree_the_repository_lacks_is_not_moved_forward():
    base = RefManifest(frozenset({"t1", "t2"}), frozenset({"t1"}), ())
    with pytest.raises(StateUnusable, match="it knew 1 tree.s. this repository no longer has .e.g. t2"):
        TreeChange.between(base, {"t1", "t3"}, {"t3"})
    assert TreeChange.between(base, {"t1", "t2", "t3"}, {"t2", "t3"}).weights == {"t3": 1, "t2": 1, "t1": -1}
    assert part_of("8204288042") == "d94957" and part_of("") == "s:" and part_of("x1") == "s:x1"


def test_an_address_has_one_part_in_python_in_arrow_and_in_spark(spark):
    """The driver (`part_of`), the tasks that look the base set up and fold it (`part_array`) and
    Spark's grouping (`part_column`) must agree, or an address's rows would be looked for in a part
    that does not hold them. A hostile folder of twenty digits is no slice of ours, nor a long."""
    import pyarrow as pa

    from lakegc.repogc.refset import part_array, part_column

    names = ["8204288042", "0", "x1", "", "99999999999999999999", "123456789012345678", "٣٣"]
    addresses = [f"data/{name}/object" if name else "root-object" for name in names]
    python = [part_of(name) for name in names]
    arrow = part_array(pa.array(addresses)).to_pylist()
    df = spark.createDataFrame([(a,) for a in addresses], "address string")
    in_spark = [row["part"] for row in df.select("address", part_column().alias("part")).collect()]
    assert python == arrow == in_spark
    assert python[4] == "s:99999999999999999999" and python[6] == "s:٣٣"


@pytest.mark.parametrize("tamper", ["corrupt", "forged"])
def test_a_changed_reference_set_file_fails_the_run_and_deletes_nothing(lakeside: Lakeside, clock: Clock, tamper):
    """The reference set decides what is referenced: a layer rewritten to say a live object is not
    (`forged`: valid Parquet, its count set to 0) or damaged (`corrupt`) must not be believed."""
    ls = lakeside
    clock.now = clock.now.replace(hour=1, minute=0, second=0)  # every write below falls on one day: one part
    live = ls.upload("main", "live")
    ls.repo.commit("main", "c1")
    clock.advance(2 * HOUR)
    r1 = ls.run()
    doc = json.loads((ls.ns / "_lakegc" / "gc" / r1.run_id / "refs" / "manifest.json").read_text())
    [part] = [k for keys in doc["parts"].values() for k in keys]
    if tamper == "corrupt":
        (ls.ns / part).write_bytes(b"not parquet")
    else:
        table = pq.read_table(ls.ns / part)
        assert table.to_pylist() == [{"address": live, "n": 1}]
        pq.write_table(table.set_column(1, "n", pa.array([0], pa.int64())), ls.ns / part)
    ls.upload("main", "newer")  # a new slice whose part is the forged one's day: the run must read that part
    ls.repo.commit("main", "c2")
    stray = ls.upload("main", "stray")
    ls.repo.reset_branch("main")
    clock.advance(2 * HOUR)
    with pytest.raises(LakegcError, match="was changed since its run wrote it"):
        ls.run()
    assert ls.exists(live) and ls.exists(stray)
    clock.advance(HOUR)
    r3 = ls.run()
    assert r3.mode == "clean" and r3.repo.mode_reason.endswith("failed") and not ls.exists(stray) and ls.exists(live)


def test_the_sweep_rechecks_only_what_was_staged_or_copied_after_its_mark(lakeside: Lakeside, clock: Clock):
    """Staged entries and copy records carry the repository's staging version: the sweep's
    re-check snapshot holds what came after the mark (and live tokens), not the whole staging,
    and still revives a candidate copied in between."""
    ls = lakeside
    options = replace(MIN_AGE_0, default_cutoff="1")
    ls.repo.create_branch("keep", "main")
    for i in range(5):
        ls.upload("keep", f"staged/{i}")  # staged all along: protected at the mark, not re-read by the sweep
    x = ls.upload("main", "a", b"x")
    c1 = ls.repo.commit("main", "c1")
    ls.upload("main", "a", b"y")
    ls.repo.commit("main", "c2")  # c1 expires (keep the newest 1): x is committed garbage
    ls.repo.create_branch("work", "main")
    gone = ls.upload("work", "gone")
    ls.repo.reset_branch("work")  # gone is uncommitted garbage
    clock.advance(2 * HOUR)
    marked = ls.run(options, mark_only=True)
    assert ls.candidates(marked) == {x: "expired", gone: "uncommitted"}

    ls.repo.copy(c1.id, "a", "work", "copy-of-a")  # a copy record and a staged entry: x revives
    swept = sweep_run(ls.lake, "repo", marked.run_id, spark=ls.spark)
    recheck = pq.read_table(ls.ns / "_lakegc" / "gc" / marked.run_id / "recheck" / "uncommitted.parquet")
    assert sorted(zip(*recheck.to_pydict().values())) == [(x, "copy"), (x, "staged")]  # not the five
    assert (swept.num_deleted, swept.repo.num_revived) == (1, 1)
    assert ls.exists(x) and not ls.exists(gone) and ls.repo.read("work", "copy-of-a") == b"x"
