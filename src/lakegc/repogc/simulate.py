"""The retention curve: what `gc run --dry-run --clean --default-cutoff R` would collect, for many
R at once, in one pass over the lake (`gc simulate`).

Retentions are nested: a longer one keeps every commit a shorter one keeps (the walk's threshold
only moves back), so each commit has a *level*, the index of the shortest retention that keeps it
(`len(points)` when none does). A tree's level is the least of its commits', a range's the least of
its trees', an object's the least of the entries naming it. An object listed, older than the
min-age and referenced by nothing uncommitted is then a candidate at every retention shorter than
its level: one listing, one read of every range, one small aggregation by level give every point.
The commit decision is the runs' own (`active_commits` with the policy each point stands for), so
each point equals its dry run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakegc.engine.arrowio import read_parquet
from lakegc.engine.progress import Phase
from lakegc.errors import InvalidArgument
from lakegc.repo.gc_source import GcSource
from lakegc.repo.model import CommitGraph
from lakegc.repogc.inventory import namespace_listing
from lakegc.repogc.listing import slices
from lakegc.repogc.references import UNCOMMITTED_DDL, entry_counts, snapshot_uncommitted, weighted_ranges
from lakegc.retention.active import active_commits
from lakegc.retention.rules import KeepSince, policies_from_cutoffs
from lakegc.timeutil import parse_duration

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCRATCH_PREFIX = "_lakegc/simulate/"  # the uncommitted snapshot's file while a simulation runs


@dataclass(frozen=True)
class CurvePoint:
    """One retention of the curve and what a dry run with it would collect."""

    retention: str  # as given
    seconds: float
    num_candidates: int
    bytes: int


@dataclass(frozen=True)
class RetentionCurve:
    """What `gc simulate` found: one point per retention, in the order given."""

    repository: str
    now: datetime
    cutoff_time: datetime  # objects modified at or after this are never candidates (min-age)
    num_listed: int
    num_young: int
    points: tuple[CurvePoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "now": self.now.isoformat(),
            "cutoff_time": self.cutoff_time.isoformat(),
            "num_listed": self.num_listed,
            "num_young": self.num_young,
            "points": [
                {"retention": p.retention, "seconds": p.seconds, "num_candidates": p.num_candidates, "bytes": p.bytes}
                for p in self.points
            ],
        }


def parse_retentions(texts: list[str]) -> list[tuple[str, timedelta]]:
    """Durations (`1d`, `P7D`, ...), each as given and parsed; a clear error for anything else."""
    parsed = []
    for text in texts:
        value = text.strip()
        if not value:
            raise InvalidArgument("invalid --retention: an empty duration in the list")
        try:
            parsed.append((value, parse_duration(value)))
        except InvalidArgument:
            raise InvalidArgument(f"invalid retention {value!r}: a duration such as 1d, 36h or P7D") from None
    if not parsed:
        raise InvalidArgument("--retention needs at least one duration, e.g. 1d,7d,30d")
    return parsed


def _address_levels(spark: SparkSession, source: GcSource, tree_level: dict[str, int], count: int) -> DataFrame:
    """(address, level) of every namespace address the trees hold: the least level of the trees
    holding it, through their ranges (each read once)."""
    from pyspark.sql import functions as F

    columns = [f"at{k}" for k in range(count)]  # at<k>: the trees kept at the k-th shortest retention holding a range
    flags = {mid: tuple(int(k >= lv) for k in range(count)) for mid, lv in tree_level.items()}
    ranges = weighted_ranges(spark, source.storage, flags, columns)
    kept_at = [F.when(F.col(c) > 0, F.lit(k)) for k, c in enumerate(columns)]
    first_kept = F.coalesce(F.least(*kept_at) if count > 1 else kept_at[0], F.lit(count))
    weighted = ranges.select("range_id", "min_path", first_kept.alias("weight"), F.lit(0).alias("fresh"))
    return entry_counts(spark, source.storage, weighted, combine="min").select("address", F.col("n").alias("level"))


def retention_curve(
    spark: SparkSession,
    source: GcSource,
    retentions: list[tuple[str, timedelta]],
    now: datetime,
    min_age: timedelta,
    phase: Phase,
) -> RetentionCurve:
    """Every point of the curve from one listing and one read of the trees (see the module)."""
    from pyspark.sql import functions as F

    storage = source.storage
    cutoff = now - min_age
    order = sorted(range(len(retentions)), key=lambda i: retentions[i][1])  # level k: the k-th shortest
    names = slices(storage)
    phase("listing the namespace", f"{len(names)} slices + root")
    found = namespace_listing(spark, storage, names, source.slice_windows(), cutoff, None)
    listing = found.rows
    scratch = f"{SCRATCH_PREFIX}{secrets.token_hex(8)}/uncommitted.parquet"
    try:
        phase("snapshotting uncommitted references")
        graph = snapshot_uncommitted(source, scratch, now).graph
        phase("choosing active commits", f"{len(retentions)} retentions, {len(graph.commits)} commits")
        tree_level = _tree_levels(graph, retentions, order, now)
        phase("reading committed trees", f"{len(tree_level)} trees")
        levels = _address_levels(spark, source, tree_level, len(order))
        phase("counting candidates per retention")
        uncommitted = read_parquet(spark, storage, [scratch], UNCOMMITTED_DDL).select("address")
        objects = listing.where(~listing.young).join(uncommitted, "address", "left_anti")
        by_level = (
            objects.join(levels, "address", "left")
            .select(F.coalesce("level", F.lit(len(order))).alias("level"), "size")
            .groupBy("level")
            .agg(F.count("*").alias("n"), F.sum("size").alias("bytes"))
            .collect()  # one row per level: at most one more than the retentions given
        )
        tally = listing.groupBy("young").count().collect()
    finally:
        found.cached.unpersist()
        storage.delete_many([scratch])
    young = sum(row["count"] for row in tally if row["young"])
    return RetentionCurve(
        source.name, now, cutoff, sum(row["count"] for row in tally), young, _points(retentions, order, by_level)
    )


def _tree_levels(
    graph: CommitGraph, retentions: list[tuple[str, timedelta]], order: list[int], now: datetime
) -> dict[str, int]:
    """Metarange id -> its level (see the module): the least level of the commits holding the tree,
    each commit's the shortest retention whose own dry run would keep it (`active_commits`, as the
    runs decide), `len(order)` when none would."""
    level: dict[str, int] = {}
    for k, i in reversed(list(enumerate(order))):  # longest first: a shorter one overwrites the level
        policy = KeepSince(now - retentions[i][1], retentions[i][1])
        for commit in active_commits(graph.commits, graph.branches, policies_from_cutoffs([], policy), graph.tags):
            level[commit] = k
    tree_level: dict[str, int] = {}
    for commit, tree in graph.metaranges.items():
        tree_level[tree] = min(tree_level.get(tree, len(order)), level.get(commit, len(order)))
    return tree_level


def _points(retentions: list[tuple[str, timedelta]], order: list[int], by_level: list[Any]) -> tuple[CurvePoint, ...]:
    """One point per retention, in the order given, from the candidates tallied by level: an
    object is a candidate at the k-th shortest retention when it is not kept before level k + 1
    (none of the k + 1 shortest keeps it), so each point sums the levels above its own."""
    points: list[CurvePoint | None] = [None] * len(retentions)
    for k, i in enumerate(order):
        held_later = [row for row in by_level if row["level"] > k]
        text, value = retentions[i]
        points[i] = CurvePoint(
            text, value.total_seconds(), sum(r["n"] for r in held_later), sum(r["bytes"] or 0 for r in held_later)
        )
    return tuple(p for p in points if p is not None)
