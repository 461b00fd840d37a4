"""GC end to end, through the real CLI on real Spark, SQLite and folders (docs/design.md).

Each scenario builds a history with backdated commits (`commit --date`) and objects aged to match,
runs `lakegc gc run` once, and then each test checks one promise against what the run left behind:
collected objects answer `gone (410)` at the commit where they were last visible, everything else
still reads back, and nothing outside the namespace, under `_lakegc/` or younger than min-age moves.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import sqlalchemy as sa
from conftest import CliResult, Env, make_cli, new_metastore, one_error, snapshot

from lakegc.metastore import schema as t
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
Cli = Callable[..., CliResult]


# -- helpers -------------------------------------------------------------------------------------
def module_env(
    tmp_path_factory: pytest.TempPathFactory, name: str, request: pytest.FixtureRequest, backend: str
) -> Env:
    """An Env for a module-scoped fixture: `request` and `backend` are that fixture's own."""
    root = tmp_path_factory.mktemp(name)
    return Env(root / "home", new_metastore(request, backend, root / "home"), root)


def local(uri: str) -> Path:
    assert uri.startswith("file:///"), uri
    return Path(unquote(urlparse(uri).path))


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def age(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def data_keys(ns: Path) -> set[str]:
    return {k for k in snapshot(ns) if k.startswith("data/")}


def gc_run(cli: Cli, *args: str, repo: str = REPO) -> dict[str, Any]:
    return cli("gc", "run", repo, "--json", *args).json()


def candidates(cli: Cli, run_id: str, repo: str = REPO) -> list[dict[str, Any]]:
    return cli("gc", "candidates", repo, run_id, "--json").json()


def cat(cli: Cli, ref: str, path: str) -> str:
    return cli("fs", "cat", f"{REPO}/{ref}/{path}").stdout


def assert_gone(cli: Cli, ref: str, path: str) -> None:
    one_error(cli("fs", "cat", f"{REPO}/{ref}/{path}", ok=False), "gone (410)")


def runs_recorded(env: Env) -> int:
    with sa.create_engine(env.metastore).connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(t.gc_runs)).scalar()


@dataclass
class Obj:
    """One physical object of a scenario: where it lives, what it holds, and where to read it."""

    key: str  # namespace key, data/<slice>/<id>
    content: str
    ref: str  # a ref (commit id, branch, tag) where the object is (or was last) visible
    path: str


@dataclass
class History:
    """Builds a repository through the CLI: uploads aged to the time they stand for, backdated commits."""

    cli: Cli
    ns: Path
    objects: dict[str, Obj] = field(default_factory=dict)
    commits: dict[str, str] = field(default_factory=dict)  # label -> commit id
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> path -> content
    _pending: dict[str, list[str]] = field(default_factory=dict)  # branch -> names staged

    def put(self, name: str, branch: str, path: str, content: str, when: datetime | None) -> Obj:
        """Upload; `when` sets the object's mtime (None: leave it brand new)."""
        doc = self.cli("fs", "upload", f"{REPO}/{branch}/{path}", "--source", "-", "--json", input=content).json()
        key = local(doc["physical_address"]).relative_to(self.ns).as_posix()
        if when is not None:
            age(self.ns / key, when)
        obj = self.objects[name] = Obj(key, content, branch, path)
        self._pending.setdefault(branch, []).append(name)
        return obj

    def rm(self, branch: str, path: str) -> None:
        self.cli("fs", "rm", f"{REPO}/{branch}/{path}")

    def commit(self, label: str, branch: str, when: datetime) -> str:
        commit_id = self.cli("commit", f"{REPO}/{branch}", "-m", label, "--date", iso(when), "--json").json()["id"]
        return self._committed(label, branch, commit_id)

    def merge(self, label: str, source: str, dest: str, when: datetime) -> str:
        commit_id = self.cli(
            "merge", f"{REPO}/{source}", f"{REPO}/{dest}", "-m", label, "--date", iso(when), "--json"
        ).json()["id"]
        return self._committed(label, dest, commit_id)

    def _committed(self, label: str, branch: str, commit_id: str) -> str:
        self.commits[label] = commit_id
        for name in self._pending.pop(branch, []):
            self.objects[name].ref = commit_id
        self.trees[label] = {
            e["path"]: cat(self.cli, commit_id, e["path"])
            for e in self.cli("fs", "ls", f"{REPO}/{commit_id}/", "--json").json()
        }
        return commit_id


# -- lakeFS's worked example of retention rules ------------------------------------------------------------------
SEED_RULES = {
    "default_retention_days": 21,
    "branches": [{"branch_id": "main", "retention_days": 21}, {"branch_id": "dev", "retention_days": 7}],
}
SEED_COLLECTED = {"E1", "L", "T1", "A1", "A2", "X1"}
SEED_ACTIVE_MAIN = ["2022-03-09", "2022-03-12", "2022-03-18", "merge dev", "2022-03-26"]
SEED_EXPIRED = ["2022-02-27", "2022-03-01", "d: 2022-03-14", "d: 2022-03-16", "d: 2022-03-20"]


