"""`lakegc gc simulate`: the retention curve from one pass, each point equal to its dry run.

The randomized check against the reference model is in test_gc_model_hypothesis.py; here a lake
with commits of many ages on several branches, a dangling commit, staged and dropped uploads and
stored path rules (which `--default-cutoff` replaces, as for a run) is simulated and then dry-run
point by point, and the command's output, plot and bad input are checked.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import CliResult, Env, age_objects, one_error, snapshot

from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
RETENTIONS = ["12d", "1d", "P5D", "40d", "2d", "36h"]  # unsorted, mixed forms: points keep this order
Cli = Callable[..., CliResult]


@pytest.fixture
def lake(env: Env, cli: Cli, put, spark) -> Path:
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    rules = {"default_retention_days": 3, "branches": [], "path_rules": [{"glob": "**", "retention_days": 100}]}
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(rules))

    def commit(branch: str, days: float) -> None:
        date = (utcnow() - timedelta(days=days)).isoformat()
        cli("commit", f"{REPO}/{branch}", "-m", f"{days} days ago", "--date", date)

    for days, path in [(60, "a"), (30, "a"), (20, "b"), (10, "a"), (6, "dir/c"), (4, "a"), (1.5, "b"), (0.5, "a")]:
        put(f"{REPO}/main/{path}", f"main {path} {days}")
        commit("main", days)
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    for days in (8, 3):
        put(f"{REPO}/dev/d", f"dev {days}")
        commit("dev", days)
    cli("branch", "create", f"{REPO}/gone", "--source", f"{REPO}/main")
    put(f"{REPO}/gone/g", "left behind")
    commit("gone", 2.5)
    cli("branch", "delete", f"{REPO}/gone", "--yes")  # a dangling commit
    put(f"{REPO}/main/dropped", "reset away")
    cli("branch", "reset", f"{REPO}/main", "--yes")  # uncommitted garbage: in every point
    put(f"{REPO}/main/staged", "staged")  # never garbage
    age_objects(ns, utcnow() - timedelta(days=2))
    return ns


@pytest.mark.slow  # seven Spark runs: in the second CI step
def test_every_point_equals_its_dry_run(cli: Cli, lake: Path) -> None:
    before = snapshot(lake)
    curve = cli("gc", "simulate", REPO, "--retention", ",".join(RETENTIONS), "--json").json()
    assert snapshot(lake) == before  # nothing written, nothing left behind
    assert cli("gc", "runs", REPO, "--json").json() == []  # no run recorded
    assert set(curve) >= {"repository", "cutoff_time", "points"} and curve["repository"] == "repo"
    assert [p["retention"] for p in curve["points"]] == RETENTIONS
    for point in curve["points"]:
        run = cli("gc", "run", REPO, "--dry-run", "--clean", "--default-cutoff", point["retention"], "--json").json()
        assert (point["num_candidates"], point["bytes"]) == (run["num_candidates"], run["bytes_candidates"]), point
    counts = {p["retention"]: p["num_candidates"] for p in curve["points"]}
    assert counts["1d"] >= counts["36h"] >= counts["2d"] >= counts["P5D"] >= counts["12d"] >= counts["40d"] >= 1
    assert counts["1d"] > counts["40d"]  # the lake has something to show


def test_table_and_plot(cli: Cli, lake: Path, tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    out = cli("gc", "simulate", REPO, "--retention", "1d,7d,30d", "--plot", str(png)).stdout
    lines = out.splitlines()
    assert lines[1].split() == ["RETENTION", "CANDIDATES", "BYTES"]
    assert [line.split()[0] for line in lines[2:5]] == ["1d", "7d", "30d"]
    assert lines[-1] == f"plot: {png}"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 600 and height >= 300


def test_bad_input(cli: Cli, lake: Path, tmp_path: Path) -> None:
    for args, needle in [
        (["--retention", ""], "empty"),
        (["--retention", "soon"], "invalid retention 'soon'"),
        (["--retention", "7d,,1d"], "empty"),
        (["--retention", "10"], "invalid retention '10'"),
        (["--retention", "1d", "--min-age", "-2h"], "invalid duration"),
        (["--retention", "1d", "--plot", str(tmp_path)], "folder"),
        (["--retention", "1d", "--plot", str(tmp_path / "no" / "such" / "dir.png")], "cannot write"),
    ]:
        one_error(cli("gc", "simulate", REPO, *args, "--json", ok=False), needle, json_cmd=True)
    one_error(cli("gc", "simulate", "lakegc://repo/main", "--retention", "1d", ok=False), "expected lakegc://REPO")
    one_error(cli("gc", "simulate", "lakegc://nothere", "--retention", "1d", ok=False), "nothere")
    assert not (lake / "_lakegc" / "simulate").exists() or not any((lake / "_lakegc" / "simulate").rglob("*.parquet"))
