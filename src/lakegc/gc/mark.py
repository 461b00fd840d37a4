"""Mark: compute a run's deletion candidates as one Spark job (DESIGN.md §6.3).

    candidates = listing(namespace, older than min-age)
               - addresses of every entry of the active commits   (each distinct range read once)
               - uncommitted references (staged entries, copy records, live tokens)

Each candidate carries its reason: `expired` when an expired commit still holds it (committed
garbage), `uncommitted` when nothing ever committed it (overwritten or reset staging, abandoned
uploads).

An incremental run (see `incremental`) does not list the slices its base run settled; it looks up,
one by one, the objects there that may have lost a reference since, and treats them as listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable

import sqlalchemy as sa

from lakegc.errors import LakegcError
from lakegc.gc.active import active_commits
from lakegc.gc.ages import candidate_ages, listing_tally
from lakegc.gc.arrowio import read_parquet, write_parquet
from lakegc.gc.incremental import Plan, SliceWindow, newly_settled
from lakegc.gc.listing import list_namespace, slices, stat_objects
from lakegc.gc.references import UNCOMMITTED_DDL, Graph, range_addresses, referenced, snapshot_uncommitted, tree_ranges
from lakegc.gc.rules import PolicyOf
from lakegc.gc.runs import output_keys, run_prefix
from lakegc.metastore import schema as t
from lakegc.repo.repository import Repository

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CANDIDATES_SCHEMA = "address string, size long, mtime timestamp, reason string"
SETTLED = "settled_slices.json"
UNCOMMITTED = "uncommitted/part-0.parquet"
BASE_OUTPUTS = ("summary.json", "active_commits.json", UNCOMMITTED, SETTLED)  # what an incremental run reads
SLICE_OF_KEY = r"^data/([^/]+)/."  # the slice a key lies in ('' when none: never a settled one)
Phase = Callable[..., None]  # phase(name, detail="")


@dataclass
class MarkResult:
    num_listed: int
    num_uncommitted: int
    active: set[str]
    expired: int
    num_candidates: int
    bytes_candidates: int
    by_reason: dict[str, int]
    slices_listed: int
    slices_skipped: int
    num_rechecked: int
    object_ages: list[dict]
    candidate_ages: list[dict]


def uncommitted_key(run_id: str) -> str:
    return f"{run_prefix(run_id)}{UNCOMMITTED}"


def mark(spark: "SparkSession", repo: Repository, run_id: str, plan: Plan, policy_of: PolicyOf, now: datetime,
         min_age: timedelta, phase: Phase) -> MarkResult:
    storage = repo.storage
    prefix = run_prefix(run_id)
    cutoff = now - min_age

    windows = slice_windows(repo)
    slice_names = slices(repo.storage)
    to_list = [name for name in slice_names if name not in plan.settled]
    phase("listing the namespace", f"{len(to_list)} of {len(slice_names)} slices + root")
    listing = list_namespace(spark, storage, to_list, cutoff).persist()
    num_listed, young, ages = listing_tally(listing, now)  # listed first: the order below keeps concurrent writes safe

    phase("snapshotting uncommitted references", f"{num_listed} objects older than min-age")
    num_uncommitted, graph = snapshot_uncommitted(repo, uncommitted_key(run_id), now)

    phase("choosing active commits", f"{num_uncommitted} uncommitted references, {len(graph.commits)} commits")
    active = active_commits(graph.commits, graph.branches, policy_of, graph.tags)
    repo.storage.write(f"{prefix}active_commits.json", json.dumps(sorted(active)).encode())
    settled_now = plan.settled | newly_settled(to_list, windows, young, now, min_age)
    repo.storage.write(f"{prefix}{SETTLED}", json.dumps(sorted(settled_now)).encode())

    phase("reading committed trees", f"{len(active)} active, {len(graph.commits) - len(active)} expired commits")
    trees: dict[str, bool] = {}
    for commit, mid in graph.metaranges.items():
        trees[mid] = trees.get(mid, False) or commit in active
    ranges = tree_ranges(spark, storage, trees).persist()  # a few rows per thousand objects, read twice
    active_ranges = ranges.where("active")
    protected = referenced(spark, storage, active_ranges, uncommitted_key(run_id))
    objects = listing.where(~listing.young)
    num_rechecked = 0
    cached: list["DataFrame"] = [listing, ranges]
    if plan.base is not None and plan.settled:  # nothing settled: every slice was listed, nothing to look up
        phase("looking up what lost a reference since the base run", f"run {plan.base.run_id}")
        protected = protected.persist()  # read once, used twice
        suspects = _suspects(spark, repo, plan, graph, active, protected, active_ranges, cutoff).persist()
        cached += [protected, suspects]
        num_rechecked = suspects.count()
        objects = objects.unionByName(suspects)
    expired = range_addresses(spark, storage, ranges.where(~ranges.active)) if not all(trees.values()) else None
    candidates = _candidates(objects.where(~objects.young).drop("young"), protected, expired)
    write_parquet(candidates, storage, f"{prefix}candidates")
    for df in cached:
        df.unpersist()

    phase("counting candidates")
    by_age = candidate_ages(read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), CANDIDATES_SCHEMA), now)
    by_reason: dict[str, int] = {}
    for bucket in by_age:
        by_reason[bucket["reason"]] = by_reason.get(bucket["reason"], 0) + bucket["count"]
    return MarkResult(num_listed, num_uncommitted, active, len(graph.commits) - len(active),
                      sum(b["count"] for b in by_age), sum(b["bytes"] for b in by_age), dict(sorted(by_reason.items())),
                      len(to_list), len(plan.settled & set(slice_names)), num_rechecked, ages, by_age)


def slice_windows(repo: Repository) -> dict[str, SliceWindow]:
    """The metastore's slices of the repository (one per hour of writes at most: a small table)."""
    with repo.ms.read() as conn:
        rows = conn.execute(sa.select(t.slices.c.name, t.slices.c.created_at, t.slices.c.writable_until)
                            .where(t.slices.c.repository == repo.name)).all()
    return {r.name: SliceWindow(r.name, r.created_at, r.writable_until) for r in rows}


