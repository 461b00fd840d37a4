"""What still references objects: the uncommitted snapshot (taken through the repository's
`GcSource`) and the committed trees (ranges read on the executors).

Order matters: the uncommitted snapshot is taken *before* the commit graph is read, so an object
committed in between is seen either as staged or as committed, never as neither (`GcSource.snapshot`
does both in one read transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import write_driver_parquet
from lakegc.engine.columns import ddl
from lakegc.repo.gc_source import UNCOMMITTED, GcSource, Snapshot, StagingVersion, namespace_key
from lakegc.repo.trees import METARANGES_PREFIX, RANGES_PREFIX, read_metarange, read_range
from lakegc.retention.paths import PathClasses
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UNCOMMITTED_DDL = ddl(UNCOMMITTED)
RANGES_DDL = "range_id string, min_path string, trees long"
COUNTS_DDL = "address string, n long, fresh long"
_DEDUP_ROWS = 1 << 18  # range entries summed together on an executor
_USED = ["path", "address", "address_kind"]  # what counting reads of a range
_LOOKUP_THREADS = 16  # tree files read at once by a lookup on the driver (I/O bound on S3)


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
    return weighted_ranges(spark, storage, {mid: (weight,) for mid, weight in trees.items()}, ["trees"])


def weighted_ranges(
    spark: SparkSession,
    storage: Storage,
    trees: Mapping[str, tuple[int, ...]],
    columns: list[str],
    maxed: frozenset[str] = frozenset(),
    trusted: Mapping[str, str] | None = None,
) -> DataFrame:
    """`tree_ranges` with several weights per tree, one per column of `columns` (with path rules,
    one per path class), each summed over the trees holding the range; the columns in `maxed` take
    the largest instead (a rank: the newest tree holding the range). A metarange whose file still
    has its facts in `trusted` (tree-file key -> facts, `repogc.trust`) is not verified again."""
    from pyspark.sql import functions as F

    from lakegc.engine.tasks import parallelism, work_items

    rows = sorted(trees.items())
    facts = [(trusted or {}).get(METARANGES_PREFIX + mid) for mid, _ in rows]
    aggregations = [(name, "max" if name in maxed else "sum") for name in columns]

    def read_metaranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Most trees share most of their ranges: combined here, in Arrow, before Spark."""
        pending: list[pa.Table] = []
        count = 0
        for batch in batches:
            for index in batch.column(0).to_pylist():
                mid, weights = rows[index]
                # verified whole, or trusted (its facts unchanged since a run verified it)
                table = read_metarange(storage, mid, facts[index]).select(["range_id", "min_path"])
                for name, weight in zip(columns, weights):
                    table = table.append_column(name, pa.repeat(pa.scalar(weight, pa.int64()), table.num_rows))
                pending.append(table)
                count += table.num_rows
                if count >= _DEDUP_ROWS:
                    yield from _combined(pending, ["range_id", "min_path"], aggregations)
                    pending, count = [], 0
        if pending:
            yield from _combined(pending, ["range_id", "min_path"], aggregations)

    schema = "range_id string, min_path string, " + ", ".join(f"{name} long" for name in columns)
    return (
        work_items(spark, len(rows), parallelism(spark) * 4)
        .mapInArrow(read_metaranges, schema)
        .groupBy("range_id", "min_path")
        .agg(*(getattr(F, how)(name).alias(name) for name, how in aggregations))
    )


def _combined(tables: list[pa.Table], keys: list[str], aggregations: list[tuple[str, str]]) -> list[pa.RecordBatch]:
    """The rows of `tables` grouped by `keys`, each other column combined as `aggregations` say."""
    grouped = pa.concat_tables(tables).group_by(keys).aggregate(aggregations)
    return (
        grouped.select([*keys, *(f"{name}_{how}" for name, how in aggregations)])
        .rename_columns([*keys, *(name for name, _ in aggregations)])
        .to_batches()
    )


def entry_counts(
    spark: SparkSession,
    storage: Storage,
    ranges: DataFrame,
    paths: PathClasses | None = None,
    combine: str = "sum",
    named: bool = False,
    trusted: Mapping[str, str] | None = None,
) -> DataFrame:
    """(address, n, fresh) over the entries of the ranges (rows with range_id, min_path, weight and
    fresh): each range read once, on the executors, each of its entries adding the range's weight
    to its address's n and its `fresh` to the address's fresh. Every address of the ranges gets a
    row, also when its n is 0. With `paths` (path rules), a range has `weights` instead, one per
    path class, and each entry adds the weight of its path's class. With `combine="min"`, an
    address's n is the least weight of the entries naming it instead of their sum. With `named`,
    ranges have a `rank` too, and each address gets a `path` naming it (the least) and the greatest
    `rank` of the ranges holding it: what a report names a candidate by. A range whose file still
    has its facts in `trusted` (`weighted_ranges`) is read without being verified again, and only
    the columns used."""
    from pyspark.sql import functions as F

    from lakegc.engine.tasks import parallelism

    weight_column = "weights" if paths is not None else "weight"
    aggregations = [("n", combine), ("fresh", combine)] + ([("rank", "max"), ("path", "min")] if named else [])
    inputs = ["range_id", weight_column, "fresh"] + (["rank"] if named else [])
    facts = {key.removeprefix(RANGES_PREFIX): f for key, f in (trusted or {}).items() if key.startswith(RANGES_PREFIX)}
    read_ranges = _range_reader(storage, inputs, facts, paths, named, aggregations)
    weights = F.col(weight_column).cast("array<long>" if paths is not None else "long")
    return (
        ranges.select(
            "range_id",
            "min_path",
            weights,
            F.col("fresh").cast("long"),
            *([F.col("rank").cast("long")] if named else []),
        )
        .repartition(parallelism(spark) * 4, "min_path")
        .sortWithinPartitions("min_path")
        .mapInArrow(read_ranges, COUNTS_DDL + (", rank long, path string" if named else ""))
        .groupBy("address")
        .agg(*(getattr(F, how)(name).alias(name) for name, how in aggregations))
    )


