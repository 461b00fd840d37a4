"""The orphan files of an Iceberg GC run, on Spark: the table locations it lists (`Root`: each
collected location once, less the other tables' locations nested in it), what of a listing it may
judge (hidden paths and nested tables left out), which of those files no table references and why
each goes (`judge`), and their deletion, each through the store of the root it lies under.

Apart from `gc`, which runs these steps as the run's mark and sweep, because these are the parts
Spark runs: what goes to `mapInArrow` (`with_path`, and the closures `visible_files`, `locator` and
`outside_nested` make) runs on the executors, so it is a module-level function, or a closure over
plain data (bases, key prefixes, partition field names), never over the driver's catalogs or session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.connectors.foreign import ICEBERG, Foreign, Prefixes
from lakegc.connectors.iceberg.catalogs import Loaded, real_location
from lakegc.connectors.iceberg.paths import (
    Location,
    PrefixMismatch,
    hidden,
    key_prefix,
    listing_plan,
    owners_partition_fields,
    parse_location,
    within,
)
from lakegc.engine.columns import DELETES, LISTING, ddl
from lakegc.engine.delete import Budget, delete_objects
from lakegc.engine.listing import list_folders, location_folders
from lakegc.errors import LakegcError
from lakegc.storage import LocalStorage, Storage, open_storage

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ORPHAN, EXPIRED, MISMATCH = "orphan", "expired", "prefix mismatch"
LOCATED_DDL = "uri string, key string, path string, scheme string, authority string, size long, mtime timestamp"


@dataclass(frozen=True)
class Root:
    """A collected table location: listed, and the only place files are deleted from, except
    under the other tables' locations nested in it (`leave_out`, key prefixes)."""

    uri: str
    location: Location
    storage: Storage
    real: Location  # symlinks resolved: what nesting is judged on
    leave_out: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()  # the tables whose locations those are, for the run's details

    @property
    def base(self) -> str:
        """The prefix of every listed file's URI: the location as written, then the file's key."""
        return f"{self.location.scheme}://{self.location.authority}{self.location.path.rstrip('/')}/"


def listing_roots(tables: list[Loaded]) -> list[Root]:
    """The collected tables' locations, each listed once, less the other tables' locations nested
    in them (`paths.listing_plan`, on real paths)."""
    targets = sorted((t for t in tables if t.target), key=lambda t: t.table.location())
    others = [t for t in tables if not t.target]
    roots: list[Root] = []
    for real, nested in listing_plan([t.real for t in targets], [o.real for o in others]):
        uri = next(t.table.location().rstrip("/") for t in targets if t.real == real)
        location = parse_location(uri)
        names = tuple(sorted(f"{o.label}: {o.table.location()}" for o in others if o.real in nested))
        roots.append(
            Root(uri, location, _storage_at(uri, location), real, tuple(key_prefix(real, n) for n in nested), names)
        )
    return roots


def _storage_at(uri: str, location: Location) -> Storage:
    """The store under a table location at its path as written (FileIO does not decode it either)."""
    if location.scheme == "file" and not location.authority:
        return LocalStorage(location.path)
    if location.scheme == "s3":
        return open_storage(f"s3://{location.authority}{location.path}")
    raise LakegcError(f"table location {uri}: lakegc collects local (file://) and s3:// locations only")


def partition_scopes(root: Root, tables: list[Loaded]) -> dict[str, frozenset[str]]:
    """For the hidden-path rule (`paths.owners_partition_fields`): the key prefix, under `root`, of
    each collected table's location it covers ("" for the root's own), and the partition field
    names of every spec of the collected tables at exactly that location. Only collected tables
    count, as only a table's own specs count in Iceberg: a protecting table sharing the location
    un-hides nothing (its files stay by its references)."""
    scopes: dict[str, frozenset[str]] = {}
    for t in tables:
        if t.target and within(t.real, root.real):
            prefix = "" if t.real == root.real else key_prefix(root.real, t.real)
            names = frozenset(f.name for spec in t.table.metadata.partition_specs for f in spec.fields)
            scopes[prefix] = scopes.get(prefix, frozenset()) | names
    return scopes


