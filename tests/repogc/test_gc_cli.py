"""The `lakegc gc ...` contract (docs/cli.md, "Garbage collection"): rules, runs, sweeps, and what runs record.

One module-scoped repository goes through a run's whole life (dry run, mark-only, sweep, full run)
so that each contract test checks one promise against recorded results without paying Spark again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import pytest
from conftest import CliResult, Env, make_cli, new_metastore, one_error, snapshot
from support.browser import render_in_chromium

from lakegc.repo.repository import Lake
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
SUMMARY_KEYS = {
    "run_id",
    "repository",
    "state",
    "mode",
    "dry_run",
    "started_at",
    "finished_at",
    "cutoff_time",
    "num_candidates",
    "num_deleted",
    "bytes_deleted",
    "error",
}
RULES = {
    "default_retention_days": 21,
    "branches": [{"branch_id": "main", "retention_days": 28}, {"branch_id": "dev", "retention_days": 7}],
}
Cli = Callable[..., CliResult]


# -- helpers -------------------------------------------------------------------------------------
def data(ns: Path) -> dict[str, tuple[int, int, str]]:
    return {k: v for k, v in snapshot(ns).items() if k.startswith("data/")}


def age(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


@dataclass
class Garbage:
    """A repository with one expired object (A1, committed 30 days ago, overwritten 20 days ago while
    main keeps 7) and one overwritten draft (D1); `keys` maps each object's name to its address."""

    ns: Path
    keys: dict[str, str]
    sizes: dict[str, int]
    mtimes: dict[str, datetime]
    commits: dict[str, str]

    def upload(self, lake: Lake, name: str, path: str, content: bytes, when: datetime) -> None:
        entry = lake.repository("repo").upload("main", path, content)
        age(self.ns / entry.address, when)
        self.keys[name], self.sizes[name], self.mtimes[name] = entry.address, len(content), when


def build_garbage(env: Env, cli: Cli) -> Garbage:
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({"default_retention_days": 7, "branches": []}))
    lake, now = env.lake(), utcnow()
    g = Garbage(ns, {}, {}, {}, {})
    repo = lake.repository("repo")
    for label, days, files in (
        ("c1", 30, {"A1": ("a", b"a version 1"), "K": ("keep", b"kept forever")}),
        ("c2", 20, {"A2": ("a", b"a version 2!")}),
    ):
        for name, (path, content) in files.items():
            g.upload(lake, name, path, content, now - timedelta(days=days))
        g.commits[label] = repo.commit("main", label, date=now - timedelta(days=days)).id
    g.upload(lake, "D1", "draft", b"draft one", now - timedelta(days=3))
    g.upload(lake, "D2", "draft", b"draft two..", now - timedelta(days=3))
    return g


# -- a run's whole life, recorded once ------------------------------------------------------------------
@dataclass
class Lifecycle:
    env: Env
    cli: Cli
    garbage: Garbage
    before: dict
    dry: CliResult
    after_dry: dict
    dry_sweep: CliResult
    after_dry_sweep: dict
    marked: CliResult
    after_mark: dict
    swept: CliResult
    after_sweep: dict
    full: CliResult
    after_full: dict


@pytest.fixture(scope="module")
def life(tmp_path_factory, spark, backend, request) -> Lifecycle:
    root = tmp_path_factory.mktemp("lifecycle")
    env = Env(root / "home", new_metastore(request, backend, root / "home"), root)
    cli = make_cli(env)
    g = build_garbage(env, cli)
    before = data(g.ns)
    dry = cli("gc", "run", REPO, "--dry-run", "--curve", "1d,7d,P30D,40d", "--json")
    after_dry = data(g.ns)
    dry_sweep = cli("gc", "sweep", REPO, dry.json()["run_id"], "--json", ok=False)
    after_dry_sweep = data(g.ns)
    marked = cli("gc", "run", REPO, "--mark-only", "--json")
    after_mark = data(g.ns)
    swept = cli("gc", "sweep", REPO, marked.json()["run_id"], "--json")
    after_sweep = data(g.ns)
    g.upload(env.lake(), "D3", "draft", b"draft three", utcnow() - timedelta(days=3))  # D2 becomes garbage
    full = cli("gc", "run", REPO, "--json")
    return Lifecycle(
        env,
        cli,
        g,
        before,
        dry,
        after_dry,
        dry_sweep,
        after_dry_sweep,
        marked,
        after_mark,
        swept,
        after_sweep,
        full,
        data(g.ns),
    )


