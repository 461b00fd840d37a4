"""Sweep: delete a marked run's candidates on the executors, in batches, after re-checking each one.

The re-check protects objects revived since the mark: referenced again by staging, a copy or a live
token, or by a commit that became active (a branch created from an old commit, a merge or revert
that brought an old entry back, retention made longer). Revived candidates are skipped and reported.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from lakegc.engine.arrowio import read_parquet, write_groups
from lakegc.engine.columns import CANDIDATES, DELETES, ddl
from lakegc.engine.delete import Budget, DeleteTally, Pacing, delete_recorded
from lakegc.errors import LakegcError
from lakegc.repo.gc_source import GcSource, StagingVersion
from lakegc.repogc.outputs import STAGING, output_keys, run_prefix
from lakegc.repogc.references import (
    RANGES_DDL,
    UNCOMMITTED_DDL,
    entry_counts,
    snapshot_uncommitted,
    tree_ranges,
    weighted_ranges,
)
from lakegc.repogc.refset import RefManifest, StateUnusable, load_manifest, read_refs
from lakegc.retention.active import active_commits
from lakegc.retention.rules import Policies
from lakegc.storage import Storage, read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SweepResult:
    """What a run's sweeps did so far: the delete figures (those of earlier sweeps of the run that
    stopped included, failures only this sweep's), how many candidates this sweep kept because
    something references them again since the mark, and how many a budget left for a later sweep."""

    deletes: DeleteTally
    revived: int
    stopped: int = 0


JUDGED = "to_delete.json"  # written once to_delete/ and revived/ are complete: what a continued sweep starts from


def sweep(
    spark: SparkSession,
    source: GcSource,
    run_id: str,
    policies: Policies,
    marked_active: Sequence[set[str]],
    now: datetime,
    fenced_active: Sequence[set[str]] = (),
    before_delete: Callable[[], float] = lambda: float("inf"),
    refs_sha256: str | None = None,
    budget: Budget = Budget(),
    quarantine: str | None = None,
) -> SweepResult:
    """Delete what the re-check leaves of a marked run's candidates. Runs behind the fence (`repo.fence`):
    `marked_active` and `fenced_active` are the commits active at the mark and when the fence went
    up, per path class (`Policies.classes`); those are protected like the ones active now.
    What will be deleted is written to `to_delete/` first, so a sweep killed halfway has recorded
    everything it may have deleted. Deletes go in rounds: `before_delete` (the lease check) gives
    each round its deadline, and no executor starts a delete after it (see `_delete_batch`).
    Each batch's outcome is written as it is done (`deleted/`): a sweep of a run that an earlier
    one left (stopped by a budget, killed, or with objects the store would not delete) goes on
    with what that one did not record as gone, re-checked again now. With `quarantine`, objects
    move into that folder instead of being deleted."""
    storage = source.storage
    prefix = run_prefix(run_id)
    attempt = f"{time.time_ns():x}"  # this sweep's own names: an earlier sweep's records stay as they are
    done = _recorded_done(spark, storage, run_id)
    judged_before = storage.exists(prefix + JUDGED)
    pending, to_delete_folder = _pending(spark, storage, run_id, attempt, judged_before)
    if done is not None:
        pending = pending.join(done.select("address"), "address", "left_anti")
    protected = _protected_now(
        spark,
        source,
        run_id,
        refs_sha256,
        f"{prefix}recheck/uncommitted.parquet",
        policies,
        marked_active,
        now,
        fenced_active,
    )
    folders = {"revived": f"{prefix}revived", "to_delete": to_delete_folder}
    judged = _revived_or_to_delete(pending, protected)
    written = write_groups(judged, storage, folders.__getitem__, "output")  # one pass, both
    revived = sum(part.rows for part in written.get("revived", []))
    if not judged_before:
        storage.write(prefix + JUDGED, json.dumps({"revived": revived}).encode())
    remaining = read_parquet(spark, storage, [part.key for part in written.get("to_delete", [])], ddl(CANDIDATES))
    totals = _delete_rounds(spark, storage, remaining, prefix, attempt, before_delete, budget, quarantine)
    if done is not None:
        totals = _with_earlier_sweeps(totals, done)
    return SweepResult(totals, revived, totals.stopped)


def _pending(
    spark: SparkSession, storage: Storage, run_id: str, attempt: str, judged_before: bool
) -> tuple[DataFrame, str]:
    """What a sweep starts from, and the folder its list of what it deletes goes to: a sweep that
    goes on from a complete list (`judged_before`) reads `to_delete/` and writes its own list under
    `pending/`; the first sweep, or one killed before its list was complete (and so before any
    delete), drops any partial list and starts again from the candidates."""
    prefix = run_prefix(run_id)
    if judged_before:
        pending = read_parquet(spark, storage, output_keys(storage, run_id, "to_delete"), ddl(CANDIDATES))
        return pending, f"{prefix}pending/{attempt}"
    for output in ("to_delete", "revived"):
        storage.delete_many(output_keys(storage, run_id, output))
    pending = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), ddl(CANDIDATES))
    return pending, f"{prefix}to_delete"


def _revived_or_to_delete(pending: DataFrame, protected: DataFrame) -> DataFrame:
    """The pending candidates, each with its `output`: `revived` when something references it now
    (`protected`), else `to_delete`."""
    from pyspark.sql import functions as F

    return (
        pending.join(protected.withColumn("referenced", F.lit(True)), "address", "left")
        .withColumn("output", F.when(F.col("referenced"), F.lit("revived")).otherwise(F.lit("to_delete")))
        .drop("referenced")
    )


def _delete_rounds(
    spark: SparkSession,
    storage: Storage,
    remaining: DataFrame,
    prefix: str,
    attempt: str,
    before_delete: Callable[[], float],
    budget: Budget,
    quarantine: str | None,
) -> DeleteTally:
    """Delete `remaining` in rounds, each with its deadline from `before_delete` (the lease check)
    and recorded under `deleted/<attempt>-<round>/`; what a round deferred goes into the next one,
    within what is left of the budget's deletes."""
    totals = DeleteTally()
    left = budget.max_deletes
    for round_no in itertools.count():
        how = Pacing(deadline=before_delete(), quarantine=quarantine, rate=budget.max_rate)
        tally = delete_recorded(
            spark, storage, remaining, f"{prefix}deleted/{attempt}-{round_no}", f"{prefix}deferred/{attempt}", how, left
        )
        totals = totals + tally
        if left is not None:
            left -= tally.deleted + tally.failed
        if not tally.deferred_parts:
            break
        remaining = read_parquet(spark, storage, list(tally.deferred_parts), ddl(DELETES)).select(*CANDIDATES.names)
    return totals


