"""Sweep: delete a marked run's candidates on the executors, in batches, after re-checking each one.

The re-check protects objects revived since the mark: referenced again by staging, a copy or a live
token, or by a commit that became active (a branch created from an old commit, a merge or revert
that brought an old entry back, retention made longer). Revived candidates are skipped and reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from lakegc.engine.arrowio import read_parquet, write_groups
from lakegc.engine.columns import CANDIDATES, DELETES, ddl
from lakegc.engine.delete import DEFERRED, DeleteTally, delete_objects, record_deletes
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

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: the delete rounds' figures, and how many candidates it kept because
    something references them again since the mark."""

    deletes: DeleteTally
    revived: int


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
) -> SweepResult:
    """Delete what the re-check leaves of a marked run's candidates. Runs behind the fence (`repo.fence`):
    `marked_active` and `fenced_active` are the commits active at the mark and when the fence went
    up, per path class (`Policies.classes`); those are protected like the ones active now.
    What will be deleted is written to `to_delete/` first, so a sweep killed halfway has recorded
    everything it may have deleted. Deletes go in rounds: `before_delete` (the lease check) gives
    each round its deadline, and no executor starts a delete after it (see `_delete_batch`)."""
    from pyspark.sql import functions as F

    storage = source.storage
    prefix = run_prefix(run_id)
    candidates = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), ddl(CANDIDATES))
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
    judged = (
        candidates.join(protected.withColumn("referenced", F.lit(True)), "address", "left")
        .withColumn("output", F.when(F.col("referenced"), F.lit("revived")).otherwise(F.lit("to_delete")))
        .drop("referenced")
    )
    written = write_groups(judged, storage, lambda output: f"{prefix}{output}", "output")  # one pass, both
    remaining = read_parquet(spark, storage, [part.key for part in written.get("to_delete", [])], ddl(CANDIDATES))
    totals = DeleteTally()
    for round_no in itertools.count():
        results = delete_objects(spark, storage, remaining, deadline=before_delete())
        tally = record_deletes(results, storage, f"{prefix}deleted/round-{round_no}")
        totals = totals + tally
        if not tally.deferred_parts:
            break
        remaining = (
            read_parquet(spark, storage, tally.deferred_parts, ddl(DELETES))
            .where(F.col("error").startswith(DEFERRED))
            .select(*CANDIDATES.names)
        )
    return SweepResult(totals, sum(part.rows for part in written.get("revived", [])))


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
