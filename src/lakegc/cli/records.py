"""The record commands every connector has (`runs`, `show`, `candidates`), added to its group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.options import JSON, LIMIT, RUN_ID, RUNS


def records(app: typer.Typer, kind: str) -> None:
    """`runs`, `show` and `candidates` of a connector's runs."""

    @app.command("runs", help=f"{kind} GC runs, newest first.", epilog=f"Example: lakegc {kind} runs --json")
    def runs(runs: str | None = RUNS, as_json: bool = JSON) -> None:
        output.print_runs(api.connector_runs(kind, runs_location=runs), as_json)

    @app.command(
        "show", help=f"One {kind} GC run's summary.", epilog=f"Example: lakegc {kind} show 20261126T1406 --html"
    )
    def show(
        run_id: str = RUN_ID,
        runs: str | None = RUNS,
        as_json: bool = JSON,
        html: bool = typer.Option(False, "--html", help="Print where the run's report.html is."),
    ) -> None:
        found = api.connector_run(kind, run_id, runs_location=runs)
        if html:
            output.show_report(api.connector_folder(kind, found.run_id, runs_location=runs), found)
            return
        output.print_run(found, as_json)

    @app.command(
        "candidates",
        help=f"The files a {kind} GC run marked for deletion (address, size, mtime, reason).",
        epilog=f"Example: lakegc {kind} candidates 20261126T1406 --limit 20",
    )
    def candidates(
        run_id: str = RUN_ID, runs: str | None = RUNS, as_json: bool = JSON, limit: int | None = LIMIT
    ) -> None:
        output.print_candidates(api.connector_candidates(kind, run_id, runs_location=runs, limit=limit), as_json)


def restore_command(app: typer.Typer, kind: str, restorer: Callable[..., Any], things: str, example: str) -> None:
    """`restore RUN_ID [--path GLOB]` for a connector with a restore window: `restorer(run_id,
    path_glob=, runs_location=)` moves a run's quarantined `things` back."""

    @app.command(
        "restore",
        help=f"Move a run's quarantined {things} back (while its restore window lasts).",
        epilog=f"Example: lakegc {kind} restore {example}",
    )
    def restore(
        run_id: str = RUN_ID,
        path: str | None = typer.Option(None, "--path", metavar="GLOB", help="Only paths matching GLOB."),
        runs: str | None = RUNS,
        as_json: bool = JSON,
    ) -> None:
        done = restorer(run_id, path_glob=path, runs_location=runs)
        if as_json:
            output.emit_json(done.to_json())
            return
        output.table("", "", rows=[["restored", done.restored], ["kept (something is there again)", done.kept]])
