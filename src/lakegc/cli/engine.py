"""`lakegc engine start|status|stop`: the warm engine (`engine.warm`), a local Spark kept running
so that commands skip Spark's start."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import CONF, JSON, parse_conf
from lakegc.engine import warm
from lakegc.settings import lakegc_home

app = new_app("A warm local Spark (Spark Connect on 127.0.0.1) that commands use instead of starting their own.")


@app.command("start", epilog="Example: lakegc engine start --port 15002")
def start(
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help=f"Port on 127.0.0.1 (default {warm.DEFAULT_PORT}, else a free one)."
    ),
    conf: list[str] = CONF,
) -> None:
    """Start the engine and wait until it answers; prints its address."""
    with output.console.status("starting the engine (Spark, once)"):
        engine = warm.start(lakegc_home(), port, parse_conf(conf))
    output.say(engine.url)


@app.command("status", epilog="Example: lakegc engine status --json")
def status(as_json: bool = JSON) -> None:
    """Whether the engine is up, its address, pid, uptime and how many commands it served."""
    home = lakegc_home()
    engine = warm.read_record(home)
    up = engine is not None and warm.answers(engine, timeout=2)
    doc = {"up": up}
    if engine is not None and up:
        started = datetime.fromisoformat(engine.started_at)
        doc |= {
            "url": engine.url,
            "pid": engine.pid,
            "started_at": engine.started_at,
            "uptime_s": round((datetime.now(UTC) - started).total_seconds(), 1),
            "commands_served": warm.uses_since(home, engine.started_at),
            "version": engine.version,
        }
    if as_json:
        output.emit_json(doc)
        return
    if not up:
        output.say("engine: down (commands start their own Spark; `lakegc engine start` starts one)")
        return
    output.table(
        "ENGINE",
        "PID",
        "UP FOR",
        "COMMANDS SERVED",
        "VERSION",
        rows=[[doc["url"], doc["pid"], f"{doc['uptime_s']:.0f}s", doc["commands_served"], doc["version"]]],
    )


@app.command("stop", epilog="Example: lakegc engine stop")
def stop() -> None:
    """Stop the engine this machine's LAKEGC_HOME records (only a lakegc engine is ever signalled)."""
    engine = warm.stop(lakegc_home())
    output.say("engine: not running" if engine is None else f"engine at {engine.url} (pid {engine.pid}) stopped")
