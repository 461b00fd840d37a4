"""The restore window: a run's collected objects wait in its quarantine folder, then go for good.

With `quarantine_days` in the rules (or `gc run --quarantine`), a sweep moves each object it
collects to `_lakegc/quarantine/<run>/<address>` instead of deleting it (`engine.delete`). Its
address is empty, so reads answer 410 as for any collected object; until the window ends,
`restore` moves the run's objects (all, or those whose path or address matches a glob) back, and
reads work again. After it, `purge` deletes the quarantine: `gc purge`, and every `gc run` before
it marks.

Both go through the deletion guard: the namespace is checked as for a sweep, and a purge's
deletes are refused outside the one quarantine folder being purged. What a restore moves comes
from the run's own `deleted/` records, never from a listing, so nothing else is ever moved.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import Part, read_parquet, store_batches, write_parquet
from lakegc.engine.columns import DELETES, ddl
from lakegc.engine.delete import BATCH_SIZE, Pacing, _delete_batch, delete_recorded, quarantine_folder
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.recorder import Recorder
from lakegc.engine.runs import MetastoreRunLog, Run, RunState
from lakegc.errors import InvalidArgument, NotFound
from lakegc.repo.gc_source import GcSource
from lakegc.repogc.outputs import output_keys, run_folder, run_prefix
from lakegc.retention.paths import glob_regex
from lakegc.storage import Storage, read_table
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class QuarantinePurged(NotFound):
    """What a restore asked for is gone: its quarantine was purged."""


@dataclass(frozen=True)
class Purged:
    """One quarantine a purge deleted: the run, how many objects, and when its window had ended."""

    run_id: str
    num_purged: int
    bytes_purged: int
    quarantine_until: str
    num_left: int = 0  # still in the quarantine (the store refused): the next purge tries again

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Restored:
    """What a restore put back, what an earlier restore of the run already had (counted there, not
    again), and what it could not (gone: purged, or taken out of the quarantine by someone else)."""

    run_id: str
    num_restored: int
    bytes_restored: int
    num_missing: int
    missing: tuple[str, ...]  # the first few addresses that could not be restored
    num_already_restored: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "missing": list(self.missing)}


MOVED_BY = (RunState.SWEEPING, RunState.SWEPT, RunState.FAILED)  # states of a run that may have moved objects


def expired(run: Run, now: datetime) -> bool:
    """Is the run's restore window over, and its quarantine not purged yet? A run whose sweep
    stopped or failed has one too: its window opened before its first move."""
    return (
        run.state in MOVED_BY
        and run.repo.quarantine_until is not None
        and run.repo.purged_at is None
        and datetime.fromisoformat(run.repo.quarantine_until) <= now
    )


def due_for_purge(runs: list[Run], now: datetime) -> list[Run]:
    """The runs whose quarantine a purge at `now` deletes, oldest first."""
    return sorted((run for run in runs if expired(run, now)), key=lambda r: r.run_id)


def purge_expired(
    spark: SparkSession, source: GcSource, log: MetastoreRunLog, due: list[Run], phase: Phase = no_progress
) -> list[Purged]:
    """Delete the quarantines of the runs `due_for_purge` chose (the caller holds the repository's
    lease and has checked the namespace, so no sweep is moving objects in meanwhile; a stopped
    sweep that goes on later opens its window again). A quarantine the store would not empty
    whole stays unpurged (`num_left`), for the next purge: it never stops a GC run."""
    done = []
    for run in due:
        phase("purging quarantine", f"run {run.run_id}, window ended {run.repo.quarantine_until}")
        done.append(_purge(spark, source, log, run))
    return done


def _purge(spark: SparkSession, source: GcSource, log: MetastoreRunLog, run: Run) -> Purged:
    """Delete one run's quarantine: on the executors, the objects its records say it moved there;
    then, from a listing, any a killed batch moved without a record. Deletes are refused outside
    the quarantine folder."""
    from pyspark.sql import functions as F

    storage = source.storage
    folder = quarantine_folder(run.run_id)
    moved = _moved(spark, storage, run.run_id)
    back = _restored_addresses(spark, storage, run.run_id)
    if back is not None:  # back at their addresses: not in the quarantine, not counted as purged
        moved = moved.join(back, "address", "left_anti")
    moved = moved.select(F.concat(F.lit(folder), "address").alias("address"), "size", "mtime", "reason")
    prefix = run_prefix(run.run_id)
    done = _purged_keys(spark, storage, run.run_id)
    if done is not None:  # an earlier purge that did not finish: what it deleted is counted already
        moved = moved.join(done, "address", "left_anti")
    delete_recorded(spark, storage, moved, f"{prefix}purged", f"{prefix}purged-deferred", Pacing(allowed=folder))
    _straggler_purge(source, folder, f"{prefix}purged")
    left = sum(1 for _ in storage.list(folder))  # the truth: what is still there
    before, before_bytes = run.repo.num_purged, run.repo.bytes_purged
    recount(spark, storage, run)
    if not left:
        run.repo.purged_at = utcnow().isoformat()
    Recorder(log, run_folder(storage, run.run_id)).update(run)
    return Purged(
        run.run_id,
        run.repo.num_purged - before,
        run.repo.bytes_purged - before_bytes,
        run.repo.quarantine_until or "",
        left,
    )


def recount(spark: SparkSession, storage: Storage, run: Run) -> None:
    """Set the run's restored and purged counts from its records, never by adding to them: each
    object it moved counts once, as restored (a `restored/` row says it is back) or as purged (a
    `purged/` row says its quarantine copy was deleted, and no restore put it back). A restore or
    purge that was killed after writing some records is counted by the next one; one run again
    counts nothing twice."""
    from pyspark.sql import functions as F

    if not output_keys(storage, run.run_id, "deleted"):
        return
    moved = _moved(spark, storage, run.run_id).select("address", "size")
    back = _restored_addresses(spark, storage, run.run_id)
    restored = moved.join(back, "address", "left_semi") if back is not None else None
    deleted = _purged_keys(spark, storage, run.run_id)
    purged = None
    if deleted is not None:
        folder = quarantine_folder(run.run_id)
        gone = deleted.where(F.col("address").startswith(folder)).select(
            F.expr(f"substring(address, {len(folder) + 1})").alias("address")
        )
        purged = moved.join(gone, "address", "left_semi")
        if back is not None:
            purged = purged.join(back, "address", "left_anti")
    for frame, fields in ((restored, ("num_restored", "bytes_restored")), (purged, ("num_purged", "bytes_purged"))):
        if frame is None:
            continue
        row = frame.agg(F.count("*").alias("n"), F.sum("size").alias("b")).collect()[0]
        setattr(run.repo, fields[0], int(row["n"]))
        setattr(run.repo, fields[1], int(row["b"] or 0))


def _moved(spark: SparkSession, storage: Storage, run_id: str) -> DataFrame:
    """What the run's sweep moved into its quarantine, as its `deleted/` records say (DELETES rows,
    one per address): what a restore may put back, a purge delete, and the counts are counted of."""
    return (
        read_parquet(spark, storage, output_keys(storage, run_id, "deleted"), ddl(DELETES))
        .where("deleted")
        .dropDuplicates(["address"])
    )


def _purged_keys(spark: SparkSession, storage: Storage, run_id: str) -> DataFrame | None:
    """The quarantine keys the run's purges deleted (column `address`, each once), or None."""
    keys = output_keys(storage, run_id, "purged")
    if not keys:
        return None
    return read_parquet(spark, storage, keys, ddl(DELETES)).where("deleted").select("address").dropDuplicates()


