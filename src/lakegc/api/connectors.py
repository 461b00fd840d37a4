"""The connectors' API: collect Iceberg tables, an IOx-style catalog's store or a Delta table, and
read the runs each connector records in its runs folder."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from lakegc.api.common import Candidate, Duration, check_limit, duration, read_candidates
from lakegc.engine.collector import RunOptions
from lakegc.engine.delete import Budget
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import FolderRunLog, Run, RunFolder
from lakegc.errors import InvalidArgument
from lakegc.settings import load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    check_limit(limit)
    log = _connector_log(kind, runs_location)
    return read_candidates(log.folder(log.resolve(run_id)), limit)
