"""`lakegc fs`: objects on a branch or ref."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import JSON, state
from lakegc.repo.objects import DEFAULT_TOKEN_TTL
from lakegc.timeutil import epoch_seconds, parse_duration
from lakegc.uri import parse_uri

app = new_app("Upload, read, list, copy, link and remove objects.")


@app.command("upload", epilog="Example: lakegc fs upload lakegc://lake/main/events/part-0 --source part-0.parquet")
def upload(
    ctx: typer.Context,
    uri: str,
    source: str = typer.Option(..., "--source", "-s", help="A file, or - for stdin."),
    as_json: bool = JSON,
) -> None:
    """Write an object under the namespace's data/ and stage it on the branch."""
    target = parse_uri(uri, need_path=True)
    repo = state(ctx).repo(target)
    if source == "-":
        entry = repo.upload(target.ref, target.path, sys.stdin.buffer)
    else:
        path = Path(source)
        if not path.is_file():
            output.fail(f"source {source!r} is not a readable file")
        with path.open("rb") as f:
            entry = repo.upload(target.ref, target.path, f)
    if as_json:
        output.emit_json(output.entry_doc(repo, entry))
    else:
        output.say(f"{target}: {entry.size} bytes staged at {repo.physical_address(entry)}")


@app.command("cat", epilog="Example: lakegc fs cat lakegc://lake/main/events/part-0 > part-0.parquet")
def cat(ctx: typer.Context, uri: str) -> None:
    """Write an object's content to stdout."""
    target = parse_uri(uri, need_path=True)
    data = state(ctx).repo(target).read(target.ref, target.path)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


@app.command("stat", epilog="Example: lakegc fs stat lakegc://lake/main/events/part-0 --json")
def stat(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """Show an object's entry."""
    target = parse_uri(uri, need_path=True)
    repo = state(ctx).repo(target)
    entry = repo.stat(target.ref, target.path)
    doc = output.entry_doc(repo, entry)
    if as_json:
        output.emit_json(doc)
    else:
        output.table(
            "FIELD", "VALUE", rows=[[k, output.when(entry.mtime) if k == "mtime" else v] for k, v in doc.items()]
        )


@app.command("ls", epilog="Example: lakegc fs ls lakegc://lake/main/events/ --json")
def ls(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """List objects under a prefix, recursively (staged changes included on a branch)."""
    target = parse_uri(uri, need_ref=True)
    repo = state(ctx).repo(target)
    entries = list(repo.list(target.ref, target.path or ""))
    if as_json:
        output.emit_json([output.entry_doc(repo, e) for e in entries])
    else:
        output.table(
            "PATH",
            "SIZE",
            "MTIME",
            "PHYSICAL ADDRESS",
            rows=[[e.path, e.size, output.when(e.mtime), repo.physical_address(e)] for e in entries],
        )


@app.command("rm", epilog="Example: lakegc fs rm lakegc://lake/main/events/part-0")
def rm(ctx: typer.Context, uri: str) -> None:
    """Stage the deletion of an object."""
    target = parse_uri(uri, need_path=True)
    if state(ctx).repo(target).remove(target.ref, target.path):
        output.say(f"{target}: deletion staged")
    else:
        output.say(f"{target}: unstaged (it was never committed, so there is no deletion to stage)")


@app.command("cp", epilog="Example: lakegc fs cp lakegc://lake/main/events/part-0 lakegc://lake/dev/events/part-0")
def cp(ctx: typer.Context, source: str, dest: str, as_json: bool = JSON) -> None:
    """Copy an object to a path on a branch, sharing its physical object (shallow copy)."""
    src, dst = parse_uri(source, need_path=True), parse_uri(dest, need_path=True)
    if src.repo != dst.repo:
        output.fail(f"copy across repositories is not supported ({src.repo!r} -> {dst.repo!r})")
    repo = state(ctx).repo(dst)
    entry = repo.copy(src.ref, src.path, dst.ref, dst.path)
    if as_json:
        output.emit_json(output.entry_doc(repo, entry))
    else:
        output.say(f"{src} -> {dst}")


@app.command(
    "link",
    epilog="Example: lakegc fs link lakegc://lake/main/big --address ADDR --token TOKEN --size 1048576 --checksum MD5",
)
def link(
    ctx: typer.Context,
    uri: str,
    address: str = typer.Option(..., "--address", help="Physical address (full URI or namespace key)."),
    token: str | None = typer.Option(None, "--token", help="Token from `fs get-address` (in-namespace addresses)."),
    size: int = typer.Option(..., "--size", min=0, help="Size in bytes."),
    checksum: str = typer.Option(
        ..., "--checksum", help="MD5 of the content in hex, or the store's ETag; an in-namespace object must match it."
    ),
    as_json: bool = JSON,
) -> None:
    """Stage an object that already exists in storage."""
    target = parse_uri(uri, need_path=True)
    repo = state(ctx).repo(target)
    entry = repo.link(target.ref, target.path, address, size, checksum, token)
    if as_json:
        output.emit_json(output.entry_doc(repo, entry))
    else:
        output.say(f"{target}: linked to {repo.physical_address(entry)}")


@app.command("get-address", epilog="Example: lakegc fs get-address lakegc://lake/main/big --ttl 6h --json")
def get_address(
    ctx: typer.Context,
    uri: str,
    ttl: str = typer.Option(
        f"{int(DEFAULT_TOKEN_TTL.total_seconds() // 3600)}h", "--ttl", help="How long the token stays valid."
    ),
    as_json: bool = JSON,
) -> None:
    """Get a physical address to upload to directly, and the token `fs link` needs."""
    target = parse_uri(uri, need_path=True)
    repo = state(ctx).repo(target)
    claims = repo.get_physical_address(target.ref, target.path, parse_duration(ttl))
    doc = {
        "physical_address": repo.storage.full_uri(claims.address),
        "token": repo.sign(claims),
        "expires_at": epoch_seconds(claims.expires_at),
    }
    if as_json:
        output.emit_json(doc)
    else:
        output.table(
            "FIELD",
            "VALUE",
            rows=[
                *[[k, v] for k, v in doc.items() if k != "expires_at"],
                ["expires_at", output.when(claims.expires_at)],
            ],
        )
