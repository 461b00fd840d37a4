"""`lakegc demo`: build the demo lake in a folder of its own, run GC on it, show what it collected."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from lakegc.cli import output
from lakegc.cli.gc import candidate_rows, print_summary, progress
from lakegc.demo import RULES, build_demo, namespace_objects
from lakegc.gc.config import set_rules
from lakegc.gc.job import GcOptions, run_gc
from lakegc.gc.rules import GcRules
from lakegc.repo.repository import Lake
from lakegc.storage.guard import check_root

_MARK = ".lakegc-demo"


def demo(directory: Path = typer.Option(Path("demo"), "--dir", help="Folder for the demo's metastore and namespace."),
         master: str = typer.Option("local[2]", "--master", help="Spark master for the GC run.")) -> None:
    """Build a demo lake (seed 000's example: main keeps 21 days, dev 7; plus uncommitted leftovers),
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
    set_rules(repo, GcRules.model_validate(RULES))
    output.say(f"Demo repository lakegc://{repo.name} at {repo.info.storage_namespace}: "
               f"{namespace_objects(repo)} objects under data/, rules {RULES}")
    output.table("COMMIT", "DATE", "MESSAGE", title="lakegc log lakegc://demo/main",
                 rows=[[c.id[:12], output.when(c.creation_date), c.message] for c in repo.log("main")])
    with progress("GC demo", quiet=False) as phase:
        summary = run_gc(lake, repo.name, GcOptions(master=master), phase)
    print_summary(summary, as_json=False)
    output.table("DELETED ADDRESS", "SIZE", "REASON", title="What GC collected",
                 rows=[[r["address"], r["size"], r["reason"]] for r in candidate_rows(repo.storage, summary.run_id, None)])
    output.say(f"{namespace_objects(repo)} objects left under data/. Explore with: "
               f"lakegc --metastore {metastore} gc runs lakegc://demo")
