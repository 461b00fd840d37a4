"""`lakegc auth create-user` and `lakegc serve`: lakeFS's REST API over this metastore."""

from __future__ import annotations

import signal
from datetime import timedelta

import typer

from lakegc.cli import output
from lakegc.cli.group import Commands, new_app
from lakegc.cli.options import state
from lakegc.errors import InvalidArgument

auth_app = new_app("Users of `lakegc serve` and their key pairs.")
commands = Commands()  # `lakegc serve`


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


@commands.command("serve", epilog="Example: lakegc serve --port 8000")
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="the address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="the port to listen on (0: any free one)"),
    external: list[str] = typer.Option(
        [],
        "--allowed-external-prefix",
        help="a location outside every namespace that staging links may point at (repeatable; none by default)",
    ),
    engine: bool = typer.Option(
        False, "--engine", help="run GC on the warm engine (`lakegc engine`), starting one if none runs"
    ),
    gc_every: str | None = typer.Option(
        None, "--gc-every", metavar="DURATION", help="also run GC on every repository now and then every DURATION (1h)"
    ),
) -> None:
    """Serve the metastore's repositories over lakeFS's REST API at /api/v1 (basic auth with a key
    pair from `lakegc auth create-user`), so lakeFS's clients work against lakegc. With
    `--gc-every`, also collect every repository on that schedule, each run recorded as `gc run`'s."""
    import uvicorn

    from lakegc.server.app import create_app
    from lakegc.storage import normalize_location
    from lakegc.timeutil import parse_duration

    lake = state(ctx).creating_lake
    every = parse_duration(gc_every) if gc_every is not None else None
    if every is not None and every <= timedelta(0):
        raise InvalidArgument(f"--gc-every {gc_every}: a schedule needs a positive duration (1h)")
    lake.metastore.ensure_schema()
    app = create_app(lake, [normalize_location(prefix) for prefix in external])
    engine_url, started = _warm_engine() if engine else (None, None)
    if (
        started is not None
    ):  # uvicorn re-raises the signal that stopped it once shut down: as an exit, so `finally` runs
        signal.signal(signal.SIGTERM, _exit_on_term)
    output.say(f"lakegc serve: lakeFS API at http://{host}:{port}/api/v1 (Ctrl-C stops)", err=True)
    schedule = None
    try:
        if every is not None:
            from lakegc.server.schedule import start_schedule
            from lakegc.settings import load_settings

            settings = load_settings()
            master, min_age = engine_url or settings.master(None), parse_duration(settings.gc.min_age)
            say = lambda line: output.say(line, err=True)  # noqa: E731
            schedule = start_schedule(lake, every, master, min_age, settings.spark_conf(None), say)
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        if schedule is not None:
            schedule.stop()  # the round under way ends before its engine does
        if started is not None:
            _stop_engine(started)


def _exit_on_term(*_: object) -> None:
    raise SystemExit(128 + signal.SIGTERM)


def _stop_engine(pid: int) -> None:
    """Stop the engine this server started, if the record still names it (not one started since)."""
    from lakegc.engine import warm
    from lakegc.settings import lakegc_home

    record = warm.read_record(lakegc_home())
    if record is not None and record.pid == pid:
        warm.stop(lakegc_home())


def _warm_engine() -> tuple[str, int | None]:
    """The running warm engine's address, or one started now; and the pid of the one started here
    (the server stops it when it stops), else None."""
    from lakegc.engine import warm
    from lakegc.settings import lakegc_home

    home = lakegc_home()
    engine, started = warm.running(home), None
    if engine is None:
        output.say("lakegc serve: starting the warm engine (Spark, once)", err=True)
        try:
            engine = warm.start(home, None, {})
            started = engine.pid
        except InvalidArgument:  # another `engine start` won the race: use that one
            engine = warm.running(home)
            if engine is None:
                raise
    output.say(f"lakegc serve: GC runs on the warm engine at {engine.url}", err=True)
    return engine.url, started