def _with_earlier_sweeps(totals: DeleteTally, done: DataFrame) -> DeleteTally:
    """`totals` with what earlier sweeps of the run recorded as gone (`_recorded_done`) added to
    the deleted count and bytes."""
    from pyspark.sql import functions as F

    before = done.agg(F.count("address").alias("n"), F.sum("size").alias("bytes")).first()
    return replace(totals, deleted=totals.deleted + before["n"], bytes=totals.bytes + (before["bytes"] or 0))


def failures(storage: Storage, run_id: str, limit: int) -> list[tuple[str, str]]:
    """The first `limit` objects the run's newest sweep tried and could not delete, with the
    store's error: its records are `deleted/<sweep>-<round>/`, a later sweep's sorting after."""
    keys = output_keys(storage, run_id, "deleted")
    if not keys or limit <= 0:
        return []
    folder = lambda key: key.rsplit("/", 2)[-2]  # noqa: E731
    sweep_of = folder(max(keys, key=lambda k: _attempt_order(folder(k)))).split("-")[0]
    found: list[tuple[str, str]] = []
    for key in sorted(k for k in keys if folder(k).split("-")[0] == sweep_of):
        table = read_table(storage, key, ["address", "deleted", "error"])
        for address, deleted, error in zip(*table.to_pydict().values(), strict=True):
            if not deleted and len(found) < limit:
                found.append((address, error or ""))
    return sorted(found)


def _attempt_order(folder: str) -> tuple[int, int]:
    """`<sweep>-<round>` folders in the order they were written (`round-N` of older versions first)."""
    sweep_of, _, round_no = folder.partition("-")
    try:
        return int(sweep_of, 16), int(round_no)
    except ValueError:
        return -1, 0


