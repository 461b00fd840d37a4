"""`lakegc demo`: build the demo lake in a folder of its own, run GC on it, show what it collected."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from lakegc import api
from lakegc.cli import output
from lakegc.cli.group import Commands
from lakegc.cli.options import REMOTE
from lakegc.cli.progress import progress
from lakegc.demo import RULES, build_demo, namespace_objects
from lakegc.engine import warm
from lakegc.engine.guard import check_root
from lakegc.repo.repository import Lake
from lakegc.retention.rules import GcRules
from lakegc.settings import lakegc_home
from lakegc.settings_file import spark_address

_MARK = ".lakegc-demo"
DEMO_CURVE = ("1d", "7d", "14d", "21d", "30d")  # what other retentions would have collected, in the run's report

commands = Commands()  # `lakegc demo`, at the root


@commands.command("demo", epilog="Example: lakegc demo --dir /tmp/lakegc-demo")
def demo(
    directory: Path = typer.Option(Path("demo"), "--dir", help="Folder for the demo's metastore and namespace."),
    master: str | None = typer.Option(
        None, "--master", help="Spark master for the GC run (default: a running engine, else local[2])."
    ),
    remote: str | None = REMOTE,
) -> None:
    """Build a demo lake (lakeFS's worked example of retention: main keeps 21 days, dev 7; plus uncommitted
    leftovers),
    run GC on it and show what was collected."""
    directory = directory.resolve()
    if directory.exists() and any(directory.iterdir()):
        if not (directory / _MARK).exists():
            output.fail(f"{directory} is not empty and not a demo folder; pick another --dir")
        check_root(str(directory), "demo folder", [])  # the deletion guard: never /, never a home folder
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / _MARK).touch()
    metastore = f"sqlite:///{directory / 'lakegc.db'}"
    lake = Lake(metastore)
    with output.console.status("building the demo lake"):
        lake_demo = build_demo(lake, directory / "namespace")
    repo = lake_demo.repo
    repo.set_gc_rules(GcRules.model_validate(RULES))
    output.say(
        f"Demo repository lakegc://{repo.name} at {repo.info.storage_namespace}: "
        f"{namespace_objects(repo)} objects under data/, rules {RULES}"
    )
    output.table(
        "COMMIT",
        "DATE",
        "MESSAGE",
        title="lakegc log lakegc://demo/main",
        rows=[[c.id, output.when(c.creation_date), c.message] for c in repo.log("main")],
    )
    with progress("GC demo") as phase:
        run = api.gc(repo.name, metastore=lake, master=_session(master, remote), progress=phase, curve=DEMO_CURVE)
    output.print_run(run, as_json=False)
    output.table(
        "DELETED ADDRESS",
        "SIZE",
        "REASON",
        title="What GC collected",
        rows=[[c.address, c.size, c.reason] for c in api.candidates(repo.name, run.run_id, metastore=lake)],
    )
    output.say(
        f"{namespace_objects(repo)} objects left under data/. Explore with: "
        f"lakegc --metastore {metastore} gc runs lakegc://demo, or ask why an object stays: "
        f"lakegc --metastore {metastore} gc explain lakegc://demo/main/events/part-0"
    )


def _session(master: str | None, remote: str | None) -> str | None:
    """The flags' Spark; with neither, a running engine (None: found again, and said, when the run
    starts its session), else two local cores."""
    address = spark_address(master, remote)
    if address is None and warm.running(lakegc_home()) is None:
        return "local[2]"
    return address
