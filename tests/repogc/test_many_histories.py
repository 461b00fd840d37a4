"""Thousands of random histories through the real pipeline: many histories to a repository.

The acceptance property of test_gc_incremental.py (c) holds for every history. At every GC step, a
clean dry run and the default run (incremental when allowed), made on the same state at the same
fake time, choose the same candidates for the same reasons, and those equal the reference model's
(tests/support/gc_model.py). The default run deletes exactly those, so no live object goes. A GC
run costs a second or more whatever the lake holds, so running 5,000 histories one repository each
takes hours. Here, each repository holds `PER_BATCH` independent histories, and each GC run judges
them all at once. A history's branches, tags, paths and root files carry its own prefix (`h7-main`,
`h7-a`). They all start from the repository's empty root commit and never touch each other's refs
or objects. So the model of the union is the union of the models, and one run checks every history
in the batch.

What a batch draws, from the strategies of test_gc_incremental.py:
- one policy and one min-age (per-branch policies are written for every history's branches);
- GC steps, each with random changes to every history (uploads, commits, merges, resets, reverts,
  branches and branch deletes, tags, tokens, late writes, copies, stray files, clock ticks) and
  then a run;
- now and then new rules before a step's run (another policy: the run must say it starts clean);
- now and then a mark-only run with refs made between its mark and its sweep (branches and tags on
  old commits, copies, uploads: concurrent ref creation). That sweep is stopped by a `max_deletes`
  budget and continued by `gc sweep`: the stopped and continued sweep path.

Kills of a real GC process, at every point of a run, are test_gc_crash.py's.

`./dev test -m nightly` runs `LAKEGC_HISTORIES` histories (default 5,000) on one shared Spark
session and prints the count it ran. The slow CI step runs one batch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import support.gc_model as model
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from test_gc_incremental import (
    NOT_VACUOUS,
    POLICIES,
    Clock,
    World,
    clock,  # noqa: F401  (the fixture)
    gc_steps,
    operations,
)

from lakegc.engine.delete import Budget
from lakegc.engine.runs import Run, RunState
from lakegc.repogc.job import sweep_run
from lakegc.retention.rules import GcRules

PER_BATCH = 50


def prefixed_policy(name: str, prefixes: list[str]) -> tuple[Any, dict | None, model.Retention]:
    """A policy of test_gc_incremental.POLICIES written for prefixed branch names: a branch rule for
    `main` becomes one for each history's main, and a cutoff regex for `feat` matches every `hN-feat`."""
    options, rules, retention = POLICIES[name]
    options = replace(options, cutoffs=tuple(rf"h\d+-{c}" for c in options.cutoffs))
    if rules is not None:
        rules = {
            **rules,
            "branches": [
                {"branch_id": prefix + b["branch_id"], "retention_days": b["retention_days"]}
                for b in rules["branches"]
                for prefix in prefixes
            ],
        }
        return options, rules, model.retention_from_rules(rules)

    def unprefixed(branch: str | None) -> str | None:  # h7-main -> main; the repository's own main -> ""
        if branch is None:
            return None  # dangling commits
        return branch.split("-", 1)[1] if branch.startswith("h") else ""

    return options, None, lambda branch: retention(unprefixed(branch))


@dataclass
class Batch(World):
    """One repository holding many histories; the ops of test_gc_incremental.World act on the
    history `prefix` names."""

    writes_of: Counter = field(default_factory=Counter)
    own: dict[str, list[str]] = field(default_factory=dict)  # prefix -> its commits, in order
    stop_after: int | None = None  # a mark-only run's sweep stops after this many deletes, then continues
    stopped: int = 0

    def use_policy(self, name: str, prefixes: list[str], min_age: timedelta) -> None:
        """Rules or cutoffs for every history's branches, stored or given to each run."""
        options, rules, retention = prefixed_policy(name, prefixes)
        self.options, self.retention = replace(options, min_age=min_age), retention
        if rules is not None:
            self.repo.set_gc_rules(GcRules.model_validate(rules))
        else:
            self.repo.delete_gc_rules()

    def start(self, prefixes: list[str]) -> None:
        root = self.repo.resolve("main")[0]
        for prefix in prefixes:
            self.repo.create_branch(prefix + "main", root.id)
            self.own[prefix] = [root.id]

    def in_history(self, prefix: str, op: tuple) -> None:
        self.prefix, self.writes = prefix, self.writes_of[prefix]
        self.apply(op)
        self.writes_of[prefix] = self.writes

    def op_in(self, prefix: str, op: tuple) -> None:
        """An op of one history, as `gc_step` applies the changes between a mark and its sweep."""
        self.in_history(prefix, op)

    # -- what is this history's own ------------------------------------------------------------
    def record(self, commit) -> None:  # type: ignore[no-untyped-def]
        super().record(commit)
        self.own.setdefault(self.prefix, []).append(commit.id)

    def commits_made(self) -> int:
        return len(self.own[self.prefix]) - 1  # the root commit is everyone's

    def commit_choices(self) -> list[str]:
        return self.own[self.prefix]

    # -- a sweep that stops and goes on ---------------------------------------------------------
    def sweep(self, marked: Run) -> Run:
        if self.stop_after is None:
            return super().sweep(marked)
        first = sweep_run(self.lake, "repo", marked.run_id, spark=self.spark, budget=Budget(self.stop_after))
        if first.state is RunState.SWEEPING:
            assert first.num_stopped > 0 and first.num_deleted == self.stop_after, first
            self.stopped += 1
        return sweep_run(self.lake, "repo", marked.run_id, spark=self.spark)


