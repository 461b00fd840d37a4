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

import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import store_batches, write_parquet
from lakegc.engine.columns import DELETES, ddl
from lakegc.engine.tasks import parallelism
from lakegc.errors import InvalidArgument
from lakegc.storage import Storage
from lakegc.storage.deadline import sends_until

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
    stopped: int = 0  # left untried by a --max-deletes budget
    slowdowns: int = 0  # requests the store throttled

    def __add__(self, other: DeleteTally) -> DeleteTally:
        return DeleteTally(
            self.deleted + other.deleted,
            self.bytes + other.bytes,
            self.failed + other.failed,
            other.deferred_parts,
            self.stopped + other.stopped,
            self.slowdowns + other.slowdowns,
        )


@dataclass(frozen=True)
class Budget:
    """What one sweep (or connector run) may do: delete at most `max_deletes` objects, at most
    `max_rate` a second across all executors (None: no limit)."""

    max_deletes: int | None = None
    max_rate: float | None = None


def check_budget(budget: Budget) -> None:
    if budget.max_deletes is not None and budget.max_deletes < 0:
        raise InvalidArgument("--max-deletes must not be negative")
    if budget.max_rate is not None and not budget.max_rate > 0:
        raise InvalidArgument("--max-delete-rate must be a positive number of objects a second")


def delete_objects(
    spark: SparkSession,
    storage: Storage,
    to_delete: DataFrame,
    deadline: float = float("inf"),
    *,
    max_deletes: int | None = None,
    max_rate: float | None = None,
    quarantine: str | None = None,
    allowed: str | None = None,
) -> DataFrame:
    """Delete the objects of `to_delete` (CANDIDATES rows) on the executors: one DELETES row each
    tried (the connectors' deletes; a repository sweep records each batch as it goes,
    `delete_recorded`). With `max_deletes`, at most that many are tried and the rest get no row;
    `max_rate` paces them (objects a second, shared by the tasks). With `quarantine` (a folder of
    the namespace), the objects are moved there instead (a restore window); `allowed` is the one
    metadata folder it may delete in (a purge of a quarantine)."""
    how = Pacing(deadline=deadline, quarantine=quarantine, rate=max_rate, allowed=allowed)
    by_folder, how = _paced(spark, to_delete, how, max_deletes)
    return by_folder.mapInArrow(lambda batches: _delete(storage, batches, how), ddl(DELETES))


@dataclass(frozen=True)
class Pacing:
    """How a delete round goes, as its tasks are told: no request after `deadline`; moves into
    `quarantine` instead of deletes; at most `rate` objects a second across the round's tasks;
    with `quotas` (partition -> objects), a task tries only that many and leaves the rest
    (a `--max-deletes` budget, shared out in advance because tasks cannot talk to each other);
    `allowed` is the one metadata folder the round may delete in (a purge of a quarantine)."""

    deadline: float = float("inf")
    quarantine: str | None = None
    rate: float | None = None
    tasks: int = 1  # how many tasks run at once: each takes rate / tasks
    quotas: tuple[int, ...] | None = None
    allowed: str | None = None


def _by_folder(spark: SparkSession, to_delete: DataFrame) -> DataFrame:
    """Whole folders per task, in key order: tasks unlinking in the same folders at once wait on
    each other's folder locks (50K local deletes spread at random took 12 s)."""
    from pyspark.sql import functions as F

    folder = F.regexp_extract("address", r"^(.*)/", 1)
    return to_delete.repartition(_folder_tasks(spark), folder).sortWithinPartitions("address")


def _folder_tasks(spark: SparkSession) -> int:
    return parallelism(spark) * 2


def _paced(spark: SparkSession, to_delete: DataFrame, how: Pacing, max_deletes: int | None) -> tuple[DataFrame, Pacing]:
    """`to_delete` by folder, and `how` told how many tasks share its rate and, with a budget,
    each partition's quota of it."""
    by_folder = _by_folder(spark, to_delete)
    if max_deletes is not None:
        how = replace(how, quotas=_quotas(by_folder, _folder_tasks(spark), max_deletes))
    return by_folder, replace(how, tasks=parallelism(spark))


_SWEPT = pa.schema(
    [*_TALLY, ("stopped", pa.int64()), ("slowdowns", pa.int64()), ("deferred_key", pa.string())]
)  # one task of a recorded round: its tally, the rows a budget left, and where its deferred rows are


