"""A command imports only what it uses (issue 39): `lakegc --version` and `lakegc --help` load no
SQL, Arrow or Spark module; the metadata commands never load PySpark; on a SQLite metastore the
commands that only read refs and commits load neither SQLAlchemy nor Arrow, and those that read a
tree load Arrow but not SQLAlchemy (nor pandas, which pyarrow pulls in when it converts a Python
value). Each is checked in a fresh interpreter, where `sys.modules` says what the command imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lakegc.cli.main import SUBCOMMANDS, load_subcommand

# The command runs as the console script does (`lakegc.cli.main.run`): it leaves with `os._exit`
# once its output is flushed, never through the interpreter's teardown, where pyarrow's native
# thread pools can abort the process ("terminate called without an active exception").
_RUN = """
import os, sys
from lakegc.cli.main import app
try:
    app(sys.argv[1:], prog_name="lakegc")
except SystemExit:
    pass
print("IMPORTED", *[m for m in ("pyspark", "pyarrow", "sqlalchemy", "pandas") if m in sys.modules], file=sys.stderr)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def imported(env, *args: str) -> set[str]:  # noqa: ANN001
    """The heavy modules a fresh `lakegc ARGS` imported."""
    done = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, env=env, check=False)
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("IMPORTED"), done.stderr
    return set(line.split()[1:])


@pytest.fixture
def environ(env) -> dict[str, str]:  # noqa: ANN001
    import os

    return {**os.environ, **env.environ()}


@pytest.mark.parametrize("args", [[], ["--version"], ["--help"]], ids=["import", "version", "help"])
def test_the_root_loads_no_sql_arrow_or_spark(environ: dict[str, str], args: list[str]) -> None:
    assert imported(environ, *args) == set()


METADATA = [
    ["repo", "list"],
    ["branch", "list", "lakegc://small"],
    ["tag", "list", "lakegc://small"],
    ["log", "lakegc://small/main"],
    ["fs", "ls", "lakegc://small/main/"],
    ["fs", "stat", "lakegc://small/main/a.txt", "--json"],
    ["fs", "cat", "lakegc://small/main/a.txt"],
    ["gc", "runs", "lakegc://small"],
    ["gc", "explain", "lakegc://small/main/a.txt"],
]


def small_repository(cli, env) -> None:  # noqa: ANN001
    cli("repo", "create", "lakegc://small", str(env.namespace()))
    cli("fs", "upload", "lakegc://small/main/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakegc://small/main", "-m", "one")
    cli("fs", "upload", "lakegc://small/main/staged.txt", "--source", "-", input=b"b")


def test_metadata_commands_never_load_pyspark(cli, env, environ: dict[str, str]) -> None:  # noqa: ANN001
    small_repository(cli, env)
    for args in METADATA:
        assert "pyspark" not in imported(environ, *args), args


# What each reading command may load on a SQLite metastore: refs and commits come from the
# metastore's own sqlite3 connection; a tree is Parquet, read with Arrow.
READERS = {
    ("repo", "list"): set(),
    ("branch", "list", "lakegc://small"): set(),
    ("tag", "list", "lakegc://small"): set(),
    ("log", "lakegc://small/main"): set(),
    ("log", "lakegc://small/main", "--json"): set(),
    ("fs", "stat", "lakegc://small/main/staged.txt", "--json"): set(),  # staged: no tree read
    ("fs", "stat", "lakegc://small/main/a.txt", "--json"): {"pyarrow"},
    ("fs", "ls", "lakegc://small/main/"): {"pyarrow"},
    ("fs", "ls", "lakegc://small/main/", "--json"): {"pyarrow"},
    ("fs", "cat", "lakegc://small/main/a.txt"): {"pyarrow"},
}


def test_reading_commands_load_no_sqlalchemy_and_arrow_only_for_a_tree(cli, env, environ) -> None:  # noqa: ANN001
    """On the default SQLite metastore (the `backend` of this module's tests)."""
    small_repository(cli, env)
    for args, allowed in READERS.items():
        assert imported(environ, *args) == allowed, args


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_the_root_s_help_line_is_the_command_s_own(name: str) -> None:
    assert load_subcommand(name).get_short_help_str(limit=10**6) == SUBCOMMANDS[name][2]
