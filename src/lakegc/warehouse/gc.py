"""`lakegc warehouse gc LOCATION`: one live set for everything under a prefix.

Per-table collectors clean inside a table; none may clean between tables, where a dropped table's
folder or a failed write's files lie, because none knows who else references them. A warehouse run
is told every system that may (Iceberg catalogs, Delta tables, lakegc and lakeFS repositories, an
IOx catalog) and deletes only what none of them references:

1. Plan: LOCATION passes the deletion guard (not `/`, no home folder, no metastore, no run folder;
   it may hold namespaces and tables: that is its point). Every named system is read
   (`systems`); any that cannot be read fails the run before it starts.
2. Mark: LOCATION is listed once (its own `_lakegc/`, the restore window, left out). Markers show
   every table and namespace folder; `owners.judge` gives each key its category; what any system
   references (`live.referenced`) is subtracted in one anti-join; inside a Delta table only what
   its own VACUUM takes stays. What is older than `--min-age` is what the run would free, reported
   per top-level folder and category; candidates are all of it but unowned tables' (unless
   `--unowned delete`).
3. Sweep: every system is asked again (Delta logs, Iceberg catalogs, repositories' trees and
   staging, lakeFS's metadata files), and a folder that holds a marker now (a table created over
   old files during the run) keeps everything under it; then the rest is deleted, or moved into
   the restore window.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lakegc.connectors.foreign import find_markers
from lakegc.connectors.protected import connector_protected
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.delete import METADATA_PREFIX, delete_objects
from lakegc.engine.guard import check_root
from lakegc.engine.listing import list_folders, location_folders, open_location
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run
from lakegc.engine.window import window_for
from lakegc.errors import InvalidArgument, UnsafeLocation
from lakegc.storage import Storage, normalize_location
from lakegc.timeutil import shown_time, utcnow
from lakegc.warehouse import live, recheck
from lakegc.warehouse.owners import KEPT, UNOWNED, Folder, folders, unowned_report
from lakegc.warehouse.systems import Named, Root, Systems, delta_locations, read_systems
from lakegc.warehouse.verdicts import JUDGED_DDL, verdicts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_MIN_AGE = timedelta(days=7)


@dataclass(frozen=True)
class WarehouseGcOptions:
    """What `lakegc warehouse gc` decides with (the run's own options are `RunOptions`)."""

    iceberg_catalogs: tuple[str, ...] = ()
    delta_tables: tuple[str, ...] = ()
    delta_under: tuple[str, ...] = ()
    repositories: bool = False
    lakefs_repos: tuple[str, ...] = ()
    lakefs_endpoint: str | None = None
    lakefs_access_key_id: str | None = None
    lakefs_secret_access_key: str | None = None
    lakefs_local_path: str | None = None
    iox_catalog: str | None = None
    min_age: timedelta = DEFAULT_MIN_AGE
    unowned_delete: bool = False
    quarantine: timedelta | None = None  # a restore window: move instead of delete, for this long


def run_warehouse_gc(
    location: str,
    options: WarehouseGcOptions,
    run: RunOptions = RunOptions(),
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Collect what no named system references under `location` (see the module)."""
    return collect(WarehouseCollector(location, options, run), phase, spark, run.start)


@dataclass(frozen=True)
class WarehousePlan:
    run: RunPlan
    storage: Storage
    root: Root
    systems: Systems
    where: live.Locator
    judged_by: set[str] = field(default_factory=set)  # the folders the mark judged by (filled by the mark)


@dataclass(frozen=True)
class WarehouseCollector:
    """`lakegc warehouse gc` as a collector (`engine.collector`)."""

    location: str
    options: WarehouseGcOptions
    given: RunOptions

    def plan(self) -> WarehousePlan:
        options = self.options
        if options.min_age < timedelta(0):
            raise InvalidArgument("--min-age must not be negative")
        if options.quarantine is not None and options.quarantine < timedelta(0):
            raise InvalidArgument("--quarantine must not be negative")
        runs_location = self.given.runs_location or default_runs_location()
        storage = open_location(self.location, "warehouse location")
        protected = connector_protected(self.given.metastore, runs_location, _catalog_urls(options))
        # a warehouse may hold namespaces (it keeps them whole), never lie in one or be one
        protected = [replace(p, holding_ok=p.what.startswith("the namespace of repository")) for p in protected]
        root = Root(check_root(storage.uri, "warehouse location", protected))
        recheck.check_not_in_a_table(root.real)
        now = utcnow()
        named = Named(
            options.iceberg_catalogs,
            tuple(delta_locations(options.delta_tables, options.delta_under)),
            options.repositories,
            self.given.metastore,
            options.lakefs_repos,
            options.lakefs_endpoint,
            options.lakefs_access_key_id,
            options.lakefs_secret_access_key,
            options.lakefs_local_path,
            options.iox_catalog,
        )
        systems = read_systems(root, named, now)
        _check_not_inside(root, systems)
        where = live.locator(
            normalize_location(self.location), root.real, _named_folders(systems), options.lakefs_local_path
        )
        run = self.given.plan("warehouse", storage.uri, now, now - options.min_age, runs_location)
        run = replace(run, settings=self._settings(systems, now - options.min_age))
        return WarehousePlan(run, storage, root, systems, where)

    def _settings(self, systems: Systems, cutoff: Any) -> dict[str, object]:
        options = self.options
        window = options.quarantine
        return {
            "min age": f"{duration_text(options.min_age.total_seconds())} (files modified before {shown_time(cutoff)})",
            "iceberg catalogs": ", ".join(systems.catalogs) or "none",
            "iceberg tables": len(systems.iceberg),
            "delta tables": len(systems.delta),
            "repositories": ", ".join(r.name for r in systems.repositories) or "none",
            "lakeFS repositories": ", ".join(r.name for r in systems.lakefs) or "none",
            "IOx catalog": "named" if systems.iox_catalog else "none",
            "unowned tables": "delete" if options.unowned_delete else "keep",
            "restore window": duration_text(window.total_seconds()) if window else "none",
        }

    def mark(self, spark: SparkSession, plan: WarehousePlan, stage: Stage) -> Marked:
        from pyspark.sql import functions as F

        timed, storage = stage.timed, plan.storage
        timed("listing the warehouse", storage.uri)
        tasks = location_folders(storage, "0", depth=1, leave_out=(METADATA_PREFIX,))
        listed = list_folders(spark, storage, tasks, plan.run.cutoff).persist()
        tally = stage.tally_listing(listed)
        timed("finding tables and namespaces", "every folder holding a table marker")
        by_prefix = _folders(plan, find_markers(listed))
        plan.judged_by.update(by_prefix)
        stage.run.details["unowned table folders"] = unowned_report(by_prefix)
        judged = listed.mapInArrow(verdicts(by_prefix), JUDGED_DDL).where(F.col("category") != KEPT).persist()
        timed("reading what every system references", _systems_text(plan.systems))
        referenced = live.referenced(spark, plan.systems, plan.where)
        unreferenced = judged.where(~F.col("young")).join(referenced, "address", "left_anti")
        freeable = _agreed(unreferenced, live.delta_collectable(spark, plan.systems, judged))
        freeable = recheck.outside_iox(freeable, plan.systems.iox_catalog).persist()
        timed("judging every file and writing the candidates", "the anti-join, each Delta table's VACUUM")
        stage.run.details["folders"] = _by_folder(freeable)
        take = F.col("category") != UNOWNED if not self.options.unowned_delete else F.lit(True)
        counts = stage.write_candidates(
            freeable.where(take).select("address", "size", "mtime", F.col("category").alias("reason"))
        )
        for frame in (freeable, judged, listed):
            frame.unpersist()
        return Marked(tally, counts)

    def sweep(self, spark: SparkSession, plan: WarehousePlan, stage: Stage) -> Swept:
        stage.timed("asking every system again", "what a writer committed since the mark stays")
        to_delete = recheck.still_unreferenced(
            spark, plan.systems, plan.storage, plan.where, stage.read(spark), stage.run, frozenset(plan.judged_by)
        )
        sent = stage.write_to_delete(to_delete)
        stage.timed("deleting files")
        budget = stage.budget
        to_delete = stage.within_budget(spark, stage.read(spark, "to_delete"))
        quarantine = window_for(spark, plan.storage, stage.run, self.options.quarantine)
        results = delete_objects(
            spark,
            plan.storage,
            to_delete,
            max_deletes=budget.max_deletes,
            max_rate=budget.max_rate,
            quarantine=quarantine,
        )
        return Swept(stage.record_deletes(results), sent)


def _check_not_inside(root: Root, systems: Systems) -> None:
    """A warehouse inside a table's folder would judge that table's files without it."""
    for owner in systems.owners:
        if owner.location and owner.prefix is None and Root(_real(owner.location)).prefix_of(root.real) is not None:
            raise UnsafeLocation(
                f"the warehouse location {root.real} lies inside {owner.name} ({owner.location}): collect that "
                "table by its own GC; nothing was listed or deleted"
            )


def _real(location: str) -> str:
    from lakegc.storage import real_location
    from lakegc.warehouse.systems import written

    try:
        return real_location(written(location))
    except InvalidArgument:  # a store lakegc cannot address holds no warehouse of ours
        return "unaddressable://"


def _catalog_urls(options: WarehouseGcOptions) -> tuple[str, ...]:
    return (options.iox_catalog,) if options.iox_catalog else ()


def _named_folders(systems: Systems) -> dict[str, str]:
    """Each named folder under the warehouse as its system writes it -> its key prefix."""
    return {o.location: o.prefix for o in systems.owners if o.prefix is not None and o.location}


def _folders(plan: WarehousePlan, markers: list[Any]) -> dict[str, Folder]:
    """The folders keys are judged by; a marker at the location itself refuses the run."""
    at_root = [m for m in markers if m.prefix == ""]
    if at_root:
        raise UnsafeLocation(
            f"the warehouse location {plan.storage.uri} is itself a {at_root[0].kind}: collect it by the system "
            "that owns it; nothing was deleted"
        )
    return folders(((m.prefix, m.kind) for m in markers), plan.systems.owners)


def _agreed(unreferenced: DataFrame, delta: DataFrame | None) -> DataFrame:
    """Inside a named Delta table (unowned around it or not), only what its own VACUUM takes
    (`delta`) stays a candidate."""
    from pyspark.sql import functions as F

    in_delta = F.col("table").isNotNull() & F.col("delta")
    if delta is None:
        return unreferenced.where(~in_delta)
    return unreferenced.where(~in_delta).unionByName(unreferenced.where(in_delta).join(delta, "address", "left_semi"))


def _by_folder(freeable: DataFrame) -> list[dict[str, object]]:
    """What the run would free per top-level folder and category (a short list: one row each)."""
    from pyspark.sql import functions as F

    rows = freeable.groupBy("top", "category").agg(F.count("*").alias("files"), F.sum("size").alias("bytes")).collect()
    return [
        {"folder": r["top"] or "(root)", "category": r["category"], "files": r["files"], "bytes": r["bytes"] or 0}
        for r in sorted(rows, key=lambda r: (r["top"], r["category"]))
    ]


def _systems_text(systems: Systems) -> str:
    return (
        f"{len(systems.iceberg)} Iceberg table(s), {len(systems.delta)} Delta table(s), "
        f"{len(systems.repositories)} repository(ies), {len(systems.lakefs)} lakeFS repository(ies)"
    )


__all__ = ["WarehouseCollector", "WarehouseGcOptions", "run_warehouse_gc"]
