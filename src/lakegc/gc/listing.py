"""Listing the namespace by slice, in parallel on the executors (seed 001: "Listing namespace objects").

`data/<slice>/` folders are listed one task per slice; the namespace root is listed without
recursion (objects written before slices existed). `_lakegc/` is never listed: GC metadata is not
garbage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.repo.slices import DATA_PREFIX
from lakegc.storage import Storage
from lakegc.storage.base import listing_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LISTING_SCHEMA = pa.schema([("address", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC")),
                            ("slice", pa.string()), ("young", pa.bool_())])
LISTING_DDL = "address string, size long, mtime timestamp, slice string, young boolean"
_ROOT = ""  # the pseudo-slice standing for the namespace root's own files


def slices(storage: Storage) -> list[str]:
    """Slice names, newest first (their names sort that way)."""
    return storage.list_dirs(DATA_PREFIX)


def list_namespace(spark: "SparkSession", storage: Storage, slice_names: list[str], older_than: datetime) -> "DataFrame":
    """Objects of the given slices (and the root); `young` marks those modified at or after
    `older_than` (never candidates, and they keep their slice from settling)."""
    folders = [Folder("", False, _ROOT), *(Folder(f"{DATA_PREFIX}{name}/", True, name) for name in slice_names)]
    return list_folders(spark, storage, folders, older_than)


@dataclass(frozen=True)
class Folder:
    """One listing task: the objects under `prefix` (all levels, or only its own), labelled `slice`."""

    prefix: str
    recursive: bool
    slice: str


def list_folders(spark: "SparkSession", storage: Storage, folders: list[Folder], older_than: datetime) -> "DataFrame":
    """Rows of LISTING_DDL for the objects of `folders`, each folder listed by one task on the executors."""
    from lakegc.gc.spark import work_items

    cutoff = older_than

    def list_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                folder = folders[index]
                for found in storage.list_batches(folder.prefix, recursive=folder.recursive):
                    yield _listing_rows(found, pa.repeat(pa.scalar(folder.slice, pa.string()), found.num_rows), cutoff)

    return work_items(spark, len(folders), spark.sparkContext.defaultParallelism * 4).mapInArrow(list_tasks, LISTING_DDL)


def _listing_rows(found: pa.RecordBatch, slice_names: pa.Array, cutoff: datetime) -> pa.RecordBatch:
    """A storage listing batch (and each object's slice) as rows of the GC listing."""
    mtimes = found.column("mtime")
    return pa.RecordBatch.from_arrays(
        [found.column("key"), found.column("size"), mtimes, slice_names,
         pc.greater_equal(mtimes, pa.scalar(cutoff, mtimes.type))], schema=LISTING_SCHEMA)


def stat_objects(spark: "SparkSession", storage: Storage, addresses: "DataFrame", older_than: datetime) -> "DataFrame":
    """Look up objects one by one (columns `address`, `slice`), as rows of a listing; the ones that
    no longer exist are left out."""
    cutoff = older_than

    def stat(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            pairs = zip(batch.column("address").to_pylist(), batch.column("slice").to_pylist())
            found = [(info, name) for key, name in pairs if (info := storage.stat(key)) is not None]
            if found:
                yield _listing_rows(listing_batch([info for info, _ in found]),
                                    pa.array([name for _, name in found], pa.string()), cutoff)

    return addresses.select("address", "slice").mapInArrow(stat, LISTING_DDL)
