"""Path rules through a real GC run: the rule of an entry's path decides, first match wins, a
branch HEAD's entries stay live whatever the rule, `--cutoff`s replace them, and a run with them is
clean (the randomized proof against the model is in test_gc_model_hypothesis.py). Several GC runs
each: in the second CI step (`slow`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from conftest import CliResult, Env, age_objects, one_error

from lakegc.timeutil import utcnow

pytestmark = pytest.mark.slow

REPO = "lakegc://repo"
RULES = {
    "default_retention_days": 40,
    "branches": [],
    "path_rules": [
        {"glob": "logs/keep/**", "retention_days": 365},  # first match: before logs/**
        {"glob": "logs/**", "retention_days": 10},
        {"glob": "**/*.tmp", "retention_days": 0},
    ],
}
Cli = Callable[..., CliResult]


def test_each_entry_is_kept_by_the_rule_of_its_path(env: Env, cli: Cli, put, spark) -> None:
    """main: c1 (60 days ago) <- c2 (30) <- c3 (5, HEAD). Under 40 days all three count; under
    `logs/**`'s 10 days c1 does not; under `*.tmp`'s 0 days only HEAD does."""
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    addresses: dict[str, str] = {}

    def commit(days: int, files: dict[str, str]) -> None:
        for path, version in files.items():
            addresses[f"{path}@{version}"] = put(f"{REPO}/main/{path}", version)["physical_address"]
        date = (utcnow() - timedelta(days=days)).isoformat()
        cli("commit", f"{REPO}/main", "-m", f"{days}", "--date", date)

    commit(60, {"logs/a": "v1", "logs/keep/k": "v1", "tables/x": "v1", "scratch/t.tmp": "v1", "x.tmp": "v1"})
    commit(30, {"logs/a": "v2", "logs/keep/k": "v2", "tables/x": "v2", "scratch/t.tmp": "v2"})
    commit(5, {"logs/b": "v1"})
    age_objects(ns, utcnow() - timedelta(days=2))

    dry = cli("gc", "run", REPO, "--dry-run", "--json").json()
    assert (dry["mode"], dry["mode_reason"]) == ("clean", "path rules: every run is clean")
    verdicts = {
        name: cli("gc", "explain", REPO, "--address", address, "--json").json()["verdict"]
        for name, address in addresses.items()
    }
    run = cli("gc", "run", REPO, "--json").json()
    deleted = {name for name, address in addresses.items() if not (ns / address.split("/ns/", 1)[1]).exists()}
    # logs/a@v1: only c1 holds it, expired under logs/**; scratch/t.tmp@v1 likewise under *.tmp;
    # scratch/t.tmp@v2 is in HEAD (unchanged since c2): live whatever the rule; x.tmp@v1 too.
    assert deleted == {"logs/a@v1", "scratch/t.tmp@v1"}
    assert run["num_deleted"] == 2 and run["state"] == "swept"
    assert {name for name, verdict in verdicts.items() if verdict == "collect"} == deleted  # explain agreed
    for path in ["logs/a", "logs/b", "logs/keep/k", "tables/x", "scratch/t.tmp", "x.tmp"]:
        cli("fs", "cat", f"{REPO}/main/{path}")  # HEAD reads whole
    first = cli("log", f"{REPO}/main", "--json").json()[-2]["id"]  # c1 (the last is the initial commit)
    assert cli("fs", "cat", f"{REPO}/{first}/tables/x").stdout == "v1"  # 40 days reach c1
    assert cli("fs", "cat", f"{REPO}/{first}/logs/keep/k").stdout == "v1"  # the first match: 365 days
    one_error(cli("fs", "cat", f"{REPO}/{first}/logs/a", ok=False), "gone (410)")

    again = cli("gc", "run", REPO, "--json").json()  # nothing more, and clean again
    assert (again["mode"], again["num_deleted"]) == ("clean", 0)
    # cutoffs given for a run replace the stored rules, path rules too: 100 days keep everything left
    assert cli("gc", "run", REPO, "--dry-run", "--default-cutoff", "100d", "--json").json()["num_candidates"] == 0


def test_a_sweep_after_the_path_rules_changed_keeps_what_the_new_rules_keep(env: Env, cli: Cli, put, spark) -> None:
    """Marked under `logs/**` = 10 days, swept after the rules dropped it (40 days for all): the
    old version of logs/a is live again under the rules the sweep runs with, and the sweep keeps it,
    though its commit counted as active at the mark (under the branch's own 40 days)."""
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    rules = {"default_retention_days": 40, "branches": [], "path_rules": [{"glob": "logs/**", "retention_days": 10}]}
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(rules))
    old = put(f"{REPO}/main/logs/a", "v1")["physical_address"]
    for days, version in ((60, "v1"), (30, "v2"), (5, "v3")):
        if version != "v1":
            put(f"{REPO}/main/logs/a", version)
        cli("commit", f"{REPO}/main", "-m", version, "--date", (utcnow() - timedelta(days=days)).isoformat())
    age_objects(ns, utcnow() - timedelta(days=2))
    marked = cli("gc", "run", REPO, "--mark-only", "--json").json()
    assert marked["num_candidates"] == 1
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({"default_retention_days": 40, "branches": []}))
    swept = cli("gc", "sweep", REPO, marked["run_id"], "--json").json()
    assert (swept["num_deleted"], swept["num_revived"]) == (0, 1)
    assert (ns / old.split("/ns/", 1)[1]).exists()
