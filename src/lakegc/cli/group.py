"""How a command group is built: errors end as one line, and its commands may be written in several
modules yet listed in one order.

Every command module builds its groups here and never from `cli.main`, which imports them all to
build the `lakegc` command: the modules of the CLI import one way, downwards."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from lakegc.cli import output
from lakegc.errors import LakegcError, first_line
from lakegc.failures import cause, jvm_gone
from lakegc.redact import shown

Command = TypeVar("Command", bound=Callable[..., Any])


class Group(TyperGroup):
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
    module = type(exc).__module__
    if module.startswith("sqlalchemy.") or module == "sqlite3":  # theirs, without importing them for every command
        return "metastore: " + first_line(getattr(exc, "orig", None) or exc, 1000)
    if isinstance(exc, OSError) and not jvm_gone(exc):
        return f"storage: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return cause(exc)


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(
        cls=Group,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


class Commands:
    """Commands declared where they are written (`@commands.command("run", epilog=...)`, as on a
    typer app) and added to their group by the module that builds it (`add_commands`): a group whose
    commands live in several modules lists them in the order its help always had."""

    def __init__(self) -> None:
        self.declared: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}

    def command(self, name: str, **settings: Any) -> Callable[[Command], Command]:
        def declare(function: Command) -> Command:
            self.declared[name] = (function, settings)
            return function

        return declare


def add_commands(app: typer.Typer, names: Iterable[str], *parts: Commands) -> None:
    """The `names` commands of `parts`, in that order, added to `app`; each must be declared once."""
    declared = {name: found for part in parts for name, found in part.declared.items()}
    for name in names:
        function, settings = declared.pop(name)
        app.command(name, **settings)(function)
    if declared:
        raise ValueError(f"commands declared but not added: {sorted(declared)}")
