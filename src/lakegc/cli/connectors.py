"""`lakegc catalog`, `lakegc iceberg` and `lakegc delta`: the connectors' runs, and their records (`runs`, `show`,
`candidates`, as `gc` has them for repository runs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import (
    CONF,
    JSON,
    MASTER,
    MAX_DELETE_RATE,
    MAX_DELETES,
    REMOTE,
    RUNS,
    on_spark,
    state,
)
from lakegc.cli.progress import progress
from lakegc.cli.records import records
from lakegc.connectors.iceberg.paths import PrefixMismatch
from lakegc.errors import InvalidArgument
from lakegc.timeutil import parse_duration

catalog_app = new_app("GC for an IOx-style catalog: its parquet_file table and the object store it names.")
iceberg_app = new_app("GC for Iceberg tables: expire snapshots, then delete files no table references.")
delta_app = new_app("GC for Delta Lake tables: a full VACUUM, deciding as delta-rs does, on Spark.")

# -- iceberg gc's own options (module level: the command reads as what it does) -----------------------
ICEBERG_CATALOG = typer.Option(
    ..., "--catalog", metavar="NAME", help="A pyiceberg catalog name (~/.pyiceberg.yaml or PYICEBERG_CATALOG__NAME__*)."
)
OLDER_THAN = typer.Option(
    None,
    "--older-than",
    show_default=False,
    help="Expire snapshots older than this (default: the table's history.expire.max-snapshot-age-ms, "
    "else 5d; a branch's max-snapshot-age-ms replaces it).",
)
RETAIN_LAST = typer.Option(
    None,
    "--retain-last",
    show_default=False,
    help="Keep this many snapshots of each branch (default: the table's "
    "history.expire.min-snapshots-to-keep, else 1; a branch's min-snapshots-to-keep replaces it).",
)
ORPHAN_MIN_AGE = typer.Option("3d", "--orphan-min-age", help="Files modified more recently are never deleted.")
PREFIX_MISMATCH = typer.Option(
    PrefixMismatch.ERROR,
    "--prefix-mismatch",
    case_sensitive=False,
    help="A file referenced under another scheme or authority: error (stop), ignore (keep) or delete.",
)


@catalog_app.command(
    "gc",
    epilog="Example: lakegc catalog gc --catalog postgresql+psycopg://iox@db/catalog --store s3://bucket/iox --dry-run",
)
def catalog_gc(
    ctx: typer.Context,
    catalog: str = typer.Option(..., "--catalog", metavar="URL", help="SQLAlchemy URL of the catalog database."),
    store: str = typer.Option(
        ..., "--store", metavar="LOCATION", help="The object store: a folder or s3://bucket/prefix."
    ),
    objectstore_cutoff: str = typer.Option(
        "14d", "--objectstore-cutoff", help="Objects modified more recently are never deleted (at least 3h)."
    ),
    parquetfile_cutoff: str = typer.Option(
        "14d", "--parquetfile-cutoff", help="Rows soft-deleted more recently are kept (at least 3h)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; delete nothing, change no row."),
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    runs: str | None = RUNS,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Hard-delete expired parquet_file rows and delete the objects no row names."""
    with progress("catalog GC", as_json=as_json) as phase:
        run = api.catalog_gc(
            catalog,
            store,
            objectstore_cutoff=parse_duration(objectstore_cutoff),
            parquetfile_cutoff=parse_duration(parquetfile_cutoff),
            dry_run=dry_run,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            runs_location=runs,
            metastore=state(ctx).metastore_url,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    output.print_run(run, as_json)


@iceberg_app.command("gc", epilog="Example: lakegc iceberg gc --catalog lake db.events --older-than 7d --dry-run")
def iceberg_gc(
    ctx: typer.Context,
    tables: list[str] = typer.Argument(..., metavar="TABLE...", help="Tables to collect, as namespace.table."),
    catalog: str = ICEBERG_CATALOG,
    older_than: str | None = OLDER_THAN,
    retain_last: int | None = RETAIN_LAST,
    orphan_min_age: str = ORPHAN_MIN_AGE,
    prefix_mismatch: PrefixMismatch = PREFIX_MISMATCH,
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; expire nothing, delete nothing."),
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    runs: str | None = RUNS,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Expire old snapshots of the tables, then delete files under their locations no table references."""
    orphan_age = _orphan_age(orphan_min_age, dry_run)
    with progress("iceberg GC", as_json=as_json) as phase:
        run = api.iceberg_gc(
            catalog,
            tables,
            older_than=parse_duration(older_than) if older_than is not None else None,
            retain_last=retain_last,
            orphan_min_age=orphan_age,
            prefix_mismatch=str(prefix_mismatch),
            dry_run=dry_run,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            runs_location=runs,
            metastore=state(ctx).metastore_url,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    output.print_run(run, as_json)
    if not as_json:
        _print_snapshots(run.details["tables"], dry_run)


def _orphan_age(text: str, dry_run: bool) -> timedelta:
    """--orphan-min-age as a duration; under a day, when files are deleted, a warning: files of writes
    still in flight may be taken (Iceberg's own procedure refuses it)."""
    orphan_age = parse_duration(text)
    if orphan_age < timedelta(days=1) and not dry_run:
        output.warn(
            f"--orphan-min-age {text} is under a day: files of writes still in flight, not yet "
            "committed, may be deleted (Iceberg's own procedure refuses under 24h)"
        )
    return orphan_age


def _print_snapshots(tables: list[dict[str, Any]], dry_run: bool) -> None:
    """Each table's snapshots expired (or, in a dry run, to expire) and kept."""
    expired = "SNAPSHOTS TO EXPIRE" if dry_run else "SNAPSHOTS EXPIRED"
    output.table(
        "TABLE",
        "LOCATION",
        expired,
        "SNAPSHOTS KEPT",
        rows=[[t["table"], t["location"], t["snapshots expired"], t["snapshots kept"]] for t in tables],
    )


@delta_app.command(
    "gc",
    epilog="Example: lakegc delta gc s3://bucket/tables/events --retention 7d --dry-run --json",
)
def delta_gc(
    ctx: typer.Context,
    location: str = typer.Argument(..., metavar="TABLE_LOCATION", help="The table's folder or s3:// prefix."),
    retention: str | None = typer.Option(
        None,
        "--retention",
        metavar="DURATION",
        help="Delete files removed (or written, if never committed) longer ago than this "
        "(default: the table's delta.deletedFileRetentionDuration, or 7d).",
    ),
    keep_versions: str | None = typer.Option(
        None, "--keep-versions", metavar="V,...", help="Also keep every file these table versions read."
    ),
    force: bool = typer.Option(
        False, "--force", help="Allow a retention shorter than the table's delta.deletedFileRetentionDuration."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; delete nothing."),
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    runs: str | None = RUNS,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Delete the files a full VACUUM would: removed longer ago than the retention, or never
    committed and older than it. With --json, "files" lists them (table-relative, sorted)."""
    with progress("delta GC", as_json=as_json) as phase:
        run = api.delta_gc(
            location,
            retention=parse_duration(retention) if retention is not None else None,
            keep_versions=_versions(keep_versions),
            force=force,
            dry_run=dry_run,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            runs_location=runs,
            metastore=state(ctx).metastore_url,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    if as_json:
        output.emit_json_with_list(run.to_json(), "files", api.delta_files(run.run_id, runs_location=runs))
        return
    output.print_run(run, as_json)


def _versions(text: str | None) -> list[int]:
    """`--keep-versions 3,5,8` as table versions."""
    if text is None:
        return []
    try:
        versions = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidArgument(
            f"invalid --keep-versions {text!r}: table versions separated by commas, as 3,5,8"
        ) from None
    if not versions or any(v < 0 for v in versions):
        raise InvalidArgument(f"invalid --keep-versions {text!r}: table versions are 0 or more")
    return versions


records(catalog_app, "catalog")
records(iceberg_app, "iceberg")
records(delta_app, "delta")

__all__ = ["catalog_app", "delta_app", "iceberg_app"]
