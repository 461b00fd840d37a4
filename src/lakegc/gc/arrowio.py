"""Parquet in and out of a namespace on the executors, through lakegc's storage layer.

Executors get the driver's `Storage` (it pickles with its settings, not its client) and open the
namespace themselves (local folder or object store), so no Hadoop connector is needed, and data moves as Arrow batches (`mapInArrow`) rather than row by row.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import uuid
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.storage import Storage, read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PART_SCHEMA = "key string, rows long"


def read_parquet(spark: "SparkSession", storage: Storage, keys: list[str], schema: str) -> "DataFrame":
    """A DataFrame of the Parquet files `keys` (part files of one output) in the namespace."""
    from lakegc.gc.spark import work_items

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from read_table(storage, keys[index]).to_batches(max_chunksize=65_536)

    return work_items(spark, len(keys), spark.sparkContext.defaultParallelism * 2).mapInArrow(read, schema)


def write_parquet(df: "DataFrame", storage: Storage, prefix: str) -> list[tuple[str, int]]:
    """Write each partition of `df` as one Parquet part under `prefix/`; returns (key, rows) per part
    (a short list: one row per partition, never the data)."""
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key = f"{prefix.rstrip('/')}/part-{uuid.uuid4().hex}.parquet"
        rows = store_batches(storage, key, batches, schema=None)
        if rows is not None:  # an empty partition writes no part
            yield pa.RecordBatch.from_pydict({"key": [key], "rows": [rows]})

    return [(r.key, r.rows) for r in df.mapInArrow(write, PART_SCHEMA).collect()]


def write_driver_parquet(storage: Storage, key: str, batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> int:
    """Stream batches from the driver into one Parquet object (written even when empty, since
    readers expect it); returns the rows written."""
    return store_batches(storage, key, batches, schema) or 0


def write_groups(df: "DataFrame", storage: Storage, folder_of: Callable[[str], str],
                 group: str) -> dict[str, list[tuple[str, str]]]:
    """Write `df` as Parquet files of one `group` value each (the column is not stored), in one
    Spark job: file names under `folder_of(value)`. Returns value -> [(key, SHA-256 of the file)]
    (a short list: a file per value and task, never the rows). Rows are grouped first, so a
    value's rows land in one task; each task holds its rows while it writes them."""
    import pyarrow.compute as pc

    columns = [c for c in df.columns if c != group]

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: dict[str, list[pa.RecordBatch]] = {}
        for batch in batches:
            values = batch.column(group)
            for value in pc.unique(values).to_pylist():  # a few values per task
                pending.setdefault(value, []).append(batch.filter(pc.equal(values, value)).select(columns))
        written = []
        for value, parts in pending.items():
            key = f"{folder_of(value).rstrip('/')}/part-{uuid.uuid4().hex}.parquet"
            sink = io.BytesIO()
            with pq.ParquetWriter(sink, parts[0].schema, compression="zstd") as writer:
                for part in parts:
                    writer.write_batch(part)
            storage.write(key, sink.getvalue())
            written.append((value, key, hashlib.sha256(sink.getvalue()).hexdigest()))
        if written:
            yield pa.RecordBatch.from_pylist([{"value": v, "key": k, "sha256": h} for v, k, h in written])

    tasks = df.sparkSession.sparkContext.defaultParallelism * 2
    out: dict[str, list[tuple[str, str]]] = {}
    for row in df.repartition(tasks, group).mapInArrow(write, "value string, key string, sha256 string").collect():
        out.setdefault(row["value"], []).append((row["key"], row["sha256"]))
    return out


def store_batches(storage: Storage, key: str, batches: Iterable[pa.RecordBatch], schema: pa.Schema | None) -> int | None:
    """Write batches to `key` through a spooled temp file, so neither driver nor executor holds the
    whole set. With no schema, it comes from the first batch, and no batch means no object (None)."""
    rows = 0
    with tempfile.SpooledTemporaryFile(max_size=32 << 20) as sink:
        writer = None if schema is None else pq.ParquetWriter(sink, schema, compression="zstd")
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(sink, batch.schema, compression="zstd")
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is None:
            return None
        writer.close()
        sink.seek(0)
        storage.write(key, sink)
    return rows
