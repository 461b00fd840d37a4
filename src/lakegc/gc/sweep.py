"""Sweep: delete a marked run's candidates on the executors, in batches, after re-checking each one.

The re-check protects objects revived since the mark: referenced again by staging, a copy or a live
token, or by a commit that became active (a branch created from an old commit, a merge or revert
that brought an old entry back, retention made longer). Revived candidates are skipped and reported.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow as pa

from lakegc.gc.active import active_commits
from lakegc.gc.arrowio import read_parquet, write_parquet
from lakegc.gc.mark import CANDIDATES_SCHEMA
from lakegc.gc.references import referenced, snapshot_uncommitted, tree_ranges
from lakegc.gc.rules import PolicyOf
from lakegc.gc.runs import output_keys, run_prefix
from lakegc.repo.repository import Repository
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BATCH_SIZE = 1_000
RETRIES = 5
RESULT_SCHEMA = pa.schema([("address", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC")),
                           ("reason", pa.string()), ("deleted", pa.bool_()), ("error", pa.string())])
RESULT_DDL = "address string, size long, mtime timestamp, reason string, deleted boolean, error string"
_PROTECTED_PREFIX = "_lakegc/"


def sweep(spark: "SparkSession", repo: Repository, run_id: str, policy_of: PolicyOf, marked_active: set[str],
          now: datetime, before_delete: Callable[[], None] = lambda: None) -> tuple[int, int, int, int]:
    """Returns (deleted, bytes deleted, failed, revived). What will be deleted is written to
    `to_delete/` first, so a sweep killed halfway has recorded everything it may have deleted;
    `before_delete` gets the last word (the run's lease check)."""
    storage = repo.storage
    prefix = run_prefix(run_id)
    candidates = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), CANDIDATES_SCHEMA)
    protected = _protected_now(spark, repo, f"{prefix}recheck/uncommitted.parquet", policy_of, marked_active, now)
    revived = candidates.join(protected, "address", "left_semi")
    revived_parts = write_parquet(revived, storage, f"{prefix}revived")
    write_parquet(candidates.join(protected, "address", "left_anti"), storage, f"{prefix}to_delete")
    before_delete()
    to_delete = read_parquet(spark, storage, output_keys(storage, run_id, "to_delete"), CANDIDATES_SCHEMA)
    write_parquet(delete_objects(spark, storage, to_delete), storage, f"{prefix}deleted")
    return (*deletion_stats(spark, storage, output_keys(storage, run_id, "deleted")),
            sum(rows for _, rows in revived_parts))


def _protected_now(spark: "SparkSession", repo: Repository, uncommitted_key: str, policy_of: PolicyOf,
                   marked_active: set[str], now: datetime) -> "DataFrame":
    """Addresses referenced now that the mark did not count as referenced."""
    _, graph = snapshot_uncommitted(repo, uncommitted_key, now)
    newly_active = active_commits(graph.commits, graph.branches, policy_of, graph.tags) - marked_active
    ranges = tree_ranges(spark, repo.storage, {graph.metaranges[c]: True for c in newly_active})
    return referenced(spark, repo.storage, ranges, uncommitted_key).distinct()


def delete_objects(spark: "SparkSession", storage: Storage, to_delete: "DataFrame") -> "DataFrame":
    """Delete the objects of `to_delete` (rows of CANDIDATES_SCHEMA) on the executors: one RESULT_DDL
    row each. Each task deletes whole folders in key order: tasks unlinking in the same folders at
    once wait on each other's folder locks (50K local deletes spread at random took 12 s)."""
    from pyspark.sql import functions as F

    folder = F.regexp_extract("address", r"^(.*)/", 1)
    return (to_delete.repartition(spark.sparkContext.defaultParallelism * 2, folder).sortWithinPartitions("address")
            .mapInArrow(lambda batches: _delete(storage, batches), RESULT_DDL))


def _delete(storage: Storage, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    pending: list[dict] = []
    for batch in batches:
        pending.extend(batch.to_pylist())
        while len(pending) >= BATCH_SIZE:
            yield _delete_batch(storage, pending[:BATCH_SIZE])
            del pending[:BATCH_SIZE]
    if pending:
        yield _delete_batch(storage, pending)


def _delete_batch(storage: Storage, rows: list[dict]) -> pa.RecordBatch:
    """One batched delete with retries and backoff for the keys that failed; a missing object
    counts as deleted. Metadata keys are refused whatever the candidates say."""
    errors: dict[str, str | None] = {}
    todo = []
    for row in rows:
        if row["address"].startswith(_PROTECTED_PREFIX):
            errors[row["address"]] = "refused: lakegc metadata is never deleted"
        else:
            todo.append(row["address"])
    for attempt in range(RETRIES):
        if not todo:
            break
        if attempt:
            time.sleep(min(0.05 * 2 ** attempt, 2.0))
        outcomes = storage.delete_many(todo)
        todo = []
        for outcome in outcomes:
            errors[outcome.key] = outcome.error
            if not outcome.ok:
                todo.append(outcome.key)
    return pa.RecordBatch.from_pylist(
        [{**row, "deleted": errors.get(row["address"]) is None, "error": errors.get(row["address"])} for row in rows],
        schema=RESULT_SCHEMA)


def deletion_stats(spark: "SparkSession", storage: Storage, keys: list[str]) -> tuple[int, int, int]:
    """(deleted, bytes deleted, failed)."""
    from pyspark.sql import functions as F

    row = read_parquet(spark, storage, keys, RESULT_DDL).agg(
        F.sum(F.when(F.col("deleted"), 1).otherwise(0)).alias("n"),
        F.sum(F.when(F.col("deleted"), F.col("size")).otherwise(0)).alias("bytes"),
        F.sum(F.when(F.col("deleted"), 0).otherwise(1)).alias("failed")).first()
    return int(row["n"] or 0), int(row["bytes"] or 0), int(row["failed"] or 0)
