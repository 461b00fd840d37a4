"""Before a warehouse run deletes: every named system asked again, and every folder looked at again.

Writers go on while a run marks. What they did in between keeps what it reaches:
- a Delta commit since the planned version keeps the files it adds (a rewritten log fails the run);
- an Iceberg table changed since the mark (or created) keeps everything it references now;
- a lakegc repository's new commits and its staging now, a lakeFS repository's new metadata files,
  keep the full addresses they name;
- a folder holding a candidate that holds a table marker now (a table created, or converted to
  Delta, over old files) keeps everything under it.
A candidate the IOx catalog names (any row, soft-deleted or not) is never a candidate at all
(`outside_iox`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.connectors.foreign import ICEBERG, Prefixes, marker_of
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.errors import UnsafeLocation
from lakegc.storage import Storage
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.engine.runs import Run
    from lakegc.warehouse.live import Locator
    from lakegc.warehouse.systems import Systems

_EVERY_ROW = -(2**62)  # a soft-delete time before any: every row of the IOx catalog protects its file


def still_unreferenced(
    spark: SparkSession,
    systems: Systems,
    storage: Storage,
    where: Locator,
    candidates: DataFrame,
    run: Run,
    known: frozenset[str],
) -> DataFrame:
    """The candidates less what the systems reference now (see the module)."""
    for now in _referenced_now(spark, systems, where, run):
        candidates = candidates.join(now, "address", "left_anti")
    return outside_iox(outside_new_tables(spark, storage, candidates, run, known), systems.iox_catalog)


def _referenced_now(spark: SparkSession, systems: Systems, where: Locator, run: Run) -> Iterator[DataFrame]:
    """What the Iceberg tables changed since the mark, the repositories' new commits and staging,
    and lakeFS's new metadata files reference now."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    from lakegc.connectors.delta.actions import ADD, read_actions
    from lakegc.connectors.delta.gc import segment_since
    from lakegc.lakefs.trees import metadata_files
    from lakegc.warehouse import live
    from lakegc.warehouse.systems import iceberg_tables, repositories

    for d in systems.delta:  # under the warehouse or not: its absolute paths may name files here
        since = segment_since(d.plan)
        if since is None:
            continue
        run.details[f"Delta commits since the mark ({d.location})"] = since.version - d.plan.seg.version
        yield live.delta_references(spark, d, where, since)
        if d.prefix is not None:
            added = read_actions(spark, d.plan.storage, since, d.plan.roots).where(F.col("kind") == ADD)
            yield live.prefixed(live.paths(added.select("path", "dv")), d.prefix)
    if systems.catalogs:
        seen = {t.state for t in systems.iceberg}  # by state: a table reached by two names was read once
        changed = [t for t in iceberg_tables(systems.catalogs)[0] if t.state not in seen]
        if changed:
            run.details["Iceberg tables changed since the mark"] = sorted(t.label for t in changed)
            yield live.iceberg_references(spark, replace(systems, iceberg=tuple(changed)), where)
    before = {r.name: r.trees for r in systems.repositories}
    for r in repositories(systems.metastore, utcnow()):  # one created since the mark too
        new = sorted(r.trees - before.get(r.name, frozenset()))
        yield live.repository_references(spark, r.storage, new, r.staged, where)
    for t in systems.lakefs:
        new = sorted(set(metadata_files(t.trees.storage)) - t.files)
        if new:
            yield live.lakefs_references(spark, t.trees, new, where)


