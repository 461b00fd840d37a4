"""The `lakegc` command: a thin layer over the Python API (lakegc.repo) that parses and prints."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from dataclasses import dataclass
from functools import cached_property

import sqlalchemy as sa
import typer
from typer.core import TyperGroup

from lakegc.cli import output
from lakegc.errors import LakegcError, first_line
from lakegc.failures import cause, jvm_gone
from lakegc.metastore import Metastore
from lakegc.redact import mask_secrets, shown
from lakegc.repo.repository import Lake, Repository
from lakegc.uri import LakeUri


class _Group(TyperGroup):
    """Every command's errors end here as one `error:` line naming the cause, exit 1; with --debug
    the traceback comes first (on stderr, credentials masked)."""

    def invoke(self, ctx: typer.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):
            raise  # exit codes and usage errors: typer's own
        except Exception as exc:
            if getattr(ctx.find_root().obj, "debug", False):
                sys.stderr.writelines(
                    shown(line) + "\n" for line in "".join(traceback.format_exception(exc)).split("\n")[:-1]
                )
                sys.stderr.flush()
            output.fail(error_message(exc))


def error_message(exc: Exception) -> str:
    """lakegc's own errors as written; metastore and storage failures named so; anything else (a
    Spark executor's error, a dead JVM, a bug) by its cause."""
    if isinstance(exc, LakegcError):
        return str(exc)
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return "metastore: " + first_line(getattr(exc, "orig", None) or exc, 1000)
    if isinstance(exc, OSError) and not jvm_gone(exc):
        return f"storage: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return cause(exc)


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


@dataclass
class State:
    metastore_url: str | None
    debug: bool = False

    @cached_property
    def lake(self) -> Lake:
        """The metastore's lake, which must exist: a mistyped URL is an error, never a new, empty
        lake (the metastore is created on first use by the commands that may create it)."""
        return Lake(Metastore(self.metastore_url, create=False))

    @cached_property
    def creating_lake(self) -> Lake:
        """For the commands that may create the metastore: `repo create`, `db init`, `serve` and
        `auth create-user` (setting up a server), and the demo (its own)."""
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


_FORMS = (
    "URIs: lakegc://REPO, lakegc://REPO/REF, lakegc://REPO/REF/PATH (REF: a branch, a tag, a commit id or a "
    "unique prefix of 8+ characters). Namespaces: /abs/path, file:///abs/path, local:///abs/path or "
    "s3://bucket/prefix. Durations: 90s, 30m, 6h, 7d or ISO 8601 (P7D, PT2H). Dates: ISO 8601 "
    "(2026-01-02T03:04:05Z) or Unix seconds. Settings: $LAKEGC_HOME/config.toml (metastore, runs, [spark], "
    "[gc]), overridden by the environment and by flags. Exit status: 0 ok, 1 an error (one 'error:' line), "
    "2 a usage error."
)
app = typer.Typer(
    cls=_Group,
    help="Garbage collection for versioned data lakes: a git-like repository and its GC.",
    epilog=_FORMS,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(given: bool) -> None:
    if given:
        from lakegc import __version__

        output.say(f"lakegc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    metastore: str | None = typer.Option(
        None,
        "--metastore",
        envvar="LAKEGC_METASTORE",
        metavar="URL",
        help="SQLAlchemy URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (default: "
        "the settings file's, else sqlite:///$LAKEGC_HOME/lakegc.db).",
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        help="On an error, print its traceback before the error line (and let libraries log to stderr).",
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Say more as long commands run (Spark's task counts in logs too)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr; only results and errors."),
    _version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print lakegc's version and exit."
    ),
) -> None:
    ctx.obj = State(metastore, debug)
    output.set_verbosity(0 if quiet else 2 if verbose else 1)
    _LibraryLogs.enabled = debug
    from lakegc.engine import spark

    spark.show_jvm_noise = debug


def _register() -> None:
    from lakegc.cli import connectors, db, demo, engine, fs, gc, history, refs, server

    app.add_typer(db.app, name="db")
    app.add_typer(refs.repo_app, name="repo")
    app.add_typer(refs.branch_app, name="branch")
    app.add_typer(refs.tag_app, name="tag")
    app.add_typer(fs.app, name="fs")
    app.add_typer(gc.app, name="gc")
    app.add_typer(connectors.catalog_app, name="catalog")
    app.add_typer(connectors.iceberg_app, name="iceberg")
    app.add_typer(connectors.delta_app, name="delta")
    app.add_typer(server.auth_app, name="auth")
    app.add_typer(engine.app, name="engine")
    app.command("serve", epilog="Example: lakegc serve --port 8000")(server.serve)
    history.register(app)
    app.command("demo", epilog="Example: lakegc demo --dir /tmp/lakegc-demo")(demo.demo)


_register()


class _LibraryLogs(logging.StreamHandler):
    """The console script's root log handler: what libraries log (Py4J logs the broken connection
    of a JVM that died, traceback and all) reaches stderr only under --debug; otherwise the one
    error line says what went wrong."""

    enabled = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.enabled:
            super().emit(record)

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


def run() -> None:
    """The console script. Once its output is flushed it leaves with `os._exit`, skipping the
    interpreter's teardown: pyarrow's native thread pools can abort that teardown (std::terminate,
    exit -6; apache/arrow#34314), turning a command that finished into a crash."""
    from lakegc.engine.classic import command_scope

    logging.getLogger().addHandler(_LibraryLogs(sys.stderr))
    try:
        with command_scope():  # the first Spark command on a machine leaves its JVM's class archive
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
