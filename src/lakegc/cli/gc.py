"""`lakegc gc`: rules, runs (mark + sweep), deferred sweeps, and what runs found."""

from __future__ import annotations

import io
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import pyarrow.parquet as pq
import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from lakegc.cli import output
from lakegc.cli.main import new_app, state
from lakegc.cli.refs import JSON
from lakegc.errors import InvalidArgument
from lakegc.gc.config import delete_rules, get_rules, set_rules
from lakegc.gc.job import GcOptions, run_gc, sweep_run
from lakegc.gc.rules import parse_rules
from lakegc.gc.report import render_report, summary_rows
from lakegc.gc.runs import RunStore, RunSummary, output_keys, report_key
from lakegc.redact import mask_doc, shown
from lakegc.timeutil import parse_duration
from lakegc.uri import parse_uri

app = new_app("Garbage collection: retention rules, runs, sweeps.")


def _repo_uri(uri: str) -> str:
    target = parse_uri(uri)
    if target.ref:
        raise InvalidArgument(f"invalid URI {uri!r}: expected lakegc://REPO")
    return target.repo


@app.command("set-config")
def set_config(ctx: typer.Context, uri: str, file: str = typer.Option(..., "-f", "--file", help="Rules JSON, or - for stdin.")) -> None:
    """Set the repository's retention rules (lakeFS JSON)."""
    repo = state(ctx).lake.repository(_repo_uri(uri))
    text = sys.stdin.read() if file == "-" else _read_file(file)
    set_rules(repo, parse_rules(text))
    output.say(f"GC rules set for {repo.name!r}")