def test_run_json_prints_exactly_one_summary_document(life):
    doc = json.loads(life.full.stdout)  # the whole of stdout is one JSON document
    assert isinstance(doc, dict) and set(doc) >= SUMMARY_KEYS
    assert doc["repository"] == "repo"
    assert (doc["state"], doc["dry_run"], doc["error"]) == ("swept", False, None)
    assert doc["mode"] in ("clean", "incremental")
    assert (doc["num_candidates"], doc["num_deleted"], doc["bytes_deleted"]) == (1, 1, life.garbage.sizes["D2"])
    started, finished = datetime.fromisoformat(doc["started_at"]), datetime.fromisoformat(doc["finished_at"])
    assert started <= finished
    assert datetime.fromisoformat(doc["cutoff_time"]) <= started


def test_full_run_deletes_its_candidates(life):
    assert set(life.after_sweep) - set(life.after_full) == {life.garbage.keys["D2"]}
    assert life.cli("fs", "cat", f"{REPO}/main/draft").stdout == "draft three"


def test_dry_run_marks_and_reports_but_deletes_nothing(life):
    doc = life.dry.json()
    assert (doc["state"], doc["dry_run"], doc["num_candidates"], doc["num_deleted"]) == ("marked", True, 2, 0)
    assert life.after_dry == life.before


def test_dry_run_cannot_be_swept(life):
    one_error(life.dry_sweep, "dry run", json_cmd=True)
    assert life.after_dry_sweep == life.before
    shown = life.cli("gc", "show", REPO, life.dry.json()["run_id"], "--json").json()
    assert (shown["state"], shown["num_deleted"]) == ("marked", 0)


def test_mark_only_stops_at_marked_and_deletes_nothing(life):
    doc = life.marked.json()
    assert (doc["state"], doc["dry_run"], doc["num_candidates"], doc["num_deleted"]) == ("marked", False, 2, 0)
    assert life.after_mark == life.before


def test_sweep_deletes_the_marked_candidates(life):
    doc, g = life.swept.json(), life.garbage
    assert doc["run_id"] == life.marked.json()["run_id"]
    assert (doc["state"], doc["num_deleted"], doc["bytes_deleted"], doc["error"]) == (
        "swept",
        2,
        g.sizes["A1"] + g.sizes["D1"],
        None,
    )
    assert set(life.before) - set(life.after_sweep) == {g.keys["A1"], g.keys["D1"]}
    one_error(life.cli("fs", "cat", f"{REPO}/{g.commits['c1']}/a", ok=False), "gone (410)")
    assert life.cli("fs", "cat", f"{REPO}/{g.commits['c1']}/keep").stdout == "kept forever"


def test_sweeping_a_swept_run_again_is_refused(life):
    before = snapshot(life.garbage.ns)
    one_error(life.cli("gc", "sweep", REPO, life.marked.json()["run_id"], "--json", ok=False), json_cmd=True)
    assert snapshot(life.garbage.ns) == before


def test_sweeping_an_unknown_run_is_refused(life):
    before = snapshot(life.garbage.ns)
    one_error(life.cli("gc", "sweep", REPO, "0000000000000-nosuch", "--json", ok=False), "not found", json_cmd=True)
    assert snapshot(life.garbage.ns) == before


def test_show_and_candidates_of_an_unknown_run_are_refused(life):
    for command in ("show", "candidates"):
        one_error(life.cli("gc", command, REPO, "0000000000000-nosuch", "--json", ok=False), "not found", json_cmd=True)