def _restored_addresses(spark: SparkSession, storage: Storage, run_id: str) -> DataFrame | None:
    """The addresses earlier restores of the run put back (column `address`, each once), or None."""
    keys = output_keys(storage, run_id, "restored")
    if not keys:
        return None
    return read_parquet(spark, storage, keys, ddl(_RESTORES)).where("restored").select("address").dropDuplicates()


def _straggler_purge(source: GcSource, folder: str, records: str) -> None:
    """Delete what is left under `folder` (objects a killed batch moved without a record, and ones
    whose delete failed above) in batches as the listing streams, never holding it whole; each
    batch's outcome is recorded under `records` as the purge's own are (`recount` reads them)."""
    batch: list[dict[str, Any]] = []

    def delete() -> None:
        done = _delete_batch(source.storage, batch, Pacing(allowed=folder))
        store_batches(source.storage, f"{records}/straggler-{uuid.uuid4().hex}.parquet", [done], DELETES)
        batch.clear()

    for info in source.storage.list(folder):
        batch.append({"address": info.key, "size": info.size, "mtime": info.mtime, "reason": "purge"})
        if len(batch) == BATCH_SIZE:
            delete()
    if batch:
        delete()


def check_restorable(run: Run, path_glob: str | None = None) -> None:
    """What makes a restore impossible, told before anything starts (no Spark, no lease): the
    run, and a `--path` that is no glob."""
    if path_glob is not None:
        _matcher(path_glob)
    if run.state not in MOVED_BY or run.dry_run:
        raise InvalidArgument(
            f"run {run.run_id} is {run.state}{' (a dry run)' if run.dry_run else ''}: it moved nothing"
        )
    if run.repo.quarantine_until is None:
        raise InvalidArgument(
            f"run {run.run_id} deleted what it collected (it had no restore window): nothing to restore"
        )
    own = run.repo
    if own.purged_at is not None:
        raise QuarantinePurged(
            f"run {run.run_id}'s quarantine was purged at {own.purged_at} (its window ended {own.quarantine_until}): "
            f"the {own.num_moved - own.num_restored} object(s) it moved there and nobody restored are gone"
        )


