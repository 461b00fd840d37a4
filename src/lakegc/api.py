"""lakegc's Python API: everything the `lakegc` command does, for a scheduler, a notebook or a
service that should not shell out. The CLI is a thin layer over these functions.

    import lakegc

    run = lakegc.gc("lake", dry_run=True)              # a Run: what it found, what it deleted
    print(run.num_candidates, run.bytes_candidates)
    run = lakegc.gc("lake")                            # mark and sweep
    for r in lakegc.runs("lake"):                      # newest first
        print(r.run_id, r.state, r.num_deleted)

Every function takes the metastore as `metastore=` (a SQLAlchemy URL or an open `Lake`; default:
`LAKEGC_METASTORE`, else `$LAKEGC_HOME/config.toml`'s `metastore`, else the SQLite file in
`$LAKEGC_HOME`). Durations are `timedelta`s or the CLI's text (`24h`, `7d`, `P7D`). Spark's master
(`master=`, or `remote=` a Spark Connect address `sc://HOST:PORT`) and conf default to the settings
file's, then a running warm engine (`lakegc engine start`), then local mode. A run's progress can be followed with
`progress=`, called as each phase starts with its name and a detail. Errors are raised as
`lakegc.errors.LakegcError` subclasses whose message is the CLI's one-line `error:`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from lakegc.engine.collector import RunOptions
from lakegc.engine.delete import Budget
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import FolderRunLog, MetastoreRunLog, Run, RunFolder
from lakegc.errors import InvalidArgument
from lakegc.repo.gc_source import address_key, namespace_key
from lakegc.repo.repository import Lake, Repository
from lakegc.repogc.explain import Explanation, Reason, Verdict
from lakegc.repogc.quarantine import Purged, Restored
from lakegc.repogc.simulate import CurvePoint, RetentionCurve
from lakegc.retention.rules import GcRules, parse_rules
from lakegc.settings import load_settings
from lakegc.timeutil import parse_duration, utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Duration = timedelta | str
REPOSITORY_REASONS = ("expired", "uncommitted")  # why a repository run marks a candidate
Metastore = Lake | str | None

__all__ = [
    "Candidate",
    "CurvePoint",
    "RetentionCurve",
    "Explanation",
    "Reason",
    "Verdict",
    "Lake",
    "Purged",
    "Repository",
    "Restored",
    "Run",
    "candidates",
    "catalog_gc",
    "connector_candidates",
    "connector_folder",
    "connector_run",
    "connector_runs",
    "delete_rules",
    "delta_files",
    "delta_gc",
    "explain",
    "failures",
    "gc",
    "get_rules",
    "iceberg_gc",
    "open_lake",
    "purge",
    "restore",
    "run",
    "runs",
    "set_rules",
    "simulate",
    "sweep",
]


def open_lake(metastore: Metastore = None) -> Lake:
    """The metastore and the repositories in it (see the module for where `None` leads)."""
    return metastore if isinstance(metastore, Lake) else Lake(metastore)


def duration(value: Duration) -> timedelta:
    return value if isinstance(value, timedelta) else parse_duration(value)


def _min_age(value: Duration | None) -> timedelta:
    """The min-age a read-only command judges by: as given, else the settings' (as `gc` takes it)."""
    age = duration(value or load_settings().gc.min_age)
    if age < timedelta(0):
        raise InvalidArgument("--min-age must not be negative")
    return age