def test_gc_commands_refuse_unknown_repositories_and_uris_with_a_ref(life):
    for args in (("run", "lakegc://nosuch"), ("runs", "lakegc://nosuch"), ("run", f"{REPO}/main")):
        one_error(life.cli("gc", *args, "--json", ok=False), json_cmd=True)


def test_runs_json_lists_every_run_newest_first(life):
    runs = life.cli("gc", "runs", REPO, "--json").json()
    assert [r["run_id"] for r in runs] == [
        life.full.json()["run_id"],
        life.marked.json()["run_id"],
        life.dry.json()["run_id"],
    ]
    assert [r["state"] for r in runs] == ["swept", "swept", "marked"]
    started = [datetime.fromisoformat(r["started_at"]) for r in runs]
    assert started == sorted(started, reverse=True)
    assert all(set(r) >= SUMMARY_KEYS for r in runs)


def test_show_json_equals_the_run_summary(life):
    for printed in (life.dry, life.swept, life.full):
        doc = printed.json()
        assert life.cli("gc", "show", REPO, doc["run_id"], "--json").json() == doc


def test_summary_json_in_the_namespace_equals_show(life):
    for printed in (life.dry, life.swept, life.full):
        run_id = printed.json()["run_id"]
        path = life.garbage.ns / "_lakegc" / "gc" / run_id / "summary.json"
        assert json.loads(path.read_text()) == life.cli("gc", "show", REPO, run_id, "--json").json()


def report_of(life: Lifecycle, run_id: str) -> Path:
    """Where `gc show --html` says the run's report is."""
    uri = life.cli("gc", "show", REPO, run_id, "--html").stdout.strip()
    assert uri.startswith("file://"), uri
    return Path(unquote(urlparse(uri).path))


def test_every_run_writes_a_report_beside_its_summary(life):
    for printed in (life.dry, life.swept, life.full):
        doc = printed.json()
        path = report_of(life, doc["run_id"])
        assert path == life.garbage.ns / "_lakegc" / "gc" / doc["run_id"] / "report.html"
        page = path.read_text()
        assert f"GC run {doc['run_id']} · repo" in page and f'<span class="state {doc["state"]}">' in page
        assert "min-age cutoff (1d)" in page  # the default 24h, drawn on the age histogram
    dry = report_of(life, life.dry.json()["run_id"]).read_text()
    assert "would be reclaimed by 2 candidates (nothing deleted yet)" in dry
    swept = life.swept.json()
    page = report_of(life, swept["run_id"]).read_text()
    assert f"reclaimed: {swept['num_deleted']:,} objects deleted" in page
    assert "<td>expired</td><td class=n>1</td>" in page and "<td>uncommitted</td><td class=n>1</td>" in page


def test_run_records_object_ages_and_candidate_slice_ages(life):
    """A1 and K were modified 30 days ago, A2 20, D1 and D2 3: the histogram's buckets; both
    candidates lie in slices opened during the test (age 0)."""
    doc = life.cli("gc", "show", REPO, life.marked.json()["run_id"], "--json").json()
    assert [(b["label"], b["count"]) for b in doc["object_ages"]] == [("2-7d", 2), ("14-21d", 1), ("30-60d", 2)]
    assert sum(b["bytes"] for b in doc["object_ages"]) == sum(
        life.garbage.sizes[n] for n in ("A1", "K", "A2", "D1", "D2")
    )
    g = life.garbage
    assert [(b["label"], b["reason"], b["count"], b["bytes"]) for b in doc["candidate_ages"]] == [
        ("0-1d", "expired", 1, g.sizes["A1"]),
        ("0-1d", "uncommitted", 1, g.sizes["D1"]),
    ]


