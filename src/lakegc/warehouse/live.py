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

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.connectors.iceberg.paths import parse_location
from lakegc.warehouse.systems import written

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.connectors.delta.log import Segment
    from lakegc.warehouse.systems import DeltaTable, Systems

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
    roots: tuple[str, ...] = ()  # the warehouse as written and as it is, as Delta's table_key takes roots

    def key(self, uri: str) -> str | None:
        """The key a referenced location names under the warehouse as Iceberg spells locations,
        None when it lies elsewhere (`keys` gives every key it may name)."""
        try:
            return self._under(canonical(self._local(uri)))
        except Exception:  # a reference that is no location names nothing here
            return None

    def keys(self, uri: str, real_dirs: dict[str, str] | None = None) -> set[str]:
        """Every key a referenced location may name under the warehouse: as written (only the
        scheme normalised: `a//b` is a key of its own on S3), with dot segments and repeated
        slashes folded, a local path percent-decoded (a lakegc repository writes `%20`), and as it
        really is through symlinks (each folder resolved once, `real_dirs`). Protecting a key
        that is not there costs nothing; missing the one that is, a file."""
        uri = self._local(uri)
        spellings = {written(uri)}
        with contextlib.suppress(Exception):  # a reference that is no location names nothing here
            spellings.add(canonical(uri))
        spellings |= {_decoded(s) for s in spellings if s.startswith("file://") and "%" in s}
        for s in list(spellings):
            if s.startswith("file:///"):
                folder, _, name = s.removeprefix("file://").rpartition("/")
                if real_dirs is not None and folder not in real_dirs:
                    real_dirs[folder] = os.path.realpath(folder or "/")
                real = (real_dirs or {}).get(folder) or os.path.realpath(folder or "/")
                spellings.add("file://" + real.rstrip("/") + "/" + name)
        return {k for s in spellings if (k := self._under(s)) is not None}

    def _local(self, uri: str) -> str:
        if not uri.startswith("local://"):  # lakeFS's local blockstore: an absolute path, or one under it
            return uri
        rest = uri.removeprefix("local://")
        if not rest.startswith("/") and self.local_root:
            rest = os.path.join(self.local_root, rest)
        return "file://" + rest

    def _under(self, path: str) -> str | None:
        cut = len(path)
        while (cut := path.rfind("/", 0, cut)) > 0:
            prefix = self.folders.get(path[: cut + 1])
            if prefix is not None:
                return prefix + path[cut + 1 :]
        return None

    def task(self) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        """A task mapping a column of locations (the first) to keys, those elsewhere left out."""

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            real_dirs: dict[str, str] = {}
            for batch in batches:
                found = sorted({k for u in batch.column(0).to_pylist() if u for k in self.keys(u, real_dirs)})
                yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], names=["address"])

        return run


def _decoded(uri: str) -> str:
    from urllib.parse import unquote

    return "file://" + unquote(uri.removeprefix("file://"))


def locator(written: str, real: str, named: Mapping[str, str], local_root: str | None = None) -> Locator:
    """The root as written and as it is, and each named folder as written (-> its key prefix)."""
    folders: dict[str, str] = {}
    for location, prefix in [(written, ""), (real, ""), *named.items()]:
        for spelling in (canonical(location), _decoded(canonical(location)) if location.startswith("file:") else None):
            if spelling:
                folders[spelling.rstrip("/") + "/"] = prefix
    from urllib.parse import unquote

    roots = tuple(dict.fromkeys(unquote(r).rstrip("/") + "/" for r in (written, real)))
    return Locator(folders, os.path.abspath(local_root) if local_root else None, roots)


def referenced(spark: SparkSession, systems: Systems, where: Locator) -> DataFrame:
    """Every key under the warehouse some named system references (see the module)."""
    parts = [iceberg_references(spark, systems, where)]
    parts += [delta_references(spark, d, where) for d in systems.delta]
    parts += [named_files(spark, systems.files, where)] if systems.files else []
    parts += [repository_references(spark, r.storage, sorted(r.trees), r.staged, where) for r in systems.repositories]
    parts += [lakefs_references(spark, t.trees, sorted(t.files), where) for t in systems.lakefs]
    found = parts[0]
    for part in parts[1:]:
        found = found.unionByName(part)
    return found