@dataclass
class SeedRun:
    history: History
    before: set[str]
    after: set[str]
    summary: dict[str, Any]
    candidates: list[dict[str, Any]]


@pytest.fixture(scope="module")
def worked_example(tmp_path_factory, spark, request, backend) -> SeedRun:
    """Seed 000's diagram, GC day (2022-03-31) shifted to today; main keeps 21 days, dev 7."""
    env = module_env(tmp_path_factory, "worked_example", request, backend)
    cli = make_cli(env)
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(SEED_RULES))
    today = utcnow()

    def day(example_date: str) -> datetime:
        return today - timedelta(days=(datetime(2022, 3, 31) - datetime.fromisoformat(example_date)).days)

    h = History(cli, ns)

    def commit(branch: str, label: str, files: dict[str, tuple[str, str] | None]) -> None:
        when = day(label.removeprefix("d: "))
        for path, change in files.items():
            if change is None:
                h.rm(branch, path)
            else:
                h.put(change[0], branch, path, change[1], when)
        h.commit(label, branch, when)

    commit(
        "main",
        "2022-02-27",
        {"events/part-0": ("E1", "events v1"), "users/all": ("U1", "users v1"), "logs/old": ("L", "old logs")},
    )
    commit("main", "2022-03-01", {"events/part-0": ("E2", "events v2"), "logs/old": None, "tmp/t": ("T1", "tmp v1")})
    commit("main", "2022-03-09", {"events/part-1": ("P1", "more events"), "tmp/t": ("T2", "tmp v2")})
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    commit("main", "2022-03-12", {"users/all": ("U2", "users v2")})
    commit(
        "dev", "d: 2022-03-14", {"experiments/a": ("A1", "experiment a v1"), "experiments/x": ("X1", "experiment x v1")}
    )
    commit("dev", "d: 2022-03-16", {"experiments/a": ("A2", "experiment a v2")})
    commit("main", "2022-03-18", {"events/part-2": ("P2", "even more events")})
    commit(
        "dev",
        "d: 2022-03-20",
        {"experiments/a": None, "experiments/x": ("X2", "experiment x v2"), "experiments/b": ("B", "experiment b")},
    )
    commit("dev", "d: 2022-03-23", {"experiments/c": ("C", "experiment c")})
    h.merge("merge dev", "dev", "main", day("2022-03-25"))
    commit("main", "2022-03-26", {"users/all": ("U3", "users v3")})

    before = data_keys(ns)
    summary = gc_run(cli)
    return SeedRun(h, before, data_keys(ns), summary, candidates(cli, summary["run_id"]))


def test_worked_example_deletes_exactly_the_objects_no_retained_commit_shows(worked_example):
    objects = worked_example.history.objects
    assert worked_example.before - worked_example.after == {objects[n].key for n in SEED_COLLECTED}
    assert worked_example.summary["state"] == "swept"
    assert worked_example.summary["num_deleted"] == len(SEED_COLLECTED)
    assert worked_example.summary["bytes_deleted"] == sum(len(objects[n].content) for n in SEED_COLLECTED)


def test_worked_example_collected_objects_answer_gone_where_they_were_last_visible(worked_example):
    h = worked_example.history
    last_visible = {
        "E1": "2022-02-27",
        "L": "2022-02-27",
        "T1": "2022-03-01",
        "A1": "d: 2022-03-14",
        "A2": "d: 2022-03-16",
        "X1": "d: 2022-03-16",
    }
    assert set(last_visible) == SEED_COLLECTED
    for name, label in last_visible.items():
        assert_gone(h.cli, h.commits[label], h.objects[name].path)


def test_worked_example_every_object_visible_from_main_0309_onwards_stays(worked_example):
    h = worked_example.history
    for label in SEED_ACTIVE_MAIN:
        for path, content in h.trees[label].items():
            assert cat(h.cli, h.commits[label], path) == content, (label, path)


def test_worked_example_branch_heads_read_back_completely(worked_example):
    h = worked_example.history
    for branch, label in (("main", "2022-03-26"), ("dev", "d: 2022-03-23")):
        assert {e["path"] for e in h.cli("fs", "ls", f"{REPO}/{branch}/", "--json").json()} == set(h.trees[label])
        for path, content in h.trees[label].items():
            assert cat(h.cli, branch, path) == content, (branch, path)


