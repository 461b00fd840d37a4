"""Delta table GC (`lakegc delta gc`): a full VACUUM, decided as delta-rs decides it
(`vacuum.py`), run on the shared engine: the listing and the deletes on the executors, the
deletion guard, a run with its record, candidates and report.

The order of a run, and why:
1. The table location passes the deletion guard (not `/`, no home folder, no lakegc namespace or
   metastore, no run folder, no Iceberg table's location, no symlink into one).
2. `_delta_log/` is listed and the newest state's segment chosen (`log.segment`): no log is a
   clear error, a log with a hole deletes nothing.
3. The driver reads the newest metaData and protocol (`actions.newest_metadata`: the last commits,
   else two columns of the checkpoint): the partition columns, `delta.deletedFileRetentionDuration`
   (the retention when none is given, and the least one allowed without --force), and reader
   features lakegc must understand. All of this fails before a run starts.
4. The table is listed (not `_delta_log/`, a top-level folder per task), the segment's actions
   read on the executors (`actions.read_actions`), and `vacuum.judge` picks the files.
5. Before deleting, the log is listed again: every file a commit made since the segment's version
   adds (or its deletion vector) is taken out of the list, so a writer committing during the run
   loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import unquote

from lakegc.connectors.delta.actions import ADD, newest_metadata, read_actions
from lakegc.connectors.delta.log import (
    DEFAULT_RETENTION,
    LOG,
    BrokenLog,
    LogFiles,
    Segment,
    log_files,
    parse_interval,
    segment,
)
from lakegc.connectors.delta.vacuum import judge, live_files
from lakegc.connectors.foreign import DELTA, leave_out_foreign, outside_foreign
from lakegc.connectors.protected import connector_protected, iceberg_table_places
from lakegc.connectors.runs import default_runs_location
from lakegc.engine.arrowio import read_parquet, write_counted, write_parquet
from lakegc.engine.collector import Marked, RunOptions, RunPlan, Stage, Swept, collect
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.delete import delete_objects
from lakegc.engine.guard import check_root
from lakegc.engine.listing import list_folders, location_folders, open_location
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.report import duration_text
from lakegc.engine.runs import Run, RunFolder
from lakegc.errors import InvalidArgument, LakegcError
from lakegc.storage import Storage, real_location
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Reader features whose tables lakegc reads correctly: none of them names files another way.
# A table needing any other feature is refused (its files could be named where lakegc does not look).
KNOWN_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "typeWidening",
        "typeWidening-preview",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
    }
)
# Writer features lakegc knows keep every file of the table in this table's log and folder. Any
# other is refused: coordinated commits and catalog-managed tables keep their newest commits
# elsewhere (`_delta_log/_staged_commits/`, a catalog), UniForm (`icebergCompat*`) keeps Iceberg
# metadata under the table that no Delta action names; an unknown one may do either.
KNOWN_WRITER_FEATURES = KNOWN_READER_FEATURES | {
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "identityColumns",
    "rowTracking",
    "domainMetadata",
    "clustering",
    "inCommitTimestamp",
    "allowColumnDefaults",
}
REPEATS = "repeats"  # files delta-rs would list more than once (removed by several actions)
# Files delta-rs lists (an expired remove names them) that are not there any more (an earlier run,
# or someone, deleted them): listed as delta-rs lists them, never candidates, deleted or counted.
GONE = "gone"


@dataclass(frozen=True)
class DeltaGcOptions:
    """What `lakegc delta gc` decides with (the run's own options are `engine.collector.RunOptions`)."""

    retention: timedelta | None = None  # None: the table's delta.deletedFileRetentionDuration
    keep_versions: tuple[int, ...] = ()
    force: bool = False  # a retention under the table's own is allowed


@dataclass(frozen=True)
class TableState:
    """What the driver learns of the table: its newest version's metadata and protocol."""

    version: int
    partition_columns: tuple[str, ...]
    retention: timedelta  # delta.deletedFileRetentionDuration, or 7 days
    reader_features: tuple[str, ...]
    min_reader_version: int
    writer_features: tuple[str, ...] = ()
    min_writer_version: int = 2


def check_retention(retention: timedelta, table: timedelta, force: bool) -> None:
    """A retention shorter than the table's own deletes files concurrent readers and writers may
    still use: refused unless forced (delta-rs's `enforce_retention_duration`)."""
    if retention < timedelta(0):
        raise InvalidArgument("--retention must not be negative")
    if retention < table and not force:
        raise InvalidArgument(
            f"--retention {duration_text(retention.total_seconds())} is shorter than the table's "
            f"delta.deletedFileRetentionDuration ({duration_text(table.total_seconds())}): readers and writers "
            "may still use those files (use --force to go below it)"
        )


def check_readable(state: TableState) -> None:
    """Refuse a table whose protocol lakegc does not fully understand: its files could be named
    where lakegc does not look (the reason Delta has `vacuumProtocolCheck`)."""
    unknown = sorted(set(state.reader_features) - KNOWN_READER_FEATURES)
    if state.min_reader_version > 3 or unknown:
        what = ", ".join(unknown) or f"reader version {state.min_reader_version}"
        raise LakegcError(f"the table needs Delta reader features lakegc does not know ({what}); nothing was deleted")
    unknown = sorted(set(state.writer_features) - KNOWN_WRITER_FEATURES)
    if state.min_writer_version > 7 or unknown:
        what = ", ".join(unknown) or f"writer version {state.min_writer_version}"
        raise LakegcError(
            f"the table uses Delta writer features lakegc does not collect ({what}): files it needs may live "
            "where its Delta log does not name them; nothing was deleted"
        )


def run_delta_gc(
    location: str,
    options: DeltaGcOptions,
    run: RunOptions = RunOptions(),
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """VACUUM (full) the Delta table at `location` (see the module). Everything that can be wrong
    with the input fails before anything is deleted."""
    return collect(DeltaCollector(location, options, run), phase, spark, run.start)


@dataclass(frozen=True)
class DeltaPlan:
    """What the mark and the sweep work from, read once before the run starts."""

    run: RunPlan
    storage: Storage
    seg: Segment  # the newest state's log segment
    keep: tuple[Segment, ...]  # the states of --keep-versions
    state: TableState
    roots: tuple[str, ...]  # the table location as absolute paths in the log may spell it
    retention: timedelta
    fingerprint: tuple  # the segment's last file as the store described it (`_fingerprint`)


@dataclass(frozen=True)
class DeltaCollector:
    """`lakegc delta gc` as a collector (`engine.collector`)."""

    location: str
    options: DeltaGcOptions
    given: RunOptions

    def plan(self) -> DeltaPlan:
        options = self.options
        if any(v < 0 for v in options.keep_versions):
            raise InvalidArgument("--keep-versions takes table versions, 0 or more")
        if options.retention is not None and options.retention < timedelta(0):
            raise InvalidArgument("--retention must not be negative")
        runs_location = self.given.runs_location or default_runs_location()
        storage = open_location(self.location, "table location")
        protected = connector_protected(self.given.metastore, runs_location) + iceberg_table_places()
        check_root(storage.uri, "table location", protected)
        return plan_table(storage, options, self.given, runs_location)

    def mark(self, spark: SparkSession, plan: DeltaPlan, stage: Stage) -> Marked:
        return _mark(spark, plan, stage)

    def sweep(self, spark: SparkSession, plan: DeltaPlan, stage: Stage) -> Swept:
        return _sweep(spark, plan, stage)


def plan_table(storage: Storage, options: DeltaGcOptions, given: RunOptions, runs_location: str) -> DeltaPlan:
    """What a run of the table at `storage` works from: its newest state read, its retention
    checked (everything that can be wrong with the table fails here, before a run starts). A
    warehouse run plans each Delta table under its location this way too."""
    table_uri = unquote(storage.uri).rstrip("/") + "/"  # as absolute paths in the log spell it
    files = read_log_files(storage)
    seg = segment(files)
    fingerprint = _fingerprint(storage, seg)
    state = table_state(storage, seg)
    check_readable(state)
    retention = options.retention if options.retention is not None else state.retention
    check_retention(retention, state.retention, options.force)
    keep = tuple(segment(files, v) for v in sorted(set(options.keep_versions)))  # a version the log lacks fails
    now = utcnow()
    run = given.plan("delta", table_uri.rstrip("/"), now, now - retention, runs_location)
    run = replace(run, settings=_settings(state, retention, now - retention, options))
    real = unquote(real_location(storage.uri)).rstrip("/") + "/"
    return DeltaPlan(run, storage, seg, keep, state, (table_uri, real), retention, fingerprint)


def _settings(state: TableState, retention: timedelta, cutoff: datetime, options: DeltaGcOptions) -> dict[str, object]:
    """The run's options as its record shows them."""
    return {
        "version": state.version,
        "retention": f"{duration_text(retention.total_seconds())} "
        f"(files modified or removed before {shown_time(cutoff)})",
        "table retention": duration_text(state.retention.total_seconds()),
        "partition columns": ", ".join(state.partition_columns) or "none",
        "keep versions": ", ".join(str(v) for v in sorted(set(options.keep_versions))) or "none",
        "forced": options.force,
    }


def read_log_files(storage: Storage) -> LogFiles:
    """The files of `_delta_log/` (its own, not `_sidecars/`)."""
    names = [info.key[len(LOG) :] for info in storage.list(LOG, recursive=False)]
    return log_files(names)


def table_state(storage: Storage, seg: Segment) -> TableState:
    """The table's newest metadata and protocol, as far as GC needs them; a field of the wrong
    type is a broken log (a partition column list read as a string would change what is hidden)."""
    metadata, protocol = newest_metadata(storage, seg)
    configuration = metadata.get("configuration") or {}
    columns = metadata.get("partitionColumns") or []
    features = [protocol.get("readerFeatures") or [], protocol.get("writerFeatures") or []]
    versions = [protocol.get("minReaderVersion", 1), protocol.get("minWriterVersion", 2)]
    if (
        not isinstance(configuration, dict)
        or not _strings(columns)
        or not all(_strings(f) for f in features)
        or not all(isinstance(v, int) for v in versions)
    ):
        raise BrokenLog("the Delta log's metaData or protocol action is malformed; nothing was deleted")
    configured = configuration.get("delta.deletedFileRetentionDuration")
    return TableState(
        seg.version,
        tuple(columns),
        parse_interval(configured) if configured else DEFAULT_RETENTION,
        tuple(features[0]),
        versions[0],
        tuple(features[1]),
        versions[1],
    )


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _mark(spark: SparkSession, plan: DeltaPlan, stage: Stage) -> Marked:
    """List the table, judge every file, write candidates/ (and repeats/, for the file list)."""
    from pyspark.sql import functions as F

    run, timed, storage, roots = stage.run, stage.timed, plan.storage, plan.roots
    timed("listing the table", roots[0])
    folders = location_folders(storage, "0", depth=1, leave_out=(LOG,))  # top-level folders, one task each
    listed = list_folders(spark, storage, folders, plan.run.cutoff).persist()
    # another Delta table inside is refused (its log would be taken for this table's unreferenced
    # files); any other table nobody named is left out whole
    foreign = leave_out_foreign(run, listed, {"0": roots[0]}, timed, refuse=frozenset({DELTA}))
    listing = outside_foreign(listed, foreign)
    tally = stage.tally_listing(listing)
    keep = plan.keep
    timed(
        "reading the Delta log",
        f"version {plan.state.version}"
        + (f", and versions {', '.join(str(s.version) for s in keep)} to keep" if keep else ""),
    )
    decided = judged(spark, plan, listing).persist()
    found = F.col("mtime").isNotNull()  # judge's mtime is the listing's: null for a file not found
    counts = stage.write_candidates(decided.where(found).drop("count"))
    folder = stage.folder
    run.details["removed files not found"] = write_counted(
        decided.where(~found).drop("count"), folder.storage, folder.key(GONE)
    )
    write_parquet(decided.where(F.col("count") > 1).select("address", "count"), folder.storage, folder.key(REPEATS))
    decided.unpersist()
    listed.unpersist()
    return Marked(tally, counts)


def judged(spark: SparkSession, plan: DeltaPlan, listing: DataFrame) -> DataFrame:
    """Every listed file with delta-rs's verdict (`vacuum.judge`), against the newest state and the
    states of --keep-versions."""
    storage, roots = plan.storage, plan.roots
    kept = None
    for kept_state in plan.keep:
        live = live_files(read_actions(spark, storage, kept_state, roots))
        kept = live if kept is None else kept.unionByName(live)
    return judge(
        listing,
        read_actions(spark, storage, plan.seg, roots),
        read_actions(spark, storage, plan.seg, roots, vectors_only=True),
        kept,
        plan.state.partition_columns,
        int(plan.run.now.timestamp() * 1000),
        int(plan.retention.total_seconds() * 1000),
    )


def _fingerprint(storage: Storage, seg: Segment) -> tuple:
    """The last file of a segment as the store describes it: another table, or a rewritten log,
    cannot keep its version's commit file byte for byte and to the microsecond."""
    key = seg.commits[-1][1] if seg.commits else seg.checkpoint.keys[-1]  # type: ignore[union-attr]
    info = storage.stat(key)
    return (key, info.size, info.mtime) if info is not None else (key, None, None)


def segment_since(plan: DeltaPlan) -> Segment | None:
    """The log read again: the commits since the planned version, as a segment (None: none). A log
    that no longer holds the planned version as it was fails: the table was replaced."""
    storage, seg = plan.storage, plan.seg
    files = read_log_files(storage)
    latest = files.latest
    if latest is None or latest < seg.version or _fingerprint(storage, seg) != plan.fingerprint:
        raise LakegcError(
            f"the Delta log changed under the run (version {seg.version} is no longer what the mark read): "
            "the table was replaced or its log rewritten; nothing was deleted"
        )
    if latest == seg.version:
        return None
    newer = [(v, files.commits[v]) for v in range(seg.version + 1, latest + 1) if v in files.commits]
    return Segment(latest, None, tuple(newer)) if len(newer) == latest - seg.version else segment(files)


def added_since(spark: SparkSession, plan: DeltaPlan) -> tuple[DataFrame, int] | None:
    """The files (and deletion vectors) the commits since the planned version add (column
    `address`, table-relative), and how many commits; None when there are none (`segment_since`)."""
    from pyspark.sql import functions as F

    since = segment_since(plan)
    if since is None:
        return None
    added = read_actions(spark, plan.storage, since, plan.roots).where(F.col("kind") == ADD)
    named = added.select(F.col("path").alias("address")).unionByName(added.select(F.col("dv").alias("address")))
    return named.where(F.col("address").isNotNull()), since.version - plan.seg.version


def _sweep(spark: SparkSession, plan: DeltaPlan, stage: Stage) -> Swept:
    """Read the log again; whatever a commit since the mark added stays; delete the rest."""
    stage.timed("re-reading the Delta log", "files committed since the mark stay")
    to_delete = stage.read(spark)
    since = added_since(spark, plan)
    if since is not None:
        added, commits = since
        to_delete = to_delete.join(added, "address", "left_anti")
        stage.run.details["commits since the mark"] = commits
    sent = stage.write_to_delete(to_delete)
    stage.timed("deleting files")
    results = delete_objects(
        spark,
        plan.storage,
        stage.read(spark, "to_delete"),
        max_deletes=stage.budget.max_deletes,
        max_rate=stage.budget.max_rate,
    )
    return Swept(stage.record_deletes(results), sent)


def file_list(spark: SparkSession, folder: RunFolder, swept: bool) -> Iterator[str]:
    """A run's files, the multiset delta-rs's vacuum returns, sorted: table-relative, a file that
    several remove actions name named as often. A dry run's candidates; a real run's deleted files
    (candidates less what the log's second reading kept, and less what a budget left); both with
    the files an expired remove names that are already gone (delta-rs lists those too, though
    nothing is deleted or counted for them). Streamed from the run folder, never held whole on the
    driver."""
    from pyspark.sql import functions as F

    output = "deleted" if swept else "candidates"
    candidates = read_parquet(spark, folder.storage, folder.parts(output), ddl(CANDIDATES)).select("address")
    gone_parts = folder.parts(GONE)
    if gone_parts:  # delta-rs lists them too (its vacuum "deletes" them again)
        gone = read_parquet(spark, folder.storage, gone_parts, ddl(CANDIDATES)).select("address")
        candidates = candidates.unionByName(gone)
    parts = folder.parts(REPEATS)
    if parts:
        repeats = read_parquet(spark, folder.storage, parts, "address string, count long")
        candidates = (
            candidates.join(repeats, "address", "left")
            .select("address", F.explode(F.sequence(F.lit(1), F.coalesce(F.col("count"), F.lit(1)))))
            .select("address")
        )
    for row in candidates.orderBy("address").toLocalIterator():
        yield row["address"]