def named_files(spark: SparkSession, files: tuple[str, ...], where: Locator) -> DataFrame:
    """Files a system names itself (a catalog's database), as warehouse keys (a short list)."""
    from lakegc.engine.tasks import work_items

    keys = sorted({k for f in files for k in where.keys(f)})

    def emit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            yield pa.RecordBatch.from_arrays([pa.array(keys, pa.string())], names=["address"])

    return work_items(spark, 1, 1).mapInArrow(emit, ADDRESS)


def iceberg_references(spark: SparkSession, systems: Systems, where: Locator) -> DataFrame:
    from lakegc.connectors.iceberg.reachable import reachable_files
    from lakegc.engine.tasks import work_items

    if not systems.iceberg:
        return work_items(spark, 0, 1).selectExpr("cast(null as string) as address").where("false")
    reachable = reachable_files(spark, [t.files() for t in systems.iceberg])
    return reachable.select("uri").mapInArrow(where.task(), ADDRESS)


def delta_references(spark: SparkSession, table: DeltaTable, where: Locator, since: Segment | None = None) -> DataFrame:
    """What a Delta table's log keeps, as warehouse keys, for whatever else might judge those files:
    - every path its adds and removes name by absolute path under the warehouse (a shallow clone's
      source files, deletion vectors kept elsewhere), read with the warehouse as the root its paths
      are taken against (a relative path comes out as itself, naming a key at the warehouse's
      root: one more file kept, at most);
    - for a table under the warehouse, its live files and those its retention still keeps, under
      its folder: another table nested in one of its folders must not take them.
    With `since` (the commits after the mark's), the first part of those commits only."""
    from pyspark.sql import functions as F

    from lakegc.connectors.delta.actions import ADD, REMOVE, read_actions
    from lakegc.connectors.delta.vacuum import live_files

    plan = table.plan
    actions = read_actions(spark, plan.storage, since or plan.seg, where.roots).where(F.col("kind").isin(ADD, REMOVE))
    found = paths(actions.select("path", "dv"))
    if table.prefix is None or since is not None:
        return found
    own = read_actions(spark, plan.storage, plan.seg, plan.roots)
    cutoff_ms = int((plan.run.now - plan.retention).timestamp() * 1000)
    inside = own.where((F.col("kind") == REMOVE) & (F.coalesce(F.col("deletion_ts"), F.lit(0)) >= cutoff_ms))
    kept = paths(live_files(own).select("path", "dv").unionByName(inside.select("path", "dv")))
    return found.unionByName(prefixed(kept, table.prefix))


def prefixed(keys: DataFrame, prefix: str) -> DataFrame:
    """Keys of a table's folder as keys of the warehouse."""
    from pyspark.sql import functions as F

    return keys.select(F.concat(F.lit(prefix), F.col("address")).alias("address"))


def paths(rows: DataFrame) -> DataFrame:
    """The `path` and `dv` of file actions as one column of keys (`address`)."""
    from pyspark.sql import functions as F

    named = rows.select(F.col("path").alias("address")).unionByName(rows.select(F.col("dv").alias("address")))
    return named.where(F.col("address").isNotNull())


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
    return full.mapInArrow(where.task(), ADDRESS)


def lakefs_references(spark: SparkSession, trees: object, files: list[str], where: Locator) -> DataFrame:
    """The full addresses outside its namespace that a lakeFS repository's range files name."""
    ranges = [file_id for file_id, kind, _ in trees.kinds(spark, files) if kind == "ranges"]  # type: ignore[attr-defined]
    return trees.external(spark, ranges).mapInArrow(where.task(), ADDRESS)  # type: ignore[attr-defined]


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
