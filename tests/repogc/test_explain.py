"""`lakegc gc explain`: the verdict on one object and every reason, with its evidence.

One repository with a known history (dates set by `commit --date`) is explained object by object:
retained and expired commits with their moments, tags, staging, copies, tokens, young objects,
dangling commits, path rules and HEAD protection, objects outside what GC lists, and an object a
run deleted. The randomized proof that explain agrees with a run, object for object, is in
test_gc_model_hypothesis.py; here each reason is pinned down, and explain is attacked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, Env, forget_tree_changes, one_error, snapshot

from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
RULES = {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 10}]}
Cli = Callable[..., CliResult]


def ago(days: float) -> datetime:
    return (utcnow() - timedelta(days=days)).replace(microsecond=0)


def explain(cli: Cli, *args: str, ok: bool = True) -> dict[str, Any]:
    return cli("gc", "explain", *args, "--min-age", "0s", "--json", ok=ok).json()


def kinds(found: dict[str, Any]) -> list[str]:
    return sorted(r["kind"] for r in found["reasons"])


def near(seconds: int | None, when: datetime, slack: timedelta = timedelta(minutes=5)) -> bool:
    """A time as --json gives every time: integer Unix seconds (as fs stat's mtime)."""
    assert seconds is None or isinstance(seconds, int)
    return seconds is not None and abs(datetime.fromtimestamp(seconds, UTC) - when) < slack


@pytest.fixture
def lake(env: Env, cli: Cli, put) -> dict[str, Any]:
    """main: c1 (30 days ago, a=v1) <- c2 (20 days ago, a=v2) <- c3 (5 days ago, b); rules: main 10
    days, default 7. So c1 lapsed when c2 was 10 days old (10 days ago), c2 stays retained until c3
    is 10 days old (5 days from now), c3 is HEAD."""
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    found: dict[str, Any] = {"ns": ns}
    found["a1"] = put(f"{REPO}/main/a", "v1")["physical_address"]
    found["c1"] = cli("commit", f"{REPO}/main", "-m", "c1", "--date", ago(30).isoformat(), "--json").json()["id"]
    found["a2"] = put(f"{REPO}/main/a", "v2")["physical_address"]
    found["c2"] = cli("commit", f"{REPO}/main", "-m", "c2", "--date", ago(20).isoformat(), "--json").json()["id"]
    found["b"] = put(f"{REPO}/main/b", "b")["physical_address"]
    found["c3"] = cli("commit", f"{REPO}/main", "-m", "c3", "--date", ago(5).isoformat(), "--json").json()["id"]
    return found


def key(address: str) -> str:
    return address.split("/ns/", 1)[1]


def test_an_expired_commit_is_named_with_when_it_lapsed(cli: Cli, lake: dict[str, Any]) -> None:
    found = explain(cli, REPO, "--address", lake["a1"])
    assert found["verdict"] == "collect" and found["deleted_by"] is None
    assert found["address"] == lake["a1"]
    [reason] = found["reasons"]
    assert reason["kind"] == "expired" and reason["commit"] == lake["c1"]
    assert reason["branch"] == "main" and reason["path"] == "a"
    assert near(reason["expired_at"], ago(20) + timedelta(days=10))  # c2 was made, then 10 days passed


def test_a_retained_commit_says_until_when_and_a_head_forever(cli: Cli, lake: dict[str, Any]) -> None:
    found = explain(cli, f"{REPO}/main/a")  # by path: the object main's `a` names now (v2)
    assert found["verdict"] == "keep" and found["address"] == lake["a2"]
    reasons = {r["commit"]: r for r in found["reasons"]}
    assert set(reasons) == {lake["c2"], lake["c3"]} and kinds(found) == ["commit", "commit"]
    assert reasons[lake["c3"]]["retained_until"] is None  # HEAD
    assert near(reasons[lake["c2"]]["retained_until"], ago(5) + timedelta(days=10))
    assert all(r["branch"] == "main" and r["path"] == "a" for r in reasons.values())


def test_a_tag_keeps_an_expired_commit(cli: Cli, lake: dict[str, Any]) -> None:
    cli("tag", "create", f"{REPO}/v1", f"{REPO}/{lake['c1']}")
    found = explain(cli, REPO, "--address", key(lake["a1"]))  # a namespace key works as well as the location
    assert found["verdict"] == "keep"
    assert found["reasons"] == [{"kind": "tag", "tag": "v1", "commit": lake["c1"], "path": "a"}]


def test_staged_young_token_and_copy_reasons(cli: Cli, lake: dict[str, Any], put) -> None:
    staged = put(f"{REPO}/main/s", "s")["physical_address"]
    found = cli("gc", "explain", f"{REPO}/main/s", "--json").json()  # default min-age: 24h
    assert found["verdict"] == "keep" and kinds(found) == ["staged", "young"]
    young = next(r for r in found["reasons"] if r["kind"] == "young")
    assert young["min_age"] == "1d" and near(young["mtime"], utcnow())
    assert explain(cli, REPO, "--address", staged)["reasons"] == [{"kind": "staged", "branch": "main", "path": "s"}]

    claim = cli("fs", "get-address", f"{REPO}/main/t", "--json").json()
    Path(claim["physical_address"].removeprefix("file://")).write_bytes(b"direct")
    found = explain(cli, REPO, "--address", claim["physical_address"])
    assert found["verdict"] == "keep" and kinds(found) == ["token"]
    assert found["reasons"][0]["branch"] == "main" and found["reasons"][0]["path"] == "t"
    assert near(
        found["reasons"][0]["expires_at"], datetime.fromtimestamp(claim["expires_at"], UTC), timedelta(seconds=2)
    )

    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    cli("fs", "cp", f"{REPO}/main/s", f"{REPO}/dev/s-copy")
    cli("branch", "reset", f"{REPO}/dev", "--yes")
    cli("branch", "reset", f"{REPO}/main", "--yes")
    found = explain(cli, REPO, "--address", staged)  # only the copy record holds it now (for a day)
    assert found["verdict"] == "keep" and kinds(found) == ["copy"] and near(found["reasons"][0]["copied_at"], utcnow())


def test_reset_staging_is_unreferenced(cli: Cli, lake: dict[str, Any], put) -> None:
    dropped = put(f"{REPO}/main/tmp", "tmp")["physical_address"]
    cli("branch", "reset", f"{REPO}/main", "--yes")
    assert explain(cli, REPO, "--address", dropped)["reasons"] == [{"kind": "unreferenced"}]


def test_a_dangling_commit_has_no_branch_and_the_default_retention(cli: Cli, lake: dict[str, Any], put) -> None:
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    d = put(f"{REPO}/dev/d", "d")["physical_address"]
    commit = cli("commit", f"{REPO}/dev", "-m", "d", "--date", ago(3).isoformat(), "--json").json()["id"]
    cli("branch", "delete", f"{REPO}/dev", "--yes")
    found = explain(cli, REPO, "--address", d)  # a leaf made 3 days ago, default retention 7 days
    assert found["verdict"] == "keep"
    assert found["reasons"] == [
        {
            "kind": "commit",
            "commit": commit,
            "branch": None,
            "path": "d",
            "retained_until": found["reasons"][0]["retained_until"],
        }
    ]
    assert near(found["reasons"][0]["retained_until"], ago(3) + timedelta(days=7))
    found = explain(cli, REPO, "--address", d, "--default-cutoff", "2d")  # the same options as `gc run`
    assert found["verdict"] == "collect" and found["reasons"][0]["branch"] is None
    assert near(found["reasons"][0]["expired_at"], ago(3) + timedelta(days=2))


def test_path_rules_name_the_rule_and_spare_the_head(cli: Cli, lake: dict[str, Any], put) -> None:
    rules = {**RULES, "path_rules": [{"glob": "a", "retention_days": 30}, {"glob": "*", "retention_days": 0}]}
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(rules))
    found = explain(cli, REPO, "--address", lake["a1"])  # `a`: 30 days reach back to c1 (HEAD until 20 days ago)
    assert found["verdict"] == "keep"
    assert [(r["commit"], r["rule"]) for r in found["reasons"]] == [(lake["c1"], "a")]
    found = explain(cli, REPO, "--address", lake["b"])  # `*` keeps 0 days: only HEAD's entries stay live
    assert found["verdict"] == "keep"
    assert [(r["commit"], r["retained_until"], r["rule"]) for r in found["reasons"]] == [(lake["c3"], None, "*")]
    cli("fs", "rm", f"{REPO}/main/b")
    cli("commit", f"{REPO}/main", "-m", "rm b", "--date", ago(1).isoformat())
    found = explain(cli, REPO, "--address", lake["b"])  # no longer in HEAD: nothing keeps it for 0 days
    assert found["verdict"] == "collect"
    assert {(r["commit"], r["rule"]) for r in found["reasons"]} == {(lake["c3"], "*")}