def _range_reader(
    storage: Storage,
    inputs: list[str],
    facts: Mapping[str, str],
    paths: PathClasses | None,
    named: bool,
    aggregations: list[tuple[str, str]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`entry_counts`' task (shipped to the executors): rows of `inputs` in, the entries of each
    range out as `_entry_rows`, combined by address as `aggregations` say."""
    namespace = storage.uri

    def read_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Ranges arrive grouped by their first path, so the versions of one stretch of the tree
        (a commit that appends to a folder rewrites its last range, keeping its first path) meet
        in one task, and their shared entries are summed here, in Arrow, before Spark ever sees
        them."""
        pending: list[pa.Table] = []
        rows = 0
        for batch in batches:
            for rid, weight, fresh, *rank in zip(*(batch.column(c).to_pylist() for c in inputs)):
                table = read_range(storage, rid, facts.get(rid), _USED)
                keys = _range_keys(table, namespace)
                pending.append(_entry_rows(table, keys, weight, fresh, rank, paths, named))
                rows += len(keys)
                if rows >= _DEDUP_ROWS:
                    yield from _combined(pending, ["address"], aggregations)
                    pending, rows = [], 0
        if pending:
            yield from _combined(pending, ["address"], aggregations)

    return read_ranges


def _entry_rows(
    table: pa.Table,
    keys: pa.Array,
    weight: Any,
    fresh: int,
    rank: list[int],
    paths: PathClasses | None,
    named: bool,
) -> pa.Table:
    """What one range's entries add, row for row (address, n, fresh; with `named`, rank and path),
    those outside the namespace left out: each entry's n is the range's weight, or with `paths`
    the weight of its path's class."""
    if paths is None:
        n = pa.repeat(pa.scalar(weight, pa.int64()), len(keys))
    else:
        n = pa.array(weight, pa.int64()).take(paths.of_array(table.column("path")))
    columns = {"address": keys, "n": n, "fresh": pa.repeat(pa.scalar(fresh, pa.int64()), len(keys))}
    if named:  # an active range's entries are live (no path rules): nothing to name
        live = paths is None and weight > 0
        columns["rank"] = pa.repeat(pa.scalar(0 if live else rank[0], pa.int64()), len(keys))
        columns["path"] = pa.nulls(len(keys), pa.string()) if live else table.column("path")
    return pa.table(columns).filter(pc.is_valid(keys))


def _range_keys(table: pa.Table, namespace: str) -> pa.Array:
    """Each entry's address as a namespace key, row for row (null: outside the namespace)."""
    if pc.all(pc.equal(table.column("address_kind"), "relative")).as_py() is not False:
        return table.column("address").combine_chunks()  # the common case: no Python objects
    pairs = zip(table.column("address").to_pylist(), table.column("address_kind").to_pylist())
    return pa.array([namespace_key(namespace, a, k) for a, k in pairs], pa.string())


def trees_holding(storage: Storage, trees: set[str], key: str) -> dict[str, list[str]]:
    """Metarange id -> the paths at which that tree holds the namespace key `key` (trees that do not
    hold it left out). Every distinct range of the trees is read once, verified, and dropped but
    for its rows naming `key`: a lookup for one object, on the driver, in threads."""
    namespace = storage.uri
    with ThreadPoolExecutor(_LOOKUP_THREADS) as pool:
        ranges_of = dict(zip(trees, pool.map(lambda mid: read_metarange(storage, mid)["range_id"].to_pylist(), trees)))
        distinct = sorted({rid for ids in ranges_of.values() for rid in ids})
        found = dict(zip(distinct, pool.map(lambda rid: _paths_naming(storage, namespace, rid, key), distinct)))
    holding = {mid: [path for rid in ids for path in found[rid]] for mid, ids in ranges_of.items()}
    return {mid: paths for mid, paths in holding.items() if paths}


def _paths_naming(storage: Storage, namespace: str, range_id: str, key: str) -> list[str]:
    table = read_range(storage, range_id)
    keys = _range_keys(table, namespace)
    return table.column("path").filter(pc.fill_null(pc.equal(keys, key), False)).to_pylist()