def test_report_renders_in_headless_chromium(life, tmp_path):
    """The report is opened by a real browser (Debian's chromium): its DOM has the sections and
    charts, and a screenshot of it is not blank."""
    dom = render_in_chromium(report_of(life, life.swept.json()["run_id"]), tmp_path)
    for section in ("Time per phase", "Candidates by reason", "Candidates by slice age", "Ages of the listed objects"):
        assert f"<h2>{section}</h2>" in dom
    assert dom.count("<svg") == 3 and "min-age cutoff" in dom


def test_the_report_names_what_holds_the_bytes_and_draws_the_curve(life, tmp_path):
    """The dry run (with --curve) in a real browser: the prefixes, branches and commits that hold
    its candidates, and the retention curve, table and chart."""
    doc = life.dry.json()
    dom = render_in_chromium(report_of(life, doc["run_id"]), tmp_path)
    for section in (
        "Top prefixes (path folders) by candidate bytes",
        "Top branches by candidate bytes",
        "Commits whose expiry freed the most",
        "Retention curve: what a run would collect",
    ):
        assert f"<h2>{section}</h2>" in dom, section
    g = life.garbage
    assert doc["top"]["commits"] == [
        {"name": g.commits["c1"], "candidates": 1, "bytes": g.sizes["A1"], "branch": "main",
         "created": doc["top"]["commits"][0]["created"]}
    ]  # fmt: skip
    assert [(r["name"], r["candidates"]) for r in doc["top"]["prefixes"]] == [("(root)", 1), ("(uncommitted)", 1)]
    assert g.commits["c1"] in dom and "(uncommitted)" in dom
    assert 'aria-label="retention curve"' in dom and dom.count("<svg") == 4
    curve = [(p["retention"], p["num_candidates"]) for p in doc["retention_curve"]]
    assert curve == [("1d", 2), ("7d", 2), ("P30D", 1), ("40d", 1)]  # A1's commit lapsed 20 days ago; D1 always


def test_candidates_are_named_and_filtered(life):
    g, run_id = life.garbage, life.dry.json()["run_id"]
    rows = life.cli("gc", "candidates", REPO, run_id, "--json").json()
    named = {r["address"]: (r["path"], r["commit"], r["branch"]) for r in rows}
    assert named == {g.keys["A1"]: ("a", g.commits["c1"], "main"), g.keys["D1"]: (None, None, None)}
    only = life.cli("gc", "candidates", REPO, run_id, "--reason", "uncommitted", "--json").json()
    assert [r["address"] for r in only] == [g.keys["D1"]]
    assert [r["address"] for r in life.cli("gc", "candidates", REPO, run_id, "--prefix", "a", "--json").json()] == [
        g.keys["A1"]
    ]
    assert life.cli("gc", "candidates", REPO, run_id, "--prefix", "b", "--json").json() == []
    assert [r["address"] for r in life.cli("gc", "candidates", REPO, run_id, "--branch", "main", "--json").json()] == [
        g.keys["A1"]
    ]
    table = life.cli("gc", "candidates", REPO, run_id, "--reason", "expired").stdout.splitlines()
    assert table[0].split() == ["ADDRESS", "SIZE", "MTIME", "REASON", "PATH", "COMMIT", "BRANCH"]
    assert table[1].split()[3:] == ["expired", "a", g.commits["c1"][:12], "main"]
    one_error(life.cli("gc", "candidates", REPO, run_id, "--reason", "old", ok=False), "invalid reason 'old'")


def test_candidates_json_lists_address_size_mtime_and_reason(life):
    g = life.garbage
    rows = life.cli("gc", "candidates", REPO, life.marked.json()["run_id"], "--json").json()
    assert all(set(r) == {"address", "size", "mtime", "reason", "path", "commit", "branch"} for r in rows)
    assert sorted((r["address"], r["size"], r["reason"]) for r in rows) == sorted(
        [(g.keys["A1"], g.sizes["A1"], "expired"), (g.keys["D1"], g.sizes["D1"], "uncommitted")]
    )
    for r in rows:
        name = "A1" if r["address"] == g.keys["A1"] else "D1"
        assert isinstance(r["mtime"], int)  # integer Unix seconds, as every time in --json
        assert abs((datetime.fromtimestamp(r["mtime"], UTC) - g.mtimes[name]).total_seconds()) < 1
    dry_rows = life.cli("gc", "candidates", REPO, life.dry.json()["run_id"], "--json").json()
    assert sorted(r["address"] for r in dry_rows) == sorted(r["address"] for r in rows)


