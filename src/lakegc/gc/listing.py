"""Listing the namespace by slice, in parallel on the executors (seed 001: "Listing namespace objects").

`data/<slice>/` folders are listed one task per slice; the namespace root is listed without
recursion (objects written before slices existed). `_lakegc/` is never listed: GC metadata is not
garbage.
"""

from __future__ import annotations

from datetime import datetime
import itertools
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.repo.slices import DATA_PREFIX
from lakegc.storage import ObjectInfo, Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LISTING_SCHEMA = pa.schema([("address", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC")),
                            ("slice", pa.string()), ("young", pa.bool_())])
LISTING_DDL = "address string, size long, mtime timestamp, slice string, young boolean"
_ROOT = ""  # the pseudo-slice standing for the namespace root's own files
_BATCH = 10_000


def slices(storage: Storage) -> list[str]:
    """Slice names, newest first (their names sort that way)."""
    return storage.list_dirs(DATA_PREFIX)


def list_namespace(spark: "SparkSession", storage: Storage, slice_names: list[str], older_than: datetime) -> "DataFrame":
    """Objects of the given slices (and the root); `young` marks those modified at or after
    `older_than` (never candidates, and they keep their slice from settling)."""
    cutoff = older_than

    def list_slices(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name in batch.column("slice").to_pylist():
                if name == _ROOT:
                    objects = storage.list("", recursive=False)
                else:
                    objects = storage.list(f"{DATA_PREFIX}{name}/")
                yield from _batches(((obj, name) for obj in objects), cutoff)

    names = [_ROOT, *slice_names]
    df = spark.createDataFrame([(n,) for n in names], "slice string")
    return df.repartition(max(1, min(len(names), spark.sparkContext.defaultParallelism * 4))).mapInArrow(
        list_slices, LISTING_DDL)


def _batches(objects: Iterator[tuple[ObjectInfo, str]], cutoff: datetime) -> Iterator[pa.RecordBatch]:
    """(object, its slice) pairs as listing batches."""
    young_from = pa.scalar(cutoff, pa.timestamp("us", tz="UTC"))
    while True:
        chunk = list(itertools.islice(objects, _BATCH))
        if not chunk:
            return
        mtimes = pa.array([obj.mtime for obj, _ in chunk], pa.timestamp("us", tz="UTC"))
        yield pa.RecordBatch.from_arrays(
            [pa.array([obj.key for obj, _ in chunk], pa.string()), pa.array([obj.size for obj, _ in chunk], pa.int64()),
             mtimes, pa.array([name for _, name in chunk], pa.string()), pc.greater_equal(mtimes, young_from)],
            schema=LISTING_SCHEMA)


def stat_objects(spark: "SparkSession", storage: Storage, addresses: "DataFrame", older_than: datetime) -> "DataFrame":
    """Look up objects one by one (columns `address`, `slice`), as rows of a listing; the ones that
    no longer exist are left out."""
    cutoff = older_than

    def stat(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            pairs = zip(batch.column("address").to_pylist(), batch.column("slice").to_pylist())
            found = ((storage.stat(key), slice_name) for key, slice_name in pairs)
            yield from _batches(((info, name) for info, name in found if info is not None), cutoff)

    return addresses.select("address", "slice").mapInArrow(stat, LISTING_DDL)
