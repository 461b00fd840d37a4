"""`lakegc auth create-user` and `lakegc serve`: lakeFS's REST API over this metastore."""

from __future__ import annotations

import typer

from lakegc.cli import output
from lakegc.cli.main import new_app, state

auth_app = new_app("Users of `lakegc serve` and their key pairs.")


@auth_app.command("create-user", epilog="Example: lakegc auth create-user alice --json")
def create_user(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="the user's name"),
    as_json: bool = typer.Option(False, "--json", help="print the key pair as JSON"),
) -> None:
    """Create a user and its first key pair. The secret is shown only now: it is stored hashed."""
    from lakegc.server.users import create_user as create

    pair = create(state(ctx).creating_lake.metastore, name)
    if as_json:
        output.emit_json({"access_key_id": pair.access_key_id, "secret_access_key": pair.secret_access_key})
        return
    output.table(
        "user", "access_key_id", "secret_access_key", rows=[[pair.user, pair.access_key_id, pair.secret_access_key]]
    )
    output.say("the secret is shown only here: keep it (lakegc stores only its hash)", err=True)


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="the address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="the port to listen on (0: any free one)"),
    external: list[str] = typer.Option(
        [],
        "--allowed-external-prefix",
        help="a location outside every namespace that staging links may point at (repeatable; none by default)",
    ),
) -> None:
    """Serve the metastore's repositories over lakeFS's REST API at /api/v1 (basic auth with a key
    pair from `lakegc auth create-user`), so lakeFS's clients work against lakegc."""
    import uvicorn

    from lakegc.server.app import create_app
    from lakegc.storage import normalize_location

    lake = state(ctx).creating_lake
    lake.metastore.ensure_schema()
    app = create_app(lake, [normalize_location(prefix) for prefix in external])
    output.say(f"lakegc serve: lakeFS API at http://{host}:{port}/api/v1 (Ctrl-C stops)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