def restore(
    spark: SparkSession, source: GcSource, log: MetastoreRunLog, run_id: str, path_glob: str | None
) -> Restored:
    """Move a run's quarantined objects (those whose repository path or address matches
    `path_glob`, or all) back to their addresses. An object an earlier restore put back is counted
    there, not again (`num_already_restored`); one found at its address with no record (a restore
    killed before it wrote its records) is counted now;
    an object that is not in the quarantine any more is gone, and so is the whole quarantine once
    purged: both are errors that name what is gone (the rest is restored all the same)."""
    run, _ = log.get(run_id)
    check_restorable(run, path_glob)
    matcher = None if path_glob is None else _matcher(path_glob)
    storage = source.storage
    put_back = _putting_back(storage, quarantine_folder(run_id), matcher)
    results = _restorable(spark, storage, run_id).mapInArrow(put_back, ddl(_RESTORES))
    written = write_parquet(results, storage, f"{run_prefix(run_id)}restored/{time.time_ns():x}", (_restore_tally, []))
    total = (
        written.tally.to_pylist()[0]
        if written.tally is not None
        else {"restored": 0, "bytes": 0, "missing": 0, "already": 0}
    )
    missing = _first_missing(storage, written.parts)
    restored = Restored(
        run_id, total["restored"], total["bytes"], total["missing"], tuple(sorted(missing)), total["already"]
    )
    if path_glob is not None and restored.num_restored + restored.num_missing + restored.num_already_restored == 0:
        raise NotFound(f"run {run_id} collected nothing whose path or address matches {path_glob!r}")
    run.repo.restored.append({"at": utcnow().isoformat(), "path": path_glob, "num_restored": restored.num_restored})
    recount(spark, storage, run)
    Recorder(log, run_folder(storage, run_id)).update(run)
    if restored.num_missing:
        shown = ", ".join(restored.missing) + (" ..." if restored.num_missing > len(restored.missing) else "")
        raise QuarantinePurged(
            f"{restored.num_missing} object(s) of run {run_id} are not in its quarantine any more and are gone "
            f"({shown}); {restored.num_restored} restored"
        )
    return restored


def _restorable(spark: SparkSession, storage: Storage, run_id: str) -> DataFrame:
    """What the run moved (`_moved`), each with the repository path its candidate named (null:
    none) and `earlier`, true when an earlier restore of the run put it back: restored before is
    said so, never counted twice, never moved again."""
    from pyspark.sql import functions as F

    named = read_parquet(spark, storage, output_keys(storage, run_id, "candidates"), "address string, path string")
    chosen = _moved(spark, storage, run_id).join(named.dropDuplicates(["address"]), "address", "left")
    earlier = _restored_addresses(spark, storage, run_id)
    if earlier is None:
        return chosen.withColumn("earlier", F.lit(None).cast("boolean"))
    return chosen.join(earlier.withColumn("earlier", F.lit(True)), "address", "left")


