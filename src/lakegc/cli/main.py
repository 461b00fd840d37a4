"""The `lakegc` command: a thin layer over the Python API (lakegc.repo) that parses and prints."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import sqlalchemy as sa
import typer
from typer.core import TyperGroup

from lakegc.cli import output
from lakegc.errors import LakegcError
from lakegc.metastore import Metastore
from lakegc.repo.repository import Lake, Repository
from lakegc.uri import LakeUri


class _Group(TyperGroup):
    """Every command's errors end here: LakegcError and database or OS failures become one line, exit 1."""

    def invoke(self, ctx: typer.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except LakegcError as exc:
            output.fail(str(exc))
        except sa.exc.SQLAlchemyError as exc:
            output.fail(f"metastore: {getattr(exc, 'orig', None) or exc}")
        except OSError as exc:
            output.fail(f"storage: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(cls=_Group, help=help_text, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None)


@dataclass
class State:
    metastore_url: str | None

    @cached_property
    def lake(self) -> Lake:
        return Lake(Metastore(self.metastore_url))

    def repo(self, uri: LakeUri) -> Repository:
        return self.lake.repository(uri.repo)


def state(ctx: typer.Context) -> State:
    return ctx.find_root().obj


def confirm(yes: bool, action: str) -> None:
    """Destructive commands need --yes; a person at a terminal may answer instead."""
    if yes:
        return
    if sys.stdin.isatty() and typer.confirm(f"{action}?"):
        return
    output.fail(f"refusing to {action} without --yes")


app = new_app("Garbage collection for versioned data lakes: a git-like repository and its GC.")


@app.callback()
def _root(
    ctx: typer.Context,
    metastore: Optional[str] = typer.Option(None, "--metastore", envvar="LAKEGC_METASTORE", metavar="URL",
                                            help="SQLAlchemy URL (default sqlite:///$LAKEGC_HOME/lakegc.db)."),
) -> None:
    ctx.obj = State(metastore)


def _register() -> None:
    from lakegc.cli import connectors, db, demo, fs, gc, history, refs

    app.add_typer(db.app, name="db")
    app.add_typer(refs.repo_app, name="repo")
    app.add_typer(refs.branch_app, name="branch")
    app.add_typer(refs.tag_app, name="tag")
    app.add_typer(fs.app, name="fs")
    app.add_typer(gc.app, name="gc")
    app.add_typer(connectors.catalog_app, name="catalog")
    app.add_typer(connectors.iceberg_app, name="iceberg")
    history.register(app)
    app.command("demo")(demo.demo)


_register()


def run() -> None:
    """The console script. Once its output is flushed it leaves with `os._exit`, skipping the
    interpreter's teardown: pyarrow's native thread pools can abort that teardown (std::terminate,
    exit -6; apache/arrow#34314), turning a command that finished into a crash."""
    try:
        app(prog_name="lakegc")
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


__all__ = ["app", "run"]
