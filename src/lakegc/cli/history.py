"""`lakegc commit`, `merge`, `log`, `diff`."""

from __future__ import annotations

import typer

from lakegc.cli import output
from lakegc.cli.main import state
from lakegc.cli.refs import JSON
from lakegc.timeutil import parse_date
from lakegc.uri import parse_uri

DATE = typer.Option(None, "--date", help="Commit date: ISO 8601 or Unix seconds (backdating).")
ALLOW_EMPTY = typer.Option(False, "--allow-empty", help="Commit even when nothing changes.")


def commit(
    ctx: typer.Context,
    uri: str,
    message: str = typer.Option(..., "--message", "-m"),
    date: str | None = DATE,
    allow_empty: bool = ALLOW_EMPTY,
    as_json: bool = JSON,
) -> None:
    """Commit the branch's staged changes."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    result = (
        state(ctx)
        .repo(target)
        .commit(target.ref, message, date=parse_date(date) if date is not None else None, allow_empty=allow_empty)
    )
    output.emit_json(output.commit_doc(result)) if as_json else typer.echo(result.id)


def merge(
    ctx: typer.Context,
    source: str,
    dest: str,
    message: str | None = typer.Option(None, "--message", "-m"),
    date: str | None = DATE,
    allow_empty: bool = ALLOW_EMPTY,
    as_json: bool = JSON,
) -> None:
    """Merge SOURCE (any ref) into branch DEST: three-way, from the best common ancestor."""
    src = parse_uri(source, need_ref=True, allow_path=False)
    dst = parse_uri(dest, need_ref=True, allow_path=False)
    if src.repo != dst.repo:
        output.fail(f"both URIs must name the same repository ({src.repo!r} vs {dst.repo!r})")
    result = (
        state(ctx)
        .repo(dst)
        .merge(
            src.ref,
            dst.ref,
            message=message,
            date=parse_date(date) if date is not None else None,
            allow_empty=allow_empty,
        )
    )
    output.emit_json(output.commit_doc(result)) if as_json else typer.echo(result.id)


def log(
    ctx: typer.Context, uri: str, amount: int | None = typer.Option(None, "--amount", "-n", min=1), as_json: bool = JSON
) -> None:
    """Commits reachable from a ref, newest first."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    commits = state(ctx).repo(target).log(target.ref, amount)
    if as_json:
        output.emit_json([output.commit_doc(c, with_metadata=False) for c in commits])
    else:
        output.table(
            "COMMIT",
            "DATE",
            "PARENTS",
            "MESSAGE",
            rows=[[c.id, output.when(c.creation_date), " ".join(c.parents), c.message] for c in commits],
        )


def diff(ctx: typer.Context, left: str, right: str | None = typer.Argument(None), as_json: bool = JSON) -> None:
    """Changes from LEFT to RIGHT; with only LEFT (a branch), its uncommitted changes."""
    a = parse_uri(left, need_ref=True, allow_path=False)
    b = parse_uri(right, need_ref=True, allow_path=False) if right else None
    if b and a.repo != b.repo:
        output.fail(f"both URIs must name the same repository ({a.repo!r} vs {b.repo!r})")
    changes = state(ctx).repo(a).diff(a.ref, b.ref if b else None)
    if as_json:
        output.emit_json([output.change_doc(c) for c in changes])
    else:
        marks = {"added": "+", "removed": "-", "changed": "~"}
        output.table(
            "", "PATH", "SIZE", rows=[[marks[c.type], c.path, output.change_doc(c)["size_bytes"]] for c in changes]
        )


EXAMPLES = {
    "commit": 'lakegc commit lakegc://lake/main -m "daily load" --json',
    "merge": "lakegc merge lakegc://lake/dev lakegc://lake/main -m 'release'",
    "log": "lakegc log lakegc://lake/main --amount 10",
    "diff": "lakegc diff lakegc://lake/main lakegc://lake/dev  ·  lakegc diff lakegc://lake/dev (uncommitted)",
}


def register(app: typer.Typer) -> None:
    for fn in (commit, merge, log, diff):
        app.command(fn.__name__, epilog=f"Example: {EXAMPLES[fn.__name__]}")(fn)
