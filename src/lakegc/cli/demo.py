"""`lakegc demo`: build the demo lake in a folder of its own and show it."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from lakegc.cli import output
from lakegc.demo import build_demo, namespace_objects
from lakegc.repo.repository import Lake

_MARK = ".lakegc-demo"


def demo(directory: Path = typer.Option(Path("demo"), "--dir", help="Folder for the demo's metastore and namespace.")) -> None:
    """Build a demo lake (branches, backdated commits, merges, uncommitted leftovers) and show it."""
    directory = directory.resolve()
    if directory.exists() and any(directory.iterdir()):
        if not (directory / _MARK).exists():
            output.fail(f"{directory} is not empty and not a demo folder; pick another --dir")
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / _MARK).touch()
    lake = Lake(f"sqlite:///{directory / 'lakegc.db'}")
    with output.console.status("building the demo lake"):
        lake_demo = build_demo(lake, directory / "namespace")
    repo = lake_demo.repo
    output.console.print(f"[bold]Demo repository[/bold] lakegc://{repo.name} at {repo.info.storage_namespace}")
    output.table("BRANCH", "HEAD", "STAGED", rows=[[b.name, b.head[:12], len(repo.diff(b.name))] for b in repo.branches()])
    output.table("COMMIT", "DATE", "MESSAGE", title="lakegc log lakegc://demo/main",
                 rows=[[c.id[:12], output.when(c.creation_date), c.message] for c in repo.log("main")])
    output.console.print(f"{namespace_objects(repo)} objects under data/ in the namespace. "
                         f"Try: lakegc --metastore sqlite:///{directory / 'lakegc.db'} fs ls lakegc://demo/main/")