# -- repository GC ---------------------------------------------------------------------------------
def gc(
    repository: str,
    *,
    metastore: Metastore = None,
    dry_run: bool = False,
    mark_only: bool = False,
    min_age: Duration | None = None,
    clean: bool = False,
    cutoffs: tuple[str, ...] | list[str] = (),
    default_cutoff: str | None = None,
    inventory: str | None = None,
    curve: tuple[str, ...] | list[str] = (),
    quarantine: Duration | None = None,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Collect a repository: mark what no retained commit, staged entry, copy or live token
    references and is older than `min_age` (default 24h), then, unless `dry_run` or `mark_only`,
    sweep it (re-checking each candidate first). `cutoffs` (`REGEX=POLICY`) and `default_cutoff`
    replace the stored rules for this run; `clean` ignores earlier runs; `inventory` lists the
    namespace from an S3 Inventory manifest; `curve` (durations) also computes the retention curve
    for the report (as `simulate` does, one more pass); `quarantine` (a duration) moves what is
    collected into the run's quarantine for that long instead of deleting it (default: the rules'
    `quarantine_days`); `max_deletes` and `max_delete_rate` (objects a second) bound the sweep,
    which then leaves the run `sweeping` for `sweep` to continue. Returns the run's record, also
    when nothing was deleted; a failed run raises (its record says `failed` and why)."""
    from lakegc.repogc.job import GcOptions, run_gc

    settings = load_settings()
    options = GcOptions(
        dry_run=dry_run,
        mark_only=mark_only,
        min_age=duration(min_age or settings.gc.min_age),
        clean=clean,
        cutoffs=tuple(cutoffs),
        default_cutoff=default_cutoff,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
        inventory=inventory,
        curve=tuple(curve),
        quarantine=None if quarantine is None else duration(quarantine),
        budget=Budget(max_deletes, max_delete_rate),
    )
    return run_gc(open_lake(metastore), repository, options, progress, spark=spark)


def explain(
    repository: str,
    ref: str | None = None,
    path: str | None = None,
    *,
    address: str | None = None,
    metastore: Metastore = None,
    min_age: Duration | None = None,
    cutoffs: tuple[str, ...] | list[str] = (),
    default_cutoff: str | None = None,
) -> Explanation:
    """Why the object at `path` on `ref` (or at the physical `address`, a full location or a key of
    the namespace) would be kept or collected by a `gc` run started now with the same options:
    its verdict and every reason, with evidence. Reads only; deletes and records nothing."""
    from lakegc.repogc.explain import explain_key
    from lakegc.repogc.job import check_namespace, resolve_policies
    from lakegc.repogc.outputs import run_folder

    if (address is None) == (path is None):
        raise InvalidArgument("explain an object by its path on a ref, or by its address: one of the two")
    lake = open_lake(metastore)
    repo = lake.repository(repository)
    source = repo.gc_source()
    age = _min_age(min_age)
    now = utcnow()
    policies = resolve_policies(source, tuple(cutoffs), default_cutoff, now)
    if address is None:
        entry = repo.stat(ref or repo.info.default_branch, path)  # type: ignore[arg-type]
        key, full = namespace_key(source.namespace, entry.address, entry.address_kind), repo.physical_address(entry)
    else:
        key, full = address_key(source.namespace, address), address
        full = source.storage.full_uri(key) if key is not None else full
    check_namespace(source)
    log = MetastoreRunLog(lake.metastore, repository)
    return explain_key(source, key, full, policies, now, age, log.list(), lambda r: run_folder(source.storage, r))


def simulate(
    repository: str,
    retentions: list[str] | tuple[str, ...],
    *,
    metastore: Metastore = None,
    min_age: Duration | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> RetentionCurve:
    """The retention curve: for each duration in `retentions`, what `gc(dry_run=True, clean=True,
    default_cutoff=R)` would collect (candidates and bytes), all from one pass over the lake.
    Deletes nothing, records no run."""
    from lakegc.engine.spark import SessionStart
    from lakegc.repogc.job import check_namespace
    from lakegc.repogc.simulate import parse_retentions, retention_curve

    settings = load_settings()
    parsed = parse_retentions(list(retentions))
    age = _min_age(min_age)
    source = open_lake(metastore).repository(repository).gc_source()
    check_namespace(source)
    now = utcnow()
    session = spark or SessionStart(settings.master(master, remote), settings.spark_conf(conf)).result()
    return retention_curve(session, source, parsed, now, age, progress)


def sweep(
    repository: str,
    run_id: str,
    *,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
) -> Run:
    """Delete the candidates of a run marked with `mark_only`, re-checking each first, or go on
    with a run whose sweep stopped (a budget, a crash, objects the store would not delete).
    `run_id` may be a prefix only that run's id has."""
    from lakegc.repogc.job import sweep_run

    settings = load_settings()
    return sweep_run(
        open_lake(metastore),
        repository,
        run_id,
        progress,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
        budget=Budget(max_deletes, max_delete_rate),
    )