def test_outside_what_gc_lists(env: Env, cli: Cli, lake: dict[str, Any], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not ours")
    (lake["ns"] / "data" / "loose").write_text("a file in data/ but in no slice")
    for address, why in [
        (str(elsewhere), "namespace"),
        (elsewhere.as_uri(), "namespace"),
        ("_lakegc/repository.json", "metadata"),
        ("data/loose", "data/<slice>/"),
    ]:
        found = explain(cli, REPO, "--address", address)
        assert found["verdict"] == "outside", address
        assert why in found["reasons"][0]["why"], found


def test_odd_paths(cli: Cli, lake: dict[str, Any], put) -> None:
    path = "odd dir/ü ✓ #1?.txt"
    address = put(f"{REPO}/main/{path}", "odd")["physical_address"]
    cli("commit", f"{REPO}/main", "-m", "odd")
    found = explain(cli, f"{REPO}/main/{path}")
    assert found["address"] == address and found["verdict"] == "keep"
    assert {r["path"] for r in found["reasons"]} == {path}


def test_through_a_symlinked_alias_of_the_namespace(cli: Cli, lake: dict[str, Any], tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(lake["ns"])
    found = explain(cli, REPO, "--address", str(alias / key(lake["a1"])))
    assert found["verdict"] == "collect" and found["reasons"][0]["commit"] == lake["c1"]


def test_deleted_names_the_run(cli: Cli, lake: dict[str, Any], spark) -> None:
    run = cli("gc", "run", REPO, "--min-age", "0s", "--json").json()
    assert run["num_deleted"] == 1
    found = explain(cli, REPO, "--address", lake["a1"])
    assert (found["verdict"], found["deleted_by"], found["reasons"]) == ("deleted", run["run_id"], [])
    assert cli("gc", "explain", REPO, "--address", lake["a1"]).stdout.startswith(f"DELETED by run {run['run_id']}")


def test_explain_writes_nothing_and_records_no_run(cli: Cli, lake: dict[str, Any]) -> None:
    before = snapshot(lake["ns"])
    for args in ([f"{REPO}/main/a"], [REPO, "--address", lake["a1"]], [REPO, "--address", "/etc/hosts"]):
        explain(cli, *args)
    assert snapshot(lake["ns"]) == before
    assert cli("gc", "runs", REPO, "--json").json() == []


def test_plain_output_is_a_verdict_line_and_a_table(cli: Cli, lake: dict[str, Any]) -> None:
    out = cli("gc", "explain", f"{REPO}/main/a", "--min-age", "0s").stdout
    lines = out.splitlines()
    assert lines[0] == f"KEEP  {lake['a2']}"
    assert lines[1].split() == ["REASON", "COMMIT", "REF", "PATH", "UNTIL", "/", "SINCE", "DETAIL"]
    assert any(line.startswith("commit") and lake["c3"][:12] in line and "main" in line for line in lines)
    assert lines[-1].startswith("policy: rules ")


def test_bad_input_is_one_clear_line(cli: Cli, lake: dict[str, Any]) -> None:
    cases = [
        (["gc", "explain", REPO], "expected lakegc://REPO/REF/PATH"),
        (["gc", "explain", f"{REPO}/main/a", "--address", "data/x"], "with --address, expected lakegc://REPO"),
        (["gc", "explain", REPO, "--address", "../etc/passwd"], "invalid address"),
        (["gc", "explain", REPO, "--address", ""], "invalid address"),
        (["gc", "explain", REPO, "--address", "file:///tmp/../etc/passwd"], "'..' are not allowed"),
        (["gc", "explain", REPO, "--address", "file://host/x"], "file:///absolute/path"),
        (["gc", "explain", f"{REPO}/main/nope"], "not found"),
        (["gc", "explain", f"{REPO}/nobranch/a"], "nobranch"),
        (["gc", "explain", "lakegc://nothere/main/a"], "nothere"),
        (["gc", "explain", REPO, "--address", "data/1/none"], "no object"),
        (["gc", "explain", f"{REPO}/main/a", "--min-age", "-1d"], "invalid duration"),
        (["gc", "explain", f"{REPO}/main/a", "--cutoff", "main"], "cutoff"),
        (["gc", "explain", f"{REPO}/main/a", "--default-cutoff", "soon"], "cutoff"),
    ]
    for args, needle in cases:
        one_error(cli(*args, "--json", ok=False), needle, json_cmd=True)


def test_a_tampered_range_stops_the_run_and_explain_says_what_the_records_say(cli: Cli, lake: dict[str, Any]) -> None:
    """explain looks the object up in the metastore's records and reads no tree file; the run reads
    and verifies every tree, so a damaged one stops it before it deletes anything."""
    ranges = sorted((lake["ns"] / "_lakegc" / "ranges").iterdir())
    ranges[0].write_bytes(b"not parquet")
    assert explain(cli, REPO, "--address", lake["a1"])["verdict"] == "collect"
    one_error(cli("gc", "run", REPO, "--min-age", "0s", ok=False), "range")
    assert (lake["ns"] / key(lake["a1"])).exists()


def test_commits_without_recorded_changes_are_explained_from_their_trees(
    cli: Cli, env: Env, lake: dict[str, Any]
) -> None:
    """Commits made before schema v5 have no recorded tree changes: explain reads every tree then,
    with the same answers, and fails on a damaged tree as the run would."""
    addresses = (lake["a1"], lake["a2"], lake["b"])
    recorded = [explain(cli, REPO, "--address", a) for a in addresses]
    forget_tree_changes(env)
    from_trees = [explain(cli, REPO, "--address", a) for a in addresses]
    assert [(e["verdict"], e["reasons"]) for e in from_trees] == [(e["verdict"], e["reasons"]) for e in recorded]
    assert [e["verdict"] for e in recorded] == ["collect", "keep", "keep"]
    ranges = sorted((lake["ns"] / "_lakegc" / "ranges").iterdir())
    ranges[0].write_bytes(b"not parquet")
    one_error(cli("gc", "explain", REPO, "--address", lake["a1"], ok=False), "range")


def test_a_namespace_that_is_not_the_repositorys_fails_as_the_run_would(cli: Cli, lake: dict[str, Any]) -> None:
    marker = lake["ns"] / "_lakegc" / "repository.json"
    marker.write_text(json.dumps({"repository": "someone-else"}))
    one_error(cli("gc", "explain", f"{REPO}/main/a", ok=False), "belongs to repository 'someone-else'")
    os.remove(marker)
    one_error(cli("gc", "explain", f"{REPO}/main/a", ok=False), "not a lakegc namespace")