@app.command("get-config")
def get_config(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """Show the repository's retention rules."""
    repo = state(ctx).lake.repository(_repo_uri(uri))
    rules = get_rules(repo)
    if rules is None:
        output.fail(f"no GC rules set for repository {repo.name!r} (GC keeps every commit)")
    if as_json:
        output.emit_json(rules.model_dump())
    else:
        output.table("BRANCH", "RETENTION DAYS", rows=[["(default)", rules.default_retention_days],
                                                       *[[b.branch_id, b.retention_days] for b in rules.branches]])


@app.command("delete-config")
def delete_config(ctx: typer.Context, uri: str) -> None:
    """Remove the repository's retention rules (GC then keeps every commit)."""
    repo = state(ctx).lake.repository(_repo_uri(uri))
    if not delete_rules(repo):
        output.fail(f"no GC rules set for repository {repo.name!r}")
    output.say(f"GC rules deleted for {repo.name!r}")


@app.command("run")
def run(ctx: typer.Context, uri: str,
        dry_run: bool = typer.Option(False, "--dry-run", help="Mark and report; delete nothing."),
        mark_only: bool = typer.Option(False, "--mark-only", help="Stop at 'marked'; sweep later with `gc sweep`."),
        min_age: str = typer.Option("24h", "--min-age", help="Objects younger than this are never candidates."),
        clean: bool = typer.Option(False, "--clean", help="Ignore earlier runs."),
        cutoff: list[str] = typer.Option([], "--cutoff", help="REGEX=POLICY (repeatable); overrides the stored rules."),
        default_cutoff: Optional[str] = typer.Option(None, "--default-cutoff", help="POLICY for other branches and dangling commits."),
        master: Optional[str] = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
        conf: list[str] = typer.Option([], "--conf", help="Spark conf KEY=VALUE (repeatable)."),
        inventory: Optional[str] = typer.Option(
            None, "--inventory", metavar="MANIFEST",
            help="List the namespace from this S3 Inventory manifest.json (a path or s3://...) instead of listing "
                 "it; slices written since it was taken are listed directly. Refused when older than --min-age."),
        as_json: bool = JSON) -> None:
    """Mark and sweep in one Spark job; prints the run's summary."""
    name = _repo_uri(uri)
    options = GcOptions(dry_run=dry_run, mark_only=mark_only, min_age=parse_duration(min_age), clean=clean,
                        cutoffs=tuple(cutoff), default_cutoff=default_cutoff, master=master, conf=parse_conf(conf),
                        inventory=inventory)
    with progress(f"GC {name}", quiet=as_json) as phase:
        summary = run_gc(state(ctx).lake, name, options, phase)
    print_summary(summary, as_json)


@app.command("sweep")
def sweep(ctx: typer.Context, uri: str, run_id: str, as_json: bool = JSON) -> None:
    """Delete the candidates of a marked run, re-checking each first."""
    name = _repo_uri(uri)
    with progress(f"sweep {run_id}", quiet=as_json) as phase:
        summary = sweep_run(state(ctx).lake, name, run_id, phase)
    print_summary(summary, as_json)


@app.command("runs")
def runs(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """GC runs of the repository, newest first."""
    name = _repo_uri(uri)
    state(ctx).lake.repository(name)
    summaries = RunStore(state(ctx).lake.metastore, name).list()
    if as_json:
        output.emit_json([s.to_json() for s in summaries])
        return
    output.table("RUN", "STATE", "STARTED", "CANDIDATES", "DELETED", "BYTES", "NOTE", rows=[
        [s.run_id, s.state, s.started_at[5:16].replace("T", " "), s.num_candidates, s.num_deleted, s.bytes_deleted,
         (s.error or "")[:60] or ("dry run" if s.dry_run else s.mode)] for s in summaries])


@app.command("show")
def show(ctx: typer.Context, uri: str, run_id: str, as_json: bool = JSON,
         html: bool = typer.Option(False, "--html", help="Print where the run's report.html is, to open in a browser.")
         ) -> None:
    """One run's summary."""
    name = _repo_uri(uri)
    repo = state(ctx).lake.repository(name)
    summary, _ = RunStore(state(ctx).lake.metastore, name).get(run_id)
    if html:
        key = report_key(run_id)
        if not repo.storage.exists(key):  # runs recorded before reports existed: render from the record
            repo.storage.write(key, render_report(summary).encode())
        output.say(repo.storage.full_uri(key))
        return
    print_summary(summary, as_json)


@app.command("candidates")
def candidates(ctx: typer.Context, uri: str, run_id: str, as_json: bool = JSON,
               limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Show at most N.")) -> None:
    """The deletion candidates a run marked (address, size, mtime, reason)."""
    name = _repo_uri(uri)
    repo = state(ctx).lake.repository(name)
    RunStore(state(ctx).lake.metastore, name).get(run_id)
    rows = candidate_rows(repo.storage, run_id, limit)
    if as_json:
        sys.stdout.write("[")
        for i, row in enumerate(rows):
            sys.stdout.write(("," if i else "") + "\n  " + json.dumps(mask_doc(row)))
        sys.stdout.write("\n]\n")
    else:
        output.table("ADDRESS", "SIZE", "MTIME", "REASON",
                     rows=[[r["address"], r["size"], r["mtime"], r["reason"]] for r in rows])


def candidate_rows(storage, run_id: str, limit: int | None) -> Iterator[dict]:  # type: ignore[no-untyped-def]
    """Stream the candidates Parquet parts batch by batch: the driver never holds them all."""
    shown = 0
    for key in output_keys(storage, run_id, "candidates"):
        for batch in pq.ParquetFile(io.BytesIO(storage.read(key))).iter_batches(batch_size=10_000):
            for row in batch.to_pylist():
                if limit is not None and shown >= limit:
                    return
                shown += 1
                yield {**row, "mtime": row["mtime"].isoformat()}


def print_summary(summary: RunSummary, as_json: bool) -> None:
    if as_json:
        output.emit_json(summary.to_json())
        return
    output.table("", "", rows=summary_rows(summary), title=f"GC run {summary.run_id} · {summary.repository}")


@contextmanager
def progress(title: str, quiet: bool) -> Iterator:  # type: ignore[type-arg]
    """Phases as a live list on a terminal's stderr; elsewhere one line per phase, none when `quiet`
    (spark-submit merges stderr into stdout, which must hold only the JSON)."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=output.err_console, transient=False, disable=not output.err_console.is_terminal) as progress:
        current: list[int] = []

        def phase(name: str, detail: str = "") -> None:
            if current:
                progress.update(current[-1], completed=1, total=1)
            line = shown(f"{title}: {name}" + (f" ({detail})" if detail else ""))
            current.append(progress.add_task(line, total=None))
            if not output.err_console.is_terminal and not quiet:
                output.err_console.print(line, markup=False, highlight=False)

        yield phase
        if current:
            progress.update(current[-1], completed=1, total=1)


def parse_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"invalid --conf {pair!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path!r}: {exc.strerror}") from None


__all__ = ["app"]
