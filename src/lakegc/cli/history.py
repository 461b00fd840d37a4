"""`lakegc commit`, `merge`, `log`, `diff`."""

from __future__ import annotations

import typer

from lakegc.cli import output
from lakegc.cli.group import Commands
from lakegc.cli.options import JSON, same_repo, state
from lakegc.timeutil import parse_date
from lakegc.uri import parse_uri

commands = Commands()  # at the root, as git has them

DATE = typer.Option(None, "--date", help="Commit date: ISO 8601 or Unix seconds (backdating).")
ALLOW_EMPTY = typer.Option(False, "--allow-empty", help="Commit even when nothing changes.")


@commands.command("commit", epilog='Example: lakegc commit lakegc://lake/main -m "daily load" --json')
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


@commands.command("merge", epilog="Example: lakegc merge lakegc://lake/dev lakegc://lake/main -m 'release'")
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
    same_repo(src.repo, dst.repo)
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


@commands.command("log", epilog="Example: lakegc log lakegc://lake/main --amount 10")
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


@commands.command(
    "diff",
    epilog="Example: lakegc diff lakegc://lake/main lakegc://lake/dev  ·  lakegc diff lakegc://lake/dev (uncommitted)",
)
def diff(ctx: typer.Context, left: str, right: str | None = typer.Argument(None), as_json: bool = JSON) -> None:
    """Changes from LEFT to RIGHT; with only LEFT (a branch), its uncommitted changes."""
    a = parse_uri(left, need_ref=True, allow_path=False)
    b = parse_uri(right, need_ref=True, allow_path=False) if right else None
    if b:
        same_repo(a.repo, b.repo)
    changes = state(ctx).repo(a).diff(a.ref, b.ref if b else None)
    if as_json:
        output.emit_json([output.change_doc(c) for c in changes])
    else:
        marks = {"added": "+", "removed": "-", "changed": "~"}
        output.table(
            "", "PATH", "SIZE", rows=[[marks[c.type], c.path, output.change_doc(c)["size_bytes"]] for c in changes]
        )
