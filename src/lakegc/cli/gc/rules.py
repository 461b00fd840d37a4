"""`lakegc gc set-config|get-config|delete-config`: a repository's retention rules."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.group import Commands
from lakegc.cli.options import JSON, repo_uri, state
from lakegc.errors import InvalidArgument
from lakegc.retention.rules import parse_rules

commands = Commands()


@commands.command("set-config", epilog="Example: lakegc gc set-config lakegc://lake -f rules.json")
def set_config(
    ctx: typer.Context, uri: str, file: str = typer.Option(..., "-f", "--file", help="Rules JSON, or - for stdin.")
) -> None:
    """Set the repository's retention rules (lakeFS JSON:
    {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]})."""
    repo = repo_uri(uri)
    text = sys.stdin.read() if file == "-" else _read_file(file)
    api.set_rules(repo, parse_rules(text), metastore=state(ctx).lake)
    output.say(f"GC rules set for {repo!r}")


@commands.command("get-config", epilog="Example: lakegc gc get-config lakegc://lake --json")
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


@commands.command("delete-config", epilog="Example: lakegc gc delete-config lakegc://lake")
def delete_config(ctx: typer.Context, uri: str) -> None:
    """Remove the repository's retention rules (GC then keeps every commit)."""
    repo = repo_uri(uri)
    if not api.delete_rules(repo, metastore=state(ctx).lake):
        output.fail(f"no GC rules set for repository {repo!r}")
    output.say(f"GC rules deleted for {repo!r}")


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path!r}: {exc.strerror}") from None