def test_worked_example_expired_commits_keep_their_entries_and_shared_objects(worked_example):
    """GC removes data, never commits or entries; an expired commit still reads what a retained
    commit shares with it (users v1 lives on in 2022-03-09, experiment x v2 in d: 2022-03-23)."""
    h = worked_example.history
    for label in SEED_EXPIRED:
        listed = {e["path"] for e in h.cli("fs", "ls", f"{REPO}/{h.commits[label]}/", "--json").json()}
        assert listed == set(h.trees[label])
    assert cat(h.cli, h.commits["2022-02-27"], "users/all") == "users v1"
    assert cat(h.cli, h.commits["d: 2022-03-20"], "experiments/x") == "experiment x v2"


def test_worked_example_candidates_are_the_collected_objects_as_expired(worked_example):
    objects = worked_example.history.objects
    assert sorted((c["address"], c["reason"]) for c in worked_example.candidates) == sorted(
        (objects[n].key, "expired") for n in SEED_COLLECTED
    )
    assert worked_example.summary["num_candidates"] == len(SEED_COLLECTED)


def test_worked_example_active_commits_are_main_since_0309_and_dev_head(worked_example):
    """§6.2: main's walk keeps 2022-03-09 (HEAD 21 days ago); dev keeps only its HEAD d: 2022-03-23."""
    assert worked_example.summary["active_commits"] == len(SEED_ACTIVE_MAIN) + 1
    assert worked_example.summary["expired_commits"] == len(SEED_EXPIRED) + 1  # + the repository's initial commit


# -- a mixed scenario: every kind of reference, every kind of garbage --------------------------------
MIXED_RULES = {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 7}]}
MIXED_COLLECTED = {
    "D1": "uncommitted",
    "SC0": "uncommitted",
    "SC1": "uncommitted",
    "AB0": "uncommitted",
    "AB1": "uncommitted",
    "TOKX": "uncommitted",
    "U1": "expired",
    "GO": "expired",
}


@dataclass
class MixedRun:
    env: Env
    history: History
    summary: dict[str, Any]
    candidates: list[dict[str, Any]]
    before: dict[str, tuple[int, int, str]]  # the namespace
    after: dict[str, tuple[int, int, str]]
    outside_before: dict[str, tuple[int, int, str]]  # everything next to the namespace
    outside_after: dict[str, tuple[int, int, str]]
    tokens: dict[str, dict[str, Any]]


