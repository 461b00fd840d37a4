"""`lakegc gc explain|simulate|runs|show|candidates`: the commands that only read. What a run
started now would do (to one object, or by retention), and what runs did (their records)."""

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
    LIMIT,
    MASTER,
    MIN_AGE,
    REMOTE,
    RUN_ID,
    on_spark,
    repo_uri,
    state,
)
from lakegc.cli.plot import check_target, plot_curve
from lakegc.cli.progress import progress
from lakegc.errors import InvalidArgument
from lakegc.redact import mask_doc
from lakegc.uri import parse_uri

commands = Commands()


@commands.command(
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


@commands.command(
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


@commands.command("runs", epilog="Example: lakegc gc runs lakegc://lake --json")
def runs(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """GC runs of the repository, newest first."""
    output.print_runs(api.runs(repo_uri(uri), metastore=state(ctx).lake), as_json)


@commands.command("show", epilog="Example: lakegc gc show lakegc://lake 20261126T1406 --html")
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


@commands.command(
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
