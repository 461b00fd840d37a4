"""Parquet in and out of a namespace on the executors, through lakegc's storage layer.

Executors get the driver's `Storage` (it pickles with its settings, not its client) and open the
namespace themselves (local folder or object store), so no Hadoop connector is needed, and data
moves as Arrow batches (`mapInArrow`) rather than row by row.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.engine.columns import ddl
from lakegc.storage import Storage, read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_parquet(spark: SparkSession, storage: Storage, keys: list[str], schema: str) -> DataFrame:
    """A DataFrame of the Parquet files `keys` (part files of one output) in the namespace."""
    from lakegc.engine.tasks import parallelism, work_items

    columns = [column.split()[0] for column in schema.split(",")]  # files may hold more (named candidates)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from read_table(storage, keys[index], columns).to_batches(max_chunksize=65_536)

    return work_items(spark, len(keys), parallelism(spark) * 2).mapInArrow(read, schema)


@dataclass(frozen=True)
class Part:
    """One Parquet file a writing task stored: its key, how many rows it holds, the SHA-256 of its
    bytes (for manifests that are checked on read) and, when the writer was given a tally, what
    its rows add up to. Known when it is written, so nothing is read back to count or sign it."""

    key: str
    rows: int
    sha256: str
    tally: pa.Table | None = None


@dataclass(frozen=True)
class Written:
    """What `write_parquet` stored: one part per non-empty partition (a short list, never the
    data) and the sum of the parts' tallies (None without a tally, or when nothing was written)."""

    parts: list[Part]
    tally: pa.Table | None


Tally = Callable[[pa.RecordBatch], pa.Table]  # a batch's contribution to a summary: key columns + summed columns
_PARTS_SCHEMA = pa.schema(
    [
        ("value", pa.string()),
        ("key", pa.string()),
        ("rows", pa.int64()),
        ("sha256", pa.string()),
        ("tally", pa.binary()),
    ]
)  # a written part, as its task reports it (`_part_row`)


def write_parquet(
    df: DataFrame, storage: Storage, prefix: str, tally: tuple[Tally, list[str]] | None = None
) -> Written:
    """Write each partition of `df` as one Parquet part under `prefix/`, in one Spark job. With
    `tally` = (function, key columns), each task also sums what the function gives per batch,
    grouped by the key columns: a summary counted as the rows are written, so the output is not
    read again."""
    (rows,) = write_together(parquet_writer(df, storage, prefix, tally))
    return written_parts(rows, tally[1] if tally else None)


def write_counted(df: DataFrame, storage: Storage, prefix: str) -> int:
    """`write_parquet`, returning how many rows it wrote (counted as they are written)."""
    written = write_parquet(df, storage, prefix, tally=(_row_count, []))
    return int(written.tally.to_pylist()[0]["count"]) if written.tally is not None else 0


def _row_count(batch: pa.RecordBatch) -> pa.Table:
    return pa.table({"count": [batch.num_rows]})


