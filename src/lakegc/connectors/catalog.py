"""IOx-style catalog GC (InfluxDB IOx's garbage collector; `lakegc catalog gc`): a SQL table `parquet_file` naming the
Parquet files of an object store, with a soft delete (`to_delete`, epoch nanoseconds).

Two cutoffs, because two different readers must stay safe:
- a row soft-deleted before now - parquetfile cutoff is hard-deleted: by then every querier has
  refreshed the cache that could still name its file;
- an object modified before now - objectstore cutoff is deleted when no row names it (a
  soft-deleted row still does, until it is hard-deleted): younger objects may be named by a
  backup or by a write still in flight.

An object's file name decides how it is judged (`classify`): not `*.parquet` is unexpected, a stem
that is no UUID is invalid, both deleted once old; a UUID is looked up in the catalog, in batches,
on the executors. Rows that this run hard-deletes do not protect their objects, so one run leaves
the store as it should be. The catalog is read before anything changes: any catalog error fails
the run with nothing deleted, and a dry run changes no row.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlalchemy as sa

from lakegc.connectors.foreign import leave_out_foreign, outside_foreign
from lakegc.connectors.protected import connector_protected, iceberg_table_places
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.delete import delete_objects
from lakegc.engine.guard import check_root
from lakegc.engine.listing import list_folders, location_folders, open_location
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run
from lakegc.errors import InvalidArgument, LakegcError, first_line
from lakegc.metastore.sql import sql_url
from lakegc.redact import mask_secrets
from lakegc.storage import Storage
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MIN_CUTOFF = timedelta(hours=3)
DEFAULT_CUTOFF = timedelta(days=14)
UNEXPECTED, INVALID, UNREFERENCED = "unexpected", "invalid", "unreferenced"
PARQUET_FILE = sa.table("parquet_file", sa.column("object_store_id", sa.Text), sa.column("to_delete", sa.BigInteger))
_LOOKUP_BATCH = 500  # ids per catalog query
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CatalogError(LakegcError):
    """The catalog could not be read or written; nothing was deleted because of it."""


@dataclass(frozen=True)
class CatalogGcOptions:
    """What `lakegc catalog gc` decides with (the run's own options are `engine.collector.RunOptions`)."""

    objectstore_cutoff: timedelta = DEFAULT_CUTOFF
    parquetfile_cutoff: timedelta = DEFAULT_CUTOFF


def check_cutoffs(objectstore_cutoff: timedelta, parquetfile_cutoff: timedelta) -> None:
    """Shorter cutoffs would race the queriers' caches and writes in flight."""
    for name, value in (("--objectstore-cutoff", objectstore_cutoff), ("--parquetfile-cutoff", parquetfile_cutoff)):
        if value < MIN_CUTOFF:
            raise InvalidArgument(
                f"{name} {duration_text(value.total_seconds())} is under the minimum of 3h: "
                "queriers and writes in flight may still need those files"
            )


def classify(name: str) -> tuple[str | None, tuple[str, ...]]:
    """How a file name is judged: (reason, ()) for files that are garbage once old (`unexpected`:
    not Parquet, `invalid`: no UUID stem), or (None, ids) with the catalog ids that would name it
    (the stem as written and the UUID's other spellings, upper or lower case, with or without
    hyphens: a row in any of them protects the file)."""
    if not name.endswith(".parquet"):
        return UNEXPECTED, ()
    stem = name[: -len(".parquet")]
    try:
        parsed = uuid.UUID(stem)
    except ValueError:
        return INVALID, ()
    return None, tuple(sorted({stem, str(parsed), str(parsed).upper(), parsed.hex, parsed.hex.upper()}))


def canonical_id(value: object) -> str:
    """A catalog id as `classify` lists it first-class: a UUID (text or a native uuid column) in
    canonical form, anything else as written."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return str(value)


def epoch_ns(when: datetime) -> int:
    return (when - _EPOCH) // timedelta(microseconds=1) * 1000


class ParquetFileCatalog:
    """The catalog's `parquet_file` table: the few statements GC runs against it."""

    def __init__(self, url: str):
        self.url, self.shown = url, mask_secrets(url)
        try:
            parsed = sql_url(url)
            if parsed.get_backend_name() == "sqlite" and not (parsed.database and Path(parsed.database).is_file()):
                raise CatalogError(f"catalog {self.shown}: no such database file")
            self.engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError, ImportError) as exc:
            raise CatalogError(f"invalid catalog URL {self.shown!r}: {exc}") from None

    @contextmanager
    def _answering(self) -> Iterator[None]:
        """A database error inside becomes one CatalogError line naming the catalog."""
        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            raise CatalogError(f"catalog {self.shown}: {first_line(getattr(exc, 'orig', None) or exc)}") from None

    def check(self) -> None:
        with self._answering(), self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("parquet_file"):
                raise CatalogError(f"catalog {self.shown} has no parquet_file table")

    def naming(self, ids: set[str], keep_from_ns: int) -> set[str]:
        """The ids a row names that this run keeps (not soft-deleted, or soft-deleted at or after
        `keep_from_ns`), in canonical form."""
        found: set[str] = set()
        ordered = sorted(ids)
        col = PARQUET_FILE.c
        with self._answering(), self.engine.connect() as conn:
            for i in range(0, len(ordered), _LOOKUP_BATCH):
                batch = ordered[i : i + _LOOKUP_BATCH]
                found.update(
                    canonical_id(v)
                    for v in conn.execute(
                        sa.select(col.object_store_id).where(
                            col.object_store_id.in_(batch),
                            sa.or_(col.to_delete.is_(None), col.to_delete >= keep_from_ns),
                        )
                    ).scalars()
                )
        return found

    def count_expired(self, keep_from_ns: int) -> int:
        with self._answering(), self.engine.connect() as conn:
            return conn.execute(
                sa.select(sa.func.count()).select_from(PARQUET_FILE).where(PARQUET_FILE.c.to_delete < keep_from_ns)
            ).scalar_one()

    def hard_delete(self, keep_from_ns: int) -> int:
        """Delete the rows soft-deleted before `keep_from_ns`, in one transaction."""
        with self._answering(), self.engine.begin() as conn:
            return conn.execute(PARQUET_FILE.delete().where(PARQUET_FILE.c.to_delete < keep_from_ns)).rowcount


