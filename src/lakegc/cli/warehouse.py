"""`lakegc warehouse`: one live set for everything under a prefix, and its runs' records."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from lakegc.api import warehouse as warehouse_api
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
from lakegc.cli.records import records, restore_command
from lakegc.engine.report import human_bytes
from lakegc.errors import InvalidArgument
from lakegc.timeutil import parse_duration

app = new_app("GC for a whole warehouse: what no table, catalog or repository under a prefix references.")

# -- warehouse gc's own options (module level: the command reads as what it does)
ICEBERG_CATALOG = typer.Option(
    [], "--iceberg-catalog", metavar="NAME", help="A pyiceberg catalog: every namespace and table of it (repeatable)."
)
DELTA_TABLE = typer.Option([], "--delta-table", metavar="LOCATION", help="A Delta table (repeatable).")
DELTA_UNDER = typer.Option(
    [], "--delta-under", metavar="LOCATION", help="Every Delta table found under it by its _delta_log (repeatable)."
)
REPOSITORIES = typer.Option(False, "--repositories", help="Every lakegc repository of the metastore.")
LAKEFS_REPO = typer.Option([], "--lakefs-repo", metavar="REPO", help="A lakeFS repository (repeatable).")
LAKEFS_ENDPOINT = typer.Option(
    None, "--lakefs-endpoint", metavar="URL", help="lakeFS's URL (default $LAKECTL_SERVER_ENDPOINT_URL)."
)
LAKEFS_LOCAL_PATH = typer.Option(
    None, "--lakefs-local-path", metavar="DIR", help="lakeFS's blockstore.local.path, for local:// namespaces."
)
IOX_CATALOG = typer.Option(None, "--catalog", metavar="URL", help="An IOx-style catalog (SQLAlchemy URL).")
MIN_AGE = typer.Option(
    None, "--min-age", metavar="DURATION", help="Files modified more recently are kept (default 7d)."
)
UNOWNED = typer.Option(
    None,
    "--unowned",
    metavar="keep|delete",
    help="A folder holding a table nobody named: keep it whole (default) or collect it.",
)
QUARANTINE = typer.Option(
    None,
    "--quarantine",
    metavar="DURATION",
    help="A restore window: move the files under LOCATION/_lakegc/quarantine/RUN_ID/ for this long instead.",
)
CONFIG = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A TOML file naming the systems (iceberg_catalogs, delta_tables, delta_under, repositories, "
    "lakefs_repos, catalog, min_age, unowned); options given here add to it or replace it.",
)
_CONFIG_KEYS = {
    "iceberg_catalogs": list,
    "delta_tables": list,
    "delta_under": list,
    "repositories": bool,
    "lakefs_repos": list,
    "catalog": str,
    "min_age": str,
    "unowned": str,
}


@app.command(
    "gc",
    epilog="Example: lakegc warehouse gc s3://bucket/warehouse --iceberg-catalog prod --delta-under "
    "s3://bucket/warehouse/delta --repositories --dry-run --json",
)
def gc(
    ctx: typer.Context,
    location: str = typer.Argument(..., metavar="LOCATION", help="The warehouse: a folder or s3://bucket/prefix."),
    iceberg_catalog: list[str] = ICEBERG_CATALOG,
    delta_table: list[str] = DELTA_TABLE,
    delta_under: list[str] = DELTA_UNDER,
    repositories: bool = REPOSITORIES,
    lakefs_repo: list[str] = LAKEFS_REPO,
    lakefs_endpoint: str | None = LAKEFS_ENDPOINT,
    lakefs_local_path: str | None = LAKEFS_LOCAL_PATH,
    catalog: str | None = IOX_CATALOG,
    min_age: str | None = MIN_AGE,
    unowned: str | None = UNOWNED,
    quarantine: str | None = QUARANTINE,
    config: Path | None = CONFIG,
    dry_run: bool = typer.Option(False, "--dry-run", help="Report; delete nothing."),
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    runs: str | None = RUNS,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Delete the files under LOCATION that none of the named systems references. With --json,
    "files" lists them (relative to LOCATION, sorted)."""
    file = read_config(config) if config is not None else {}
    age = _min_age(min_age or file.get("min_age", "7d"), dry_run)
    with progress("warehouse GC", as_json=as_json) as phase:
        run = warehouse_api.warehouse_gc(
            location,
            iceberg_catalogs=[*file.get("iceberg_catalogs", []), *iceberg_catalog],
            delta_tables=[*file.get("delta_tables", []), *delta_table],
            delta_under=[*file.get("delta_under", []), *delta_under],
            repositories=repositories or file.get("repositories", False),
            lakefs_repos=[*file.get("lakefs_repos", []), *lakefs_repo],
            lakefs_endpoint=lakefs_endpoint,
            lakefs_local_path=lakefs_local_path,
            catalog=catalog or file.get("catalog"),
            min_age=age,
            unowned=(unowned or file.get("unowned", "keep")).lower(),
            quarantine=quarantine,
            dry_run=dry_run,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            runs_location=runs,
            metastore=state(ctx).metastore_url,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    if as_json:
        output.emit_json_with_list(
            run.to_json(), "files", warehouse_api.warehouse_files(run.run_id, runs_location=runs)
        )
        return
    output.print_run(run, as_json)
    print_folders(run.details.get("folders", []), run.details.get("unowned table folders", []))


def _min_age(text: str, dry_run: bool) -> str:
    """--min-age as given; under a day, when files are deleted, a warning (as `iceberg gc` gives)."""
    if not dry_run and parse_duration(text) < timedelta(days=1):
        output.warn(
            f"--min-age {text} is under a day: files of writes still in flight, outside every table, may be deleted"
        )
    return text


def read_config(path: Path) -> dict[str, Any]:
    """The TOML file's systems, each key checked (an unknown key or a wrong type is an error)."""
    try:
        found = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--config {path}: cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"--config {path}: not TOML: {exc}") from None
    for key, value in found.items():
        wanted = _CONFIG_KEYS.get(key)
        if wanted is None:
            raise InvalidArgument(f"--config {path}: unknown key {key!r} (known: {', '.join(_CONFIG_KEYS)})")
        if not isinstance(value, wanted) or (wanted is list and not all(isinstance(v, str) for v in value)):
            raise InvalidArgument(
                f"--config {path}: {key} must be a {'list of strings' if wanted is list else wanted.__name__}"
            )
    return found


def print_folders(folders: list[dict[str, Any]], unowned: list[dict[str, str]]) -> None:
    """What the run frees (or would) per top-level folder and category, and the unowned folders."""
    if folders:
        output.table(
            "FOLDER",
            "CATEGORY",
            "FILES",
            "BYTES",
            rows=[[f["folder"], f["category"], f"{f['files']:,}", human_bytes(f["bytes"])] for f in folders],
            title="What is unreferenced, by top-level folder",
        )
    if unowned:
        output.table(
            "FOLDER",
            "MARKERS",
            rows=[[u["folder"], u["markers"]] for u in unowned],
            title="Tables nobody named (kept whole unless --unowned delete)",
        )


restore_command(app, "warehouse", warehouse_api.warehouse_restore, "files", "20261128T0612 --path 'stray/*'")


records(app, "warehouse")

__all__ = ["app"]
