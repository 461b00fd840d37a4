"""What a lakeFS repository references, as DataFrames of addresses relative to its namespace.

Committed: the ranges of the active commits' metaranges, each metarange and each range read once,
on the executors, from `_lakefs/<id>` in the namespace; every file is checked as lakegc checks its
own trees (its checksums, and its content hashing to its id), and one that fails fails the run.
With no GC rules every commit is live, and, as lakeFS's own client does, every range file in
`_lakefs/` is read. Uncommitted: the Parquet files lakeFS's `prepare_uncommited` wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.errors import ObjectNotFound
from lakegc.lakefs.namespace import (
    FILE_ID,
    METADATA,
    NamespaceFileError,
    check_file_id,
    metadata_key,
    relative_address,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.lakefs.sstable import SSTable
    from lakegc.storage import Storage

ADDRESSES = "address string"
KINDS = "id string, kind string, named array<string>"
_KINDS = pa.schema([("id", pa.string()), ("kind", pa.string()), ("named", pa.list_(pa.string()))])
RANGE_IDS = "range_id string"


@dataclass(frozen=True)
class Trees:
    """Where a repository's trees are read from: the namespace, and its prefix as full addresses
    inside it start."""

    storage: Storage
    prefixes: tuple[str, ...]

    def read(self, file_id: str, kind: str | None) -> SSTable:
        """One metadata file, checked: an SSTable whose content hashes to its id."""
        from lakegc.lakefs.sstable import read_lakefs_file

        try:
            data = self.storage.read(metadata_key(file_id))
        except ObjectNotFound:
            raise NamespaceFileError(
                f"lakeFS {kind or 'metadata'} file {file_id} is missing (_lakefs/{file_id})"
            ) from None
        return read_lakefs_file(data, file_id, kind)

    def range_ids(self, spark: SparkSession, metaranges: list[str]) -> DataFrame:
        """The distinct ranges of `metaranges` (read on the executors)."""
        from lakegc.engine.tasks import parallelism, work_items
        from lakegc.lakefs.entries import metarange_ranges

        ids = [check_file_id(m, "metarange") for m in metaranges]

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    table = self.read(ids[index], "metaranges")
                    found = [check_file_id(r.range_id, "range") for r in metarange_ranges(table, ids[index])]
                    yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], names=["range_id"])

        return work_items(spark, len(ids), parallelism(spark) * 2).mapInArrow(read, RANGE_IDS).distinct()

    def addresses(self, spark: SparkSession, ranges: list[str]) -> DataFrame:
        """Every address the `ranges` name inside the namespace (read on the executors, each once)."""
        from lakegc.engine.tasks import parallelism, work_items

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    yield self._range_batch(ranges[index])

        return work_items(spark, len(ranges), parallelism(spark) * 4).mapInArrow(read, ADDRESSES)

    def external(self, spark: SparkSession, ranges: list[str]) -> DataFrame:
        """Every full address the `ranges` name outside the namespace (what lakeFS's own GC never
        touches, and a warehouse run must keep wherever it lies)."""
        from lakegc.engine.tasks import parallelism, work_items
        from lakegc.lakefs.entries import range_entries

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    entries = range_entries(self.read(ranges[index], "ranges"), ranges[index])
                    found = [
                        e.address for e in entries if relative_address(e.address, e.address_type, self.prefixes) is None
                    ]
                    yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], names=["address"])

        return work_items(spark, len(ranges), parallelism(spark) * 4).mapInArrow(read, ADDRESSES)

    def _outside(self, address: str, address_type: int | None) -> bool:
        return relative_address(address, address_type, self.prefixes) is None

    def _range_batch(self, range_id: str) -> pa.RecordBatch:
        from lakegc.lakefs.entries import range_entries

        table = self.read(range_id, "ranges")
        found = [relative_address(e.address, e.address_type, self.prefixes) for e in range_entries(table, range_id)]
        return pa.RecordBatch.from_arrays([pa.array([a for a in found if a], pa.string())], names=["address"])

    def kinds(self, spark: SparkSession, files: list[str]) -> list[tuple[str, str, list[str]]]:
        """Each tree file's kind ("ranges", "metaranges", or "other": a file lakeFS's client skips,
        such as an entity file) and, for a metarange, the ranges it names (read on the executors,
        each checked; a short list: one row per file)."""
        from lakegc.engine.tasks import parallelism, work_items
        from lakegc.lakefs.entries import kind_of, metarange_ranges

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                rows = []
                for index in batch.column(0).to_pylist():
                    table = self.read(files[index], None)
                    kind = "other" if "entity" in table.properties else kind_of(table, files[index])
                    named = [r.range_id for r in metarange_ranges(table, files[index])] if kind == "metaranges" else []
                    rows.append({"id": files[index], "kind": kind, "named": named})
                yield pa.RecordBatch.from_pylist(rows, schema=_KINDS)

        found = work_items(spark, len(files), parallelism(spark) * 2).mapInArrow(read, KINDS)
        return [(r["id"], r["kind"], list(r["named"])) for r in found.collect()]


def metadata_files(storage: Storage) -> list[str]:
    """The files directly in `_lakefs/` that may be trees: those named by a file id (which leaves
    out the `dummy` and JSON files lakeFS's client skips there); a file under another name is no
    tree lakegc can check."""
    names = [info.key.removeprefix(METADATA) for info in storage.list(METADATA, recursive=False)]
    return sorted(n for n in names if FILE_ID.fullmatch(n))


def uncommitted_addresses(
    spark: SparkSession, storage: Storage, folder: str | None, prefixes: tuple[str, ...]
) -> DataFrame:
    """The `physical_address` column of every Parquet file under `folder` (None: lakeFS wrote none),
    relative to the namespace."""
    from lakegc.engine.arrowio import read_parquet
    from lakegc.engine.tasks import work_items

    keys = [] if folder is None else [i.key for i in storage.list(folder.rstrip("/") + "/") if _data_file(i.key)]
    if not keys:
        return work_items(spark, 0, 1).selectExpr("cast(null as string) as address").where("false")
    rows = read_parquet(spark, storage, keys, "physical_address string")

    def relative(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            found = [relative_address(a, None, prefixes) for a in batch.column(0).to_pylist() if a]
            yield pa.RecordBatch.from_arrays([pa.array([a for a in found if a], pa.string())], names=["address"])

    return rows.mapInArrow(relative, ADDRESSES)


def _data_file(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return not name.startswith(("_", "."))