def _parquet_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of an output's parts (deleted/ has a folder per delete round)."""
    return [row for part in sorted(folder.rglob("*.parquet")) for row in pq.read_table(part).to_pylist()]


def test_run_outputs_are_summary_and_parquet_under_lakegc_gc_run_id(life):
    g = life.garbage
    run_dir = g.ns / "_lakegc" / "gc" / life.marked.json()["run_id"]
    assert (run_dir / "summary.json").is_file()
    marked = _parquet_rows(run_dir / "candidates")
    assert marked and all({"address", "size", "mtime", "reason"} <= set(r) for r in marked)
    assert sorted((r["address"], r["reason"]) for r in marked) == sorted(
        [(g.keys["A1"], "expired"), (g.keys["D1"], "uncommitted")]
    )
    deleted = _parquet_rows(run_dir / "deleted")
    assert sorted(r["address"] for r in deleted) == sorted([g.keys["A1"], g.keys["D1"]])
    assert all(r.get("deleted", True) for r in deleted)
    dry_dir = g.ns / "_lakegc" / "gc" / life.dry.json()["run_id"]
    assert (dry_dir / "summary.json").is_file() and len(_parquet_rows(dry_dir / "candidates")) == 2
    assert _parquet_rows(dry_dir / "deleted") == []


# -- a failed run -----------------------------------------------------------------------------------
def test_failed_run_is_recorded_deletes_nothing_and_a_rerun_converges(env, cli, spark):
    g = build_garbage(env, cli)
    ranges, aside = g.ns / "_lakegc" / "ranges", env.root / "ranges-aside"
    ranges.rename(aside)  # committed trees cannot be read any more
    before = data(g.ns)

    one_error(cli("gc", "run", REPO, "--json", ok=False), json_cmd=True)

    runs = cli("gc", "runs", REPO, "--json").json()
    assert len(runs) == 1 and runs[0]["state"] == "failed" and runs[0]["error"]
    assert runs[0]["num_deleted"] == 0
    summary = json.loads((g.ns / "_lakegc" / "gc" / runs[0]["run_id"] / "summary.json").read_text())
    assert (summary["state"], summary["error"]) == ("failed", runs[0]["error"])
    assert data(g.ns) == before
    assert not (g.ns / "_lakegc" / "gc" / runs[0]["run_id"] / "deleted").exists()

    aside.rename(ranges)
    rerun = cli("gc", "run", REPO, "--json").json()
    assert (rerun["state"], rerun["num_deleted"]) == ("swept", 2)
    assert set(before) - set(data(g.ns)) == {g.keys["A1"], g.keys["D1"]}


# -- rules: set-config, get-config, delete-config -----------------------------------------------------
def get_rules(cli: Cli) -> dict[str, Any]:
    return cli("gc", "get-config", REPO, "--json").json()


def test_set_config_from_a_file_and_get_config_json_round_trips(env, cli, repo_uri):
    rules = env.root / "rules.json"
    rules.write_text(json.dumps(RULES))
    cli("gc", "set-config", REPO, "-f", str(rules))
    assert get_rules(cli) == RULES


def test_set_config_reads_stdin_with_dash(cli, repo_uri):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    assert get_rules(cli) == RULES


def test_set_config_replaces_the_earlier_rules(cli, repo_uri):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    newer = {"default_retention_days": 3, "branches": []}
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(newer))
    assert get_rules(cli) == newer


def test_rules_may_name_branches_that_do_not_exist_yet_and_keep_zero_days(cli, repo_uri):
    rules = {"default_retention_days": 0, "branches": [{"branch_id": "future", "retention_days": 0}]}
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(rules))
    assert get_rules(cli) == rules