def _outside(env: Env) -> dict[str, tuple[int, int, str]]:
    return {f"{d}/{k}": v for d in ("external", "ns-other") for k, v in snapshot(env.root / d).items()}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, spark, request, backend) -> MixedRun:
    env = module_env(tmp_path_factory, "mixed", request, backend)
    cli = make_cli(env)
    ns = env.namespace("ns")
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(MIXED_RULES))
    now = utcnow()

    def ago(days: float) -> datetime:
        return now - timedelta(days=days)

    h = History(cli, ns)
    tokens: dict[str, dict[str, Any]] = {}

    # A token that expires within a second: its object, written by the client and never linked, is garbage.
    tokens["TOKX"] = cli("fs", "get-address", f"{REPO}/main/direct/expired", "--ttl", "1s", "--json").json()
    # Out of the namespace: an import folder, and a sibling folder whose name shares the prefix `ns`.
    external, sibling = env.root / "external" / "x.csv", env.root / "ns-other" / "linked.csv"
    for path, content in (
        (external, "imported"),
        (sibling, "sibling linked"),
        (env.root / "ns-other" / "data" / "0000" / "obj", "sibling data"),
        (env.root / "ns-other" / "stray", "sibling stray"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        age(path, ago(40))

    # main: c-old (tagged) -> c-mid -> c-new -> c-recent -> c-head, retention 7 days
    cli("branch", "create", f"{REPO}/stale", "--source", f"{REPO}/main")  # from the empty initial commit
    h.put("ST", "stale", "stale/data", "stale head data", ago(25))
    h.commit("stale-head", "stale", ago(25))
    h.put("T1", "main", "tagged/data", "tagged v1", ago(30))
    h.commit("c-old", "main", ago(30))
    cli("tag", "create", f"{REPO}/v-old", f"{REPO}/{h.commits['c-old']}")
    h.put("U1", "main", "untagged/data", "untagged v1", ago(29))
    h.put("O1", "main", "old/restorable", "restorable", ago(29))
    for path, target in (("ext/linked", external), ("ext/sibling", sibling)):
        cli(
            "fs",
            "link",
            f"{REPO}/main/{path}",
            "--address",
            target.as_uri(),
            "--size",
            str(target.stat().st_size),
            "--checksum",
            "c0ffee",
        )
    h.commit("c-mid", "main", ago(29))
    h.put("T2", "main", "tagged/data", "tagged v2", ago(20))
    h.put("U2", "main", "untagged/data", "untagged v2", ago(20))
    for path in ("old/restorable", "ext/linked", "ext/sibling"):
        h.rm("main", path)
    h.commit("c-new", "main", ago(20))
    h.put("R1", "main", "recent/data", "recent v1", ago(3))
    h.commit("c-recent", "main", ago(3))
    h.put("R2", "main", "recent/data", "recent v2", ago(2))
    h.commit("c-head", "main", ago(2))

    # Deleted branches leave dangling commits: one within the default retention, one past it.
    for branch, name, days in (("gone-recent", "GR", 2), ("gone-old", "GO", 20)):
        cli("branch", "create", f"{REPO}/{branch}", "--source", f"{REPO}/main")
        h.put(name, branch, f"gone/{branch}", f"{branch} data", ago(days))
        h.commit(branch, branch, ago(days))
        cli("branch", "delete", f"{REPO}/{branch}", "--yes")

    # Uncommitted: live staging, an overwritten draft, young garbage, reset and deleted branches.
    h.put("L", "main", "staged/live", "live staged", ago(3))
    h.put("D1", "main", "staged/draft", "draft 1", ago(3))
    h.put("D2", "main", "staged/draft", "draft 2", ago(3))
    h.put("Y1", "main", "staged/young", "young 1", None)
    h.put("Y2", "main", "staged/young", "young 2", None)
    for branch, prefix, finish in (("scratch", "SC", "reset"), ("abandoned", "AB", "delete")):
        cli("branch", "create", f"{REPO}/{branch}", "--source", f"{REPO}/main")
        for i in range(2):
            h.put(f"{prefix}{i}", branch, f"tmp/{i}", f"{branch} {i}", ago(3))
        cli("branch", finish, f"{REPO}/{branch}", "--yes")

    # Shallow copies: of a staged object whose branch is then reset, and of an expired commit's object.
    cli("branch", "create", f"{REPO}/feature", "--source", f"{REPO}/main")
    h.put("F", "feature", "feature/src", "feature data", ago(3))
    cli("fs", "cp", f"{REPO}/feature/feature/src", f"{REPO}/main/copied/from-feature")
    cli("branch", "reset", f"{REPO}/feature", "--yes")
    cli("fs", "cp", f"{REPO}/{h.commits['c-mid']}/old/restorable", f"{REPO}/main/restored/old")

    # A copy whose staging was dropped at once: only the fresh copy record references the object.
    cli("branch", "create", f"{REPO}/copyrec", "--source", f"{REPO}/main")
    h.put("CR", "copyrec", "copy/src", "copied, then reset", ago(3))
    cli("fs", "cp", f"{REPO}/copyrec/copy/src", f"{REPO}/copyrec/copy/dst")
    cli("branch", "reset", f"{REPO}/copyrec", "--yes")

    # Tokens: a live one never linked, and one linked (staged); plus the expired one from the start.
    tokens["TOKL"] = cli("fs", "get-address", f"{REPO}/main/direct/live", "--json").json()
    tokens["TOKLINKED"] = cli("fs", "get-address", f"{REPO}/main/direct/linked", "--json").json()
    for name, doc in tokens.items():
        path = local(doc["physical_address"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"direct {name}")
        age(path, ago(3))
        h.objects[name] = Obj(path.relative_to(ns).as_posix(), f"direct {name}", "main", "")
    linked = tokens["TOKLINKED"]
    cli(
        "fs",
        "link",
        f"{REPO}/main/direct/linked",
        "--address",
        linked["physical_address"],
        "--token",
        linked["token"],
        "--size",
        str(len("direct TOKLINKED")),
        "--checksum",
        hashlib.md5(b"direct TOKLINKED").hexdigest(),
    )
    h.objects["TOKLINKED"].path = "direct/linked"

    # Files GC must leave alone (metadata, a folder it does not list) and one it must not (root stray).
    (ns / "_lakegc" / "notes").mkdir(parents=True)
    (ns / "_lakegc" / "notes" / "old.txt").write_text("operator notes")
    (ns / "other-dir").mkdir()
    (ns / "other-dir" / "x").write_text("not listed")
    (ns / "stray.bin").write_text("stray at the root")
    for path in [*(ns / "_lakegc").rglob("*"), ns / "other-dir" / "x", ns / "stray.bin"]:
        if path.is_file():
            age(path, ago(40))

    time.sleep(max(0.0, tokens["TOKX"]["expires_at"] + 1.1 - time.time()))
    before, outside_before = snapshot(ns), _outside(env)
    summary = gc_run(cli)
    return MixedRun(
        env, h, summary, candidates(cli, summary["run_id"]), before, snapshot(ns), outside_before, _outside(env), tokens
    )


def _deleted(m: MixedRun) -> set[str]:
    return set(m.before) - set(m.after)


def _kept(m: MixedRun, *names: str) -> None:
    keys = {name: m.history.objects[name].key for name in names}
    assert [n for n, k in keys.items() if k not in m.after] == [], "deleted"
    assert [n for n, k in keys.items() if m.after[k] != m.before[k]] == [], "changed"


def test_mixed_deletes_exactly_the_garbage_with_its_reason(mixed):
    objects = mixed.history.objects
    expected = {objects[n].key for n in MIXED_COLLECTED} | {"stray.bin"}
    assert _deleted(mixed) == expected
    assert sorted((c["address"], c["reason"]) for c in mixed.candidates) == sorted(
        [(objects[n].key, r) for n, r in MIXED_COLLECTED.items()] + [("stray.bin", "uncommitted")]
    )
    assert (mixed.summary["state"], mixed.summary["num_deleted"], mixed.summary["num_revived"]) == (
        "swept",
        len(expected),
        0,
    )


def test_staged_objects_are_kept_and_read_back(mixed):
    _kept(mixed, "L", "D2", "Y2", "TOKLINKED")
    cli = mixed.history.cli
    assert cat(cli, "main", "staged/live") == "live staged"
    assert cat(cli, "main", "staged/draft") == "draft 2"
    assert cat(cli, "main", "direct/linked") == "direct TOKLINKED"


def test_overwritten_staging_is_collected(mixed):
    assert mixed.history.objects["D1"].key in _deleted(mixed)


def test_reset_branch_leftovers_are_collected(mixed):
    assert {mixed.history.objects[n].key for n in ("SC0", "SC1")} <= _deleted(mixed)


def test_deleted_branch_staged_objects_are_collected(mixed):
    assert {mixed.history.objects[n].key for n in ("AB0", "AB1")} <= _deleted(mixed)


def test_shallow_copy_keeps_its_object_while_the_copy_is_staged(mixed):
    """The feature branch that uploaded F was reset, and c-mid (the only commit holding O1) expired:
    only the staged copies on main reference them now."""
    _kept(mixed, "F", "O1")
    cli = mixed.history.cli
    assert cat(cli, "main", "copied/from-feature") == "feature data"
    assert cat(cli, "main", "restored/old") == "restorable"
    assert cat(cli, mixed.history.commits["c-mid"], "old/restorable") == "restorable"


def test_fresh_copy_record_alone_keeps_its_object(mixed):
    """§8.1: the copy's branch was reset right after `fs cp`; the copy record still protects it
    (it closes the race between a shallow copy and GC's snapshot)."""
    _kept(mixed, "CR")


def test_token_address_written_but_not_linked_is_kept_while_the_token_is_live(mixed):
    _kept(mixed, "TOKL")


def test_token_address_is_collected_once_its_token_expired(mixed):
    assert mixed.history.objects["TOKX"].key in _deleted(mixed)


def test_objects_linked_from_outside_the_namespace_are_never_deleted(mixed):
    """ext/linked and ext/sibling were only in c-mid, which expired: unreferenced, yet outside."""
    assert mixed.outside_after == mixed.outside_before
    cli = mixed.history.cli
    assert cat(cli, mixed.history.commits["c-mid"], "ext/linked") == "imported"
    assert cat(cli, mixed.history.commits["c-mid"], "ext/sibling") == "sibling linked"


def test_sibling_folder_sharing_the_namespace_prefix_is_untouched(mixed):
    assert {k for k in mixed.outside_before if k.startswith("ns-other/")} == {
        "ns-other/linked.csv",
        "ns-other/data/0000/obj",
        "ns-other/stray",
    }
    assert mixed.outside_after == mixed.outside_before
    assert not any("ns-other" in c["address"] or c["address"].startswith(("/", "file:")) for c in mixed.candidates)


def test_tagged_old_commit_keeps_its_objects(mixed):
    """c-old is past retention but tagged: tagged v1 stays; untagged v1, only in c-mid, goes."""
    _kept(mixed, "T1")
    cli = mixed.history.cli
    assert cat(cli, "v-old", "tagged/data") == "tagged v1"
    assert cat(cli, mixed.history.commits["c-mid"], "tagged/data") == "tagged v1"
    assert_gone(cli, mixed.history.commits["c-mid"], "untagged/data")


def test_branch_head_older_than_its_retention_keeps_its_objects(mixed):
    _kept(mixed, "ST")
    assert cat(mixed.history.cli, "stale", "stale/data") == "stale head data"


def test_active_commit_below_head_keeps_its_objects(mixed):
    """c-recent is not HEAD, but it was HEAD within the last 7 days; c-new was HEAD 7 days ago."""
    _kept(mixed, "R1", "R2", "T2", "U2")
    cli, commits = mixed.history.cli, mixed.history.commits
    assert cat(cli, commits["c-recent"], "recent/data") == "recent v1"
    assert cat(cli, commits["c-new"], "untagged/data") == "untagged v2"


def test_dangling_commit_within_default_retention_stays_and_expired_one_goes(mixed):
    _kept(mixed, "GR")
    cli, commits = mixed.history.cli, mixed.history.commits
    assert cat(cli, commits["gone-recent"], "gone/gone-recent") == "gone-recent data"
    assert_gone(cli, commits["gone-old"], "gone/gone-old")


def test_objects_newer_than_min_age_are_never_candidates(mixed):
    _kept(mixed, "Y1")
    cutoff = datetime.fromisoformat(mixed.summary["cutoff_time"])
    assert mixed.summary["min_age_seconds"] == 24 * 3600
    assert mixed.candidates and all(datetime.fromtimestamp(c["mtime"], UTC) < cutoff for c in mixed.candidates)


def test_lakegc_metadata_is_never_deleted_or_changed(mixed):
    meta_before = {k: v for k, v in mixed.before.items() if k.startswith("_lakegc/")}
    assert "_lakegc/notes/old.txt" in meta_before and "_lakegc/repository.json" in meta_before
    assert any(k.startswith("_lakegc/ranges/") for k in meta_before)
    assert {k: mixed.after[k] for k in meta_before if k in mixed.after} == meta_before
    assert not any(c["address"].startswith("_lakegc/") for c in mixed.candidates)


def test_gc_lists_data_and_the_namespace_root_but_no_other_folder(mixed):
    """DESIGN §6.3: the listing is data/ by slice plus the root's own files, nothing else."""
    assert "stray.bin" in _deleted(mixed)
    assert mixed.after["other-dir/x"] == mixed.before["other-dir/x"]


# -- a committed shallow copy is no reference forever ------------------------------------------------
def test_committed_shallow_copy_is_collected_once_its_commit_expired(env, cli, repo_uri, spark):
    """DESIGN §5: copy records count as uncommitted references *until committed*. Both paths sharing
    the object were committed 30 days ago and deleted 20 days ago (main keeps 7 days), and the copy
    record itself is 30 days old: nothing references the object any more."""
    ns = env.namespace()
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(MIXED_RULES))
    h = History(cli, ns)
    then = utcnow() - timedelta(days=30)
    h.put("S", "main", "copied/src", "shared", then)
    h.put("P", "main", "plain", "not copied", then)
    cli("fs", "cp", f"{REPO}/main/copied/src", f"{REPO}/main/copied/dst")
    h.commit("c1", "main", then)
    for path in ("copied/src", "copied/dst", "plain"):
        h.rm("main", path)
    h.commit("c2", "main", then + timedelta(days=10))
    with sa.create_engine(env.metastore).begin() as conn:
        assert conn.execute(t.copy_records.update().values(created_at=then)).rowcount == 1

    summary = gc_run(cli)

    assert_gone(cli, h.commits["c1"], "plain")  # the commit did expire
    assert_gone(cli, h.commits["c1"], "copied/dst")
    assert summary["num_deleted"] == 2


# -- bad configuration or input fails before any deletion (§8.4) ------------------------------------
def _garbage_repo(env: Env, cli: Cli) -> History:
    """A repository where a good run deletes something: an expired commit's object and a draft."""
    ns = env.namespace()
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(MIXED_RULES))
    h = History(cli, ns)
    h.put("A1", "main", "a", "a v1", utcnow() - timedelta(days=30))
    h.commit("c1", "main", utcnow() - timedelta(days=30))
    h.put("A2", "main", "a", "a v2", utcnow() - timedelta(days=20))
    h.commit("c2", "main", utcnow() - timedelta(days=20))
    h.put("D1", "main", "draft", "draft 1", utcnow() - timedelta(days=3))
    h.put("D2", "main", "draft", "draft 2", utcnow() - timedelta(days=3))
    sibling = env.root / "ns-other"
    sibling.mkdir()
    (sibling / "old").write_text("sibling")
    age(sibling / "old", utcnow() - timedelta(days=40))
    return h


def test_garbage_repo_control_a_good_run_deletes_its_garbage(env, cli, repo_uri, spark):
    """The control for the failure table below: without a fault, the same repository loses 2 objects."""
    h = _garbage_repo(env, cli)
    summary = gc_run(cli)
    assert (summary["state"], summary["num_deleted"]) == ("swept", 2)
    assert_gone(cli, h.commits["c1"], "a")
    assert data_keys(env.namespace()) == {h.objects[n].key for n in ("A2", "D2")}


def _store_invalid_rules(env: Env, _ns: Path) -> list[str]:
    with sa.create_engine(env.metastore).begin() as conn:
        conn.execute(t.gc_rules.update().values(rules={"default_retention_days": -1, "branches": []}))
    return []


def _replace_marker(env: Env, ns: Path) -> list[str]:
    (ns / "_lakegc" / "repository.json").write_text(json.dumps({"repository": "other"}))
    return []


def _garble_marker(env: Env, ns: Path) -> list[str]:
    (ns / "_lakegc" / "repository.json").write_text("{not json")
    return []


def _delete_marker(env: Env, ns: Path) -> list[str]:
    (ns / "_lakegc" / "repository.json").unlink()
    return []


def _move_namespace(env: Env, ns: Path) -> list[str]:
    ns.rename(env.root / "ns-moved")
    return []


def _not_a_database(env: Env, _ns: Path) -> list[str]:
    bad = env.root / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    return ["--metastore", f"sqlite:///{bad}"]


FAULTS = [
    pytest.param(_store_invalid_rules, [], ("rules",), id="invalid-stored-rules"),
    pytest.param(None, ["--metastore", "bogus://nowhere"], ("metastore",), id="unknown-metastore-dialect"),
    pytest.param(_not_a_database, [], ("metastore",), id="metastore-not-a-database"),
    pytest.param(None, ["gc", "run", "lakegc://nope"], ("not found",), id="unknown-repository"),
    pytest.param(None, ["--cutoff", "main=forever"], ("forever",), id="unknown-cutoff-policy"),
    pytest.param(None, ["--default-cutoff", "sometimes"], ("sometimes",), id="unknown-default-cutoff"),
    pytest.param(None, ["--cutoff", "(main=1"], ("regex",), id="cutoff-with-bad-regex"),
    pytest.param(None, ["--min-age", "soon"], ("duration",), id="unparsable-min-age"),
    pytest.param(_replace_marker, [], ("namespace",), id="namespace-of-another-repository"),
    pytest.param(_garble_marker, [], ("namespace",), id="namespace-marker-garbled"),
    pytest.param(_delete_marker, [], ("namespace",), id="namespace-marker-deleted"),
    pytest.param(_move_namespace, [], ("namespace",), id="namespace-moved-away"),
]


@pytest.mark.parametrize("fault, args, needles", FAULTS)
def test_bad_configuration_fails_before_any_deletion(env, cli, repo_uri, spark, fault, args, needles):
    h = _garbage_repo(env, cli)
    extra = fault(env, h.ns) if fault else []
    ns = env.root / "ns-moved" if fault is _move_namespace else h.ns
    before, sibling_before = snapshot(ns), snapshot(env.root / "ns-other")
    if args[:1] == ["gc"]:
        command = [*args, "--json"]
    elif args[:1] == ["--metastore"] or extra[:1] == ["--metastore"]:
        command = [*args, *extra, "gc", "run", REPO, "--json"]
    else:
        command = ["gc", "run", REPO, "--json", *args]

    one_error(cli(*command, ok=False), *needles, json_cmd=True)

    assert snapshot(ns) == before
    assert snapshot(env.root / "ns-other") == sibling_before
    assert runs_recorded(env) == 0


def test_min_age_option_keeps_objects_younger_than_it(env, cli, repo_uri, spark):
    """With --min-age 5d the 3-day-old overwritten draft is in flight, not garbage; the 30-day-old
    expired object still goes."""
    h = _garbage_repo(env, cli)
    summary = gc_run(cli, "--min-age", "5d")
    assert summary["min_age_seconds"] == 5 * 86400
    assert [c["address"] for c in candidates(cli, summary["run_id"])] == [h.objects["A1"].key]
    assert data_keys(env.namespace()) == {h.objects[n].key for n in ("A2", "D1", "D2")}


# -- no rules: only uncommitted garbage -------------------------------------------------------------
def test_without_rules_every_commit_stays_and_only_uncommitted_garbage_goes(env, cli, repo_uri, spark):
    h = History(cli, env.namespace())
    now = utcnow()
    for i, days in enumerate((60, 40, 20), start=1):
        h.put(f"A{i}", "main", "a", f"a v{i}", now - timedelta(days=days))
        h.commit(f"c{i}", "main", now - timedelta(days=days))
    cli("branch", "create", f"{REPO}/gone", "--source", f"{REPO}/main")
    h.put("G", "gone", "g", "on a deleted branch", now - timedelta(days=50))
    h.commit("dangling", "gone", now - timedelta(days=50))
    cli("branch", "delete", f"{REPO}/gone", "--yes")
    h.put("D1", "main", "draft", "draft 1", now - timedelta(days=3))
    h.put("D2", "main", "draft", "draft 2", now - timedelta(days=3))
    assert cli("gc", "get-config", REPO, ok=False).exit_code == 1  # no rules set

    summary = gc_run(cli)

    assert summary["expired_commits"] == 0
    assert sorted((c["address"], c["reason"]) for c in candidates(cli, summary["run_id"])) == [
        (h.objects["D1"].key, "uncommitted")
    ]
    assert data_keys(env.namespace()) == {h.objects[n].key for n in ("A1", "A2", "A3", "G", "D2")}
    for i in (1, 2, 3):
        assert cat(cli, h.commits[f"c{i}"], "a") == f"a v{i}"
    assert cat(cli, h.commits["dangling"], "g") == "on a deleted branch"


# -- Nessie-style cutoffs override the stored rules -------------------------------------------------
CUTOFF_DAYS = (50, 40, 30, 20, 10)  # commits v1..v5 on each branch; v5 is HEAD


def test_cutoff_policies_count_duration_date_none_and_default(env, cli, repo_uri, spark):
    """One branch per policy, five commits each overwriting one file, so version i lives only in
    commit i. Stored rules (0 days) would keep only HEADs; the cutoffs replace them for the run."""
    now = utcnow()
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({"default_retention_days": 0, "branches": []}))
    expected_kept = {
        "count": {4, 5},  # count=2: HEAD and its parent
        "dur": {3, 4, 5},  # 25d: v4 was HEAD 25 days ago (lakeFS semantics)
        "iso": {3, 4, 5},  # P25D, the same as an ISO duration
        "date": {2, 3, 4, 5},  # 35 days ago: v2 was HEAD then
        "none": {1, 2, 3, 4, 5},  # `no.*=NONE` matches first; `none=1` never applies
        "other": {5},  # no regex matches: --default-cutoff 1
        "count-x": {5},  # regexes are anchored: `count` does not match `count-x`
    }
    repo = env.lake().repository("repo")
    keys: dict[tuple[str, int], str] = {}
    commits: dict[tuple[str, int], str] = {}
    for branch in expected_kept:
        repo.create_branch(branch, "main")
        for version, days in enumerate(CUTOFF_DAYS, start=1):
            when = now - timedelta(days=days)
            entry = repo.upload(branch, "f", f"{branch} v{version}".encode())
            age(env.namespace() / entry.address, when)
            keys[branch, version] = entry.address
            commits[branch, version] = repo.commit(branch, f"{branch} v{version}", date=when).id

    summary = gc_run(
        cli,
        "--cutoff",
        "count=2",
        "--cutoff",
        "dur=25d",
        "--cutoff",
        "iso=P25D",
        "--cutoff",
        f"date={iso(now - timedelta(days=35))}",
        "--cutoff",
        "no.*=NONE",
        "--cutoff",
        "none=1",
        "--default-cutoff",
        "1",
    )

    deleted = {(b, v) for (b, v) in keys if keys[b, v] not in data_keys(env.namespace())}
    assert deleted == {(b, v) for b, kept in expected_kept.items() for v in range(1, 6) if v not in kept}
    assert summary["num_deleted"] == len(deleted)
    for (branch, version), commit_id in commits.items():
        if (branch, version) in deleted:
            assert_gone(cli, commit_id, "f")
        else:
            assert cat(cli, commit_id, "f") == f"{branch} v{version}"


