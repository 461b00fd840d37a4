"""Deleting candidates on the executors, in batches, each outcome recorded.

Every collector deletes the same way: a DataFrame of candidates (`columns.CANDIDATES`) goes to
`delete_objects`, which deletes whole folders per task in key order, 1,000 keys a request, retrying
the keys that failed with backoff; every candidate comes back as a row of `columns.DELETES` (a
missing object counts as deleted, a key under `_lakegc/` is refused whatever the candidates say).
`record_deletes` writes those rows as a run's `deleted/` output and counts them as it writes.

A deadline bounds a round: no request starts after it (the run's lease is only sure until then),
and the keys not yet tried come back *deferred*, for a later round that checks the lease again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import write_parquet
from lakegc.engine.columns import DELETES, ddl
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BATCH_SIZE = 1_000
RETRIES = 5
METADATA_PREFIX = "_lakegc/"  # never deleted, whatever a candidate list says
QUARANTINE_PREFIX = METADATA_PREFIX + "quarantine/"  # a run's moved objects: QUARANTINE_PREFIX + run id + "/" + key


def quarantine_folder(run_id: str) -> str:
    """Where a run moves the objects it collects while its restore window lasts."""
    return f"{QUARANTINE_PREFIX}{run_id}/"


DEFERRED = "deferred: the lease deadline passed before it was tried"
_TALLY = pa.schema([(name, pa.int64()) for name in ("deleted", "bytes", "failed", "deferred")])


@dataclass(frozen=True)
class DeleteTally:
    """What delete rounds did, summed from each task's part (no second read of the parts)."""

    deleted: int = 0
    bytes: int = 0
    failed: int = 0  # tried and not gone (deferred keys are not failed: a later round tries them)
    deferred_parts: tuple[str, ...] = ()  # parts of the last round holding keys deferred to the next

    def __add__(self, other: DeleteTally) -> DeleteTally:
        return DeleteTally(
            self.deleted + other.deleted, self.bytes + other.bytes, self.failed + other.failed, other.deferred_parts
        )


def delete_objects(
    spark: SparkSession,
    storage: Storage,
    to_delete: DataFrame,
    deadline: float = float("inf"),
    quarantine: str | None = None,
) -> DataFrame:
    """Delete the objects of `to_delete` (CANDIDATES rows) on the executors: one DELETES row each.
    With `quarantine` (a folder under `_lakegc/`), move each object to its key under that folder
    instead: out of its address all the same, and back with a restore until a purge.
    Each task deletes whole folders in key order: tasks unlinking in the same folders at once wait
    on each other's folder locks (50K local deletes spread at random took 12 s)."""
    from pyspark.sql import functions as F

    folder = F.regexp_extract("address", r"^(.*)/", 1)
    by_folder = to_delete.repartition(spark.sparkContext.defaultParallelism * 2, folder).sortWithinPartitions("address")
    return by_folder.mapInArrow(lambda batches: _delete(storage, batches, deadline, quarantine), ddl(DELETES))


def record_deletes(results: DataFrame, storage: Storage, folder: str) -> DeleteTally:
    """Write delete results (DELETES rows) as Parquet parts under `folder`, counting them as they
    are written: one Spark job, and the deletes happen as it runs."""
    written = write_parquet(results, storage, folder, tally=(deletion_tally, []))
    if written.tally is None:
        return DeleteTally()
    total = written.tally.to_pylist()[0]
    deferred = tuple(p.key for p in written.parts if p.tally is not None and p.tally["deferred"][0].as_py())
    return DeleteTally(total["deleted"], total["bytes"], total["failed"], deferred)


def _delete(
    storage: Storage, batches: Iterator[pa.RecordBatch], deadline: float, quarantine: str | None
) -> Iterator[pa.RecordBatch]:
    pending: list[dict] = []
    for batch in batches:
        pending.extend(batch.to_pylist())
        while len(pending) >= BATCH_SIZE:
            yield _delete_batch(storage, pending[:BATCH_SIZE], deadline, quarantine)
            del pending[:BATCH_SIZE]
    if pending:
        yield _delete_batch(storage, pending, deadline, quarantine)


def _delete_batch(
    storage: Storage, rows: list[dict], deadline: float = float("inf"), quarantine: str | None = None
) -> pa.RecordBatch:
    """One batched delete (or move into `quarantine`) with retries and backoff for the keys that
    failed; a missing object counts as deleted. Metadata keys are refused whatever the candidates
    say. No request starts after `deadline`: keys not yet tried are deferred."""
    errors: dict[str, str | None] = {}
    todo = []
    for row in rows:
        if row["address"].startswith(METADATA_PREFIX):
            errors[row["address"]] = "refused: lakegc metadata is never deleted"
        else:
            todo.append(row["address"])
    for attempt in range(RETRIES):
        if not todo:
            break
        if attempt:
            time.sleep(min(0.05 * 2**attempt, 2.0))
        if time.time() >= deadline:
            errors.update((key, DEFERRED) for key in todo)
            todo = []
            break
        outcomes = (
            storage.delete_many(todo)
            if quarantine is None
            else storage.move_many([(key, quarantine + key) for key in todo])
        )
        todo = []
        for outcome in outcomes:
            errors[outcome.key] = outcome.error
            if not outcome.ok:
                todo.append(outcome.key)
    return pa.RecordBatch.from_pylist(
        [{**row, "deleted": errors.get(row["address"]) is None, "error": errors.get(row["address"])} for row in rows],
        schema=DELETES,
    )


def deletion_tally(batch: pa.RecordBatch) -> pa.Table:
    """What one batch of DELETES rows adds to a run's figures: deleted, bytes deleted, failed, and
    deferred to a later round (not failed)."""
    deleted = pc.fill_null(batch.column("deleted"), False)
    deferred = pc.fill_null(pc.starts_with(batch.column("error"), DEFERRED), False)
    n_deferred = pc.sum(deferred.cast(pa.int64())).as_py() or 0
    n_deleted = pc.sum(deleted.cast(pa.int64())).as_py() or 0
    return pa.table(
        {
            "deleted": [n_deleted],
            "bytes": [pc.sum(pc.filter(batch.column("size"), deleted)).as_py() or 0],
            "failed": [batch.num_rows - n_deleted - n_deferred],
            "deferred": [n_deferred],
        },
        schema=_TALLY,
    )