# A batch: its policy and min-age, then GC steps of (changes to each history, hours, and for a
# mark-only run the changes to each history between its mark and its sweep).
def batch_steps(histories: int) -> st.SearchStrategy:
    one_step = st.tuples(
        st.lists(gc_steps, min_size=histories, max_size=histories),
        st.sampled_from([0, 1, 2, 25]),
        st.one_of(st.none(), st.none(), st.sampled_from(sorted(POLICIES))),  # now and then, new rules
    )
    return st.lists(one_step, min_size=2, max_size=4)


batches = dict(
    policy=st.sampled_from(sorted(POLICIES)),
    min_age_minutes=st.sampled_from([0, 0, 30, 60]),
    stop_after=st.sampled_from([None, 1, 3]),
    first=st.lists(st.lists(operations, min_size=4, max_size=12), min_size=PER_BATCH, max_size=PER_BATCH),
    steps=batch_steps(PER_BATCH),
)


def check_batch(
    spark, fake: Clock, policy: str, min_age_minutes: int, stop_after, first, steps, tally: Counter
) -> None:
    fake.reset()
    root = Path(tempfile.mkdtemp(prefix="lakegc-many-"))
    try:
        prefixes = [f"h{k}-" for k in range(len(first))]
        w = Batch.create(root, fake, spark)
        w.stop_after = stop_after
        w.use_policy(policy, prefixes, timedelta(minutes=min_age_minutes))
        w.record(w.repo.resolve("main")[0])
        w.start(prefixes)
        note(f"policy {policy}, min-age {min_age_minutes} min, sweeps stop after {stop_after}")
        for prefix, ops in zip(prefixes, first, strict=True):
            for op in ops:
                w.in_history(prefix, op)
        fake.advance(timedelta(hours=1))
        w.gc_step(None, tally)
        for per_history, hours, new_policy in steps:
            between = [b for _, _, b in per_history]
            mark_only = any(b is not None for b in between)
            for prefix, (ops, _, _) in zip(prefixes, per_history, strict=True):
                for op in ops:
                    w.in_history(prefix, op)
            fake.advance(hours * timedelta(hours=1))
            if new_policy is not None and new_policy != policy:
                note(f"-- rules changed: {policy} -> {new_policy}")
                w.use_policy(new_policy, prefixes, w.options.min_age)
                policy, w.rules_changed = new_policy, True
                tally["rule changes"] += 1
            changes = [("in", prefix, op) for prefix, ops in zip(prefixes, between, strict=True) for op in ops or ()]
            w.gc_step(changes if mark_only else None, tally)
        tally["histories"] += len(prefixes)
        tally["batches"] += 1
        tally["sweeps stopped and continued"] += w.stopped
        tally["reverts"] += sum(line.startswith("revert ") for line in w.log)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_histories(spark, fake: Clock, histories: int) -> Counter:
    tally: Counter = Counter()
    started = time.monotonic()

    @settings(
        max_examples=max(1, histories // PER_BATCH),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        print_blob=True,
    )
    @given(**batches)
    def check(policy, min_age_minutes, stop_after, first, steps):
        check_batch(spark, fake, policy, min_age_minutes, stop_after, first, steps, tally)
        done = tally["histories"]
        if done and done % (10 * PER_BATCH) == 0:
            print(f"[histories] {done} in {time.monotonic() - started:.0f} s", flush=True)

    check()
    print(
        f"\n[histories] {tally['histories']} histories in {tally['batches']} batches, "
        f"{time.monotonic() - started:.0f} s: " + ", ".join(f"{k}={v}" for k, v in sorted(tally.items()))
    )
    return tally


@pytest.mark.slow  # one batch of 50 histories: the second CI step
def test_fifty_histories_in_one_repository_delete_exactly_what_the_model_expects(spark, clock):  # noqa: F811
    tally = run_histories(spark, clock, PER_BATCH)
    assert tally["histories"] == PER_BATCH


@pytest.mark.nightly
def test_five_thousand_histories_delete_exactly_what_the_model_expects(spark, clock):  # noqa: F811
    wanted = int(os.environ.get("LAKEGC_HISTORIES", 5_000))
    tally = run_histories(spark, clock, wanted)
    assert tally["histories"] >= wanted
    assert set(tally) >= NOT_VACUOUS | {"rule changes", "reverts", "sweeps stopped and continued"}, tally