def restore(
    repository: str,
    run_id: str,
    *,
    path: str | None = None,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    spark: SparkSession | None = None,
) -> Restored:
    """Move a run's quarantined objects (or those whose repository path or address matches the
    glob `path`) back to their addresses; reads of them work again. An error names what is gone
    when the quarantine (or part of it) was purged."""
    from lakegc.repogc.job import restore_run

    settings = load_settings()
    lake = open_lake(metastore)
    return restore_run(
        lake,
        repository,
        run_id,
        path,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
    )


def purge(
    repository: str,
    *,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> list[Purged]:
    """Delete the quarantines of runs whose restore window has passed (every `gc` run does too)."""
    from lakegc.repogc.job import purge_quarantines

    settings = load_settings()
    return purge_quarantines(
        open_lake(metastore),
        repository,
        progress,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
    )


def runs(repository: str, *, metastore: Metastore = None) -> list[Run]:
    """The repository's GC runs, newest first."""
    lake = open_lake(metastore)
    lake.repository(repository)
    return MetastoreRunLog(lake.metastore, repository).list()


def run(repository: str, run_id: str, *, metastore: Metastore = None) -> Run:
    """One run of the repository, by its id or a prefix only it has."""
    lake = open_lake(metastore)
    lake.repository(repository)
    log = MetastoreRunLog(lake.metastore, repository)
    return log.get(log.resolve(run_id))[0]


@dataclass(frozen=True)
class Candidate:
    """An object a run marked for deletion, and why (`expired`, `uncommitted`, `orphan`, ...)."""

    address: str
    size: int
    mtime: datetime
    reason: str
    path: str | None = None  # a repository run's: a path an expired commit held it at (None: uncommitted)
    commit: str | None = None  # the newest commit that held it: the one whose expiry freed it
    branch: str | None = None  # that commit's branch ("(dangling)" for a dangling commit)


@dataclass(frozen=True)
class CandidateFilter:
    """Which candidates to show: all of `prefix` (of the path), `branch` and `reason` that are set."""

    prefix: str | None = None
    branch: str | None = None
    reason: str | None = None

    def __call__(self, row: dict) -> bool:
        path = row.get("path")
        return (
            (self.reason is None or row["reason"] == self.reason)
            and (self.prefix is None or (path is not None and path.startswith(self.prefix)))
            and (self.branch is None or row.get("branch") == self.branch)
        )


def candidates(
    repository: str,
    run_id: str,
    *,
    metastore: Metastore = None,
    limit: int | None = None,
    prefix: str | None = None,
    branch: str | None = None,
    reason: str | None = None,
) -> Iterator[Candidate]:
    """The candidates a repository run marked, streamed from its folder (never all in memory); only
    those whose path starts with `prefix`, whose commit lapsed on `branch`, of `reason`, when given."""
    from lakegc.repogc.outputs import run_folder

    _check_limit(limit)
    if reason is not None and reason not in REPOSITORY_REASONS:
        raise InvalidArgument(f"invalid reason {reason!r}: {' or '.join(REPOSITORY_REASONS)}")
    lake = open_lake(metastore)
    found = run(repository, run_id, metastore=lake)  # here, not when the first candidate is asked for
    wanted = CandidateFilter(prefix, branch, reason)
    return _candidates(run_folder(lake.repository(repository).storage, found.run_id), limit, wanted)


def failures(repository: str, run_id: str, *, metastore: Metastore = None, limit: int = 20) -> list[tuple[str, str]]:
    """The objects the run's newest sweep could not delete (address, the store's error), at most
    `limit`: what `num_failed` counts, and what `sweep` tries again."""
    from lakegc.repogc.sweep import failures as recorded_failures

    lake = open_lake(metastore)
    found = run(repository, run_id, metastore=lake)
    if not found.num_failed:
        return []
    return recorded_failures(lake.repository(repository).storage, found.run_id, limit)


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise InvalidArgument("limit must be at least 1")


def _candidates(folder: RunFolder, limit: int | None, wanted: CandidateFilter | None = None) -> Iterator[Candidate]:
    shown = 0
    for key in folder.parts("candidates"):
        with folder.storage.open_read(key) as f:
            source = pq.ParquetFile(f if f.seekable() else _buffer(f.read()))
            for batch in source.iter_batches(batch_size=10_000):
                for row in batch.to_pylist():
                    if wanted is not None and not wanted(row):
                        continue
                    if limit is not None and shown >= limit:
                        return
                    shown += 1
                    yield Candidate(
                        row["address"], row["size"], row["mtime"], row["reason"],
                        row.get("path"), row.get("commit"), row.get("branch"),
                    )  # fmt: skip


def _buffer(data: bytes):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.BufferReader(data)


def get_rules(repository: str, *, metastore: Metastore = None) -> GcRules | None:
    """The repository's retention rules (None: none set, every commit is kept)."""
    return open_lake(metastore).repository(repository).gc_rules()


def set_rules(repository: str, rules: GcRules | dict | str, *, metastore: Metastore = None) -> GcRules:
    """Set the repository's retention rules: lakeFS's JSON as text, a dict, or `GcRules`."""
    import json

    parsed = (
        rules if isinstance(rules, GcRules) else parse_rules(rules if isinstance(rules, str) else json.dumps(rules))
    )
    open_lake(metastore).repository(repository).set_gc_rules(parsed)
    return parsed


def delete_rules(repository: str, *, metastore: Metastore = None) -> bool:
    """Remove the repository's rules; False when there were none."""
    return open_lake(metastore).repository(repository).delete_gc_rules()


# -- connectors ------------------------------------------------------------------------------------
def iceberg_gc(
    catalog: str,
    tables: list[str],
    *,
    older_than: Duration | None = None,
    retain_last: int | None = None,
    orphan_min_age: Duration = "3d",
    prefix_mismatch: str = "error",
    dry_run: bool = False,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
    runs_location: str | None = None,
    metastore: str | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Expire snapshots of Iceberg `tables` (pyiceberg's catalog `catalog`) older than
    `older_than`, keeping `retain_last` per branch (None: each table's
    `history.expire.max-snapshot-age-ms` / `min-snapshots-to-keep`, else 5 days and 1; a branch's
    own settings replace them), then delete files under their
    locations that no table of any configured catalog references and that are older than
    `orphan_min_age`. `max_deletes` / `max_delete_rate` budget the deletes: a run stopped short
    says so (`num_stopped`), and the next run deletes the rest."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc
    from lakegc.connectors.iceberg.paths import PrefixMismatch

    try:
        mismatch = PrefixMismatch(prefix_mismatch)
    except ValueError:
        raise InvalidArgument(f"invalid prefix mismatch mode {prefix_mismatch!r}: error, ignore or delete") from None
    options = IcebergGcOptions(
        duration(older_than) if older_than is not None else None, retain_last, duration(orphan_min_age), mismatch
    )
    given = _run_options(dry_run, runs_location, metastore, master, remote, conf, max_deletes, max_delete_rate)
    return run_iceberg_gc(catalog, list(tables), options, given, progress, spark=spark)


def catalog_gc(
    catalog: str,
    store: str,
    *,
    objectstore_cutoff: Duration = "14d",
    parquetfile_cutoff: Duration = "14d",
    dry_run: bool = False,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
    runs_location: str | None = None,
    metastore: str | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """IOx-style GC of `store` against the `parquet_file` table of the catalog database `catalog`
    (a SQLAlchemy URL): hard-delete rows soft-deleted before now - `parquetfile_cutoff`, delete
    objects older than now - `objectstore_cutoff` that no row names. `max_deletes` /
    `max_delete_rate` budget the object deletes, as for every collector."""
    from lakegc.connectors.catalog import CatalogGcOptions, run_catalog_gc

    options = CatalogGcOptions(duration(objectstore_cutoff), duration(parquetfile_cutoff))
    given = _run_options(dry_run, runs_location, metastore, master, remote, conf, max_deletes, max_delete_rate)
    return run_catalog_gc(catalog, store, options, given, progress, spark=spark)


def _connector_log(kind: str, runs_location: str | None) -> FolderRunLog:
    from lakegc.connectors.runs import default_runs_location

    return FolderRunLog(runs_location or default_runs_location(), kind)


def delta_gc(
    location: str,
    *,
    retention: Duration | None = None,
    keep_versions: Iterable[int] = (),
    force: bool = False,
    dry_run: bool = False,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
    runs_location: str | None = None,
    metastore: str | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """VACUUM (full) the Delta table at `location` (a folder or s3:// prefix), deciding as delta-rs's
    `vacuum(full=True)` does: expired removes and unreferenced files older than `retention`
    (default: the table's delta.deletedFileRetentionDuration, or 7 days; shorter only with
    `force`), keeping the files of `keep_versions` too. `max_deletes` / `max_delete_rate` budget
    the deletes: a run stopped short says so (`num_stopped`), and the next run deletes the rest."""
    from lakegc.connectors.delta.gc import DeltaGcOptions, run_delta_gc

    options = DeltaGcOptions(duration(retention) if retention is not None else None, tuple(keep_versions), force)
    given = _run_options(dry_run, runs_location, metastore, master, remote, conf, max_deletes, max_delete_rate)
    return run_delta_gc(location, options, given, progress, spark=spark)


def _run_options(
    dry_run: bool,
    runs_location: str | None,
    metastore: str | None,
    master: str | None,
    remote: str | None,
    conf: dict[str, str] | None,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
) -> RunOptions:
    """A connector run's own options, with the settings' Spark master and conf."""
    settings = load_settings()
    return RunOptions(
        dry_run,
        runs_location,
        settings.master(master, remote),
        settings.spark_conf(conf),
        metastore,
        Budget(max_deletes, max_delete_rate),
    )


def delta_files(run_id: str, *, runs_location: str | None = None, spark: SparkSession | None = None) -> Iterator[str]:
    """The files a `delta_gc` run sent to delete (a dry run: would), the multiset delta-rs's vacuum
    returns, sorted, table-relative, streamed."""
    from lakegc.connectors.delta.gc import file_list

    found = connector_run("delta", run_id, runs_location=runs_location)
    if spark is None:
        from lakegc.engine.spark import spark_session

        settings = load_settings()
        spark = spark_session(settings.master(None), settings.spark_conf(None))
    folder = connector_folder("delta", found.run_id, runs_location=runs_location)
    return file_list(spark, folder, swept=not found.dry_run)


def connector_runs(kind: str, *, runs_location: str | None = None) -> list[Run]:
    """A connector's runs (`iceberg`, `catalog`), newest first."""
    return _connector_log(kind, runs_location).list()


def connector_run(kind: str, run_id: str, *, runs_location: str | None = None) -> Run:
    """One connector run, by its id or a prefix only it has."""
    log = _connector_log(kind, runs_location)
    return log.get(log.resolve(run_id))[0]


def connector_folder(kind: str, run_id: str, *, runs_location: str | None = None) -> RunFolder:
    """The folder of a connector run (its summary.json, report.html and outputs)."""
    return _connector_log(kind, runs_location).folder(run_id)


def connector_candidates(
    kind: str, run_id: str, *, runs_location: str | None = None, limit: int | None = None
) -> Iterator[Candidate]:
    _check_limit(limit)
    log = _connector_log(kind, runs_location)
    return _candidates(log.folder(log.resolve(run_id)), limit)
