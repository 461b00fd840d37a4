"""The API of `lakegc warehouse`: collect what no named system references under a warehouse
location, and read those runs' records."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from lakegc.api.common import Duration, duration
from lakegc.api.connectors import _run_options, connector_folder, connector_run
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import Run, RunState
from lakegc.errors import InvalidArgument
from lakegc.settings import load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegc.engine.window import Restored

KIND = "warehouse"
UNOWNED_MODES = ("keep", "delete")


def warehouse_gc(
    location: str,
    *,
    iceberg_catalogs: Iterable[str] = (),
    delta_tables: Iterable[str] = (),
    delta_under: Iterable[str] = (),
    repositories: bool = False,
    lakefs_repos: Iterable[str] = (),
    lakefs_endpoint: str | None = None,
    lakefs_access_key_id: str | None = None,
    lakefs_secret_access_key: str | None = None,
    lakefs_local_path: str | None = None,
    catalog: str | None = None,
    min_age: Duration = "7d",
    unowned: str = "keep",
    quarantine: Duration | None = None,
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
    """Delete the files under `location` older than `min_age` that none of the named systems
    references: every table of each pyiceberg catalog of `iceberg_catalogs`, each Delta table
    (`delta_tables`, and every one found under `delta_under`; what its own VACUUM keeps, at its own
    retention), every lakegc repository of the metastore (`repositories`), each lakeFS repository
    of `lakefs_repos`, and the objects an IOx `catalog` names. A folder holding a table or
    namespace marker no named system accounts for is kept whole unless `unowned="delete"`.
    `quarantine`: a restore window (files move under `location`'s `_lakegc/quarantine/<run_id>/`
    for that long; `warehouse_restore` puts them back)."""
    from lakegc.warehouse.gc import WarehouseGcOptions, run_warehouse_gc

    if unowned not in UNOWNED_MODES:
        raise InvalidArgument(f"invalid --unowned {unowned!r}: keep or delete")
    options = WarehouseGcOptions(
        tuple(iceberg_catalogs),
        tuple(delta_tables),
        tuple(delta_under),
        repositories,
        tuple(lakefs_repos),
        lakefs_endpoint,
        lakefs_access_key_id,
        lakefs_secret_access_key,
        lakefs_local_path,
        catalog,
        duration(min_age),
        unowned == "delete",
        duration(quarantine) if quarantine is not None else None,
    )
    given = _run_options(dry_run, runs_location, metastore, master, remote, conf, max_deletes, max_delete_rate)
    return run_warehouse_gc(location, options, given, progress, spark=spark)


def warehouse_files(
    run_id: str, *, runs_location: str | None = None, spark: SparkSession | None = None
) -> Iterator[str]:
    """The files a warehouse run deleted (a dry run: would), relative to its location, sorted,
    streamed."""
    from lakegc.engine.candidates import address_list

    found = connector_run(KIND, run_id, runs_location=runs_location)
    if spark is None:
        from lakegc.engine.spark import spark_session

        settings = load_settings()
        spark = spark_session(settings.master(None), settings.spark_conf(None))
    folder = connector_folder(KIND, found.run_id, runs_location=runs_location)
    return address_list(spark, folder, swept=found.state is RunState.SWEPT)


def warehouse_restore(run_id: str, *, path_glob: str | None = None, runs_location: str | None = None) -> Restored:
    """Move a warehouse run's quarantined files (those whose path matches `path_glob`) back, while
    its restore window lasts; a path holding a file again keeps it."""
    from lakegc.engine.listing import open_location
    from lakegc.engine.window import restore

    found = connector_run(KIND, run_id, runs_location=runs_location)
    return restore(open_location(found.target, "warehouse location"), found.run_id, path_glob)
