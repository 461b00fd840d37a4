"""Sweep: delete a marked run's candidates on the executors, in batches, after re-checking each one.

The re-check protects objects revived since the mark: referenced again by staging, a copy or a live
token, or by a commit that became active (a branch created from an old commit, a merge or revert
that brought an old entry back, retention made longer). Revived candidates are skipped and reported.
"""

from __future__ import annotations

import itertools
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
DEFERRED = "deferred: the lease deadline passed before it was tried"


def sweep(spark: "SparkSession", repo: Repository, run_id: str, policy_of: PolicyOf, marked_active: set[str],
          now: datetime, fenced_active: frozenset[str] | set[str] = frozenset(),
          before_delete: Callable[[], float] = lambda: float("inf")) -> tuple[int, int, int, int]:
    """Returns (deleted, bytes deleted, failed, revived). Runs behind the fence (`gc.fence`):
    `fenced_active` are the commits active when it went up, protected like those active now.
    What will be deleted is written to `to_delete/` first, so a sweep killed halfway has recorded
    everything it may have deleted. Deletes go in rounds: `before_delete` (the lease check) gives
    each round its deadline, and no executor starts a delete after it (see `_delete_batch`)."""
    from pyspark.sql import functions as F

    storage = repo.storage
    prefix = run_prefix(run_id)
    candidates = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), CANDIDATES_SCHEMA)
    protected = _protected_now(spark, repo, f"{prefix}recheck/uncommitted.parquet", policy_of, marked_active, now,
                               fenced_active)
    revived = candidates.join(protected, "address", "left_semi")
    revived_parts = write_parquet(revived, storage, f"{prefix}revived")
    write_parquet(candidates.join(protected, "address", "left_anti"), storage, f"{prefix}to_delete")
    remaining = read_parquet(spark, storage, output_keys(storage, run_id, "to_delete"), CANDIDATES_SCHEMA)
    for round_no in itertools.count():
        deadline = before_delete()
        parts = write_parquet(delete_objects(spark, storage, remaining, deadline), storage,
                              f"{prefix}deleted/round-{round_no}")
        remaining = (read_parquet(spark, storage, [key for key, _ in parts], RESULT_DDL)
                     .where(F.col("error").startswith(DEFERRED)).select("address", "size", "mtime", "reason"))
        if remaining.isEmpty():
            break
    return (*deletion_stats(spark, storage, output_keys(storage, run_id, "deleted")),
            sum(rows for _, rows in revived_parts))


def _protected_now(spark: "SparkSession", repo: Repository, uncommitted_key: str, policy_of: PolicyOf,
                   marked_active: set[str], now: datetime, fenced_active: frozenset[str] | set[str]) -> "DataFrame":
    """Addresses referenced now (or when the fence went up) that the mark did not count as referenced."""
    _, graph = snapshot_uncommitted(repo, uncommitted_key, now)
    active_now = active_commits(graph.commits, graph.branches, policy_of, graph.tags) | fenced_active
    newly_active = (active_now & graph.metaranges.keys()) - marked_active
    ranges = tree_ranges(spark, repo.storage, {graph.metaranges[c]: True for c in newly_active})
    return referenced(spark, repo.storage, ranges, uncommitted_key).distinct()


def delete_objects(spark: "SparkSession", storage: Storage, to_delete: "DataFrame",
                   deadline: float = float("inf")) -> "DataFrame":
    """Delete the objects of `to_delete` (rows of CANDIDATES_SCHEMA) on the executors: one RESULT_DDL
    row each. Each task deletes whole folders in key order: tasks unlinking in the same folders at
    once wait on each other's folder locks (50K local deletes spread at random took 12 s)."""
    from pyspark.sql import functions as F

    folder = F.regexp_extract("address", r"^(.*)/", 1)
    return (to_delete.repartition(spark.sparkContext.defaultParallelism * 2, folder).sortWithinPartitions("address")
            .mapInArrow(lambda batches: _delete(storage, batches, deadline), RESULT_DDL))


def _delete(storage: Storage, batches: Iterator[pa.RecordBatch], deadline: float) -> Iterator[pa.RecordBatch]:
    pending: list[dict] = []
    for batch in batches:
        pending.extend(batch.to_pylist())
        while len(pending) >= BATCH_SIZE:
            yield _delete_batch(storage, pending[:BATCH_SIZE], deadline)
            del pending[:BATCH_SIZE]
    if pending:
        yield _delete_batch(storage, pending, deadline)


def _delete_batch(storage: Storage, rows: list[dict], deadline: float = float("inf")) -> pa.RecordBatch:
    """One batched delete with retries and backoff for the keys that failed; a missing object
    counts as deleted. Metadata keys are refused whatever the candidates say. No request starts
    after `deadline` (the run's lease is only sure until then): keys not yet tried are deferred to
    the sweep's next round, which checks the lease again."""
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
        if time.time() >= deadline:
            errors.update((key, DEFERRED) for key in todo)
            todo = []
            break
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

    deferred = F.coalesce(F.col("error").startswith(DEFERRED), F.lit(False))  # tried again in a later round
    row = read_parquet(spark, storage, keys, RESULT_DDL).agg(
        F.sum(F.when(F.col("deleted"), 1).otherwise(0)).alias("n"),
        F.sum(F.when(F.col("deleted"), F.col("size")).otherwise(0)).alias("bytes"),
        F.sum(F.when(F.col("deleted") | deferred, 0).otherwise(1)).alias("failed")).first()
    return int(row["n"] or 0), int(row["bytes"] or 0), int(row["failed"] or 0)