def _suspects(spark: "SparkSession", repo: Repository, plan: Plan, graph: Graph, active: set[str],
              protected: "DataFrame", active_ranges: "DataFrame", cutoff: datetime) -> "DataFrame":
    """Objects of the settled slices that were referenced at the base run and may not be now
    (see `incremental`), looked up in storage: rows like the listing's."""
    from pyspark.sql import functions as F

    storage, base = repo.storage, plan.base.run_id  # type: ignore[union-attr]
    base_active = set(json.loads(storage.read(f"{run_prefix(base)}active_commits.json")))
    unknown = base_active - graph.metaranges.keys()
    if unknown:
        raise LakegcError(f"run {base} counted commits this repository no longer has ({len(unknown)}, e.g. "
                          f"{min(unknown)}): run `gc run --clean`")
    lost = tree_ranges(spark, storage, {graph.metaranges[c]: False for c in base_active - active})
    left = range_addresses(spark, storage, lost.join(active_ranges.select("range_id"), "range_id", "left_anti"))
    addresses = (left
                 .union(read_parquet(spark, storage, [uncommitted_key(base)], UNCOMMITTED_DDL).select("address"))
                 .union(read_parquet(spark, storage, output_keys(storage, base, "revived"),
                                     CANDIDATES_SCHEMA).select("address")))
    in_settled = (addresses.withColumn("slice", F.regexp_extract("address", SLICE_OF_KEY, 1))
                  .where(F.col("slice").isin(sorted(plan.settled))).distinct()
                  .join(protected, "address", "left_anti"))
    return stat_objects(spark, storage, in_settled, cutoff)


def _candidates(objects: "DataFrame", protected: "DataFrame", expired: "DataFrame | None") -> "DataFrame":
    """Listed objects nothing protects, each `expired` when only expired commits hold it (`expired`:
    their addresses, None when no commit expired) and `uncommitted` otherwise."""
    from pyspark.sql import functions as F

    unreferenced = objects.join(protected, "address", "left_anti")
    if expired is None:
        return unreferenced.select("address", "size", "mtime", F.lit("uncommitted").alias("reason"))
    flagged = expired.distinct().withColumn("in_expired_commit", F.lit(True))
    return (unreferenced.join(flagged, "address", "left")
            .select("address", "size", "mtime",
                    F.when(F.col("in_expired_commit"), F.lit("expired")).otherwise(F.lit("uncommitted")).alias("reason")))
