"""`lakegc gc`: rules, runs (mark + sweep), deferred sweeps, and what runs found."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.main import new_app, state
from lakegc.cli.plot import check_target, plot_curve
from lakegc.cli.progress import progress
from lakegc.cli.refs import JSON
from lakegc.engine.report import human_bytes, summary_rows, top_tables, window_cell
from lakegc.engine.runs import Run
from lakegc.errors import InvalidArgument
from lakegc.redact import mask_doc
from lakegc.retention.rules import parse_rules
from lakegc.settings import spark_address
from lakegc.timeutil import epoch_seconds
from lakegc.uri import parse_uri

app = new_app("Garbage collection: retention rules, runs, sweeps.")

MASTER = typer.Option(
    None, "--master", help="Spark master URL (default: the settings file's, else a running engine, else local[*])."
)
REMOTE = typer.Option(
    None, "--remote", metavar="sc://HOST:PORT", help="Run on this Spark Connect server (or LAKEGC_REMOTE)."
)
CONF = typer.Option([], "--conf", help="Spark conf KEY=VALUE (repeatable; adds to the settings file's).")
RUN_ID = typer.Argument(..., metavar="RUN_ID", help="A run id, or a prefix only that run's id has.")
LIMIT = typer.Option(None, "--limit", min=1, help="Show at most N.")
MAX_DELETES = typer.Option(
    None, "--max-deletes", metavar="N", min=0, help="Stop after N objects; `gc sweep` continues the run later."
)
MAX_DELETE_RATE = typer.Option(
    None,
    "--max-delete-rate",
    metavar="N",
    help="At most N objects a second, across all executors (a throttling store slows it further).",
)
MIN_AGE = typer.Option(
    None,
    "--min-age",
    help="Objects younger than this are never candidates: 90s, 30m, 6h, 7d or ISO 8601 "
    "(P7D); default 24h (or the settings file's gc.min_age).",
)
CUTOFF = typer.Option(
    [],
    "--cutoff",
    help="REGEX=POLICY (repeatable), overriding the stored rules (path rules too): the regex matches "
    "whole branch names, first match wins; POLICY is a commit count (10), a duration (7d), "
    "a date (ISO 8601) or NONE.",
)
DEFAULT_CUTOFF = typer.Option(
    None, "--default-cutoff", help="POLICY for branches no --cutoff matches, and for dangling commits."
)


def _repo_uri(uri: str) -> str:
    target = parse_uri(uri)
    if target.ref:
        raise InvalidArgument(f"invalid URI {uri!r}: expected lakegc://REPO")
    return target.repo


@app.command("set-config", epilog="Example: lakegc gc set-config lakegc://lake -f rules.json")
def set_config(
    ctx: typer.Context, uri: str, file: str = typer.Option(..., "-f", "--file", help="Rules JSON, or - for stdin.")
) -> None:
    """Set the repository's retention rules (lakeFS JSON:
    {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]})."""
    repo = _repo_uri(uri)
    text = sys.stdin.read() if file == "-" else _read_file(file)
    api.set_rules(repo, parse_rules(text), metastore=state(ctx).lake)
    output.say(f"GC rules set for {repo!r}")


@app.command("get-config", epilog="Example: lakegc gc get-config lakegc://lake --json")
def get_config(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """Show the repository's retention rules."""
    repo = _repo_uri(uri)
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
    repo = _repo_uri(uri)
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
    name = _repo_uri(uri)
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
            master=spark_address(master, remote),
            conf=parse_conf(conf),
            progress=phase,
        )
    print_run(summary, as_json)
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
    if found.repo.policy:
        output.say(f"policy: {found.repo.policy}")


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
    name = _repo_uri(uri)
    if plot:
        check_target(plot)
    with progress(f"simulating retentions for {name}", as_json=as_json) as phase:
        curve = api.simulate(
            name,
            retention.split(","),
            metastore=state(ctx).lake,
            min_age=min_age,
            master=spark_address(master, remote),
            conf=parse_conf(conf),
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
    name = _repo_uri(uri)
    with progress(f"sweep {run_id}", as_json=as_json) as phase:
        summary = api.sweep(
            name,
            run_id,
            metastore=state(ctx).lake,
            master=spark_address(master, remote),
            conf=parse_conf(conf),
            progress=phase,
            max_deletes=max_deletes,
            max_delete_rate=max_delete_rate,
        )
    print_run(summary, as_json)
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
    name = _repo_uri(uri)
    with progress(f"restore {run_id}", as_json=as_json):
        done = api.restore(
            name,
            run_id,
            path=path,
            metastore=state(ctx).lake,
            master=spark_address(master, remote),
            conf=parse_conf(conf),
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
    name = _repo_uri(uri)
    with progress(f"purge {name}", as_json=as_json) as phase:
        done = api.purge(
            name, metastore=state(ctx).lake, master=spark_address(master, remote), conf=parse_conf(conf), progress=phase
        )
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
    print_runs(api.runs(_repo_uri(uri), metastore=state(ctx).lake), as_json)


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

    name = _repo_uri(uri)
    found = api.run(name, run_id, metastore=state(ctx).lake)
    if html:
        folder = run_folder(state(ctx).lake.repository(name).storage, found.run_id)
        show_report(folder, found)
        return
    print_run(found, as_json)
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
        _repo_uri(uri), run_id, metastore=state(ctx).lake, limit=limit, prefix=prefix, branch=branch, reason=reason
    )
    print_candidates(found, as_json, named=True)


# -- shared with the connectors' commands ----------------------------------------------------------
def print_run(found: Run, as_json: bool) -> None:
    if as_json:
        output.emit_json(found.to_json())
        return
    what = "GC run" if found.kind == "repository" else f"{found.kind} GC run"
    output.table("", "", rows=summary_rows(found), title=f"{what} {found.run_id} · {found.target}")
    for title, header, rows in top_tables(found):
        output.table(*header, rows=rows, title=title)


def print_runs(found: list[Run], as_json: bool) -> None:
    if as_json:
        output.emit_json([r.to_json() for r in found])
        return
    output.table(
        "RUN",
        "STATE",
        "STARTED",
        "CANDIDATES",
        "DELETED",
        "BYTES",
        "RESTORE WINDOW",
        "NOTE",
        rows=[
            [
                r.run_id,
                r.state,
                output.when(r.started_at),
                r.num_candidates,
                r.num_deleted,
                r.bytes_deleted,
                window_cell(r),
                r.error or ("dry run" if r.dry_run else r.mode),
            ]
            for r in found
        ],
    )


def print_candidates(rows: Iterator[api.Candidate], as_json: bool, named: bool = False) -> None:
    """Streamed: the driver never holds them all (a JSON list written element by element). `named`:
    a repository run's, with the path, commit and branch that held each."""
    if as_json:
        sys.stdout.write("[")
        for i, c in enumerate(rows):
            doc = {"address": c.address, "size": c.size, "mtime": epoch_seconds(c.mtime), "reason": c.reason}
            if named:
                doc |= {"path": c.path, "commit": c.commit, "branch": c.branch}
            sys.stdout.write(("," if i else "") + "\n  " + json.dumps(mask_doc(doc)))
        sys.stdout.write("\n]\n")
        return
    if named:
        output.table(
            "ADDRESS", "SIZE", "MTIME", "REASON", "PATH", "COMMIT", "BRANCH",
            rows=[[c.address, c.size, output.when(c.mtime), c.reason, c.path or "", (c.commit or "")[:12],
                   c.branch or ""] for c in rows],
        )  # fmt: skip
        return
    output.table(
        "ADDRESS", "SIZE", "MTIME", "REASON", rows=[[c.address, c.size, output.when(c.mtime), c.reason] for c in rows]
    )


def show_report(folder, found: Run) -> None:  # type: ignore[no-untyped-def]
    """Print where the run's report.html is (written from the record if the run has none yet: it
    predates reports, or is still under way or was killed before it ended)."""
    from lakegc.engine.recorder import write_record

    if not folder.storage.exists(folder.key("report.html")):
        write_record(folder, found)
    output.say(folder.storage.full_uri(folder.key("report.html")))


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