def _putting_back(
    storage: Storage, folder: str, matcher: Callable[[str], bool] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' task of a restore: of `_restorable` rows, those whose address or path
    `matcher` takes (all: None), each either recorded as already restored or moved back out of
    `folder` in batches (`_restore_batch`); _RESTORES rows out."""

    def put_back(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [
                r
                for r in batch.to_pylist()
                if matcher is None or matcher(r["address"]) or (r["path"] is not None and matcher(r["path"]))
            ]
            again = [r for r in rows if r["earlier"]]
            if again:
                yield pa.RecordBatch.from_pylist(
                    [{"address": r["address"], "size": r["size"], "restored": True, "error": ALREADY} for r in again],
                    schema=_RESTORES,
                )
            rows = [r for r in rows if not r["earlier"]]
            for start in range(0, len(rows), BATCH_SIZE):
                yield _restore_batch(storage, folder, rows[start : start + BATCH_SIZE])

    return put_back


def _first_missing(storage: Storage, parts: Sequence[Part]) -> list[str]:
    """The first few addresses (_NAMED) a restore found gone, to name them: read back only from
    the files whose tally counted some."""
    missing: list[str] = []
    for part in parts:
        if part.tally is not None and part.tally["missing"][0].as_py() and len(missing) < _NAMED:
            table = read_table(storage, part.key, ["address", "restored"])
            missing += [a for a, ok in zip(*table.to_pydict().values(), strict=True) if not ok][: _NAMED - len(missing)]
    return missing


_RESTORES = pa.schema(
    [("address", pa.string()), ("size", pa.int64()), ("restored", pa.bool_()), ("error", pa.string())]
)
_NAMED = 5  # missing objects a restore's error names
ALREADY = "already restored"  # the error of a row an earlier restore of the run put back


def _restore_tally(batch: pa.RecordBatch) -> pa.Table:
    """Restored now (and their bytes), restored before, missing: each row is one of the three."""
    back = pc.fill_null(batch.column("restored"), False)
    already = pc.fill_null(pc.equal(batch.column("error"), ALREADY), False)
    now = pc.and_(back, pc.invert(already))
    n_now = pc.sum(now.cast(pa.int64())).as_py() or 0
    n_already = pc.sum(already.cast(pa.int64())).as_py() or 0
    return pa.table(
        {
            "restored": [n_now],
            "bytes": [pc.sum(pc.filter(batch.column("size"), now)).as_py() or 0],
            "missing": [batch.num_rows - n_now - n_already],
            "already": [n_already],
        },
        schema=pa.schema([(name, pa.int64()) for name in ("restored", "bytes", "missing", "already")]),
    )


def _restore_batch(storage: Storage, folder: str, rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Move one batch back (never over an object at its address); an object is restored when its
    address holds it afterwards."""
    outcomes = {o.key: o for o in storage.move_many([(folder + r["address"], r["address"]) for r in rows])}
    out = []
    for r in rows:
        outcome = outcomes.get(folder + r["address"])
        back = outcome is not None and outcome.ok and storage.exists(r["address"])
        error = (
            None if back else (outcome.error if outcome is not None and outcome.error else "gone from the quarantine")
        )
        out.append({"address": r["address"], "size": r["size"], "restored": back, "error": error})
    return pa.RecordBatch.from_pylist(out, schema=_RESTORES)


def _matcher(glob: str) -> Any:
    """A glob as path rules read it (gitignore-style), for repository paths and addresses."""
    try:
        pattern = re.compile(glob_regex(glob), re.S)  # a glob that is not one: InvalidArgument from glob_regex
    except re.error as exc:
        raise InvalidArgument(f"invalid --path glob {glob!r}: {exc}") from None
    return lambda text: pattern.fullmatch(text) is not None
