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
  table the file belongs to: `partition_scopes`).
- Before deleting, the catalog is read again: if any table changed since the mark, what it now
  references is subtracted from the candidates.

Each candidate says why it goes: `expired` when a snapshot this run expires (a dry run: would
expire) named it, `orphan` when no snapshot did (a failed write's leftovers, say), `prefix
mismatch` as above. The reason is a label on what the references above leave unreferenced: it is
judged after, and never changes, which files are candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.connectors.foreign import ICEBERG, Foreign, Prefixes, leave_out_foreign
from lakegc.connectors.iceberg.catalogs import (
    Loaded,
    changed_since,
    check_collectable,
    check_symlinks,
    load_catalog,
    load_tables,
    other_catalogs_tables,
    real_location,
    reload_all,
)
from lakegc.connectors.iceberg.expire import Expiry, Ref, Snap, expiry
from lakegc.connectors.iceberg.paths import (
    Location,
    PrefixMismatch,
    hidden,
    key_prefix,
    listing_plan,
    nested_locations,
    owners_partition_fields,
    parse_location,
    within,
)
from lakegc.connectors.iceberg.reachable import reachable_files, snapshot_files
from lakegc.connectors.protected import connector_protected
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.columns import CANDIDATES, DELETES, LISTING, ddl
from lakegc.engine.delete import Budget, delete_objects
from lakegc.engine.guard import check_root
from lakegc.engine.listing import list_folders, location_folders
from lakegc.engine.progress import Phase, PhaseTimer, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run
from lakegc.errors import InvalidArgument, LakegcError
from lakegc.storage import LocalStorage, Storage, open_storage
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableUpdate
    from pyspark.sql import Column, DataFrame, SparkSession

ORPHAN, EXPIRED, MISMATCH = "orphan", "expired", "prefix mismatch"
LOCATED_DDL = "uri string, key string, path string, scheme string, authority string, size long, mtime timestamp"
_COMMIT_ATTEMPTS = 3
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


def _mark(spark: SparkSession, plan: IcebergPlan, stage: Stage, prefix_mismatch: PrefixMismatch) -> Marked:
    """List the collected locations, subtract what any table references, write candidates/."""
    from pyspark.sql import functions as F

    run, timed, tables, roots = stage.run, stage.timed, plan.tables, plan.roots
    left_out = sum(len(r.leave_out) for r in roots)
    timed(
        "listing table locations",
        ", ".join(r.uri for r in roots) + (f"; {left_out} nested table location(s) left out" if left_out else ""),
    )
    raw = _list(spark, roots, plan.run.cutoff).persist()
    bases = {str(i): r.uri for i, r in enumerate(roots)}
    foreign = leave_out_foreign(run, raw, bases, timed, own=own_markers(roots, tables))
    listing = _visible(raw, roots, [partition_scopes(root, tables) for root in roots], foreign).persist()
    tally = stage.tally_listing(listing)
    raw.unpersist()
    timed("reading manifests", f"{len(tables)} table(s), {tally.judged} files older than the orphan min-age")
    located = listing.where(~listing.young).mapInArrow(_locate(roots), LOCATED_DDL)
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
        candidates = candidates.mapInArrow(_outside(nested), CANDIDATES_DDL)
    changed = changed_since(tables, now)
    if changed:
        run.details["tables changed during the run"] = ", ".join(sorted(t.label for t in changed))
        now_referenced = reachable_files(spark, [t.files() for t in changed]).select("path")
        candidates = (
            candidates.mapInArrow(_with_path, CANDIDATES_DDL + ", path string")
            .join(now_referenced, "path", "left_anti")
            .drop("path")
        )
    sent = stage.write_to_delete(candidates)
    stage.timed("deleting orphan files")
    return Swept(stage.record_deletes(_delete(spark, roots, stage.read(spark, "to_delete"), stage.budget)), sent)


# -- expiry ----------------------------------------------------------------------------------------
MAX_REF_AGE_PROPERTY = "history.expire.max-ref-age-ms"
MAX_SNAPSHOT_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_PROPERTY = "history.expire.min-snapshots-to-keep"
DEFAULT_OLDER_THAN_MS, DEFAULT_RETAIN_LAST = 5 * 86_400_000, 1  # Iceberg's own defaults


def plan_expiry(table: Table, now_ms: int, options: IcebergGcOptions) -> Expiry:
    """The table's snapshots and refs as `expire.expiry` takes them. --older-than and
    --retain-last, when given, are explicit, as an Iceberg action's expireOlderThan and retainLast
    are; when not, the table's `history.expire.max-snapshot-age-ms` and
    `history.expire.min-snapshots-to-keep` apply, else Iceberg's defaults (5 days, 1), as Iceberg's
    procedure called without them does. Its `history.expire.max-ref-age-ms` applies to refs
    without their own (no run option replaces it)."""
    from pyiceberg.table.refs import SnapshotRefType

    md = table.metadata
    snaps = [Snap(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms) for s in md.snapshots]
    refs = [
        Ref(
            name,
            r.snapshot_id,
            r.snapshot_ref_type == SnapshotRefType.BRANCH,
            r.min_snapshots_to_keep,
            r.max_snapshot_age_ms,
            r.max_ref_age_ms,
        )
        for name, r in md.refs.items()
    ]
    older_than_ms = (
        int(options.older_than.total_seconds() * 1000)
        if options.older_than is not None
        else _table_number(table, MAX_SNAPSHOT_AGE_PROPERTY, DEFAULT_OLDER_THAN_MS)
    )
    retain_last = (
        options.retain_last
        if options.retain_last is not None
        else max(1, _table_number(table, MIN_SNAPSHOTS_PROPERTY, DEFAULT_RETAIN_LAST))
    )
    return expiry(snaps, refs, now_ms, older_than_ms, retain_last, _table_number(table, MAX_REF_AGE_PROPERTY, None))


def _given(value: object, otherwise: str) -> str:
    """A run setting as its summary shows it: the value given, or where it comes from."""
    if value is None:
        return f"the table's {otherwise}"
    return duration_text(value.total_seconds()) if isinstance(value, timedelta) else str(value)


def _table_number(table: Table, name: str, default: int | None) -> int | None:
    """A table property that is a whole number (`default` when unset; for max-ref-age, None: refs
    without their own never age off). Anything else fails the run before anything changes, as
    Iceberg's action fails on it."""
    value = table.metadata.properties.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise LakegcError(
            f"table {'.'.join(table.name())}: {name}={value!r} is not a whole number; nothing was expired"
        ) from None


def commit_expiry(table: Table, now_ms: int, options: IcebergGcOptions) -> tuple[Table, Expiry]:
    """Remove the planned refs and snapshots, and the expired snapshots' partition statistics, in
    one commit that asserts the refs are still those the plan saw (a ref the plan removes too: it
    must still point where it was judged old): a ref moved, removed or created meanwhile fails the
    commit, and the plan is made again from the table as it then is. Returns the table as
    committed and what the last plan removed (nothing, if there was nothing to do)."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    from lakegc.connectors.iceberg.requirements import AssertRefsUnchanged, retention_of

    for attempt in range(_COMMIT_ATTEMPTS):
        plan = plan_expiry(table, now_ms, options)
        if not plan:
            return table, plan
        refs = {name: ref.snapshot_id for name, ref in table.metadata.refs.items()}
        requirements = (
            AssertTableUUID(uuid=table.metadata.table_uuid),
            *(AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id) for name, snapshot_id in refs.items()),
            *(
                ()
                if isinstance(table.catalog, RestCatalog)
                else (AssertRefsUnchanged(refs=refs, retention=retention_of(table.metadata)),)
            ),
        )
        try:
            table.catalog.commit_table(table, requirements, expiry_updates(table, plan))
            return table.catalog.load_table(table.name()), plan
        except CommitFailedException:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise LakegcError(
                    f"table {'.'.join(table.name())}: expiring snapshots kept losing to concurrent "
                    "commits; nothing was deleted"
                ) from None
            table = table.catalog.load_table(table.name())
    return table, Expiry()


def expiry_updates(table: Table, plan: Expiry) -> tuple[TableUpdate, ...]:
    """The metadata updates of an expiry, in the order pyiceberg applies them: the aged-off refs
    first (pyiceberg removes a ref only while its snapshot exists), then the expired snapshots'
    partition statistics (pyiceberg's snapshot removal drops their table statistics but not these,
    where Iceberg's drops both), then the snapshots."""
    from pyiceberg.table.update import RemovePartitionStatisticsUpdate, RemoveSnapshotRefUpdate, RemoveSnapshotsUpdate

    partition_stats = sorted(
        {p.snapshot_id for p in table.metadata.partition_statistics if p.snapshot_id in plan.snapshots}
    )
    return (
        *(RemoveSnapshotRefUpdate(ref_name=name) for name in plan.refs),
        *(RemovePartitionStatisticsUpdate(snapshot_id=snapshot_id) for snapshot_id in partition_stats),
        *((RemoveSnapshotsUpdate(snapshot_ids=sorted(plan.snapshots)),) if plan.snapshots else ()),
    )


# -- orphans ---------------------------------------------------------------------------------------
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


def _catalog_databases(catalog: Catalog) -> tuple[str, ...]:
    """The database URL of a SQL catalog (its SQLite file must not be cleaned as an orphan)."""
    uri = getattr(catalog, "properties", {}).get("uri", "")
    return (uri,) if uri.startswith("sqlite") else ()


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


def _left_out(run: Run, tables: list[Loaded], roots: list[Root], other_catalogs: list[str]) -> None:
    """The nested locations left out, counted for the summary; they and the other catalogs read
    are named in its JSON."""
    run.details["nested table locations left out"] = sum(len(r.leave_out) for r in roots)
    run.details["nested tables left out"] = [name for r in roots for name in r.left_out]
    run.details["other catalogs read"] = other_catalogs


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


def _list(spark: SparkSession, roots: list[Root], cutoff: datetime) -> DataFrame:
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


def _visible(
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


def _locate(roots: list[Root]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
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


def _delete(spark: SparkSession, roots: list[Root], to_delete: DataFrame, budget: Budget) -> DataFrame:
    """Delete each candidate through the storage of the root it lies under (RESULT_DDL rows with
    full URIs), within the run's budget: at most `max_deletes` in all (the rest get no row), the
    rate shared by the roots."""
    from pyspark.sql import functions as F

    if budget.max_deletes is not None:
        to_delete = to_delete.limit(budget.max_deletes)
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


def _with_path(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Candidate rows with the normalised path of their address, to join against references."""
    for batch in batches:
        paths = [parse_location(uri).path for uri in batch.column("address").to_pylist()]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(paths, pa.string())], names=[*batch.schema.names, "path"]
        )


def _outside(nested: dict[str, tuple[str, ...]]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
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
