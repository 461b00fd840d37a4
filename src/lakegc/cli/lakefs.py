"""`lakegc lakefs`: GC of a real lakeFS installation's repository namespace, and its runs' records."""

from __future__ import annotations

import typer

from lakegc import api
from lakegc.api import lakefs as lakefs_api
from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import (
    CONF,
    JSON,
    LIMIT,
    MASTER,
    MAX_DELETE_RATE,
    MAX_DELETES,
    REMOTE,
    RUN_ID,
    RUNS,
    on_spark,
    state,
)
from lakegc.cli.progress import progress
from lakegc.cli.records import restore_command
from lakegc.timeutil import parse_duration

app = new_app("GC for a lakeFS installation: a repository's namespace, decided as lakeFS's own GC does.")


# -- lakefs gc's own options (module level: the command reads as what it does)
ENDPOINT = typer.Option(
    None,
    "--endpoint",
    metavar="URL",
    help="lakeFS's URL, with or without /api/v1 (default $LAKECTL_SERVER_ENDPOINT_URL).",
)
ACCESS_KEY_ID = typer.Option(None, "--access-key-id", metavar="ID", help="Default $LAKECTL_CREDENTIALS_ACCESS_KEY_ID.")
SECRET_ACCESS_KEY = typer.Option(
    None, "--secret-access-key", metavar="KEY", help="Default $LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY."
)
LOCAL_PATH = typer.Option(
    None, "--local-path", metavar="DIR", help="lakeFS's blockstore.local.path, for local:// namespaces."
)
MIN_AGE = typer.Option(
    None,
    "--min-age",
    metavar="DURATION",
    help="Objects modified more recently are kept (default 1d; a sweep keeps to its mark's cutoff).",
)
DRY_RUN = typer.Option(False, "--dry-run", help="Report; delete nothing, write no lakeFS report.")
MARK_ONLY = typer.Option(False, "--mark-only", help="Mark and write lakeFS's report; delete nothing.")
SWEEP = typer.Option(
    None, "--sweep", metavar="RUN_ID", help="Delete what that successful mark listed (re-checked first)."
)
QUARANTINE = typer.Option(
    None,
    "--quarantine",
    metavar="DURATION",
    help="A restore window: move the objects under _lakegc/quarantine/RUN_ID/ for this long instead of deleting.",
)


@app.command(
    "gc",
    epilog="Example: lakegc lakefs gc example-repo --endpoint https://lakefs.example.com --mark-only --json",
)
def gc(
    ctx: typer.Context,
    repository: str = typer.Argument(..., metavar="REPOSITORY", help="The lakeFS repository."),
    endpoint: str | None = ENDPOINT,
    access_key_id: str | None = ACCESS_KEY_ID,
    secret_access_key: str | None = SECRET_ACCESS_KEY,
    local_path: str | None = LOCAL_PATH,
    min_age: str | None = MIN_AGE,
    dry_run: bool = DRY_RUN,
    mark_only: bool = MARK_ONLY,
    sweep: str | None = SWEEP,
    quarantine: str | None = QUARANTINE,
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    runs: str | None = RUNS,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Delete the objects of a lakeFS repository's namespace that no active commit and nothing
    uncommitted references. With --json, "addresses" lists them (namespace-relative, sorted)."""
    with progress("lakeFS GC", as_json=as_json) as phase:
        run = lakefs_api.lakefs_gc(
            repository,
            endpoint=endpoint,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            local_path=local_path,
            min_age=parse_duration(min_age) if min_age is not None else None,
            mark_only=mark_only,
            sweep=sweep,
            quarantine=parse_duration(quarantine) if quarantine is not None else None,
            dry_run=dry_run,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            runs_location=runs,
            metastore=state(ctx).metastore_url,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    if as_json:
        doc = {
            **run.to_json(),
            "num_deleted_objects": run.num_candidates if run.dry_run or run.mark_only else run.num_deleted,
        }
        output.emit_json_with_list(doc, "addresses", lakefs_api.lakefs_addresses(run.run_id, runs_location=runs))
        return
    output.print_run(run, as_json)


restore_command(app, "lakefs", lakefs_api.lakefs_restore, "objects", "5c0ffee --path 'data/g01*'")


@app.command("runs", help="lakeFS GC runs, newest first.", epilog="Example: lakegc lakefs runs example-repo --json")
def runs(
    repository: str | None = typer.Argument(None, metavar="REPOSITORY", help="Only this repository's runs."),
    runs: str | None = RUNS,
    as_json: bool = JSON,
) -> None:
    output.print_runs(lakefs_api.lakefs_runs(repository, runs_location=runs), as_json)


@app.command("show", help="One lakeFS GC run's summary.", epilog="Example: lakegc lakefs show 5c0ffee --html")
def show(
    run_id: str = RUN_ID,
    runs: str | None = RUNS,
    as_json: bool = JSON,
    html: bool = typer.Option(False, "--html", help="Print where the run's report.html is."),
) -> None:
    found = api.connector_run("lakefs", run_id, runs_location=runs)
    if html:
        output.show_report(api.connector_folder("lakefs", found.run_id, runs_location=runs), found)
        return
    output.print_run(found, as_json)


@app.command(
    "candidates",
    help="The objects a lakeFS GC run marked for deletion (address, size, mtime, reason).",
    epilog="Example: lakegc lakefs candidates 5c0ffee --limit 20",
)
def candidates(run_id: str = RUN_ID, runs: str | None = RUNS, as_json: bool = JSON, limit: int | None = LIMIT) -> None:
    output.print_candidates(api.connector_candidates("lakefs", run_id, runs_location=runs, limit=limit), as_json)


__all__ = ["app"]
