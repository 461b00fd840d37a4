"""How lakegc feels to a new user: output that reads the same in a pipe as on a terminal, progress
kept on stderr, run ids that read as times and select a run by prefix, the settings file, help that
shows its forms and an example, and a first dry run that says why nothing is a candidate yet."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import click
import pytest
import typer
from conftest import PROGRESS, CliResult, Env, age_objects, make_cli, one_error

from lakegc.cli.main import app
from lakegc.engine.runs import new_run_id
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
Cli = Callable[..., CliResult]
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture
def young_lake(env: Env, cli: Cli, put) -> list[str]:
    """A repository whose three objects were all written just now."""
    cli("repo", "create", REPO, str(env.namespace()))
    paths = ["events/part-0", "events/part-1", "users/" + "x" * 120]  # one path longer than any terminal
    for p in paths:
        put(f"{REPO}/main/{p}", p)
    cli("commit", f"{REPO}/main", "-m", "first")
    return paths


# -- run ids ---------------------------------------------------------------------------------------
def test_run_ids_read_as_their_utc_start_time_and_sort_by_it():
    times = [datetime(2026, 11, 26, 14, 6, 38, 123456, tzinfo=UTC) + timedelta(milliseconds=ms) for ms in (0, 1, 999)]
    ids = [new_run_id(t) for t in times]
    assert all(re.fullmatch(r"\d{8}T\d{9}Z-[0-9a-f]{6}", i) for i in ids)
    assert ids[0].startswith("20261126T140638123Z-") and ids[2].startswith("20261126T140639122Z-")
    assert sorted(ids) == ids
    assert new_run_id(datetime(2026, 1, 1, 1, tzinfo=UTC).astimezone()).startswith("20260101T010000000Z")


def test_a_unique_prefix_selects_a_run_and_a_shared_one_is_refused_naming_the_runs(cli: Cli, young_lake, spark):
    first = cli("gc", "run", REPO, "--dry-run", "--json").json()["run_id"]
    second = cli("gc", "run", REPO, "--dry-run", "--json").json()["run_id"]
    shared = next(i for i in range(len(first)) if first[i] != second[i])
    for run_id in (first, second):
        prefix = run_id[: max(shared + 1, 8)]
        assert cli("gc", "show", REPO, prefix, "--json").json()["run_id"] == run_id
        assert cli("gc", "candidates", REPO, prefix, "--json").json() == []
    line = one_error(cli("gc", "show", REPO, first[:shared], "--json", ok=False), "ambiguous", json_cmd=True)
    assert first in line and second in line
    one_error(cli("gc", "show", REPO, "1999", ok=False), "not found")
    runs = cli("gc", "runs", REPO, "--json").json()
    assert [r["run_id"] for r in runs] == [second, first]  # newest first


# -- a first run, and a deferred sweep ---------------------------------------------------------------
def test_a_first_dry_run_on_a_young_lake_says_how_many_objects_min_age_kept(cli: Cli, young_lake, spark):
    doc = cli("gc", "run", REPO, "--dry-run", "--json").json()
    assert (doc["num_listed"], doc["num_young"], doc["num_candidates"]) == (3, 3, 0)
    table = cli("gc", "show", REPO, doc["run_id"]).stdout
    assert re.search(r"objects listed\s+3, of which 3 younger than the min-age 1d: kept, never candidates", table)


def test_mark_only_ends_with_the_exact_sweep_command_which_then_sweeps(env: Env, cli: Cli, young_lake, spark):
    age_objects(env.namespace(), utcnow() - timedelta(days=2))
    cli("fs", "rm", f"{REPO}/main/events/part-0")
    cli("commit", f"{REPO}/main", "-m", "drop part-0")  # no rules: every commit stays, nothing expires
    cli("fs", "upload", f"{REPO}/main/staged", "--source", "-", input=b"a")
    cli("fs", "upload", f"{REPO}/main/staged", "--source", "-", input=b"b")  # the first upload is garbage
    age_objects(env.namespace(), utcnow() - timedelta(days=2))
    out = cli("gc", "run", REPO, "--mark-only").stdout
    command = re.search(r"To delete the candidates: lakegc (.+)$", out.strip()).group(1).split()
    assert command[:2] == ["--metastore", env.metastore]  # as this command was given it (here: LAKEGC_METASTORE)
    assert command[2:5] == ["gc", "sweep", REPO] and len(command) == 6
    swept = cli(*command, "--conf", "spark.sql.shuffle.partitions=2", "--json").json()
    assert (swept["state"], swept["num_deleted"]) == ("swept", 1)


# -- output in a pipe, progress on stderr ------------------------------------------------------------
def test_in_a_pipe_tables_are_one_line_per_row_with_whole_values_and_iso_dates(cli: Cli, young_lake, spark):
    listing = cli("fs", "ls", f"{REPO}/main/").stdout.splitlines()
    assert len(listing) == 1 + len(young_lake)  # a header and a line per object: nothing wrapped
    long_line = next(line for line in listing if "x" * 120 in line)
    assert re.search(rf"users/x{{120}}\s+\d+\s+{ISO}\s+file:///\S+/data/\S+$", long_line)
    log = cli("log", f"{REPO}/main").stdout
    commits = cli("log", f"{REPO}/main", "--json").json()
    assert all(c["id"] in log for c in commits) and re.search(ISO, log)  # whole ids, ISO dates
    cli("gc", "run", REPO, "--dry-run")
    runs = cli("gc", "runs", REPO).stdout.splitlines()
    assert len(runs) == 2 and re.search(rf"^\S+Z-[0-9a-f]{{6}}\s+marked\s+{ISO}\s", runs[1])


def test_json_keeps_progress_on_stderr_and_quiet_silences_it(cli: Cli, young_lake, spark):
    result = cli("gc", "run", REPO, "--dry-run", "--json")
    assert json.loads(result.stdout)["state"] == "marked"
    phases = result.stderr.strip().splitlines()
    assert phases and all(PROGRESS.match(line) for line in phases), result.stderr
    assert any("listing the namespace" in line for line in phases)
    quiet = cli("-q", "gc", "run", REPO, "--dry-run", "--json")
    assert (json.loads(quiet.stdout)["state"], quiet.stderr) == ("marked", "")


# -- help and completion ----------------------------------------------------------------------------
def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    ctx = typer.Context(group)
    for name in group.list_commands(ctx):  # as click lists them: the root loads each command when asked
        command = group.get_command(ctx, name)
        assert command is not None, name
        if hasattr(command, "commands"):  # a group (typer's own Group class)
            found += _commands(command, (*prefix, name))
        else:
            found.append(((*prefix, name), command))
    return found


def test_every_command_shows_an_example_in_its_help():
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) >= 40
    missing = [" ".join(path) for path, command in commands if "Example" not in (command.epilog or "")]
    assert missing == []


def test_the_root_help_names_uri_forms_durations_dates_settings_and_exit_status(env: Env):
    text = make_cli(env)("--help").stdout
    for needle in (
        "lakegc://REPO/REF/PATH",
        "s3://bucket/prefix",
        "local:///abs/path",
        "7d",
        "P7D",
        "ISO 8601",
        "Unix seconds",
        "config.toml",
        "Exit status",
        "--quiet",
        "--verbose",
        "--install-completion",
    ):
        assert needle in text, needle


def test_shell_completion_script_is_printed(sh, monkeypatch):
    # The shell named, not detected: detection walks the process tree and fails under `timeout`,
    # `setsid` and other non-shell parents.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = sh("--show-completion", "bash")
    assert result.exit_code == 0, result.stderr
    assert "_LAKEGC_COMPLETE" in result.stdout and "complete" in result.stdout


# -- the settings file --------------------------------------------------------------------------------
def _cli_without_metastore_env(env: Env) -> Cli:
    """The CLI with LAKEGC_HOME set and LAKEGC_METASTORE unset: the settings file decides."""
    from typer.testing import CliRunner

    runner = CliRunner()

    def run(*args: str, extra: dict | None = None, ok: bool = True) -> CliResult:
        result = runner.invoke(
            app,
            list(args),
            env={"LAKEGC_HOME": str(env.home), "LAKEGC_METASTORE": None, "LAKEGC_MIN_AGE": None, **(extra or {})},
            catch_exceptions=False,
        )
        out = CliResult(result.exit_code, result.stdout, result.stderr)
        if ok:
            assert out.exit_code == 0, out.stderr
        return out

    return run


def test_the_settings_file_sets_the_metastore_and_the_environment_and_flags_win(env: Env, tmp_path):
    env.home.mkdir(parents=True, exist_ok=True)
    from_file, from_env, from_flag = (f"sqlite:///{tmp_path / name}.db" for name in ("file", "env", "flag"))
    (env.home / "config.toml").write_text(f'metastore = "{from_file}"\n[gc]\nmin_age = "36h"\n')
    cli = _cli_without_metastore_env(env)
    cli("repo", "create", "lakegc://in-file", str(tmp_path / "ns-file"))
    cli("repo", "create", "lakegc://in-env", str(tmp_path / "ns-env"), extra={"LAKEGC_METASTORE": from_env})
    cli(
        "--metastore",
        from_flag,
        "repo",
        "create",
        "lakegc://in-flag",
        str(tmp_path / "ns-flag"),
        extra={"LAKEGC_METASTORE": from_env},
    )
    for url, name in ((from_file, "in-file"), (from_env, "in-env"), (from_flag, "in-flag")):
        assert [r["id"] for r in cli("--metastore", url, "repo", "list", "--json").json()] == [name]


def test_the_settings_files_min_age_is_gc_runs_default_and_a_flag_replaces_it(env: Env, tmp_path, spark):
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text(f'metastore = "{env.metastore}"\n[gc]\nmin_age = "36h"\n')
    cli = _cli_without_metastore_env(env)
    cli("repo", "create", REPO, str(env.namespace()))
    assert cli("gc", "run", REPO, "--dry-run", "--json").json()["min_age_seconds"] == 36 * 3600
    assert cli("gc", "run", REPO, "--dry-run", "--min-age", "2h", "--json").json()["min_age_seconds"] == 2 * 3600


@pytest.mark.parametrize(
    "text, needles",
    [
        ("metastore = ", ("settings file", "cannot be read")),
        ('metastor = "sqlite:///x.db"\n', ("settings file", "metastor")),
        ('[gc]\nmin_age = "soon"\n', ("settings file", "soon")),
        ("[spark]\nmaster = 7\n", ("settings file", "spark.master")),
    ],
    ids=["not-toml", "unknown-key", "bad-duration", "wrong-type"],
)
def test_a_settings_file_that_is_wrong_is_one_error_line_naming_it(env: Env, text: str, needles: tuple[str, ...]):
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text(text)
    one_error(_cli_without_metastore_env(env)("repo", "list", "--json", ok=False), *needles, json_cmd=True)


def test_an_error_while_spark_starts_in_a_real_process_is_its_one_line_and_the_jvm_says_nothing(env: Env, sh, cli):
    """A run starts Spark's JVM in the background during its preflight: an error found meanwhile (a
    manifest that is not there) is still exactly one `error:` line, and the JVM's own notices never
    reach stderr."""
    cli("repo", "create", REPO, str(env.namespace()))
    missing = env.root / "no-manifest.json"
    result = sh("gc", "run", REPO, "--inventory", str(missing), "--json")
    one_error(result, "cannot read inventory manifest", json_cmd=True)
    assert "WARNING" not in result.stderr
