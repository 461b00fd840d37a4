"""`lakegc gc`: rules, runs (mark + sweep), deferred sweeps, and what runs found."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import (
    CONF,
    CUTOFF,
    DEFAULT_CUTOFF,
    JSON,
    LIMIT,
    MASTER,
    MAX_DELETE_RATE,
    MIN_AGE,
    REMOTE,
    RUN_ID,
    on_spark,
    repo_uri,
    state,
)
from lakegc.cli.plot import check_target, plot_curve
from lakegc.cli.progress import progress
from lakegc.engine.report import human_bytes
from lakegc.engine.runs import Run
from lakegc.errors import InvalidArgument
from lakegc.redact import mask_doc
from lakegc.retention.rules import parse_rules
from lakegc.uri import parse_uri

app = new_app("Garbage collection: retention rules, runs, sweeps.")

MAX_DELETES = typer.Option(
    None, "--max-deletes", metavar="N", min=0, help="Stop after N objects; `gc sweep` continues the run later."
)


@app.command("set-config", epilog="Example: lakegc gc set-config lakegc://lake -f rules.json")
def set_config(
    ctx: typer.Context, uri: str, file: str = typer.Option(..., "-f", "--file", help="Rules JSON, or - for stdin.")
) -> None:
    """Set the repository's retention rules (lakeFS JSON:
    {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]})."""
    repo = repo_uri(uri)
    text = sys.stdin.read() if file == "-" else _read_file(file)
    api.set_rules(repo, parse_rules(text), metastore=state(ctx).lake)
    output.say(f"GC rules set for {repo!r}")


@app.command("get-config", epilog="Example: lakegc gc get-config lakegc://lake --json")
def get_config(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """Show the repository's retention rules."""
    repo = repo_uri(uri)
    rules = api.get_rules(repo, metastore=state(ctx).lake)
    if rules is None:
        output.fail(f"no GC rules set for repository {repo!r} (GC keeps every commit)")
    if as_json:
        output.emit_json(rules.to_doc())
    else:
        output.table(
            "BRANCH",
            "RETENTION DAYS",
            rows=[
                ["(default)", rules.default_retention_days],
                *[[b.branch_id, b.retention_days] for b in rules.branches],
                *[[f"path {p.glob}", p.retention_days] for p in rules.path_rules],
                *(
                    [["(restore window: quarantine_days)", rules.quarantine_days]]
                    if rules.quarantine_days is not None
                    else []
                ),
            ],
        )


@app.command("delete-config", epilog="Example: lakegc gc delete-config lakegc://lake")
def delete_config(ctx: typer.Context, uri: str) -> None:
    """Remove the repository's retention rules (GC then keeps every commit)."""
    repo = repo_uri(uri)
    if not api.delete_rules(repo, metastore=state(ctx).lake):
        output.fail(f"no GC rules set for repository {repo!r}")
    output.say(f"GC rules deleted for {repo!r}")