def parquet_writer(
    df: DataFrame,
    storage: Storage,
    prefix: str,
    tally: tuple[Tally, list[str]] | None = None,
    written_as: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> DataFrame:
    """`write_parquet` not yet run: a DataFrame of the parts its tasks will store (`write_together`).
    With `written_as`, each batch is tallied whole and stored as that function makes it (rows a
    summary counts that are not written, say)."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key = f"{prefix.rstrip('/')}/part-{uuid.uuid4().hex}.parquet"
        sums: list[pa.Table] = []

        def counted() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                if tally is not None:
                    sums.append(tally[0](batch))
                yield batch if written_as is None else written_as(batch)

        stored = _store(storage, key, counted(), schema=None)
        if stored is not None:  # an empty partition writes no part
            yield _part_row("", stored, sum_tallies(sums, tally[1]) if tally else None)

    return df.mapInArrow(write, ddl(_PARTS_SCHEMA))


def written_parts(rows: list[Any], tally_keys: list[str] | None = None) -> Written:
    """The parts a `parquet_writer` stored, and their tallies summed."""
    parts = [Part(r["key"], r["rows"], r["sha256"], _tally_of(r["tally"])) for r in rows]
    tallies = [p.tally for p in parts if p.tally is not None]
    return Written(parts, sum_tallies(tallies, tally_keys) if tally_keys is not None and tallies else None)


def write_together(*writers: DataFrame) -> list[list[Any]]:
    """Run writers (`parquet_writer`, `groups_writer`) as one Spark job: each Spark job costs a
    tenth of a second or more whatever it holds, and independent outputs need no order. Returns
    each writer's part rows."""
    from pyspark.sql import functions as F

    tagged = [w.withColumn("writer", F.lit(i)) for i, w in enumerate(writers)]
    union = tagged[0]
    for other in tagged[1:]:
        union = union.unionByName(other)
    out: list[list[Any]] = [[] for _ in writers]
    for row in union.collect():  # one row per file written: a short list
        out[row["writer"]].append(row)
    return out


def _tally_of(data: bytes | None) -> pa.Table | None:
    return None if data is None else pa.ipc.open_stream(data).read_all()


def write_driver_parquet(storage: Storage, key: str, batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> int:
    """Stream batches from the driver into one Parquet object (written even when empty, since
    readers expect it); returns the rows written."""
    stored = _store(storage, key, batches, schema)
    return stored[0] if stored else 0


def write_groups(df: DataFrame, storage: Storage, folder_of: Callable[[str], str], group: str) -> dict[str, list[Part]]:
    """Write `df` as Parquet files of one `group` value each (the column is not stored), in one
    Spark job: file names under `folder_of(value)`. Returns value -> its parts (a short list: a
    file per value and task, never the rows). Rows are grouped first, so a value's rows land in
    one task; each task holds its rows while it writes them."""
    (rows,) = write_together(groups_writer(df, storage, folder_of, group))
    return grouped_parts(rows)


def groups_writer(
    df: DataFrame,
    storage: Storage,
    folder_of: Callable[[str], str],
    group: str,
    prepare: Callable[[str, list[pa.RecordBatch]], list[pa.RecordBatch]] | None = None,
) -> DataFrame:
    """`write_groups` not yet run: a DataFrame of the parts its tasks will store (`write_together`).
    `prepare(value, batches)` gives what is stored for a value's rows (default: the rows)."""
    import pyarrow.compute as pc

    columns = [c for c in df.columns if c != group]

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: dict[str, list[pa.RecordBatch]] = {}
        for batch in batches:
            values = batch.column(group)
            for value in pc.unique(values).to_pylist():  # a few values per task
                pending.setdefault(value, []).append(batch.filter(pc.equal(values, value)).select(columns))
        for value, parts in pending.items():
            key = f"{folder_of(value).rstrip('/')}/part-{uuid.uuid4().hex}.parquet"
            rows = prepare(value, parts) if prepare is not None else parts
            yield _part_row(value, _store(storage, key, rows, schema=None), None)  # type: ignore[arg-type]

    from lakegc.engine.tasks import parallelism

    tasks = parallelism(df.sparkSession) * 2
    return df.repartition(tasks, group).mapInArrow(write, ddl(_PARTS_SCHEMA))


def grouped_parts(rows: list[Any]) -> dict[str, list[Part]]:
    """The parts a `groups_writer` stored, by group value."""
    out: dict[str, list[Part]] = {}
    for row in rows:
        out.setdefault(row["value"], []).append(Part(row["key"], row["rows"], row["sha256"]))
    return out


def _part_row(value: str, stored: tuple[int, str, str], tally: pa.Table | None) -> pa.RecordBatch:
    rows, key, digest = stored
    sink = None
    if tally is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, tally.schema) as writer:
            writer.write_table(tally)
    return pa.RecordBatch.from_pydict(
        {
            "value": [value],
            "key": [key],
            "rows": [rows],
            "sha256": [digest],
            "tally": [sink.getvalue().to_pybytes() if sink is not None else None],
        },
        schema=_PARTS_SCHEMA,
    )


def sum_tallies(tables: list[pa.Table], keys: list[str]) -> pa.Table:
    """Tally tables added up by their key columns (every other column is summed)."""
    table = pa.concat_tables(tables)
    values = [c for c in table.column_names if c not in keys]
    summed = table.group_by(keys).aggregate([(c, "sum") for c in values])
    return summed.select([*keys, *(f"{c}_sum" for c in values)]).rename_columns([*keys, *values])


def store_batches(
    storage: Storage, key: str, batches: Iterable[pa.RecordBatch], schema: pa.Schema | None
) -> int | None:
    """Write batches to `key` (see `_store`); the rows written, or None when nothing was."""
    stored = _store(storage, key, batches, schema)
    return stored[0] if stored else None


def _store(
    storage: Storage, key: str, batches: Iterable[pa.RecordBatch], schema: pa.Schema | None
) -> tuple[int, str, str] | None:
    """Write batches to `key` through a spooled temp file, so neither driver nor executor holds the
    whole set; returns (rows, key, SHA-256 of the bytes written). With no schema, it comes from the
    first batch, and no batch means no object (None)."""
    rows = 0
    digest = hashlib.sha256()
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
        for chunk in iter(lambda: sink.read(1 << 20), b""):
            digest.update(chunk)
        sink.seek(0)
        storage.write(key, sink)
    return rows, key, digest.hexdigest()
