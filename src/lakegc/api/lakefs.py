"""The API of `lakegc lakefs`: collect a real lakeFS installation's repository namespace, and read
those runs' records."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from lakegc.api.common import Duration, duration
from lakegc.api.connectors import _run_options, connector_folder, connector_run, connector_runs
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import Run, RunState
from lakegc.settings import load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegc.engine.window import Restored

KIND = "lakefs"


def lakefs_gc(
    repository: str,
    *,
    endpoint: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    local_path: str | None = None,
    min_age: Duration | None = None,
    mark_only: bool = False,
    sweep: str | None = None,
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
    """Collect lakeFS repository `repository` as lakeFS's own GC decides: objects under its
    namespace's `data/` and root older than `min_age` that no active commit and no uncommitted
    entry references (lakeFS's prepare_commits and prepare_uncommited say which), re-checked with
    lakeFS before each delete. The endpoint and credentials default to lakectl's variables.
    `mark_only` writes lakeFS's report and deletes nothing; `sweep` (a mark's run id) deletes what
    that mark listed. `quarantine`: a restore window (objects are moved under the namespace's
    `_lakegc/quarantine/<run_id>/` for that long, `lakefs_restore` puts them back)."""
    from lakegc.lakefs.gc import LakeFSGcOptions, run_lakefs_gc

    window = duration(quarantine) if quarantine is not None else None
    options = LakeFSGcOptions(
        endpoint,
        access_key_id,
        secret_access_key,
        local_path,
        duration(min_age) if min_age is not None else None,
        mark_only,
        sweep,
        window,
    )
    given = _run_options(dry_run, runs_location, metastore, master, remote, conf, max_deletes, max_delete_rate)
    return run_lakefs_gc(repository, options, given, progress, spark=spark)


def lakefs_runs(repository: str | None = None, *, runs_location: str | None = None) -> list[Run]:
    """lakeFS GC runs, newest first (of one repository when given)."""
    found = connector_runs(KIND, runs_location=runs_location)
    return [r for r in found if repository is None or r.settings.get("repository") == repository]


def lakefs_addresses(
    run_id: str, *, runs_location: str | None = None, spark: SparkSession | None = None
) -> Iterator[str]:
    """The addresses a lakeFS GC run deleted (a dry run or a mark alone: would), relative to the
    namespace, sorted, streamed."""
    from lakegc.engine.candidates import address_list

    found = connector_run(KIND, run_id, runs_location=runs_location)
    if spark is None:
        from lakegc.engine.spark import spark_session

        settings = load_settings()
        spark = spark_session(settings.master(None), settings.spark_conf(None))
    folder = connector_folder(KIND, found.run_id, runs_location=runs_location)
    return address_list(spark, folder, swept=found.state is RunState.SWEPT)


def lakefs_restore(run_id: str, *, path_glob: str | None = None, runs_location: str | None = None) -> Restored:
    """Move a lakeFS GC run's quarantined objects (those whose address matches `path_glob`) back to
    their addresses, while its restore window lasts; an address holding an object again keeps it."""
    from lakegc.engine.listing import open_location
    from lakegc.engine.window import restore
    from lakegc.lakefs.gc import STORAGE

    found = connector_run(KIND, run_id, runs_location=runs_location)
    return restore(open_location(found.settings[STORAGE], "namespace"), found.run_id, path_glob)
