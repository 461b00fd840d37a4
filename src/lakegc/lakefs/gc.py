"""`lakegc lakefs gc`: a lakeFS repository's namespace collected as lakeFS's own GC client decides.

Mark: list `data/` and the namespace's root (objects older than --min-age), take away what the
active commits reference (`trees`) and what is uncommitted, as lakeFS's `prepare_commits` and
`prepare_uncommited` name them. Sweep: ask lakeFS again (commits and uncommitted) and keep whatever
is referenced now (only trees the mark did not read are read again), then delete through the
engine's deletes (guard, budget). The run is recorded as every connector run is (`lakefs runs`,
`show`, `candidates`), under lakeFS's own run id, and lakeFS's report is written where its tooling
reads it: `_lakefs/retention/gc/unified/<run_id>/` (`deleted/`, `summary.json`).

`--mark-only` marks and writes the report (its `deleted/` lists what a sweep would delete), as
lakeFS's `do_sweep=false`; `--sweep RUN_ID` deletes what that successful mark listed, re-checked
first, as `do_mark=false` with a mark id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lakegc.connectors.protected import connector_protected
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.delete import delete_objects
from lakegc.engine.guard import check_root
from lakegc.engine.listing import list_folders, open_location, stat_objects
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run, new_run_id
from lakegc.engine.window import window_for
from lakegc.errors import InvalidArgument
from lakegc.lakefs import report
from lakegc.lakefs.client import Connection, LakeFS, Prepared
from lakegc.lakefs.namespace import (
    COLLECTABLE,
    DUMMY,
    METADATA,
    NamespaceFileError,
    active_metaranges,
    check_file_id,
    check_run_id,
    key_of,
    listing_folders,
    metadata_key,
    namespace_location,
    namespace_prefixes,
)
from lakegc.lakefs.trees import Trees, metadata_files, uncommitted_addresses
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.storage import Storage

DEFAULT_MIN_AGE = timedelta(days=1)
STORAGE = "namespace at"  # the run's setting naming where the namespace was opened
UNREFERENCED = "unreferenced"


@dataclass(frozen=True)
class LakeFSGcOptions:
    """What `lakegc lakefs gc` decides with (the run's own options are `engine.collector.RunOptions`)."""

    endpoint: str | None = None  # None: LAKECTL_SERVER_ENDPOINT_URL
    access_key_id: str | None = None
    secret_access_key: str | None = None
    local_path: str | None = None  # lakeFS's blockstore.local.path, for local:// namespaces
    min_age: timedelta | None = None  # None: 1d for a mark; a sweep keeps to its mark's cutoff
    mark_only: bool = False
    sweep: str | None = None  # a mark's run id: delete what it listed
    quarantine: timedelta | None = None  # a restore window: move instead of delete, for this long


def run_lakefs_gc(
    repository: str,
    options: LakeFSGcOptions,
    run: RunOptions = RunOptions(),
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Mark and, unless a dry run or --mark-only, sweep one lakeFS repository's namespace."""
    return collect(LakeFSCollector(repository, options, run), phase, spark, run.start)


@dataclass(frozen=True)
class LakeFSPlan:
    run: RunPlan
    lakefs: LakeFS
    storage: Storage
    namespace: str  # as lakeFS names it (s3://..., local://...)
    prefixes: tuple[str, ...]  # how addresses and locations inside it start (`namespace_prefixes`)
    uncommitted: Prepared | None  # the mark's (None for --sweep: the sweep asks itself)
    mark_id: str | None  # --sweep: the mark whose list is swept
    trees_read: set[str] = field(default_factory=set)  # tree files this run has read: a re-check reads others

    @property
    def trees(self) -> Trees:
        return Trees(self.storage, self.prefixes)


@dataclass(frozen=True)
class LakeFSCollector:
    """`lakegc lakefs gc` as a collector (`engine.collector`)."""

    repository: str
    options: LakeFSGcOptions
    given: RunOptions

    def plan(self) -> LakeFSPlan:
        options = self.options
        if options.mark_only and options.sweep is not None:
            raise InvalidArgument("--mark-only and --sweep RUN_ID are two halves of a run: give one")
        if options.min_age is not None and options.min_age < timedelta(0):
            raise InvalidArgument("--min-age must not be negative")
        if options.quarantine is not None and options.quarantine < timedelta(0):
            raise InvalidArgument("--quarantine must not be negative")
        mark_id = check_run_id(options.sweep) if options.sweep is not None else None  # "" is refused
        lakefs = LakeFS(
            Connection.resolve(options.endpoint, options.access_key_id, options.secret_access_key), self.repository
        )
        namespace = lakefs.storage_namespace()
        location = namespace_location(namespace, options.local_path)
        runs_location = self.given.runs_location or default_runs_location()
        check_root(location, "namespace", connector_protected(self.given.metastore, runs_location))
        storage = open_location(location, "namespace")
        mark_cutoff = report.check_mark(storage, mark_id) if mark_id else None
        uncommitted = None if mark_id else lakefs.prepare_uncommitted()
        now = utcnow()
        cutoff = _cutoff(now, options.min_age, mark_cutoff)
        run = replace(
            self.given.plan("lakefs", f"{self.repository} ({namespace})", now, cutoff, runs_location),
            mark_only=options.mark_only and not self.given.dry_run,
            run_id=check_run_id(uncommitted.run_id) if uncommitted else new_run_id(now),
            settings={"namespace": namespace, **self._settings(lakefs, storage, mark_id, cutoff)},
        )
        prefixes = namespace_prefixes(namespace, location)
        return LakeFSPlan(run, lakefs, storage, namespace, prefixes, uncommitted, mark_id)

    def _settings(self, lakefs: LakeFS, storage: Storage, mark_id: str | None, cutoff: datetime) -> dict[str, str]:
        """The run's options as people read them (`storage` is also where a restore finds the
        namespace)."""
        mode = "sweep of mark " + mark_id if mark_id else "mark only" if self.options.mark_only else "mark and sweep"
        age = duration_text(self.options.min_age.total_seconds()) if self.options.min_age is not None else "the default"
        age = "the mark's" if mark_id and self.options.min_age is None else age
        window = self.options.quarantine
        return {
            "lakeFS": lakefs.endpoint,
            "repository": self.repository,
            STORAGE: storage.uri,
            "mode": mode,
            "min age": f"{age} (objects modified before {shown_time(cutoff)})",
            "restore window": duration_text(window.total_seconds()) if window else "none",
        }

    def mark(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> Marked:
        """List the namespace, less what is committed or uncommitted (--sweep: the mark's list, as
        the objects are now)."""
        try:
            if plan.mark_id:
                return self._marked_list(spark, plan, stage)
            return self._mark(spark, plan, stage)
        except Exception:
            if not plan.mark_id:  # a sweep of a mark writes no report of its own
                report.failed(plan, stage.run)
            raise

    def _mark(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> Marked:
        timed, storage = stage.timed, plan.storage
        timed("listing the namespace", storage.uri)
        data_dirs = storage.list_dirs("data/")
        listed = list_folders(spark, storage, listing_folders(data_dirs), plan.run.cutoff).persist()
        listing = listed.where(listed.address != "dummy")
        tally = stage.tally_listing(listing)
        committed = self._committed(spark, plan, stage)
        timed("reading the uncommitted objects")
        uncommitted = plan.uncommitted or Prepared("", None)
        folder = key_of(uncommitted.location, plan.prefixes, "uncommitted files") if uncommitted.location else None
        staged = uncommitted_addresses(spark, storage, folder, plan.prefixes)
        timed("finding the unreferenced objects", f"{tally.judged} objects older than --min-age")
        old = listing.where(~listing.young).select("address", "size", "mtime")
        candidates = old.join(committed, "address", "left_anti").join(staged, "address", "left_anti")
        counts = stage.write_candidates(_unreferenced(candidates))
        listed.unpersist()
        stage.run.details["first slice"] = sorted(data_dirs)[0] if data_dirs else ""
        if plan.run.mark_only:
            report.write(spark, plan, stage, "candidates")
        return Marked(tally, counts)

    def _marked_list(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> Marked:
        """--sweep: the mark's `deleted/` as candidates, each object as it is now (gone: left out)."""
        stage.timed("reading the mark", plan.mark_id)
        marked = report.marked_addresses(spark, plan.storage, plan.mark_id or "")
        listed = marked.where(_collectable(marked.address)).selectExpr("address", "'marked' as slice")
        found = stat_objects(spark, plan.storage, listed, plan.run.cutoff)
        tally = stage.tally_listing(found)
        counts = stage.write_candidates(_unreferenced(found.where(~found.young).select("address", "size", "mtime")))
        return Marked(tally, counts)

    def _committed(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> DataFrame:
        """The addresses the active commits' trees name, reading only the range files this run has
        not read yet (a re-check reads what changed since the mark)."""
        stage.timed("asking lakeFS for the active commits")
        prepared = plan.lakefs.prepare_commits()
        ranges = (
            _every_range(spark, plan, stage)
            if prepared.location is None
            else _active_ranges(spark, plan, stage, prepared)
        )
        fresh = sorted(set(ranges) - plan.trees_read)
        plan.trees_read.update(fresh)
        return plan.trees.addresses(spark, fresh)

    def sweep(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> Swept:
        """Ask lakeFS again and keep what is referenced now, then delete."""
        try:
            return self._sweep(spark, plan, stage)
        except Exception:
            if not plan.mark_id:
                report.failed(plan, stage.run)
            raise

    def _sweep(self, spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> Swept:
        """Uncommitted first, then commits (as the mark): an object committed between the two is in
        the commits asked second."""
        timed = stage.timed
        timed("asking lakeFS for the uncommitted objects again")
        again = plan.lakefs.prepare_uncommitted()
        committed = self._committed(spark, plan, stage)
        folder = key_of(again.location, plan.prefixes, "uncommitted files") if again.location else None
        staged = uncommitted_addresses(spark, plan.storage, folder, plan.prefixes)
        timed("re-checking the candidates", f"{stage.run.num_candidates} candidates")
        candidates = stage.read(spark).join(committed, "address", "left_anti").join(staged, "address", "left_anti")
        sent = stage.write_to_delete(candidates)
        timed("deleting objects")
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
        swept = Swept(stage.record_deletes(results), sent)
        if not plan.mark_id:
            report.write(spark, plan, stage, "deleted", success=not swept.deletes.failed)
        return swept


def _cutoff(now: datetime, min_age: timedelta | None, mark_cutoff: datetime | None) -> datetime:
    """Objects modified at or after the cutoff are never taken: a mark's, now less --min-age (1d by
    default); a sweep's, its mark's (what the mark listed was older), or the earlier of that and
    now less --min-age when given."""
    if mark_cutoff is None:
        return now - (DEFAULT_MIN_AGE if min_age is None else min_age)
    return mark_cutoff if min_age is None else min(mark_cutoff, now - min_age)


def _active_ranges(spark: SparkSession, plan: LakeFSPlan, stage: Stage, prepared: Prepared) -> list[str]:
    """The ranges of the active commits' metaranges (`commits.csv`), each metarange known to lakeFS
    where lakegc reads it."""
    key = key_of(prepared.location or "", plan.prefixes, "the commits file")
    metaranges = active_metaranges(plan.storage.read(key), key)
    stage.timed("reading the active commits' trees", f"{len(metaranges)} metaranges")
    for metarange in metaranges:
        _check_location(plan, metarange)
    return [r["range_id"] for r in plan.trees.range_ids(spark, metaranges).collect()]  # tree ids: a short list


def _every_range(spark: SparkSession, plan: LakeFSPlan, stage: Stage) -> list[str]:
    """No GC rules: every commit is live, so every range file in `_lakefs/` counts (as lakeFS's
    client reads them), and none may be missing: a range a metarange there names must be there."""
    storage = plan.storage
    if next(iter(storage.list(METADATA)), None) is None:
        raise NamespaceFileError(
            f"{storage.uri} has no _lakefs/: not where lakeFS keeps this repository's metadata (--local-path?)"
        )
    files = metadata_files(storage)
    stage.timed("reading every tree (no GC rules: every commit is live)", f"{len(files)} files")
    kinds = plan.trees.kinds(spark, files)
    missing = sorted({r for _, kind, named in kinds if kind == "metaranges" for r in named} - set(files))
    if missing:
        raise NamespaceFileError(
            f"lakeFS range {missing[0]} is missing (_lakefs/{missing[0]}), yet a metarange names it"
        )
    return [file_id for file_id, kind, _ in kinds if kind == "ranges"]


def _check_location(plan: LakeFSPlan, metarange: str) -> None:
    """lakeFS's answer for a metarange must be `_lakefs/<id>` in the namespace: the trees lakegc
    reads and checks are the ones lakeFS serves (a 404 or 500 fails the run)."""
    location = plan.lakefs.metarange_location(check_file_id(metarange, "metarange"))
    if key_of(location, plan.prefixes, f"metarange {metarange}") != metadata_key(metarange):
        raise NamespaceFileError(f"lakeFS keeps metarange {metarange} at {location}, not in the namespace's _lakefs/")


def _unreferenced(objects: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return objects.select("address", "size", "mtime", F.lit(UNREFERENCED).alias("reason")).where(
        _collectable(F.col("address"))
    )


def _collectable(address):  # type: ignore[no-untyped-def] - a Column
    """Whether a key may be a candidate at all, as a Spark condition: an object of `data/` or a
    file of the root, never the root's `dummy`, never `_lakefs/`, never a path that climbs (a
    mark's list is a file anyone with write access to the namespace could have edited)."""
    from pyspark.sql import functions as F

    return address.rlike(COLLECTABLE) & (address != DUMMY) & ~F.concat(F.lit("/"), address, F.lit("/")).contains("/../")


__all__ = ["LakeFSCollector", "LakeFSGcOptions", "run_lakefs_gc"]