def test_get_config_table_shows_each_branch_and_its_days(cli, repo_uri):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    out = cli("gc", "get-config", REPO).stdout
    assert "main" in out and "28" in out and "dev" in out and "21" in out
    assert "quarantine_days" not in out
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({**RULES, "quarantine_days": 5}))
    shown = [line for line in cli("gc", "get-config", REPO).stdout.splitlines() if "quarantine_days" in line]
    assert len(shown) == 1 and shown[0].split()[-1] == "5"  # the table shows what --json shows


INVALID_RULES = [
    pytest.param("{", ("json",), id="not-json"),
    pytest.param("", (), id="empty"),
    pytest.param("[]", (), id="a-list"),
    pytest.param('{"default_retention_days": -1, "branches": []}', ("default_retention_days",), id="negative-default"),
    pytest.param(
        '{"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": -2}]}',
        ("retention_days",),
        id="negative-branch-days",
    ),
    pytest.param('{"branches": []}', ("default_retention_days",), id="missing-default"),
    pytest.param('{"default_retention_days": 7}', ("branches",), id="missing-branches"),
    pytest.param('{"default_retention_days": 1.5, "branches": []}', ("default_retention_days",), id="fractional-days"),
    pytest.param('{"default_retention_days": "7", "branches": []}', ("default_retention_days",), id="days-as-string"),
    pytest.param(
        '{"default_retention_days": 7, "branches": [{"retention_days": 2}]}', ("branch_id",), id="branch-without-id"
    ),
    pytest.param(
        '{"default_retention_days": 7, "branches": [{"branch_id": "main"}]}',
        ("retention_days",),
        id="branch-without-days",
    ),
    pytest.param('{"default_retention_days": 7, "branches": {"main": 3}}', ("branches",), id="branches-not-a-list"),
]


@pytest.mark.parametrize("text, needles", INVALID_RULES)
def test_set_config_refuses_invalid_rules_and_keeps_the_old_ones(cli, repo_uri, text, needles):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    one_error(cli("gc", "set-config", REPO, "-f", "-", input=text, ok=False), *needles)
    assert get_rules(cli) == RULES


def test_set_config_refuses_invalid_rules_from_a_file(env, cli, repo_uri):
    bad = env.root / "bad.json"
    bad.write_text('{"default_retention_days": -7, "branches": []}')
    one_error(cli("gc", "set-config", REPO, "-f", str(bad), ok=False), "default_retention_days")
    assert cli("gc", "get-config", REPO, "--json", ok=False).exit_code == 1  # still no rules


def test_set_config_refuses_a_missing_file(env, cli, repo_uri):
    one_error(cli("gc", "set-config", REPO, "-f", str(env.root / "nope.json"), ok=False))


def test_set_config_refuses_an_unknown_repository(cli, repo_uri):
    one_error(cli("gc", "set-config", "lakegc://nosuch", "-f", "-", input=json.dumps(RULES), ok=False), "not found")


def test_delete_config_removes_the_rules(cli, repo_uri):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    cli("gc", "delete-config", REPO)
    one_error(cli("gc", "get-config", REPO, "--json", ok=False), "no gc rules", json_cmd=True)
    one_error(cli("gc", "delete-config", "lakegc://nosuch", ok=False), "not found")


# -- as users run it: a separate process -------------------------------------------------------------
def test_gc_run_json_in_a_real_process_prints_one_document_and_deletes(env, cli, sh, spark):
    """Starts its own JVM (slow): the console script path, stdout holding only the JSON."""
    g = build_garbage(env, cli)
    before = data(g.ns)
    result = sh("gc", "run", REPO, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) >= SUMMARY_KEYS
    assert (doc["state"], doc["num_deleted"]) == ("swept", 2)
    assert set(before) - set(data(g.ns)) == {g.keys["A1"], g.keys["D1"]}
