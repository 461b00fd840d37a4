"""Sweep: delete a marked run's candidates on the executors, in batches, after re-checking each one.

The re-check protects objects revived since the mark: referenced again by staging, a copy or a live
token, or by a commit that became active (a branch created from an old commit, a merge or revert
that brought an old entry back, retention made longer). Revived candidates are skipped and reported.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.gc.active import active_commits
from lakegc.gc.arrowio import read_parquet, store_batches, write_groups
from lakegc.gc.mark import CANDIDATES_SCHEMA, STAGING
from lakegc.errors import LakegcError
from lakegc.gc.references import UNCOMMITTED_DDL, StagingVersion, entry_counts, snapshot_uncommitted, tree_ranges
from lakegc.gc.refset import RANGES_DDL, RefManifest, StateUnusable, load_manifest, read_refs
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
          before_delete: Callable[[], float] = lambda: float("inf"), refs_sha256: str | None = None
          ) -> tuple[int, int, int, int]:
    """Returns (deleted, bytes deleted, failed, revived). Runs behind the fence (`gc.fence`):
    `fenced_active` are the commits active when it went up, protected like those active now.
    What will be deleted is written to `to_delete/` first, so a sweep killed halfway has recorded
    everything it may have deleted. Deletes go in rounds: `before_delete` (the lease check) gives
    each round its deadline, and no executor starts a delete after it (see `_delete_batch`)."""
    from pyspark.sql import functions as F

    storage = repo.storage
    prefix = run_prefix(run_id)
    candidates = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), CANDIDATES_SCHEMA)
    protected = _protected_now(spark, repo, run_id, refs_sha256, f"{prefix}recheck/uncommitted.parquet", policy_of,
                               marked_active, now, fenced_active)
    judged = (candidates.join(protected.withColumn("referenced", F.lit(True)), "address", "left")
              .withColumn("output", F.when(F.col("referenced"), F.lit("revived")).otherwise(F.lit("to_delete")))
              .drop("referenced"))
    written = write_groups(judged, storage, lambda output: f"{prefix}{output}", "output")  # one pass, both
    remaining = read_parquet(spark, storage, [part.key for part in written.get("to_delete", [])], CANDIDATES_SCHEMA)
    totals = DeleteTally()
    for round_no in itertools.count():
        deadline = before_delete()
        tally = delete_recorded(spark, storage, remaining, deadline, f"{prefix}deleted/round-{round_no}")
        totals = totals + tally
        if not tally.deferred_parts:
            break
        remaining = (read_parquet(spark, storage, tally.deferred_parts, RESULT_DDL)
                     .where(F.col("error").startswith(DEFERRED)).select("address", "size", "mtime", "reason"))
    revived = sum(part.rows for part in written.get("revived", []))
    return totals.deleted, totals.bytes, totals.failed, revived


@dataclass(frozen=True)
class DeleteTally:
    """What one round of deletes did, summed from each task's part (no second read of the parts)."""

    deleted: int = 0
    bytes: int = 0
    failed: int = 0  # tried and not gone (deferred keys are not failed: a later round tries them)
    deferred_parts: tuple[str, ...] = ()  # parts holding keys deferred to the next round

    def __add__(self, other: "DeleteTally") -> "DeleteTally":
        return DeleteTally(self.deleted + other.deleted, self.bytes + other.bytes, self.failed + other.failed,
                           other.deferred_parts)


TALLY_DDL = "key string, deleted long, bytes long, failed long, deferred long"


