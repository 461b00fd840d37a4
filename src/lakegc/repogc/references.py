"""What still references objects: the uncommitted snapshot (taken through the repository's
`GcSource`) and the committed trees (ranges read on the executors).

Order matters: the uncommitted snapshot is taken *before* the commit graph is read, so an object
committed in between is seen either as staged or as committed, never as neither (`GcSource.snapshot`
does both in one read transaction).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import write_driver_parquet
from lakegc.engine.columns import ddl
from lakegc.repo.gc_source import UNCOMMITTED, GcSource, Snapshot, StagingVersion, namespace_key
from lakegc.repo.trees import read_metarange, read_range
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UNCOMMITTED_DDL = ddl(UNCOMMITTED)
RANGES_DDL = "range_id string, min_path string, trees long"
COUNTS_DDL = "address string, n long, fresh long"
_DEDUP_ROWS = 1 << 18  # range entries summed together on an executor


def snapshot_uncommitted(source: GcSource, key: str, now: datetime, since: StagingVersion | None = None) -> Snapshot:
    """Write every uncommitted reference (staged entries of all branches, recent copy records, live
    token addresses; with `since`, only what was staged or copied after it, and the live tokens) to
    `key` as Parquet streamed from the driver, and read the commit graph right after."""
    return source.snapshot(now, lambda batches: write_driver_parquet(source.storage, key, batches, UNCOMMITTED), since)


def tree_ranges(spark: SparkSession, storage: Storage, trees: Mapping[str, int]) -> DataFrame:
    """(range_id, min_path, trees) of every distinct range of the trees, given as metarange id ->
    weight; `trees` sums the weights of the trees holding the range (with weight 1 for an active
    tree and 0 for an expired one: how many active trees hold it). One pass over the metaranges
    serves both the active and the expired side of a run."""
    from pyspark.sql import functions as F

    from lakegc.engine.spark import work_items

    rows = sorted(trees.items())

    def read_metaranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Most trees share most of their ranges: summed here, in Arrow, before Spark."""
        pending: list[pa.Table] = []
        count = 0
        for batch in batches:
            for index in batch.column(0).to_pylist():
                mid, weight = rows[index]
                table = read_metarange(storage, mid).select(["range_id", "min_path"])  # verified whole
                pending.append(table.append_column("trees", pa.repeat(pa.scalar(weight, pa.int64()), table.num_rows)))
                count += table.num_rows
                if count >= _DEDUP_ROWS:
                    yield from _summed_ranges(pending)
                    pending, count = [], 0
        if pending:
            yield from _summed_ranges(pending)

    return (
        work_items(spark, len(rows), spark.sparkContext.defaultParallelism * 4)
        .mapInArrow(read_metaranges, RANGES_DDL)
        .groupBy("range_id", "min_path")
        .agg(F.sum("trees").alias("trees"))
    )


def _summed_ranges(tables: list[pa.Table]) -> list[pa.RecordBatch]:
    grouped = pa.concat_tables(tables).group_by(["range_id", "min_path"]).aggregate([("trees", "sum")])
    return (
        grouped.select(["range_id", "min_path", "trees_sum"])
        .rename_columns(["range_id", "min_path", "trees"])
        .to_batches()
    )


def entry_counts(spark: SparkSession, storage: Storage, ranges: DataFrame) -> DataFrame:
    """(address, n, fresh) over the entries of the ranges (rows with range_id, min_path, weight and
    fresh): each range read once, on the executors, each of its entries adding the range's weight
    to its address's n and its `fresh` to the address's fresh. Every address of the ranges gets a
    row, also when its n is 0."""
    from pyspark.sql import functions as F

    namespace = storage.uri

    def read_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Ranges arrive grouped by their first path, so the versions of one stretch of the tree
        (a commit that appends to a folder rewrites its last range, keeping its first path) meet
        in one task, and their shared entries are summed here, in Arrow, before Spark ever sees
        them."""
        pending: list[pa.Table] = []
        rows = 0
        for batch in batches:
            for rid, weight, fresh in zip(*(batch.column(c).to_pylist() for c in ("range_id", "weight", "fresh"))):
                addresses = _range_addresses(storage, namespace, rid)
                pending.append(
                    pa.table(
                        {
                            "address": addresses,
                            "n": pa.repeat(pa.scalar(weight, pa.int64()), len(addresses)),
                            "fresh": pa.repeat(pa.scalar(fresh, pa.int64()), len(addresses)),
                        }
                    )
                )
                rows += len(addresses)
                if rows >= _DEDUP_ROWS:
                    yield from _summed_addresses(pending)
                    pending, rows = [], 0
        if pending:
            yield from _summed_addresses(pending)

    return (
        ranges.select("range_id", "min_path", F.col("weight").cast("long"), F.col("fresh").cast("long"))
        .repartition(spark.sparkContext.defaultParallelism * 4, "min_path")
        .sortWithinPartitions("min_path")
        .mapInArrow(read_ranges, COUNTS_DDL)
        .groupBy("address")
        .agg(F.sum("n").alias("n"), F.sum("fresh").alias("fresh"))
    )


def _summed_addresses(tables: list[pa.Table]) -> list[pa.RecordBatch]:
    grouped = pa.concat_tables(tables).group_by("address").aggregate([("n", "sum"), ("fresh", "sum")])
    return grouped.select(["address", "n_sum", "fresh_sum"]).rename_columns(["address", "n", "fresh"]).to_batches()


def _range_addresses(storage: Storage, namespace: str, range_id: str) -> pa.Array:
    """The namespace keys one range references (entries outside the namespace left out). The range
    is read whole: every column counts in the hash that proves it is the range its id names."""
    table = read_range(storage, range_id)
    if pc.all(pc.equal(table.column("address_kind"), "relative")).as_py() is not False:
        return table.column("address").combine_chunks()  # the common case: no Python objects
    pairs = zip(table.column("address").to_pylist(), table.column("address_kind").to_pylist())
    keys = [namespace_key(namespace, a, k) for a, k in pairs]
    return pa.array([k for k in keys if k is not None], pa.string())
