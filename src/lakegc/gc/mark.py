"""Mark: compute a run's deletion candidates as one Spark job (DESIGN.md §6.3).

    candidates = listing(namespace, older than min-age)
               - addresses of every entry of the active commits   (each distinct range read once)
               - uncommitted references (staged entries, copy records, live tokens)

Each candidate carries its reason: `expired` when an expired commit still holds it (committed
garbage), `uncommitted` when nothing ever committed it (overwritten or reset staging, abandoned
uploads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from lakegc.gc.active import active_commits
from lakegc.gc.arrowio import read_parquet, write_parquet
from lakegc.gc.listing import list_namespace, slices
from lakegc.gc.references import Graph, referenced, snapshot_uncommitted, tree_addresses
from lakegc.gc.rules import PolicyOf
from lakegc.gc.runs import output_keys, run_prefix
from lakegc.repo.repository import Repository

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CANDIDATES_SCHEMA = "address string, size long, mtime timestamp, reason string"
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
    slices: list[str]


def mark(spark: "SparkSession", repo: Repository, run_id: str, policy_of: PolicyOf, cutoff: datetime,
         now: datetime, phase: Phase) -> MarkResult:
    namespace = repo.info.storage_namespace
    prefix = run_prefix(run_id)

    slice_names = slices(repo.storage)
    phase("listing the namespace", f"{len(slice_names)} slices + root")
    listing = list_namespace(spark, namespace, slice_names, cutoff).persist()
    num_listed = listing.count()  # listed first: the order below is what makes concurrent writes safe

    phase("snapshotting uncommitted references", f"{num_listed} objects older than min-age")
    uncommitted_key = f"{prefix}uncommitted/part-0.parquet"
    num_uncommitted, graph = snapshot_uncommitted(repo, uncommitted_key, now)

    phase("choosing active commits", f"{num_uncommitted} uncommitted references, {len(graph.commits)} commits")
    active = active_commits(graph.commits, graph.branches, policy_of, graph.tags)
    repo.storage.write(f"{prefix}active_commits.json", json.dumps(sorted(active)).encode())

    phase("reading committed trees", f"{len(active)} active, {len(graph.commits) - len(active)} expired commits")
    candidates = _candidates(spark, namespace, listing, graph, active, uncommitted_key)
    write_parquet(candidates, namespace, f"{prefix}candidates")
    listing.unpersist()

    phase("counting candidates")
    stats = candidate_stats(spark, namespace, output_keys(repo.storage, run_id, "candidates"))
    return MarkResult(num_listed, num_uncommitted, active, len(graph.commits) - len(active),
                      sum(c for c, _ in stats.values()), sum(b for _, b in stats.values()),
                      {reason: c for reason, (c, _) in stats.items()}, slice_names)


def _candidates(spark: "SparkSession", namespace: str, listing: "DataFrame", graph: Graph, active: set[str],
                uncommitted_key: str) -> "DataFrame":
    from pyspark.sql import functions as F

    protected, active_ranges = referenced(spark, namespace, (graph.metaranges[c] for c in active), uncommitted_key)
    unreferenced = listing.join(protected, "address", "left_anti")
    expired_mids = [graph.metaranges[c] for c in graph.commits if c not in active]
    if not expired_mids:  # nothing expired: every candidate is uncommitted garbage
        return unreferenced.select("address", "size", "mtime", F.lit("uncommitted").alias("reason"))
    expired, _ = tree_addresses(spark, namespace, expired_mids, exclude_ranges=active_ranges)
    flagged = expired.distinct().withColumn("in_expired_commit", F.lit(True))
    return (unreferenced.join(flagged, "address", "left")
            .select("address", "size", "mtime",
                    F.when(F.col("in_expired_commit"), F.lit("expired")).otherwise(F.lit("uncommitted")).alias("reason")))


def candidate_stats(spark: "SparkSession", namespace: str, keys: list[str]) -> dict[str, tuple[int, int]]:
    """reason -> (count, bytes), aggregated on the executors."""
    from pyspark.sql import functions as F

    rows = (read_parquet(spark, namespace, keys, CANDIDATES_SCHEMA).groupBy("reason")
            .agg(F.count("*").alias("n"), F.sum("size").alias("bytes")).collect())
    return {r["reason"]: (int(r["n"]), int(r["bytes"] or 0)) for r in rows}