def delete_recorded(spark: "SparkSession", storage: Storage, to_delete: "DataFrame", deadline: float,
                    folder: str) -> DeleteTally:
    """Delete (see `delete_objects`) and record each task's results as one Parquet part under
    `folder`, in one Spark job; each task also counts what its part holds."""
    def record(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key = f"{folder}/part-{uuid.uuid4().hex}.parquet"
        counts = {"deleted": 0, "bytes": 0, "failed": 0, "deferred": 0}

        def counted() -> Iterator[pa.RecordBatch]:
            for batch in _delete(storage, batches, deadline):
                for name, value in deletion_tally(batch).to_pylist()[0].items():
                    counts[name] += value
                yield batch

        if store_batches(storage, key, counted(), schema=None) is not None:
            yield pa.RecordBatch.from_pylist([{"key": key, **counts}])

    rows = _by_folder(spark, to_delete).mapInArrow(record, TALLY_DDL).collect()  # a row per task
    return DeleteTally(sum(r["deleted"] for r in rows), sum(r["bytes"] for r in rows), sum(r["failed"] for r in rows),
                       tuple(r["key"] for r in rows if r["deferred"]))


def _protected_now(spark: "SparkSession", repo: Repository, run_id: str, refs_sha256: str | None, uncommitted_key: str,
                   policy_of: PolicyOf, marked_active: set[str], now: datetime,
                   fenced_active: frozenset[str] | set[str]) -> "DataFrame":
    """Addresses referenced now (or when the fence went up) that the mark did not count as
    referenced: what was staged or copied since the mark and the live tokens, and the entries of
    ranges that no tree counted active at the mark held (read from the trees that became active
    since). A change, not the live set: what was uncommitted at the mark is not a candidate."""
    from pyspark.sql import functions as F

    storage = repo.storage
    try:
        since: StagingVersion | None = StagingVersion.from_json(storage.read(run_prefix(run_id) + STAGING))
    except (LakegcError, OSError, ValueError, KeyError, TypeError):
        since = None  # a run marked before staging versions: everything uncommitted is re-checked
    _, graph, _ = snapshot_uncommitted(repo, uncommitted_key, now, since)
    active_now = active_commits(graph.commits, graph.branches, policy_of, graph.tags) | fenced_active
    newly_active = (active_now & graph.metaranges.keys()) - marked_active
    try:
        marked: RefManifest | None = load_manifest(storage, run_prefix(run_id), refs_sha256)
    except StateUnusable:
        marked = None  # a run marked before reference sets: every range of those trees is read
    trees = {graph.metaranges[c] for c in newly_active} - (marked.active if marked else set())
    ranges = tree_ranges(spark, storage, {mid: 1 for mid in trees})
    if marked is not None and trees:
        counted = read_refs(spark, storage, marked, marked.ranges, RANGES_DDL).where(F.col("trees") > 0)
        ranges = ranges.join(counted.select("range_id"), "range_id", "left_anti")
    committed = entry_counts(spark, storage, ranges.withColumn("weight", F.lit(1)).withColumn("fresh", F.lit(0))).select("address")
    uncommitted = read_parquet(spark, storage, [uncommitted_key], UNCOMMITTED_DDL).select("address")
    return committed.union(uncommitted).distinct()


def delete_objects(spark: "SparkSession", storage: Storage, to_delete: "DataFrame",
                   deadline: float = float("inf")) -> "DataFrame":
    """Delete the objects of `to_delete` (rows of CANDIDATES_SCHEMA) on the executors: one RESULT_DDL
    row each. Each task deletes whole folders in key order: tasks unlinking in the same folders at
    once wait on each other's folder locks (50K local deletes spread at random took 12 s)."""
    return _by_folder(spark, to_delete).mapInArrow(lambda batches: _delete(storage, batches, deadline), RESULT_DDL)


def _by_folder(spark: "SparkSession", to_delete: "DataFrame") -> "DataFrame":
    """Whole folders to a task, in key order (see `delete_objects`)."""
    from pyspark.sql import functions as F

    folder = F.regexp_extract("address", r"^(.*)/", 1)
    return to_delete.repartition(spark.sparkContext.defaultParallelism * 2, folder).sortWithinPartitions("address")


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


def deletion_tally(batch: pa.RecordBatch) -> pa.Table:
    """What one batch of delete results (RESULT_DDL) adds to a run's figures: deleted, bytes
    deleted, failed, and deferred to a later round (not failed). For `write_parquet`'s tally, so
    the tasks that record the results also count them."""
    deleted = pc.fill_null(batch.column("deleted"), False)
    deferred = pc.fill_null(pc.starts_with(batch.column("error"), DEFERRED), False)
    n_deferred = pc.sum(deferred.cast(pa.int64())).as_py() or 0
    n_deleted = pc.sum(deleted.cast(pa.int64())).as_py() or 0
    return pa.table({"deleted": [n_deleted], "bytes": [pc.sum(pc.filter(batch.column("size"), deleted)).as_py() or 0],
                     "failed": [batch.num_rows - n_deleted - n_deferred], "deferred": [n_deferred]},
                    schema=pa.schema([(name, pa.int64()) for name in ("deleted", "bytes", "failed", "deferred")]))
