"""A command imports only what it uses (issue 39): `lakegc --version` and `lakegc --help` load no
SQL, Arrow or Spark module, and the metadata commands never load PySpark. Each is checked in a fresh
interpreter, where `sys.modules` says what the command imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lakegc.cli.main import SUBCOMMANDS, load_subcommand

_RUN = """
import sys
from lakegc.cli.main import app
try:
    app(sys.argv[1:], prog_name="lakegc")
except SystemExit:
    pass
print("IMPORTED", *[m for m in ("pyspark", "pyarrow", "sqlalchemy") if m in sys.modules], file=sys.stderr)
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


def test_metadata_commands_never_load_pyspark(cli, environ: dict[str, str], tmp_path) -> None:  # noqa: ANN001
    cli("repo", "create", "lakegc://small", str(tmp_path / "ns"))
    cli("fs", "upload", "lakegc://small/main/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakegc://small/main", "-m", "one")
    for args in METADATA:
        assert "pyspark" not in imported(environ, *args), args


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_the_root_s_help_line_is_the_command_s_own(name: str) -> None:
    assert load_subcommand(name).get_short_help_str(limit=10**6) == SUBCOMMANDS[name][2]
