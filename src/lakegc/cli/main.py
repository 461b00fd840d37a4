"""The `lakegc` command: a thin layer over the Python API (lakegc.repo) that parses and prints."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand

from lakegc.cli import output
from lakegc.cli.group import Commands, Group
from lakegc.cli.options import State
from lakegc.redact import mask_secrets

# Every subcommand: (its module under lakegc.cli, the typer app of a group or the `Commands` that
# declare a command there), and its one-line help. A command's module is imported only when that
# command runs (or its own --help is asked for): `lakegc --version` and `lakegc --help` load no SQL,
# Arrow or Spark module, and `lakegc log` no connector. `test_cli_imports` keeps the lines here equal
# to the modules' own.
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": (
        "server",
        "commands",
        (
            "Serve the metastore's repositories over lakeFS's REST API at /api/v1 (basic auth with a key "
            "pair from `lakegc auth create-user`), so lakeFS's clients work against lakegc."
        ),
    ),
    "commit": (
        "history",
        "commands",
        "Commit the branch's staged changes.",
    ),
    "merge": (
        "history",
        "commands",
        "Merge SOURCE (any ref) into branch DEST: three-way, from the best common ancestor.",
    ),
    "log": (
        "history",
        "commands",
        "Commits reachable from a ref, newest first.",
    ),
    "diff": (
        "history",
        "commands",
        "Changes from LEFT to RIGHT; with only LEFT (a branch), its uncommitted changes.",
    ),
    "demo": (
        "demo",
        "commands",
        (
            "Build a demo lake (lakeFS's worked example of retention: main keeps 21 days, dev 7; plus "
            "uncommitted leftovers), run GC on it and show what was collected."
        ),
    ),
    "db": (
        "db",
        "app",
        "Metastore schema.",
    ),
    "repo": (
        "refs",
        "repo_app",
        "Create, list and delete repositories.",
    ),
    "branch": (
        "refs",
        "branch_app",
        "Create, list, delete, reset and revert branches.",
    ),
    "tag": (
        "refs",
        "tag_app",
        "Create, list and delete tags.",
    ),
    "fs": (
        "fs",
        "app",
        "Upload, read, list, copy, link and remove objects.",
    ),
    "gc": (
        "gc",
        "app",
        "Garbage collection: retention rules, runs, sweeps.",
    ),
    "catalog": (
        "connectors",
        "catalog_app",
        "GC for an IOx-style catalog: its parquet_file table and the object store it names.",
    ),
    "iceberg": (
        "connectors",
        "iceberg_app",
        "GC for Iceberg tables: expire snapshots, then delete files no table references.",
    ),
    "delta": (
        "connectors",
        "delta_app",
        "GC for Delta Lake tables: a full VACUUM, deciding as delta-rs does, on Spark.",
    ),
    "lakefs": (
        "lakefs",
        "app",
        "GC for a lakeFS installation: a repository's namespace, decided as lakeFS's own GC does.",
    ),
    "warehouse": (
        "warehouse",
        "app",
        "GC for a whole warehouse: what no table, catalog or repository under a prefix references.",
    ),
    "auth": (
        "server",
        "auth_app",
        "Users of `lakegc serve` and their key pairs.",
    ),
    "engine": (
        "engine",
        "app",
        ("A warm local Spark (Spark Connect on 127.0.0.1) that commands use instead of starting their own."),
    ),
}


def load_subcommand(name: str) -> Any:
    """The (click) command of subcommand `name`, its module imported now."""
    module_name, attribute, _ = SUBCOMMANDS[name]
    found = getattr(importlib.import_module(f"lakegc.cli.{module_name}"), attribute)
    if isinstance(found, Commands):
        holder = typer.Typer(cls=Group, pretty_exceptions_enable=False, rich_markup_mode=None)
        function, settings = found.declared[name]
        holder.command(name, **settings)(function)
        command = typer.main.get_command(holder)
    else:
        command = typer.main.get_group(found)
    command.name = name
    return command


class _Root(Group):
    """The root group: its subcommands listed from `SUBCOMMANDS`, each loaded when it is used."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        return load_subcommand(cmd_name) if cmd_name in SUBCOMMANDS else None

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:
        limit = formatter.width - 6 - max(len(name) for name in SUBCOMMANDS)
        rows = [
            (name, TyperCommand(name, help=help_).get_short_help_str(limit))
            for name, (_, _, help_) in SUBCOMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


_FORMS = (
    "URIs: lakegc://REPO, lakegc://REPO/REF, lakegc://REPO/REF/PATH (REF: a branch, a tag, a commit id or a "
    "unique prefix of 8+ characters). Namespaces: /abs/path, file:///abs/path, local:///abs/path or "
    "s3://bucket/prefix. Durations: 90s, 30m, 6h, 7d or ISO 8601 (P7D, PT2H). Dates: ISO 8601 "
    "(2026-01-02T03:04:05Z) or Unix seconds. Settings: $LAKEGC_HOME/config.toml (metastore, runs, [spark], "
    "[gc]), overridden by the environment and by flags. Exit status: 0 ok, 1 an error (one 'error:' line), "
    "2 a usage error."
)
app = typer.Typer(
    cls=_Root,
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

        sys.stdout.write(f"lakegc {__version__}\n")  # a version needs no rich: plain, at once
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
    if debug or "lakegc.engine.spark" in sys.modules:  # a metadata command never loads the Spark module
        from lakegc.engine import spark

        spark.show_jvm_noise = debug


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