# -- sweep re-checks: what was revived between mark and sweep stays -----------------------------------
def test_sweep_keeps_candidates_revived_after_the_mark(env, cli, repo_uri, spark):
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({"default_retention_days": 0, "branches": []}))
    h = History(cli, env.namespace())
    now = utcnow()
    for i, days in enumerate((40, 30, 20), start=1):
        h.put(f"A{i}", "main", "a", f"a v{i}", now - timedelta(days=days))
        h.put(f"B{i}", "main", "b", f"b v{i}", now - timedelta(days=days))
        h.commit(f"c{i}", "main", now - timedelta(days=days))
    marked = gc_run(cli, "--mark-only")
    assert marked["state"] == "marked"
    assert {c["address"] for c in candidates(cli, marked["run_id"])} == {
        h.objects[n].key for n in ("A1", "B1", "A2", "B2")
    }

    cli("branch", "create", f"{REPO}/revived", "--source", f"{REPO}/{h.commits['c1']}")  # A1, B1 active again
    cli("fs", "cp", f"{REPO}/{h.commits['c2']}/a", f"{REPO}/main/a-restored")  # A2 staged again
    swept = cli("gc", "sweep", REPO, marked["run_id"], "--json").json()

    assert (swept["state"], swept["num_deleted"], swept["num_revived"]) == ("swept", 1, 3)
    assert data_keys(env.namespace()) == {h.objects[n].key for n in ("A1", "B1", "A2", "A3", "B3")}
    assert_gone(cli, h.commits["c2"], "b")
    assert cat(cli, "revived", "a") == "a v1" and cat(cli, "revived", "b") == "b v1"
    assert cat(cli, "main", "a-restored") == "a v2"
