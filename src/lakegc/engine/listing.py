"""Listing a location on the executors, one folder per task, as Arrow batches of `columns.LISTING`.

A collector says which folders make up its location (`Folder`: a prefix, listed with everything
below it or only for its own files) and gets one DataFrame of what they hold. Repository GC lists a
namespace by slice (`lakegc.repogc.listing`); connectors list a location they do not own a few folder
levels down (`location_folders`). Nothing here follows a symlink (the storage backends refuse to).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.columns import LISTING, ddl
from lakegc.errors import NamespaceError
from lakegc.storage import LocalStorage, Storage, open_storage
from lakegc.storage.base import listing_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Folder:
    """One listing task: the objects under `prefix` (all levels, or only its own), labelled `slice`."""

    prefix: str
    recursive: bool
    slice: str


def list_folders(spark: SparkSession, storage: Storage, folders: list[Folder], older_than: datetime) -> DataFrame:
    """LISTING rows for the objects of `folders`, each folder listed by one task on the executors;
    `young` marks those modified at or after `older_than`."""
    from lakegc.engine.tasks import parallelism, work_items

    cutoff = older_than

    def list_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                folder = folders[index]
                for found in storage.list_batches(folder.prefix, recursive=folder.recursive):
                    yield listing_rows(found, pa.repeat(pa.scalar(folder.slice, pa.string()), found.num_rows), cutoff)

    tasks = parallelism(spark) * 4
    return work_items(spark, len(folders), tasks).mapInArrow(list_tasks, ddl(LISTING))


def listing_rows(found: pa.RecordBatch, slice_names: pa.Array, cutoff: datetime) -> pa.RecordBatch:
    """A storage listing batch (and each object's slice) as LISTING rows."""
    mtimes = found.column("mtime")
    return pa.RecordBatch.from_arrays(
        [
            found.column("key"),
            found.column("size"),
            mtimes,
            slice_names,
            pc.greater_equal(mtimes, pa.scalar(cutoff, mtimes.type)),
        ],
        schema=LISTING,
    )


def stat_objects(spark: SparkSession, storage: Storage, addresses: DataFrame, older_than: datetime) -> DataFrame:
    """Look up objects one by one (columns `address`, `slice`), as LISTING rows; the ones that no
    longer exist are left out."""
    cutoff = older_than

    def stat(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            pairs = zip(batch.column("address").to_pylist(), batch.column("slice").to_pylist())
            found = [(info, name) for key, name in pairs if (info := storage.stat(key)) is not None]
            if found:
                yield listing_rows(
                    listing_batch([info for info, _ in found]),
                    pa.array([name for _, name in found], pa.string()),
                    cutoff,
                )

    return addresses.select("address", "slice").mapInArrow(stat, ddl(LISTING))


def location_folders(
    storage: Storage, label: str = "", depth: int = 2, leave_out: tuple[str, ...] = ()
) -> list[Folder]:
    """Listing tasks (labelled `label`) that cover every object under the storage's root exactly
    once: the folders `depth` levels down are listed with everything below them, the ones above
    only for their own objects (Iceberg: `data/<partition>/`, `metadata/`; IOx: `<namespace>/<table>/`).
    No task enters a `leave_out` folder (a key prefix such as `a/b/`): the folders that hold one are
    listed for their own objects only, and their sub-folders one by one."""
    tasks: list[Folder] = []
    level, down = [""], 0
    while level:
        deeper = []
        for prefix in level:
            if prefix in leave_out:
                continue
            whole = down >= depth and not any(p.startswith(prefix) for p in leave_out)
            tasks.append(Folder(prefix, whole, label))
            if not whole:
                deeper += [f"{prefix}{name}/" for name in storage.list_dirs(prefix)]
        level, down = deeper, down + 1
    return tasks


def open_location(location: str, what: str) -> Storage:
    """The storage at `location`, which must already exist: GC never creates what it cleans."""
    storage = open_storage(location)
    if isinstance(storage, LocalStorage):
        if not storage.root.is_dir():
            raise NamespaceError(f"{what} {storage.uri} does not exist or is not a folder")
    else:
        storage.prepare()  # the bucket must answer
    return storage