def outside_new_tables(
    spark: SparkSession, storage: Storage, candidates: DataFrame, run: Run, known: frozenset[str]
) -> DataFrame:
    """The candidates less those under a folder that holds a table marker now and did not at the
    mark (`known`: the folders the mark judged by). Their folders are looked at on the executors;
    only the folders found marked reach the driver."""
    if folder_marker(storage, "") is not None:
        raise UnsafeLocation(
            f"the warehouse location {storage.uri} became a table or namespace during the run; nothing was deleted"
        )

    def folders_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lakegc.warehouse.owners import ancestors

        for batch in batches:
            found = sorted({f for key in batch.column("address").to_pylist() for f in ancestors(key)} - known)
            yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], names=["folder"])

    def marked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            found = [f for f in batch.column("folder").to_pylist() if folder_marker(storage, f) is not None]
            yield pa.RecordBatch.from_arrays([pa.array(found, pa.string())], names=["folder"])

    folders = candidates.select("address").mapInArrow(folders_of, "folder string").distinct()
    now_marked = [r["folder"] for r in folders.mapInArrow(marked, "folder string").collect()]  # a few folders
    if not now_marked:
        return candidates
    run.details["folders that became tables during the run"] = sorted(now_marked)
    under = Prefixes.of(now_marked)

    def outside(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = batch.column("address").to_pylist()
            yield batch.filter(pa.array([not under.hold(k) for k in keys], pa.bool_()))

    return candidates.mapInArrow(outside, ddl(CANDIDATES))


def check_not_in_a_table(real: str) -> None:
    """Refuse a location (`real`: canonical, symlinks resolved) that is a table or namespace, or
    lies in one: a marker in it or in any folder above it (its files would be judged without the
    log or catalog that says which are live)."""
    from lakegc.storage import open_storage

    if any(part in ("_lakegc", "_lakefs") for part in real.split("/")):
        raise UnsafeLocation(
            f"the warehouse location {real} lies in lakegc's or lakeFS's own metadata (a _lakegc/ or _lakefs/ "
            "folder: a namespace's, or a restore window); nothing was listed or deleted"
        )
    for folder in _self_and_above(real):
        marker = folder_marker(open_storage(folder), "")
        if marker is not None:
            what = "is itself" if folder == real else f"lies inside {folder}, which is"
            raise UnsafeLocation(
                f"the warehouse location {real} {what} a {marker}: collect it by the system that owns it; "
                "nothing was listed or deleted"
            )


def _self_and_above(location: str) -> list[str]:
    """`file:///a/b` -> [`file:///a/b`, `file:///a`, `file:///`]; `s3://k/a` -> [`s3://k/a`, `s3://k`]."""
    scheme, rest = location.split("://", 1)
    head, _, path = rest.partition("/")  # file: head is "" (no authority); s3: the bucket
    parts = [p for p in path.split("/") if p]
    found = [f"{scheme}://{head}/" + "/".join(parts[:n]) for n in range(len(parts), 0, -1)]
    return found + [f"{scheme}://{head}/" if scheme == "file" else f"{scheme}://{head}"]


def folder_marker(storage: Storage, folder: str) -> str | None:
    """The kind of table or namespace marker `folder` (a key prefix, "" the root) holds now."""
    if storage.exists(f"{folder}_lakegc/repository.json"):
        return "lakegc namespace"
    for sub in ("_delta_log/", "_lakefs/"):
        if next(iter(storage.list(folder + sub, recursive=False)), None) is not None:
            return "Delta table" if sub == "_delta_log/" else "lakeFS namespace"
    for info in storage.list(folder + "metadata/", recursive=False):
        found = marker_of(info.key[len(folder) :])
        if found is not None and found[0] == "" and found[1] == ICEBERG:
            return ICEBERG
    return None


def outside_iox(candidates: DataFrame, catalog_url: str | None) -> DataFrame:
    """The candidates less the files an IOx catalog row names (`<uuid>.parquet`, any row)."""
    if not catalog_url:
        return candidates
    from lakegc.connectors.catalog import ParquetFileCatalog, classify

    url, schema = catalog_url, candidates.schema

    def unnamed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        catalog = ParquetFileCatalog(url)
        for batch in batches:
            ids = [classify(k.rsplit("/", 1)[-1])[1] for k in batch.column("address").to_pylist()]
            named = catalog.naming({i for found in ids for i in found}, _EVERY_ROW)
            yield batch.filter(pa.array([not named.intersection(found) for found in ids], pa.bool_()))
        catalog.engine.dispose()

    return candidates.mapInArrow(unnamed, schema)


__all__ = ["folder_marker", "outside_iox", "outside_new_tables", "still_unreferenced"]
