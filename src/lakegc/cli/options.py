"""The options several commands share, written once so that they read and behave alike everywhere,
and the parsing of their values: the root's (`State`), --json, --yes, the Spark a command runs on,
run ids, GC's selection of what to collect, and the repository URIs of `gc`'s commands."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import typer

from lakegc.cli import output
from lakegc.errors import InvalidArgument
from lakegc.uri import LakeUri, parse_uri

if TYPE_CHECKING:
    from lakegc.repo.repository import Lake, Repository


@dataclass
class State:
    """The root's options (`lakegc --metastore URL --debug COMMAND`), which every command reads."""

    metastore_url: str | None
    debug: bool = False

    @cached_property
    def lake(self) -> Lake:
        """The metastore's lake, which must exist: a mistyped URL is an error, never a new, empty
        lake (the metastore is created on first use by the commands that may create it)."""
        from lakegc.metastore import Metastore
        from lakegc.repo.repository import Lake

        return Lake(Metastore(self.metastore_url, create=False))

    @cached_property
    def creating_lake(self) -> Lake:
        """For the commands that may create the metastore: `repo create`, `db init`, `serve` and
        `auth create-user` (setting up a server), and the demo (its own)."""
        from lakegc.metastore import Metastore
        from lakegc.repo.repository import Lake

        return Lake(Metastore(self.metastore_url))

    def repo(self, uri: LakeUri) -> Repository:
        return self.lake.repository(uri.repo)


def state(ctx: typer.Context) -> State:
    return ctx.find_root().obj


JSON = typer.Option(False, "--json", help="Print one JSON document.")
YES = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")


def confirm(yes: bool, action: str) -> None:
    """Destructive commands need --yes; a person at a terminal may answer instead."""
    if yes:
        return
    if sys.stdin.isatty() and typer.confirm(f"{action}?"):
        return
    output.fail(f"refusing to {action} without --yes")


# -- the Spark a command runs on ---------------------------------------------------------------------
MASTER = typer.Option(
    None, "--master", help="Spark master URL (default: the settings file's, else a running engine, else local[*])."
)
REMOTE = typer.Option(
    None, "--remote", metavar="sc://HOST:PORT", help="Run on this Spark Connect server (or LAKEGC_REMOTE)."
)
CONF = typer.Option([], "--conf", help="Spark conf KEY=VALUE (repeatable; adds to the settings file's).")


def parse_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"invalid --conf {pair!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


def on_spark(master: str | None, remote: str | None, conf: list[str]) -> dict[str, Any]:
    """The `master` and `conf` of an API call that runs on Spark, from --master, --remote and --conf
    (checked in that order)."""
    from lakegc.settings_file import spark_address

    return {"master": spark_address(master, remote), "conf": parse_conf(conf)}


# -- runs and what they collect ----------------------------------------------------------------------
RUN_ID = typer.Argument(..., metavar="RUN_ID", help="A run id, or a prefix only that run's id has.")
LIMIT = typer.Option(None, "--limit", min=1, help="Show at most N.")
MAX_DELETE_RATE = typer.Option(
    None,
    "--max-delete-rate",
    metavar="N",
    help="At most N objects a second, across all executors (a throttling store slows it further).",
)
MIN_AGE = typer.Option(
    None,
    "--min-age",
    help="Objects younger than this are never candidates: 90s, 30m, 6h, 7d or ISO 8601 "
    "(P7D); default 24h (or the settings file's gc.min_age).",
)
CUTOFF = typer.Option(
    [],
    "--cutoff",
    help="REGEX=POLICY (repeatable), overriding the stored rules (path rules too): the regex matches "
    "whole branch names, first match wins; POLICY is a commit count (10), a duration (7d), "
    "a date (ISO 8601) or NONE.",
)
DEFAULT_CUTOFF = typer.Option(
    None, "--default-cutoff", help="POLICY for branches no --cutoff matches, and for dangling commits."
)


# -- repository URIs ---------------------------------------------------------------------------------
def repo_uri(uri: str) -> str:
    """The repository `lakegc://REPO` names (`gc`'s commands act on a whole repository)."""
    target = parse_uri(uri)
    if target.ref:
        raise InvalidArgument(f"invalid URI {uri!r}: expected lakegc://REPO")
    return target.repo


def same_repo(a: str, b: str) -> None:
    """Two URIs of one command must name one repository."""
    if a != b:
        output.fail(f"both URIs must name the same repository ({a!r} vs {b!r})")


# -- the connectors' runs (lakegc iceberg|delta|catalog|lakefs) ------------------------------------
RUNS = typer.Option(
    None,
    "--runs",
    metavar="LOCATION",
    help="Folder or s3:// prefix of the connector's run folders (default $LAKEGC_HOME/runs, or the "
    "settings file's runs).",
)
# every connector run's budget: what it leaves, its next run judges again and deletes
MAX_DELETES = typer.Option(
    None, "--max-deletes", metavar="N", min=0, help="Stop after N files; the next run deletes the rest."
)
