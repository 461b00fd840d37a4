"""`lakegc gc run|sweep|restore|purge`: the commands that change the namespace, each a run on Spark
(mark and sweep, a sweep continued, a quarantine put back, quarantines deleted)."""

from __future__ import annotations

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.group import Commands
from lakegc.cli.options import (
    CONF,
    CUTOFF,
    DEFAULT_CUTOFF,
    JSON,
    MASTER,
    MAX_DELETE_RATE,
    MIN_AGE,
    REMOTE,
    RUN_ID,
    on_spark,
    repo_uri,
    state,
)
from lakegc.cli.progress import progress
from lakegc.engine.report import human_bytes
from lakegc.engine.runs import Run

commands = Commands()

MAX_DELETES = typer.Option(
    None, "--max-deletes", metavar="N", min=0, help="Stop after N objects; `gc sweep` continues the run later."
)
INVENTORY = typer.Option(
    None,
    "--inventory",
    metavar="MANIFEST",
    help="List the namespace from this S3 Inventory manifest.json (a path or s3://...) instead of listing "
    "it; slices written since it was taken are listed directly. Refused when older than --min-age.",
)
CURVE = typer.Option(
    None,
    "--curve",
    metavar="R1,R2,...",
    help="Also compute the retention curve for these durations (as `gc simulate`; one more pass) "
    "and show it in the run's report.",
)
QUARANTINE = typer.Option(
    None,
    "--quarantine",
    metavar="DURATION",
    help="Move what is collected into the run's quarantine for this long (`gc restore` puts it back) "
    "instead of deleting it; overrides the rules' quarantine_days; 0s deletes at once.",
)


@commands.command(
    "run",
    epilog="Examples: lakegc gc run lakegc://lake --dry-run · lakegc gc run lakegc://lake "
    "--cutoff 'main=30d' --default-cutoff 7d --min-age 48h · lakegc gc run lakegc://lake "
    "--mark-only, then lakegc gc sweep lakegc://lake RUN_ID",
)
def run(
    ctx: typer.Context,
    uri: str,
    dry_run: bool = typer.Option(False, "--dry-run", help="Mark and report; delete nothing."),
    mark_only: bool = typer.Option(False, "--mark-only", help="Stop at 'marked'; sweep later with `gc sweep`."),
    min_age: str | None = MIN_AGE,
    clean: bool = typer.Option(False, "--clean", help="Ignore earlier runs."),
    cutoff: list[str] = CUTOFF,
    default_cutoff: str | None = DEFAULT_CUTOFF,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    inventory: str | None = INVENTORY,
    curve: str | None = CURVE,
    quarantine: str | None = QUARANTINE,
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    as_json: bool = JSON,
) -> None:
    """Mark and sweep in one Spark job; prints the run's summary."""
    name = repo_uri(uri)
    with progress(f"GC {name}", as_json=as_json) as phase:
        summary = api.gc(
            name,
            metastore=state(ctx).lake,
            dry_run=dry_run,
            mark_only=mark_only,
            min_age=min_age,
            clean=clean,
            cutoffs=tuple(cutoff),
            default_cutoff=default_cutoff,
            inventory=inventory,
            curve=tuple(curve.split(",")) if curve is not None else (),
            quarantine=quarantine,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    output.print_run(summary, as_json)
    say_if_stopped(ctx, summary, as_json)
    if mark_only and not as_json:
        output.say(f"Marked, nothing deleted. To delete the candidates: {_sweep(ctx, name, summary.run_id)}")


@commands.command("sweep", epilog="Example: lakegc gc sweep lakegc://lake 20261126T140638")
def sweep(
    ctx: typer.Context,
    uri: str,
    run_id: str = RUN_ID,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    max_deletes: int | None = MAX_DELETES,
    max_delete_rate: float | None = MAX_DELETE_RATE,
    as_json: bool = JSON,
) -> None:
    """Delete the candidates of a marked run, re-checking each first; or continue a run whose sweep
    stopped (a budget, a crash, objects the store would not delete) from where it stopped."""
    name = repo_uri(uri)
    with progress(f"sweep {run_id}", as_json=as_json) as phase:
        summary = api.sweep(
            name,
            run_id,
            metastore=state(ctx).lake,
            **on_spark(master, remote, conf),
            progress=phase,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
        )
    output.print_run(summary, as_json)
    say_if_stopped(ctx, summary, as_json)


def say_if_stopped(ctx: typer.Context, summary: Run, as_json: bool) -> None:
    if summary.state == "sweeping" and not as_json:
        output.say(
            f"Stopped with {summary.num_stopped} candidate(s) left. To continue: "
            f"{_sweep(ctx, summary.target, summary.run_id)}"
        )


def _sweep(ctx: typer.Context, repository: str, run_id: str) -> str:
    """The command that sweeps the run, as the user types it (with the --metastore this one had)."""
    url = state(ctx).metastore_url
    metastore = f"--metastore {url} " if url else ""
    return f"lakegc {metastore}gc sweep lakegc://{repository} {run_id}"


@commands.command(
    "restore",
    epilog="Examples: lakegc gc restore lakegc://lake 20261126T1406 · lakegc gc restore lakegc://lake "
    "20261126T1406 --path 'tables/orders/**'",
)
def restore(
    ctx: typer.Context,
    uri: str,
    run_id: str = RUN_ID,
    path: str | None = typer.Option(
        None, "--path", metavar="GLOB", help="Only objects whose repository path or address matches this glob."
    ),
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Move a run's quarantined objects back to their addresses; reads of them work again."""
    name = repo_uri(uri)
    with progress(f"restore {run_id}", as_json=as_json):
        done = api.restore(name, run_id, path=path, metastore=state(ctx).lake, **on_spark(master, remote, conf))
    if as_json:
        output.emit_json({"repository": name, **done.to_json()})
        return
    already = f"; {done.num_already_restored} were restored before (counted then)" if done.num_already_restored else ""
    output.say(
        f"Restored {done.num_restored} object(s) ({human_bytes(done.bytes_restored)}) of run {done.run_id}{already}."
    )


@commands.command("purge", epilog="Example: lakegc gc purge lakegc://lake --json")
def purge(
    ctx: typer.Context,
    uri: str,
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """Delete the quarantines whose restore window has passed (every `gc run` does this first)."""
    name = repo_uri(uri)
    with progress(f"purge {name}", as_json=as_json) as phase:
        done = api.purge(name, metastore=state(ctx).lake, **on_spark(master, remote, conf), progress=phase)
    if as_json:
        output.emit_json(
            {"repository": name, "purged": [p.to_json() for p in done], "num_purged": sum(p.num_purged for p in done)}
        )
        return
    if not done:
        output.say("No quarantine's restore window has ended: nothing purged.")
        return
    output.table(
        "RUN",
        "WINDOW ENDED",
        "PURGED",
        "BYTES",
        rows=[[p.run_id, output.when(p.quarantine_until), p.num_purged, p.bytes_purged] for p in done],
        title=f"Quarantines purged · {name}",
    )
