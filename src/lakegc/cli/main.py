"""The `lakegc` command: a thin layer over the Python API (lakegc.repo) that parses and prints."""

from __future__ import annotations

import logging
import os
import sys

import typer

from lakegc.cli import connectors, db, demo, engine, fs, gc, history, lakefs, output, refs, server, warehouse
from lakegc.cli.group import Group, add_commands
from lakegc.cli.options import State
from lakegc.redact import mask_secrets

_FORMS = (
    "URIs: lakegc://REPO, lakegc://REPO/REF, lakegc://REPO/REF/PATH (REF: a branch, a tag, a commit id or a "
    "unique prefix of 8+ characters). Namespaces: /abs/path, file:///abs/path, local:///abs/path or "
    "s3://bucket/prefix. Durations: 90s, 30m, 6h, 7d or ISO 8601 (P7D, PT2H). Dates: ISO 8601 "
    "(2026-01-02T03:04:05Z) or Unix seconds. Settings: $LAKEGC_HOME/config.toml (metastore, runs, [spark], "
    "[gc]), overridden by the environment and by flags. Exit status: 0 ok, 1 an error (one 'error:' line), "
    "2 a usage error."
)
app = typer.Typer(
    cls=Group,
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


app.add_typer(db.app, name="db")
app.add_typer(refs.repo_app, name="repo")
app.add_typer(refs.branch_app, name="branch")
app.add_typer(refs.tag_app, name="tag")
app.add_typer(fs.app, name="fs")
app.add_typer(gc.app, name="gc")
app.add_typer(connectors.catalog_app, name="catalog")
app.add_typer(connectors.iceberg_app, name="iceberg")
app.add_typer(connectors.delta_app, name="delta")
app.add_typer(lakefs.app, name="lakefs")
app.add_typer(warehouse.app, name="warehouse")
app.add_typer(server.auth_app, name="auth")
app.add_typer(engine.app, name="engine")
add_commands(app, ("serve", "commit", "merge", "log", "diff", "demo"), server.commands, history.commands, demo.commands)


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
