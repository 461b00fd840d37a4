"""Listing the namespace by slice, in parallel on the executors (seed 001: "Listing namespace objects").

`data/<slice>/` folders are listed one task per slice; the namespace root is listed without
recursion (objects written before slices existed). `_lakegc/` is never listed: GC metadata is not
garbage.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from lakegc.repo.slices import DATA_PREFIX
from lakegc.storage import Storage, open_storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LISTING_SCHEMA = pa.schema([("address", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC")),
                            ("slice", pa.string())])
LISTING_DDL = "address string, size long, mtime timestamp, slice string"
_ROOT = ""  # the pseudo-slice standing for the namespace root's own files
_BATCH = 10_000


def slices(storage: Storage) -> list[str]:
    """Slice names, newest first (their names sort that way)."""
    return storage.list_dirs(DATA_PREFIX)


def list_namespace(spark: "SparkSession", namespace: str, slice_names: list[str], older_than: datetime) -> "DataFrame":
    """Objects of the given slices (and the root) last modified before `older_than`."""
    cutoff = older_than

    def list_slices(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = open_storage(namespace)
        for batch in batches:
            for name in batch.column("slice").to_pylist():
                if name == _ROOT:
                    objects = storage.list("", recursive=False)
                else:
                    objects = storage.list(f"{DATA_PREFIX}{name}/")
                yield from _batches(objects, name, cutoff)

    names = [_ROOT, *slice_names]
    df = spark.createDataFrame([(n,) for n in names], "slice string")
    return df.repartition(max(1, min(len(names), spark.sparkContext.defaultParallelism * 4))).mapInArrow(
        list_slices, LISTING_DDL)


def _batches(objects: Iterator, slice_name: str, cutoff: datetime) -> Iterator[pa.RecordBatch]:
    cols: dict[str, list] = {"address": [], "size": [], "mtime": [], "slice": []}
    for obj in objects:
        if obj.mtime >= cutoff:
            continue  # younger than min-age: in flight, never a candidate
        cols["address"].append(obj.key)
        cols["size"].append(obj.size)
        cols["mtime"].append(obj.mtime)
        cols["slice"].append(slice_name)
        if len(cols["address"]) >= _BATCH:
            yield pa.RecordBatch.from_pydict(cols, schema=LISTING_SCHEMA)
            cols = {k: [] for k in cols}
    if cols["address"]:
        yield pa.RecordBatch.from_pydict(cols, schema=LISTING_SCHEMA)
