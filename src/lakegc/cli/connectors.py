"""`lakegc catalog gc` and `lakegc iceberg gc`: the connectors (CLI.md "Connectors")."""

from __future__ import annotations

from datetime import timedelta
from typing import Optional

import typer

from lakegc.cli import output
from lakegc.cli.gc import parse_conf, progress
from lakegc.cli.main import new_app, state
from lakegc.cli.refs import JSON
from lakegc.connectors.iceberg.paths import PrefixMismatch
from lakegc.connectors.runs import ConnectorRun, summary_rows
from lakegc.timeutil import parse_duration

catalog_app = new_app("GC for an IOx-style catalog: its parquet_file table and the object store it names.")
iceberg_app = new_app("GC for Iceberg tables: expire snapshots, then delete files no table references.")

RUNS = typer.Option(None, "--runs", metavar="LOCATION",
                    help="Folder or s3:// prefix for the run's outputs (default $LAKEGC_HOME/runs).")
MASTER = typer.Option(None, "--master", help="Spark master URL (default local[*]).")
CONF = typer.Option([], "--conf", help="Spark conf KEY=VALUE (repeatable).")


@catalog_app.command("gc")
def catalog_gc(
    ctx: typer.Context,
    catalog: str = typer.Option(..., "--catalog", metavar="URL", help="SQLAlchemy URL of the catalog database."),
    store: str = typer.Option(..., "--store", metavar="LOCATION", help="The object store: a folder or s3://bucket/prefix."),
    objectstore_cutoff: str = typer.Option("14d", "--objectstore-cutoff",
                                           help="Objects modified more recently are never deleted (at least 3h)."),
    parquetfile_cutoff: str = typer.Option("14d", "--parquetfile-cutoff",
                                           help="Rows soft-deleted more recently are kept (at least 3h)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; delete nothing, change no row."),
    runs: Optional[str] = RUNS, master: Optional[str] = MASTER, conf: list[str] = CONF, as_json: bool = JSON,
) -> None:
    """Hard-delete expired parquet_file rows and delete the objects no row names."""
    from lakegc.connectors.catalog import CatalogGcOptions, run_catalog_gc

    options = CatalogGcOptions(parse_duration(objectstore_cutoff), parse_duration(parquetfile_cutoff), dry_run, runs,
                               master, parse_conf(conf), state(ctx).metastore_url)
    with progress("catalog GC", quiet=as_json) as phase:
        run = run_catalog_gc(catalog, store, options, phase)
    print_run(run, as_json)


@iceberg_app.command("gc")
def iceberg_gc(
    ctx: typer.Context,
    tables: list[str] = typer.Argument(..., metavar="TABLE...", help="Tables to collect, as namespace.table."),
    catalog: str = typer.Option(..., "--catalog", metavar="NAME",
                                help="A pyiceberg catalog name (~/.pyiceberg.yaml or PYICEBERG_CATALOG__NAME__*)."),
    older_than: str = typer.Option("5d", "--older-than", help="Expire snapshots older than this."),
    retain_last: int = typer.Option(1, "--retain-last", help="Keep at least this many snapshots of each branch."),
    orphan_min_age: str = typer.Option("3d", "--orphan-min-age", help="Files modified more recently are never deleted."),
    prefix_mismatch: PrefixMismatch = typer.Option(
        PrefixMismatch.ERROR, "--prefix-mismatch", case_sensitive=False,
        help="A file referenced under another scheme or authority: error (stop), ignore (keep) or delete."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; expire nothing, delete nothing."),
    runs: Optional[str] = RUNS, master: Optional[str] = MASTER, conf: list[str] = CONF, as_json: bool = JSON,
) -> None:
    """Expire old snapshots of the tables, then delete files under their locations no table references."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    options = IcebergGcOptions(parse_duration(older_than), retain_last, parse_duration(orphan_min_age), prefix_mismatch,
                               dry_run, runs, master, parse_conf(conf), state(ctx).metastore_url)
    if options.orphan_min_age < timedelta(days=1) and not dry_run:
        output.warn(f"--orphan-min-age {orphan_min_age} is under a day: files of writes still in flight, not yet "
                    "committed, may be deleted (Iceberg's own procedure refuses under 24h)")
    with progress("iceberg GC", quiet=as_json) as phase:
        run = run_iceberg_gc(catalog, tables, options, phase)
    print_run(run, as_json)
    if not as_json:
        expired = "SNAPSHOTS TO EXPIRE" if dry_run else "SNAPSHOTS EXPIRED"
        output.table("TABLE", "LOCATION", expired, "SNAPSHOTS KEPT", rows=[
            [t["table"], t["location"], t["snapshots expired"], t["snapshots kept"]] for t in run.details["tables"]])


def print_run(run: ConnectorRun, as_json: bool) -> None:
    if as_json:
        output.emit_json(run.to_json())
        return
    output.table("", "", rows=summary_rows(run), title=f"{run.connector} GC run {run.run_id}")


__all__ = ["catalog_app", "iceberg_app"]
