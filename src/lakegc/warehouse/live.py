"""What the named systems reference under the warehouse, as keys of its location, on the executors.

One DataFrame of keys (`address`) is the union of:
- every file any table of the named Iceberg catalogs needs (every snapshot it has now: a warehouse
  run expires nothing, so what the table's own GC would keep is all kept);
- the full addresses in every tree of every lakegc repository (all commits, not only retained
  ones) and in its staging: links to objects outside its namespace, which may lie here;
- the full addresses in every tree file of every lakeFS repository.
A Delta table's files are judged by its own VACUUM (`delta_collectable`), in its own folder.

References name files as their systems wrote them: `s3a://`, a bare path, a path through a symlink
to the warehouse or to a table. `Locator` maps each to the key it names: the location as written
and as it really is, and each named folder as written, all count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.connectors.iceberg.paths import parse_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.warehouse.systems import Systems

ADDRESS = "address string"


def canonical(uri: str) -> str:
    """A location as `scheme://authority/path` after Iceberg's normalising (`s3a` is `s3`, a bare
    path is `file`, dot segments and repeated slashes folded)."""
    loc = parse_location(uri)
    return f"{loc.scheme}://{loc.authority}{loc.path}"


@dataclass(frozen=True)
class Locator:
    """Canonical folder (ending in `/`) -> the key prefix it is under the warehouse."""

    folders: Mapping[str, str]
    local_root: str | None = None  # lakeFS's blockstore.local.path: where its `local://` addresses lie

    def key(self, uri: str) -> str | None:
        """The key a referenced location names under the warehouse, None when it lies elsewhere
        (the innermost folder that holds it decides)."""
        if uri.startswith("local://"):  # lakeFS's local blockstore: an absolute path, or one under it
            rest = uri.removeprefix("local://")
            if not rest.startswith("/") and self.local_root:
                rest = os.path.join(self.local_root, rest)
            uri = "file://" + rest
        try:
            path = canonical(uri)
        except Exception:  # a reference that is no location names nothing here
            return None
        found = self._under(path)
        if found is None and path.startswith("file:///"):  # reached through a symlink elsewhere
            found = self._under("file://" + os.path.realpath(path.removeprefix("file://")))
        return found

    def _under(self, path: str) -> str | None:
        cut = len(path)
        while (cut := path.rfind("/", 0, cut)) > 0:
            prefix = self.folders.get(path[: cut + 1])
            if prefix is not None:
                return prefix + path[cut + 1 :]
        return None

    def keys(self) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        """A task mapping a column of locations (the first) to keys, those elsewhere left out."""

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                found = [self.key(u) for u in batch.column(0).to_pylist() if u]
                yield pa.RecordBatch.from_arrays([pa.array([k for k in found if k], pa.string())], names=["address"])

        return run


def locator(written: str, real: str, named: Mapping[str, str], local_root: str | None = None) -> Locator:
    """The root as written and as it is, and each named folder as written (-> its key prefix)."""
    folders = {canonical(written).rstrip("/") + "/": "", canonical(real).rstrip("/") + "/": ""}
    for location, prefix in named.items():
        folders[canonical(location).rstrip("/") + "/"] = prefix
    return Locator(folders, os.path.abspath(local_root) if local_root else None)


def referenced(spark: SparkSession, systems: Systems, where: Locator) -> DataFrame:
    """Every key under the warehouse some named system references (see the module)."""
    parts = [iceberg_references(spark, systems, where)]
    parts += [repository_references(spark, r.storage, sorted(r.trees), r.staged, where) for r in systems.repositories]
    parts += [lakefs_references(spark, t.trees, sorted(t.files), where) for t in systems.lakefs]
    found = parts[0]
    for part in parts[1:]:
        found = found.unionByName(part)
    return found


def iceberg_references(spark: SparkSession, systems: Systems, where: Locator) -> DataFrame:
    from lakegc.connectors.iceberg.reachable import reachable_files
    from lakegc.engine.tasks import work_items

    if not systems.iceberg:
        return work_items(spark, 0, 1).selectExpr("cast(null as string) as address").where("false")
    reachable = reachable_files(spark, [t.files() for t in systems.iceberg])
    return reachable.select("uri").mapInArrow(where.keys(), ADDRESS)


def repository_references(
    spark: SparkSession, storage: object, trees: list[str], staged: tuple[str, ...], where: Locator
) -> DataFrame:
    """The full addresses a repository's trees (every range of every commit, each read once and
    verified) and its staging name, as warehouse keys."""
    from lakegc.engine.tasks import parallelism, work_items
    from lakegc.repo.trees import read_metarange, read_range

    ranges = sorted({rid for mid in trees for rid in read_metarange(storage, mid)["range_id"].to_pylist()})  # type: ignore[arg-type]
    outside = list(staged)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        for batch in batches:
            for index in batch.column(0).to_pylist():
                if index == len(ranges):  # the staged addresses ride with the ranges' tasks
                    yield pa.RecordBatch.from_arrays([pa.array(outside, pa.string())], names=["address"])
                    continue
                table = read_range(storage, ranges[index], None, None)  # type: ignore[arg-type]
                full = table.filter(pc.not_equal(table.column("address_kind"), "relative"))
                yield pa.RecordBatch.from_arrays([full.column("address").combine_chunks()], names=["address"])

    full = work_items(spark, len(ranges) + 1, parallelism(spark) * 4).mapInArrow(read, ADDRESS)
    return full.mapInArrow(where.keys(), ADDRESS)


def lakefs_references(spark: SparkSession, trees: object, files: list[str], where: Locator) -> DataFrame:
    """The full addresses outside its namespace that a lakeFS repository's range files name."""
    ranges = [file_id for file_id, kind, _ in trees.kinds(spark, files) if kind == "ranges"]  # type: ignore[attr-defined]
    return trees.external(spark, ranges).mapInArrow(where.keys(), ADDRESS)  # type: ignore[attr-defined]


def delta_collectable(spark: SparkSession, systems: Systems, judged: DataFrame) -> DataFrame | None:
    """The keys each Delta table under the warehouse would VACUUM (its own retention, its own log),
    judged on its part of the warehouse listing (`judged`: keys with their innermost `table`)."""
    from pyspark.sql import functions as F

    from lakegc.connectors.delta.gc import judged as vacuum

    found = None
    for d in systems.delta:
        if d.prefix is None:
            continue
        mine = judged.where(F.col("table") == d.prefix).select(
            F.expr(f"substring(address, {len(d.prefix) + 1})").alias("address"), "size", "mtime", "slice", "young"
        )
        taken = vacuum(spark, d.plan, mine).select(F.concat(F.lit(d.prefix), F.col("address")).alias("address"))
        found = taken if found is None else found.unionByName(taken)
    return found
