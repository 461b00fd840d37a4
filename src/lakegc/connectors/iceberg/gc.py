"""Iceberg table GC (what Nessie's GC does, for plain Iceberg catalogs; `lakegc iceberg gc`):
expire snapshots, then delete the files under each table's location that nothing references.

Safety rests on five rules:
- What is reachable is decided across the whole catalog, not per table: every file any table
  still references (a retained snapshot of a table being collected, any snapshot of the others)
  is kept. Tables whose locations share or nest are therefore collected together, and a table that
  references another's files (add_files, snapshot and migrate procedures) protects them: Nessie's
  data-loss bug #12363 (one table's sweep deleting a sibling's files) cannot happen here. The
  tables of every other catalog configured for pyiceberg count too (`catalogs`). A table or a
  configured catalog that cannot be loaded, a table with `gc.enabled=false` at a location that
  overlaps one being collected, or a location that is, or is reached through, a symlink into
  another table's location refuses the run before anything changes.
- Another table's location nested under a collected one (a sub-folder, of any catalog) is left out
  of its listing: that table's files, its own orphans included, are its business, never the
  holder's (`paths.listing_plan`). Nesting is judged on real paths, symlinks resolved.
- Only files under a collected table's location are ever deleted, compared after normalising
  scheme and authority (`paths`); a file that a reference names with another scheme or authority
  is a prefix mismatch, an error unless told otherwise.
- Files younger than --orphan-min-age are never candidates (writes in flight, commits that failed
  and may be retried), and neither are hidden paths (`_`/`.`, except partition folders of the
  table the file belongs to: `orphans.partition_scopes`).
- Before deleting, the catalog is read again: if any table changed since the mark, what it now
  references is subtracted from the candidates.

Each candidate says why it goes: `expired` when a snapshot this run expires (a dry run: would
expire) named it, `orphan` when no snapshot did (a failed write's leftovers, say), `prefix
mismatch` as above. The reason is a label on what the references above leave unreferenced: it is
judged after, and never changes, which files are candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lakegc.connectors.foreign import leave_out_foreign
from lakegc.connectors.iceberg.catalogs import (
    Loaded,
    changed_since,
    check_collectable,
    check_symlinks,
    load_catalog,
    load_tables,
    other_catalogs_tables,
    reload_all,
)
from lakegc.connectors.iceberg.commit import (
    MAX_SNAPSHOT_AGE_PROPERTY,
    MIN_SNAPSHOTS_PROPERTY,
    commit_expiry,
    plan_expiry,
)
from lakegc.connectors.iceberg.orphans import (
    LOCATED_DDL,
    MISMATCH,
    Root,
    delete_candidates,
    judge,
    list_locations,
    listing_roots,
    locator,
    outside_nested,
    own_markers,
    partition_scopes,
    visible_files,
    with_path,
)
from lakegc.connectors.iceberg.paths import PrefixMismatch, key_prefix, nested_locations
from lakegc.connectors.iceberg.reachable import reachable_files, snapshot_files
from lakegc.connectors.protected import connector_protected
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.guard import check_root
from lakegc.engine.progress import Phase, PhaseTimer, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run
from lakegc.errors import InvalidArgument
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import SparkSession

CANDIDATES_DDL = ddl(CANDIDATES)


@dataclass(frozen=True)
class IcebergGcOptions:
    """What `lakegc iceberg gc` decides with (the run's own options are `engine.collector.RunOptions`)."""

    older_than: timedelta | None = None  # None: the table's history.expire.max-snapshot-age-ms, else 5 days
    retain_last: int | None = None  # None: the table's history.expire.min-snapshots-to-keep, else 1
    orphan_min_age: timedelta = timedelta(days=3)
    prefix_mismatch: PrefixMismatch = PrefixMismatch.ERROR


def run_iceberg_gc(
    catalog_name: str,
    table_names: list[str],
    options: IcebergGcOptions,
    run: RunOptions = RunOptions(),
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Expire snapshots of the named tables, then delete their orphan files (see the module).
    Everything that can be wrong with the input fails before anything changes."""
    return collect(IcebergCollector(catalog_name, tuple(table_names), options, run), phase, spark, run.start)


@dataclass(frozen=True)
class IcebergPlan:
    """The tables as loaded before the run, the locations to list, and their planned expiry
    (`Loaded.expire`). The tables are the one part that changes as the run goes: the expiry's
    commit replaces each collected table's metadata (`_expire`)."""

    run: RunPlan
    catalog: Catalog
    tables: list[Loaded]
    roots: list[Root]
    other_catalogs: list[str]
    now_ms: int


@dataclass(frozen=True)
class IcebergCollector:
    """`lakegc iceberg gc` as a collector (`engine.collector`)."""

    catalog_name: str
    table_names: tuple[str, ...]
    options: IcebergGcOptions
    given: RunOptions

    def plan(self) -> IcebergPlan:
        options = self.options
        if options.retain_last is not None and options.retain_last < 1:
            raise InvalidArgument("--retain-last must be at least 1: a table keeps its current snapshot")
        if not self.table_names:
            raise InvalidArgument("name at least one table")
        catalog = load_catalog(self.catalog_name)
        now = utcnow()
        now_ms = int(now.timestamp() * 1000)
        tables = load_tables(catalog, self.catalog_name, list(self.table_names))
        check_collectable(tables)
        others, other_catalogs = other_catalogs_tables(self.catalog_name, tables)
        tables += others
        check_collectable(tables)
        check_symlinks([t for t in tables if t.target], tables)
        roots = listing_roots(tables)
        runs_location = self.given.runs_location or default_runs_location()
        protected = connector_protected(self.given.metastore, runs_location, _catalog_databases(catalog))
        for root in roots:  # the deletion guard: other tables' locations are left out above, the rest refused here
            check_root(root.uri, "table location", protected)
        for t in tables:
            if t.target:
                planned = plan_expiry(t.table, now_ms, options)
                t.expire, t.expire_refs = set(planned.snapshots), planned.refs
        cutoff = now - options.orphan_min_age
        target = ", ".join(t.name for t in tables if t.target)
        run = self.given.plan("iceberg", target, now, cutoff, runs_location)
        run = replace(run, settings=_settings(self.catalog_name, options, cutoff))
        return IcebergPlan(run, catalog, tables, roots, other_catalogs, now_ms)

    def mark(self, spark: SparkSession, plan: IcebergPlan, stage: Stage) -> Marked:
        _expire(stage.run, plan.tables, plan.now_ms, self.options, stage.timed, plan.run.dry_run)
        _left_out(stage.run, plan.tables, plan.roots, plan.other_catalogs)
        return _mark(spark, plan, stage, self.options.prefix_mismatch)

    def sweep(self, spark: SparkSession, plan: IcebergPlan, stage: Stage) -> Swept:
        return _sweep(spark, plan, stage, self.catalog_name)


def _settings(catalog_name: str, options: IcebergGcOptions, cutoff: datetime) -> dict[str, object]:
    """The run's options as its record shows them."""
    return {
        "catalog": catalog_name,
        "older than": _given(options.older_than, f"{MAX_SNAPSHOT_AGE_PROPERTY}, else 5d"),
        "retain last": _given(options.retain_last, f"{MIN_SNAPSHOTS_PROPERTY}, else 1"),
        "orphan min-age": f"{duration_text(options.orphan_min_age.total_seconds())} "
        f"(files modified before {shown_time(cutoff)})",
        "prefix mismatch": str(options.prefix_mismatch),
    }


def _given(value: object, otherwise: str) -> str:
    """A run setting as its summary shows it: the value given, or where it comes from."""
    if value is None:
        return f"the table's {otherwise}"
    return duration_text(value.total_seconds()) if isinstance(value, timedelta) else str(value)


def _catalog_databases(catalog: Catalog) -> tuple[str, ...]:
    """The database URL of a SQL catalog (its SQLite file must not be cleaned as an orphan)."""
    uri = getattr(catalog, "properties", {}).get("uri", "")
    return (uri,) if uri.startswith("sqlite") else ()


def _expire(
    run: Run, tables: list[Loaded], now_ms: int, options: IcebergGcOptions, timed: PhaseTimer, dry_run: bool
) -> None:
    """Commit the planned expiry of each collected table (a dry run only reports it). What the
    expired snapshots named is kept first (`Loaded.expired`): the commit removes them from the
    metadata, and the mark labels their files `expired`."""
    aged_off = sum(len(t.expire_refs) for t in tables)
    older_than = _given(options.older_than, "max snapshot age")
    timed(
        "expiring snapshots",
        f"{sum(len(t.expire) for t in tables)} snapshots older than {older_than}"
        + (f"; {aged_off} refs past their max-ref-age" if aged_off else ""),
    )
    docs = []
    for t in tables:
        if not t.target:
            continue
        planned, refs = len(t.expire), t.expire_refs
        if dry_run:
            t.expired = t.files_of(t.expire) if t.expire else None
        elif t.expire or t.expire_refs:
            before = t.files_of(s.snapshot_id for s in t.table.metadata.snapshots)
            t.table, committed = commit_expiry(t.table, now_ms, options)
            t.expire, t.expire_refs = set(), ()
            # what the commit removed: its plan is made again if it lost a race with another commit
            gone = before.retained - {s.snapshot_id for s in t.table.metadata.snapshots}
            t.expired = replace(before, retained=gone) if gone else None
            planned, refs = len(gone), committed.refs
        docs.append(
            {
                "table": t.name,
                "location": t.table.location(),
                "snapshots expired": planned,
                "snapshots kept": len(t.table.metadata.snapshots) - len(t.expire),
                "refs expired": list(refs),
            }
        )
    run.details["snapshots expired" if not dry_run else "snapshots to expire"] = sum(
        d["snapshots expired"] for d in docs
    )
    run.details["refs expired" if not dry_run else "refs to expire"] = sum(len(d["refs expired"]) for d in docs)
    run.details["tables"] = docs
    run.details["tables protecting their files"] = sum(not t.target for t in tables)


def _left_out(run: Run, tables: list[Loaded], roots: list[Root], other_catalogs: list[str]) -> None:
    """The nested locations left out, counted for the summary; they and the other catalogs read
    are named in its JSON."""
    run.details["nested table locations left out"] = sum(len(r.leave_out) for r in roots)
    run.details["nested tables left out"] = [name for r in roots for name in r.left_out]
    run.details["other catalogs read"] = other_catalogs


def _mark(spark: SparkSession, plan: IcebergPlan, stage: Stage, prefix_mismatch: PrefixMismatch) -> Marked:
    """List the collected locations, subtract what any table references, write candidates/."""
    from pyspark.sql import functions as F

    run, timed, tables, roots = stage.run, stage.timed, plan.tables, plan.roots
    left_out = sum(len(r.leave_out) for r in roots)
    timed(
        "listing table locations",
        ", ".join(r.uri for r in roots) + (f"; {left_out} nested table location(s) left out" if left_out else ""),
    )
    raw = list_locations(spark, roots, plan.run.cutoff).persist()
    bases = {str(i): r.uri for i, r in enumerate(roots)}
    foreign = leave_out_foreign(run, raw, bases, timed, own=own_markers(roots, tables))
    listing = visible_files(raw, roots, [partition_scopes(root, tables) for root in roots], foreign).persist()
    tally = stage.tally_listing(listing)
    raw.unpersist()
    timed("reading manifests", f"{len(tables)} table(s), {tally.judged} files older than the orphan min-age")
    located = listing.where(~listing.young).mapInArrow(locator(roots), LOCATED_DDL)
    expired = [t.expired for t in tables if t.expired]
    unreferenced = judge(
        located,
        reachable_files(spark, [t.files() for t in tables]),
        prefix_mismatch,
        snapshot_files(spark, expired) if expired else None,
    )
    counts = stage.write_candidates(unreferenced.withColumnRenamed("uri", "address"))
    listing.unpersist()
    mismatched = counts.by_reason.get(MISMATCH) if prefix_mismatch is PrefixMismatch.ERROR else 0
    if not mismatched:
        return Marked(tally, counts)
    sample = stage.read(spark).where(F.col("reason") == MISMATCH).select("address").limit(3).collect()
    refusal = (
        f"prefix mismatch: {mismatched} file(s) such as {sample[0]['address']} are referenced under another "
        "scheme or authority; nothing was deleted (choose --prefix-mismatch ignore or delete)"
    )
    return Marked(tally, counts, refusal)


def _sweep(spark: SparkSession, plan: IcebergPlan, stage: Stage, catalog_name: str) -> Swept:
    """Re-read the catalogs, keep what a table changed since the mark now references and what now
    lies under a table nested in a collected location (one created since the mark), delete the rest."""
    run, tables, roots = stage.run, plan.tables, plan.roots
    stage.timed("re-reading the catalog", "tables changed since the mark keep what they reference now")
    candidates = stage.read(spark)
    targets = [t for t in tables if t.target]
    now = reload_all(plan.catalog, catalog_name)
    others = [t for t in now if t.key not in {g.key for g in targets}]
    check_symlinks(targets, others)
    nested = {
        root.base: tuple(key_prefix(root.real, n) for n in nested_locations(root.real, [o.real for o in others]))
        for root in roots
    }
    if any(nested.values()):
        run.details["nested table locations left out"] = sum(len(prefixes) for prefixes in nested.values())
        candidates = candidates.mapInArrow(outside_nested(nested), CANDIDATES_DDL)
    changed = changed_since(tables, now)
    if changed:
        run.details["tables changed during the run"] = ", ".join(sorted(t.label for t in changed))
        now_referenced = reachable_files(spark, [t.files() for t in changed]).select("path")
        candidates = (
            candidates.mapInArrow(with_path, CANDIDATES_DDL + ", path string")
            .join(now_referenced, "path", "left_anti")
            .drop("path")
        )
    sent = stage.write_to_delete(candidates)
    stage.timed("deleting orphan files")
    to_delete = stage.within_budget(spark, stage.read(spark, "to_delete"))
    return Swept(stage.record_deletes(delete_candidates(spark, roots, to_delete, stage.budget)), sent)