def run_catalog_gc(
    catalog_url: str,
    store: str,
    options: CatalogGcOptions,
    run: RunOptions = RunOptions(),
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Mark (list the store, judge each old object) and, unless a dry run, sweep (re-judge the
    candidates, hard-delete the expired rows, delete the objects)."""
    return collect(CatalogCollector(catalog_url, store, options, run), phase, spark, run.start)


@dataclass(frozen=True)
class CatalogPlan:
    run: RunPlan
    catalog: ParquetFileCatalog
    storage: Storage
    keep_from_ns: int  # rows soft-deleted at or after this (epoch ns) still protect their object


@dataclass(frozen=True)
class CatalogCollector:
    """`lakegc catalog gc` as a collector (`engine.collector`)."""

    catalog_url: str
    store: str
    options: CatalogGcOptions
    given: RunOptions

    def plan(self) -> CatalogPlan:
        options = self.options
        check_cutoffs(options.objectstore_cutoff, options.parquetfile_cutoff)
        catalog = ParquetFileCatalog(self.catalog_url)
        runs_location = self.given.runs_location or default_runs_location()
        protected = connector_protected(self.given.metastore, runs_location, (self.catalog_url,))
        check_root(self.store, "store", protected + iceberg_table_places())
        catalog.check()
        storage = open_location(self.store, "store")
        now = utcnow()
        object_cutoff = now - options.objectstore_cutoff
        settings = {
            "catalog": catalog.shown,
            "objectstore cutoff": f"{duration_text(options.objectstore_cutoff.total_seconds())} "
            f"(objects modified before {shown_time(object_cutoff)})",
            "parquetfile cutoff": f"{duration_text(options.parquetfile_cutoff.total_seconds())} "
            f"(rows soft-deleted before {shown_time(now - options.parquetfile_cutoff)})",
        }
        run = replace(self.given.plan("catalog", storage.uri, now, object_cutoff, runs_location), settings=settings)
        return CatalogPlan(run, catalog, storage, epoch_ns(now - options.parquetfile_cutoff))

    def mark(self, spark: SparkSession, plan: CatalogPlan, stage: Stage) -> Marked:
        """List the store (a table nobody named is left out whole), judge each old object."""
        timed, storage = stage.timed, plan.storage
        timed("listing the store", storage.uri)
        listed = list_folders(spark, storage, location_folders(storage), plan.run.cutoff).persist()
        foreign = leave_out_foreign(stage.run, listed, {"": storage.uri}, timed)
        listing = outside_foreign(listed, foreign)
        tally = stage.tally_listing(listing)
        timed("looking up the catalog", f"{tally.judged} objects older than the objectstore cutoff")
        old_objects = listing.where(~listing.young).select("address", "size", "mtime")
        counts = stage.write_candidates(judged(old_objects, self.catalog_url, plan.keep_from_ns))
        listed.unpersist()
        stage.run.details["catalog rows past the parquetfile cutoff"] = plan.catalog.count_expired(plan.keep_from_ns)
        return Marked(tally, counts)

    def sweep(self, spark: SparkSession, plan: CatalogPlan, stage: Stage) -> Swept:
        """Re-judge the candidates (a row written since the mark protects its object), hard-delete
        the expired rows, delete the objects."""
        timed = stage.timed
        timed("re-checking the candidates", f"{stage.run.num_candidates} candidates")
        candidates = stage.read(spark).select("address", "size", "mtime")
        sent = stage.write_to_delete(judged(candidates, self.catalog_url, plan.keep_from_ns))
        timed("hard-deleting catalog rows")
        stage.run.details["catalog rows deleted"] = plan.catalog.hard_delete(plan.keep_from_ns)
        timed("deleting objects")
        budget = stage.budget
        results = delete_objects(
            spark,
            plan.storage,
            stage.read(spark, "to_delete"),
            max_deletes=budget.max_deletes,
            max_rate=budget.max_rate,
        )
        return Swept(stage.record_deletes(results), sent)


def judged(objects: DataFrame, catalog_url: str, keep_from_ns: int) -> DataFrame:
    """The objects (address, size, mtime) that are garbage, with their reason: judged by name, and
    by the catalog for UUID names (each executor task opens its own connection)."""

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        catalog = ParquetFileCatalog(catalog_url)
        for batch in batches:
            verdicts = [classify(address.rsplit("/", 1)[-1]) for address in batch.column("address").to_pylist()]
            named = catalog.naming({i for _, ids in verdicts for i in ids}, keep_from_ns)
            reasons = [reason or (None if named.intersection(ids) else UNREFERENCED) for reason, ids in verdicts]
            rows = pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(reasons, pa.string())], names=["address", "size", "mtime", "reason"]
            )
            yield rows.filter(pa.array([reason is not None for reason in reasons]))
        catalog.engine.dispose()

    return objects.mapInArrow(judge, ddl(CANDIDATES))