def delete_recorded(
    spark: SparkSession,
    storage: Storage,
    to_delete: DataFrame,
    folder: str,
    deferred_folder: str,
    how: Pacing,
    max_deletes: int | None = None,
) -> DeleteTally:
    """Delete (or quarantine) `to_delete` as `delete_objects` does, writing each batch's DELETES
    rows under `folder` as soon as that batch is done: a sweep that dies loses at most the record
    of the batch in flight, and one that continues skips what the records say is gone. Rows
    deferred past the deadline go under `deferred_folder` instead, for the next round. With
    `max_deletes`, at most that many objects are tried; the rest are counted as `stopped`."""
    by_folder, how = _paced(spark, to_delete, how, max_deletes)
    prefix = folder.rstrip("/")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sums = dict.fromkeys(_SWEPT.names[:-1], 0)
        deferred: list[pa.RecordBatch] = []
        pace = _Pace(how)
        for result in _delete(storage, batches, how, pace):
            if result.num_rows == 0:
                continue
            tally = deletion_tally(result).to_pylist()[0]
            later = pc.fill_null(pc.starts_with(result.column("error"), DEFERRED), False)
            done = result.filter(pc.invert(later))  # a batch the deadline cut holds both
            if done.num_rows:
                store_batches(storage, f"{prefix}/batch-{uuid.uuid4().hex}.parquet", [done], DELETES)
            if tally["deferred"]:
                deferred.append(result.filter(later))
            for name, value in tally.items():
                sums[name] += value
        sums["stopped"], sums["slowdowns"] = pace.stopped, pace.slowdowns
        key = None
        if deferred:
            key = f"{deferred_folder.rstrip('/')}/part-{uuid.uuid4().hex}.parquet"
            store_batches(storage, key, deferred, DELETES)
        yield pa.RecordBatch.from_pylist([{**sums, "deferred_key": key}], schema=_SWEPT)

    tasks = by_folder.mapInArrow(run, ddl(_SWEPT)).collect()  # a row per task, never the addresses
    return DeleteTally(
        sum(t["deleted"] for t in tasks),
        sum(t["bytes"] for t in tasks),
        sum(t["failed"] for t in tasks),
        tuple(t["deferred_key"] for t in tasks if t["deferred_key"]),
        stopped=sum(t["stopped"] for t in tasks),
        slowdowns=sum(t["slowdowns"] for t in tasks),
    )


def _quotas(by_folder: DataFrame, partitions: int, budget: int) -> tuple[int, ...]:
    """`budget` objects shared out over the `partitions` partitions of `by_folder`, in order (one
    small job counts each partition; the partitioning is a hash of the folder, so the delete job
    that follows sees the same partitions)."""
    from pyspark.sql import functions as F

    counted = by_folder.groupBy(F.spark_partition_id().alias("part")).count().collect()
    size_of = {row["part"]: row["count"] for row in counted}  # an empty partition has no row
    sizes = [size_of.get(part, 0) for part in range(partitions)]
    quotas = []
    for size in sizes:
        quotas.append(min(size, budget))
        budget -= quotas[-1]
    return tuple(quotas)


def record_deletes(results: DataFrame, storage: Storage, folder: str) -> DeleteTally:
    """Write delete results (DELETES rows) as Parquet parts under `folder`, counting them as they
    are written: one Spark job, and the deletes happen as it runs."""
    written = write_parquet(results, storage, folder, tally=(deletion_tally, []))
    if written.tally is None:
        return DeleteTally()
    total = written.tally.to_pylist()[0]
    deferred = tuple(p.key for p in written.parts if p.tally is not None and p.tally["deferred"][0].as_py())
    return DeleteTally(total["deleted"], total["bytes"], total["failed"], deferred)


THROTTLED = re.compile(r"SlowDown|Throttl|RequestLimitExceeded|TooManyRequests|\b503\b")
MIN_RATE = 1.0  # objects a second: a throttled task never stops altogether