@app.command(
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
    inventory: str | None = typer.Option(
        None,
        "--inventory",
        metavar="MANIFEST",
        help="List the namespace from this S3 Inventory manifest.json (a path or s3://...) instead of listing "
        "it; slices written since it was taken are listed directly. Refused when older than --min-age.",
    ),
    curve: str | None = typer.Option(
        None,
        "--curve",
        metavar="R1,R2,...",
        help="Also compute the retention curve for these durations (as `gc simulate`; one more pass) "
        "and show it in the run's report.",
    ),
    quarantine: str | None = typer.Option(
        None,
        "--quarantine",
        metavar="DURATION",
        help="Move what is collected into the run's quarantine for this long (`gc restore` puts it back) "
        "instead of deleting it; overrides the rules' quarantine_days; 0s deletes at once.",
    ),
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
        metastore = f"--metastore {state(ctx).metastore_url} " if state(ctx).metastore_url else ""
        output.say(
            f"Marked, nothing deleted. To delete the candidates: lakegc {metastore}gc sweep "
            f"lakegc://{name} {summary.run_id}"
        )


@app.command(
    "explain",
    epilog="Examples: lakegc gc explain lakegc://lake/main/logs/2026-01-01.json · lakegc gc explain "
    "lakegc://lake --address data/17645.../0b4f... --json",
)
def explain(
    ctx: typer.Context,
    uri: str = typer.Argument(..., metavar="URI", help="lakegc://REPO/REF/PATH, or lakegc://REPO with --address."),
    address: str | None = typer.Option(
        None, "--address", metavar="ADDR", help="A physical address: a full location or a key of the namespace."
    ),
    min_age: str | None = MIN_AGE,
    cutoff: list[str] = CUTOFF,
    default_cutoff: str | None = DEFAULT_CUTOFF,
    as_json: bool = JSON,
) -> None:
    """Why a `gc run` started now, with these options, would keep or collect the object: its verdict
    (keep, collect, deleted, outside) and every reason. Deletes nothing, records no run."""
    target = parse_uri(uri)
    if address is not None and target.ref:
        raise InvalidArgument(f"invalid URI {uri!r}: with --address, expected lakegc://REPO")
    if address is None and not target.path:
        raise InvalidArgument(f"invalid URI {uri!r}: expected lakegc://REPO/REF/PATH, or lakegc://REPO --address ADDR")
    found = api.explain(
        target.repo,
        target.ref,
        target.path if address is None else None,
        address=address,
        metastore=state(ctx).lake,
        min_age=min_age,
        cutoffs=tuple(cutoff),
        default_cutoff=default_cutoff,
    )
    if as_json:
        output.emit_json(mask_doc(found.to_json()))
        return
    print_explanation(found)


def print_explanation(found: api.Explanation) -> None:
    """The verdict on one line, then a table of the reasons with their evidence."""
    verdict = str(found.verdict).upper()
    if found.deleted_by:
        verdict += f" by run {found.deleted_by}"
    output.say(f"{verdict}  {found.address}")
    if found.reasons:
        output.table("REASON", "COMMIT", "REF", "PATH", "UNTIL / SINCE", "DETAIL", rows=explanation_rows(found))
    if found.policy:
        output.say(f"policy: {found.policy}")


def explanation_rows(found: api.Explanation) -> list[list[str]]:
    rows = []
    for r in found.reasons:
        moment = r.retained_until or r.expired_at or r.expires_at or r.copied_at or r.mtime
        ref = r.tag and f"tag {r.tag}" or r.branch or ("(dangling)" if r.kind in ("commit", "expired") else "")
        detail = {
            "commit": "retained" + ("" if r.retained_until else " while nothing changes"),
            "young": f"younger than --min-age {r.min_age}",
            "expired": "expired",
            "unreferenced": "no commit, staged entry, copy or token names it",
            "outside": r.why or "",
        }.get(r.kind, "")
        if r.rule:
            detail += f" (path rule {r.rule})"
        rows.append([r.kind, (r.commit or "")[:12], ref, r.path or "", output.when(moment) if moment else "", detail])
    return rows


@app.command(
    "simulate",
    epilog="Example: lakegc gc simulate lakegc://lake --retention 1d,7d,14d,30d,90d --plot curve.png",
)
def simulate(
    ctx: typer.Context,
    uri: str,
    retention: str = typer.Option(
        ..., "--retention", metavar="R1,R2,...", help="Retentions to try, comma-separated durations (1d,7d,30d)."
    ),
    min_age: str | None = MIN_AGE,
    plot: str | None = typer.Option(None, "--plot", metavar="FILE.png", help="Also draw the curve as a PNG."),
    master: str | None = MASTER,
    remote: str | None = REMOTE,
    conf: list[str] = CONF,
    as_json: bool = JSON,
) -> None:
    """The retention curve: for each retention, what `gc run --dry-run --clean --default-cutoff R`
    would collect, all from one pass over the lake. Deletes nothing, records no run."""
    name = repo_uri(uri)
    if plot:
        check_target(plot)
    with progress(f"simulating retentions for {name}", as_json=as_json) as phase:
        curve = api.simulate(
            name,
            retention.split(","),
            metastore=state(ctx).lake,
            min_age=min_age,
            **on_spark(master, remote, conf),
            progress=phase,
        )
    drawn = plot_curve(curve, plot) if plot else None
    if as_json:
        output.emit_json(curve.to_json())
        return
    output.table(
        "RETENTION",
        "CANDIDATES",
        "BYTES",
        rows=[[p.retention, p.num_candidates, p.bytes] for p in curve.points],
        title=f"{name}: what a run would collect, by retention (objects older than {output.when(curve.cutoff_time)})",
    )
    if drawn:
        output.say(f"plot: {drawn}")


@app.command("sweep", epilog="Example: lakegc gc sweep lakegc://lake 20261126T140638")
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
        metastore = f"--metastore {state(ctx).metastore_url} " if state(ctx).metastore_url else ""
        output.say(
            f"Stopped with {summary.num_stopped} candidate(s) left. To continue: lakegc {metastore}gc sweep "
            f"lakegc://{summary.target} {summary.run_id}"
        )


@app.command(
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
        done = api.restore(
            name,
            run_id,
            path=path,
            metastore=state(ctx).lake,
            **on_spark(master, remote, conf),
        )
    if as_json:
        output.emit_json({"repository": name, **done.to_json()})
        return
    already = f"; {done.num_already_restored} were restored before (counted then)" if done.num_already_restored else ""
    output.say(
        f"Restored {done.num_restored} object(s) ({human_bytes(done.bytes_restored)}) of run {done.run_id}{already}."
    )


@app.command("purge", epilog="Example: lakegc gc purge lakegc://lake --json")
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


@app.command("runs", epilog="Example: lakegc gc runs lakegc://lake --json")
def runs(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """GC runs of the repository, newest first."""
    output.print_runs(api.runs(repo_uri(uri), metastore=state(ctx).lake), as_json)


@app.command("show", epilog="Example: lakegc gc show lakegc://lake 20261126T1406 --html")
def show(
    ctx: typer.Context,
    uri: str,
    run_id: str = RUN_ID,
    as_json: bool = JSON,
    html: bool = typer.Option(False, "--html", help="Print where the run's report.html is, to open in a browser."),
) -> None:
    """One run's summary."""
    from lakegc.repogc.outputs import run_folder

    name = repo_uri(uri)
    found = api.run(name, run_id, metastore=state(ctx).lake)
    if html:
        folder = run_folder(state(ctx).lake.repository(name).storage, found.run_id)
        output.show_report(folder, found)
        return
    output.print_run(found, as_json)
    if found.failed and not as_json:
        more = found.num_failed - len(found.failed)
        output.table(
            "ADDRESS",
            "ERROR",
            rows=[[f["address"], f["error"]] for f in found.failed],
            title=f"Not deleted: {found.num_failed}" + (f" (the first {len(found.failed)} shown)" if more > 0 else ""),
        )


@app.command(
    "candidates",
    epilog="Examples: lakegc gc candidates lakegc://lake 20261126T1406 --limit 20 · lakegc gc candidates "
    "lakegc://lake 20261126T1406 --prefix logs/ --reason expired",
)
def candidates(
    ctx: typer.Context,
    uri: str,
    run_id: str = RUN_ID,
    prefix: str | None = typer.Option(None, "--prefix", help="Only those an expired commit held under this path."),
    branch: str | None = typer.Option(None, "--branch", help="Only those whose commit expired on this branch."),
    reason: str | None = typer.Option(None, "--reason", help="Only those of this reason: expired or uncommitted."),
    as_json: bool = JSON,
    limit: int | None = LIMIT,
) -> None:
    """The deletion candidates a run marked (address, size, mtime, reason, and for committed garbage
    the path, commit and branch that held it)."""
    found = api.candidates(
        repo_uri(uri), run_id, metastore=state(ctx).lake, limit=limit, prefix=prefix, branch=branch, reason=reason
    )
    output.print_candidates(found, as_json, named=True)


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path!r}: {exc.strerror}") from None


__all__ = ["app"]