def list_locations(spark: SparkSession, roots: list[Root], cutoff: datetime) -> DataFrame:
    """Everything under the roots (LISTING_DDL, `slice` = the root's index), less the nested tables'
    locations the catalogs name (never entered)."""
    frames = []
    for index, root in enumerate(roots):
        if isinstance(root.storage, LocalStorage) and not root.storage.root.is_dir():
            continue  # a table that never wrote a file
        frames.append(
            list_folders(
                spark, root.storage, location_folders(root.storage, str(index), leave_out=root.leave_out), cutoff
            )
        )
    if not frames:
        return spark.createDataFrame([], ddl(LISTING))
    listing = frames[0]
    for frame in frames[1:]:
        listing = listing.unionByName(frame)
    return listing


def visible_files(
    listing: DataFrame, roots: list[Root], scopes: list[dict[str, frozenset[str]]], foreign: list[Foreign]
) -> DataFrame:
    """The listed files a run may judge: hidden paths left out (`scopes`: each root's
    `partition_scopes`), and everything under a nested table's location, named by a catalog
    (`Root.leave_out`) or found by its marker (`foreign`)."""
    leave_out = [
        Prefixes.of(r.leave_out + tuple(f.prefix for f in foreign if f.slice == str(i))) for i, r in enumerate(roots)
    ]

    def visible(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys, slices = batch.column("address").to_pylist(), batch.column("slice").to_pylist()
            yield batch.filter(
                pa.array(
                    [
                        not hidden(k, owners_partition_fields(k, scopes[int(i)])) and not leave_out[int(i)].hold(k)
                        for k, i in zip(keys, slices)
                    ]
                )
            )

    return listing.mapInArrow(visible, ddl(LISTING))


def own_markers(roots: list[Root], tables: list[Loaded]) -> set[Foreign]:
    """The Iceberg markers that are the run's own: `metadata/` in the folder of every table it read
    (at its location, and where its current metadata file lies), under each root."""
    own = set()
    for index, root in enumerate(roots):
        for t in tables:
            places = [t.real]
            folder = t.table.metadata_location.rsplit("/", 1)[0]
            if folder.endswith("/metadata"):  # a marker only where the folder is `metadata/`
                places.append(real_location(parse_location(folder.rsplit("/", 1)[0])))
            for place in places:
                if within(place, root.real):
                    prefix = "" if place == root.real else key_prefix(root.real, place)
                    own.add(Foreign(str(index), prefix, ICEBERG))
    return own


def locator(roots: list[Root]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Listing rows -> LOCATED_DDL: the full URI of each file and its normalised parts."""
    bases = [r.base for r in roots]

    def locate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            uris = [
                bases[int(i)] + key
                for key, i in zip(batch.column("address").to_pylist(), batch.column("slice").to_pylist())
            ]
            parsed = [parse_location(u) for u in uris]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(uris),
                    batch.column("address"),
                    pa.array([p.path for p in parsed]),
                    pa.array([p.scheme for p in parsed]),
                    pa.array([p.authority for p in parsed]),
                    batch.column("size"),
                    batch.column("mtime"),
                ],
                names=["uri", "key", "path", "scheme", "authority", "size", "mtime"],
            )

    return locate


def judge(
    located: DataFrame, reachable: DataFrame, mode: PrefixMismatch, expired: DataFrame | None = None
) -> DataFrame:
    """The located files nothing references (uri, size, mtime, reason): `orphan`, or `prefix
    mismatch` when a reference names the same path under another scheme or authority (left out
    with IGNORE; the caller refuses to go on with ERROR). An orphan that `expired` (REACHABLE_DDL
    rows: the files of the snapshots the run expires) names, compared as references are, is
    `expired` instead: the label comes after the files are chosen and changes none of them."""
    from pyspark.sql import functions as F

    refs = reachable.select("path", F.col("scheme").alias("r_scheme"), F.col("authority").alias("r_authority"))
    per_file = (
        located.join(refs, "path", "left")
        .groupBy("uri", "size", "mtime", "path", "scheme", "authority")  # the last three follow from uri
        .agg(
            F.max(F.coalesce(_same_prefix(), F.lit(False))).alias("referenced"),
            F.max(F.col("r_scheme").isNotNull()).alias("path_named"),
        )
    )
    unreferenced = per_file.where(~F.col("referenced"))
    if mode is PrefixMismatch.IGNORE:
        unreferenced = unreferenced.where(~F.col("path_named"))
    orphan = F.lit(ORPHAN)
    if expired is not None:
        unreferenced = _expired_named(unreferenced, expired)
        orphan = F.when(F.col("expired_named"), F.lit(EXPIRED)).otherwise(orphan)
    return unreferenced.select(
        "uri", "size", "mtime", F.when(F.col("path_named"), F.lit(MISMATCH)).otherwise(orphan).alias("reason")
    )


def _same_prefix() -> Column:
    """A reference (r_scheme, r_authority) names a located file (scheme, authority) of its path
    when what it spells out matches: Iceberg's rule, what the metadata leaves out matches anything."""
    from pyspark.sql import functions as F

    return ((F.col("r_scheme") == "") | (F.col("r_scheme") == F.col("scheme"))) & (
        (F.col("r_authority") == "") | (F.col("r_authority") == F.col("authority"))
    )


def _expired_named(unreferenced: DataFrame, expired: DataFrame) -> DataFrame:
    """The unreferenced files, each once, with `expired_named`: whether an expired snapshot's file
    list names it (a left join: no file is added or dropped)."""
    from pyspark.sql import functions as F

    refs = expired.select("path", F.col("scheme").alias("r_scheme"), F.col("authority").alias("r_authority"))
    return (
        unreferenced.join(refs, "path", "left")
        .groupBy("uri", "size", "mtime", "path", "scheme", "authority", "path_named")
        .agg(F.max(F.coalesce(_same_prefix(), F.lit(False))).alias("expired_named"))
    )


def delete_candidates(spark: SparkSession, roots: list[Root], to_delete: DataFrame, budget: Budget) -> DataFrame:
    """Delete each candidate through the storage of the root it lies under (RESULT_DDL rows with
    full URIs), at the run's rate shared by the roots. A --max-deletes budget is applied before
    (`Stage.within_budget`): `to_delete` is already the rows that may go, written once, so every
    root's delete reads the same ones (a `limit` here would be chosen again by each root's branch
    of the plan, and could let N go per root)."""
    from pyspark.sql import functions as F

    rate = budget.max_rate / len(roots) if budget.max_rate and roots else None
    results = None
    for root in roots:
        base = root.base
        inner = [r.base for r in roots if r.base != base and r.base.startswith(base)]  # deleted through theirs
        mine = to_delete.where(F.col("address").startswith(base))
        for other in inner:
            mine = mine.where(~F.col("address").startswith(other))
        mine = mine.withColumn("address", F.expr(f"substring(address, {len(base) + 1})"))
        done = delete_objects(spark, root.storage, mine, max_rate=rate)
        done = done.withColumn("address", F.concat(F.lit(base), "address"))
        results = done if results is None else results.unionByName(done)
    return results if results is not None else spark.createDataFrame([], ddl(DELETES))


def with_path(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Candidate rows with the normalised path of their address, to join against references."""
    for batch in batches:
        paths = [parse_location(uri).path for uri in batch.column("address").to_pylist()]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(paths, pa.string())], names=[*batch.schema.names, "path"]
        )


def outside_nested(
    nested: dict[str, tuple[str, ...]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Candidate rows that lie under no nested table location of the root they were listed from
    (`nested`: root base -> key prefixes; a candidate belongs to the longest base it starts with)."""
    bases = sorted(nested, key=len, reverse=True)
    held = {base: Prefixes.of(prefixes) for base, prefixes in nested.items()}

    def outside(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keep = []
            for address in batch.column("address").to_pylist():
                base = next((b for b in bases if address.startswith(b)), None)
                keep.append(base is None or not held[base].hold(address[len(base) :]))
            yield batch.filter(pa.array(keep, pa.bool_()))

    return outside