class _Pace:
    """One task's pace: its share of `--max-delete-rate`, slower while the store throttles
    (halved on each throttled batch, with a pause), faster again as batches go through (half as
    much again each time, up to the share, or unbounded without one). A task's own view of the
    store: S3 throttles a prefix, and a task deletes whole folders."""

    def __init__(
        self, how: Pacing, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ):
        self.limit = None if how.rate is None else max(MIN_RATE, how.rate / how.tasks)
        self.rate = self.limit
        self.quota = None
        if how.quotas is not None:
            from pyspark import TaskContext

            context = TaskContext.get()
            index = context.partitionId() if context is not None else 0
            self.quota = how.quotas[index] if index < len(how.quotas) else 0
        self.clock, self.sleep = clock, sleep
        self.next_at = clock()
        self.stopped = self.slowdowns = 0

    def batch(self, wanted: int) -> int:
        """How many of the next `wanted` keys go in one request: a slow pace sends small ones."""
        size = min(wanted, BATCH_SIZE)
        if self.rate is not None:
            size = min(size, max(1, int(self.rate)))
        return size

    def take(self, n: int) -> int:
        """How many of `n` keys the budget still allows (the rest are stopped)."""
        if self.quota is None:
            return n
        allowed = min(n, self.quota)
        self.quota -= allowed
        self.stopped += n - allowed
        return allowed

    def wait(self, n: int) -> None:
        """Before a request of `n` keys: wait for the pace to allow it."""
        if self.rate is None:
            return
        now = self.clock()
        if self.next_at > now:
            self.sleep(self.next_at - now)
        self.next_at = max(now, self.next_at) + n / self.rate

    def went(self, n: int, seconds: float, throttled: bool) -> None:
        """After a request of `n` keys that took `seconds`: slow down or speed up."""
        if throttled:
            self.slowdowns += 1
            observed = n / max(seconds, 1e-3)
            self.rate = max(MIN_RATE, min(self.rate or observed, observed) / 2)
            self.sleep(random.uniform(0, min(2.0, n / self.rate)))  # jitter: tasks do not come back in step
        elif self.rate is not None and self.rate != self.limit:
            self.rate = self.rate * 1.5
            if self.limit is not None:
                self.rate = min(self.rate, self.limit)
            elif self.rate > UNBOUNDED:
                self.rate = None


UNBOUNDED = 100_000.0  # objects a second: a recovered task with no share stops pacing itself


def _delete(
    storage: Storage, batches: Iterator[pa.RecordBatch], how: Pacing, pace: _Pace | None = None
) -> Iterator[pa.RecordBatch]:
    pace = pace or _Pace(how)
    pending: list[dict] = []
    for batch in batches:
        rows = batch.to_pylist()
        pending.extend(rows[: pace.take(len(rows))])
        while len(pending) >= BATCH_SIZE:
            yield _delete_batch(storage, pending[:BATCH_SIZE], how, pace)
            del pending[:BATCH_SIZE]
    if pending:
        yield _delete_batch(storage, pending, how, pace)


def _delete_batch(
    storage: Storage, rows: list[dict], how: Pacing = Pacing(), pace: _Pace | None = None
) -> pa.RecordBatch:
    """One batch of deletes (or moves into the quarantine) with retries and backoff for the keys
    that failed; a missing object counts as deleted. Metadata keys are refused whatever the
    candidates say, except in the one folder `how.allowed` names. No request starts after the
    deadline: keys not yet tried are deferred. A slow pace splits the batch into smaller requests."""
    pace = pace or _Pace(how)
    errors: dict[str, str | None] = {}
    todo = []
    for row in rows:
        address = row["address"]
        if address.startswith(METADATA_PREFIX) and not (how.allowed and address.startswith(how.allowed)):
            errors[address] = "refused: lakegc metadata is never deleted"
        else:
            todo.append(address)
    for attempt in range(RETRIES):
        if not todo:
            break
        if attempt:
            time.sleep(random.uniform(0, min(0.1 * 2**attempt, 2.0)))  # backoff with full jitter
        failed: list[str] = []
        while todo:
            if time.time() >= how.deadline:
                errors.update((key, DEFERRED) for key in todo)
                todo = []
                break
            size = pace.batch(len(todo))
            chunk, todo = todo[:size], todo[size:]
            pace.wait(len(chunk))
            started = time.monotonic()
            with sends_until(how.deadline):  # the store client's own retries stop at the deadline too
                outcomes = (
                    storage.delete_many(chunk)
                    if how.quarantine is None
                    else storage.move_many([(key, how.quarantine + key) for key in chunk])
                )
            throttled = False
            for outcome in outcomes:
                errors[outcome.key] = outcome.error
                if not outcome.ok:
                    failed.append(outcome.key)
                    throttled = throttled or bool(outcome.error and THROTTLED.search(outcome.error))
            pace.went(len(chunk), time.monotonic() - started, throttled)
        todo = failed
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