def _recorded_done(spark: SparkSession, storage: Storage, run_id: str) -> DataFrame | None:
    """What earlier sweeps of the run recorded as gone (address, size), or None when none did."""
    keys = output_keys(storage, run_id, "deleted")
    if not keys:
        return None
    return (
        read_parquet(spark, storage, keys, ddl(DELETES))
        .where("deleted")
        .select("address", "size")
        .dropDuplicates(["address"])
    )


def _protected_now(
    spark: SparkSession,
    source: GcSource,
    run_id: str,
    refs_sha256: str | None,
    uncommitted_key: str,
    policies: Policies,
    marked_active: Sequence[set[str]],
    now: datetime,
    fenced_active: Sequence[set[str]],
) -> DataFrame:
    """Addresses referenced now (or when the fence went up) that the mark did not count as
    referenced: what was staged or copied since the mark and the live tokens, and the entries of
    ranges that no tree counted active at the mark held (read from the trees that became active
    since). A change, not the live set: what was uncommitted at the mark is not a candidate. With
    path rules, an entry counts when its commit became active under the rule of its path."""
    from pyspark.sql import functions as F

    storage = source.storage
    try:
        since: StagingVersion | None = StagingVersion.from_json(storage.read(run_prefix(run_id) + STAGING))
    except (LakegcError, OSError, ValueError, KeyError, TypeError):
        since = None  # a run marked before staging versions: everything uncommitted is re-checked
    graph = snapshot_uncommitted(source, uncommitted_key, now, since).graph
    classes = policies.classes()
    fenced_by_class = [*fenced_active, *([set()] * (len(classes) - len(fenced_active)))]
    newly_active = [
        ((active_commits(graph.commits, graph.branches, of, graph.tags) | fenced) & graph.metaranges.keys()) - marked
        for of, marked, fenced in zip(classes, marked_active, fenced_by_class, strict=True)
    ]
    uncommitted = read_parquet(spark, storage, [uncommitted_key], UNCOMMITTED_DDL).select("address")
    if len(newly_active) > 1:
        return (
            _newly_held_by_class(spark, source, graph.metaranges, newly_active, policies).union(uncommitted).distinct()
        )
    try:
        marked: RefManifest | None = load_manifest(storage, run_prefix(run_id), refs_sha256)
    except StateUnusable:
        marked = None  # a run marked before reference sets: every range of those trees is read
    trees = {graph.metaranges[c] for c in newly_active[0]} - (marked.active if marked else set())
    ranges = tree_ranges(spark, storage, {mid: 1 for mid in trees})
    if marked is not None and trees:
        counted = read_refs(spark, storage, marked, marked.ranges, RANGES_DDL).where(F.col("trees") > 0)
        ranges = ranges.join(counted.select("range_id"), "range_id", "left_anti")
    committed = entry_counts(
        spark, storage, ranges.withColumn("weight", F.lit(1)).withColumn("fresh", F.lit(0))
    ).select("address")
    return committed.union(uncommitted).distinct()


def _newly_held_by_class(
    spark: SparkSession,
    source: GcSource,
    metaranges: dict[str, str],
    newly_active: list[set[str]],
    policies: Policies,
) -> DataFrame:
    """With path rules: the addresses of entries whose commit became active under the rule of the
    entry's path (every range of those trees read: the mark's counts are per rule, not per range)."""
    from pyspark.sql import functions as F

    by_class = [{metaranges[c] for c in commits} for commits in newly_active]
    trees = set().union(*by_class)
    columns = [f"w{k}" for k in range(len(by_class))]
    ranges = weighted_ranges(
        spark, source.storage, {mid: tuple(int(mid in c) for c in by_class) for mid in trees}, columns
    )
    weighted = ranges.select(
        "range_id",
        "min_path",
        F.array(*(F.when(F.col(c) > 0, 1).otherwise(0) for c in columns)).alias("weights"),
        F.lit(0).alias("fresh"),
    )
    return entry_counts(spark, source.storage, weighted, policies.paths).where(F.col("n") > 0).select("address")
