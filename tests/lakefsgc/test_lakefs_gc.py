"""`lakegc lakefs gc` end to end, through the CLI, on Spark, against the lakeFS API stand-in
(`support.lakefs_standin`) over a local blockstore folder or a real S3-API server: lakeFS's own GC
scenario (its TestUnifiedGC table), both object layouts, full addresses inside and outside the
namespace, no GC rules, mark then sweep with objects re-staged in between, and the report files
lakeFS's tooling reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import Env, make_cli, snapshot
from support.lakefs_standin import StandIn, running_standin

REPO = "repo1"
DAY = timedelta(days=1)


@dataclass
class Lake:
    """A lakeFS repository behind the stand-in, and the lakegc CLI pointed at it."""

    standin: StandIn
    env: Env
    namespace: str  # as lakeFS names it
    blockstore: Path | None

    @property
    def model(self):
        return self.standin.model

    def gc(self, *args: str, ok: bool = True):
        connection = [
            "--endpoint",
            self.standin.endpoint,
            "--access-key-id",
            self.standin.access_key_id,
            "--secret-access-key",
            self.standin.secret_access_key,
        ]
        local = ["--local-path", str(self.blockstore)] if self.blockstore else []
        return make_cli(self.env)("lakefs", "gc", REPO, *connection, *local, "--runs", str(self.runs), *args, ok=ok)

    @property
    def runs(self) -> Path:
        return self.env.root / "runs"

    def exists(self, address: str) -> bool:
        try:
            self.model.repo(REPO).ns.get(address)
        except Exception:  # noqa: BLE001 - missing on either store
            return False
        return True

    def report(self, run_id: str) -> tuple[dict, list[str]]:
        ns = self.model.repo(REPO).ns
        summary = json.loads(ns.get(f"_lakefs/retention/gc/unified/{run_id}/summary.json"))
        return summary, sorted(self._deleted(run_id))

    def _deleted(self, run_id: str) -> Iterator[str]:
        root = self.blockstore / REPO / "_lakefs/retention/gc/unified" / run_id / "deleted"  # type: ignore[operator]
        for part in sorted(root.glob("*.parquet")):
            yield from pq.read_table(part).column("address").to_pylist()


@pytest.fixture
def lake(tmp_path: Path, spark) -> Iterator[Lake]:
    yield from open_lake(tmp_path)


def open_lake(tmp_path: Path) -> Iterator[Lake]:
    """A repository on a local blockstore folder, behind a started stand-in."""
    blockstore = tmp_path / "blockstore"
    blockstore.mkdir()
    with running_standin(blockstore, uncommitted_page_size=2) as standin:
        standin.model.create_repository(REPO, f"local://{REPO}")
        (blockstore / REPO / "dummy").write_bytes(b"x")  # older lakeFS checked access so; GC never takes it
        env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
        yield Lake(standin, env, f"local://{REPO}", blockstore)


def unified_gc_scenario(model, now: datetime) -> dict[str, str]:
    """lakeFS's TestUnifiedGC: three branches, creations committed 14 days ago, deletions committed
    at various ages, uncommitted leftovers, dev2 deleted and dev reset. Returns key -> address."""
    model.create_branch(REPO, "dev", "main")
    model.create_branch(REPO, "dev2", "main")
    model.set_gc_rules(REPO, 7, {"main": 10, "dev": 7})
    created = {}
    for key, branch in [("file_1", "main"), ("file_2", "main"), ("file_5", "dev"), ("file_6", "dev")]:
        created[key] = model.upload(REPO, branch, key)
        model.commit(REPO, branch, date=now - 14 * DAY)
    for key, branch in [("file_8", "dev2"), ("file_9", "dev2")]:
        created[key] = model.upload(REPO, branch, key)
        model.commit(REPO, branch, date=now - 14 * DAY)
    for key, branch, days in [
        ("file_2", "main", 12),
        ("file_1", "main", 8),
        ("file_5", "dev", 8),
        ("file_9", "dev2", 8),
        ("file_8", "dev2", 6),
        ("file_6", "dev", 4),
    ]:
        model.delete(REPO, branch, key)
        model.commit(REPO, branch, date=now - days * DAY)
    for key, branch in [("file_3", "main"), ("file_4", "main"), ("file_7", "dev"), ("file_10", "dev2")]:
        created[key] = model.upload(REPO, branch, key)
    model.delete(REPO, "main", "file_4")
    model.delete_branch(REPO, "dev2")
    model.reset_branch(REPO, "dev")
    return created


# lakeFS's expected outcome of TestUnifiedGC: key -> still there after GC
UNIFIED_GC_KEPT = {
    "file_1": True,
    "file_2": False,
    "file_3": True,
    "file_4": False,
    "file_5": False,
    "file_6": True,
    "file_7": False,
    "file_8": True,
    "file_9": False,
    "file_10": False,
}


def test_lakefs_own_gc_scenario_deletes_what_lakefs_deletes(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    result = lake.gc("--min-age", "0s", "--json").json()
    kept = {key: lake.exists(address) for key, address in created.items()}
    assert kept == UNIFIED_GC_KEPT
    gone = sorted(created[k] for k, there in UNIFIED_GC_KEPT.items() if not there)
    assert result["addresses"] == gone
    assert result["num_deleted_objects"] == len(gone) == 6
    assert result["state"] == "swept"
    summary, deleted = lake.report(result["run_id"])
    assert deleted == gone
    assert summary["run_id"] == result["run_id"] and summary["success"] is True
    assert summary["num_deleted_objects"] == 6
    assert {"first_slice", "start_time", "cutoff_time"} <= set(summary)
    assert lake.exists("dummy"), "the namespace's dummy file is never collected"


def test_a_dry_run_and_a_mark_delete_nothing_and_a_sweep_rechecks(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    before = snapshot(lake.blockstore / REPO / "data")
    dry = lake.gc("--min-age", "0s", "--dry-run", "--json").json()
    mark = lake.gc("--min-age", "0s", "--mark-only", "--json").json()
    assert snapshot(lake.blockstore / REPO / "data") == before
    gone = sorted(created[k] for k, there in UNIFIED_GC_KEPT.items() if not there)
    assert dry["addresses"] == mark["addresses"] == gone
    summary, listed = lake.report(mark["run_id"])
    assert summary["success"] is True and listed == gone
    # between mark and sweep: file_7's object is staged again on main, file_9's committed there
    lake.model.stage(REPO, "main", "again/file_7", created["file_7"])
    lake.model.stage(REPO, "main", "again/file_9", created["file_9"])
    lake.model.commit(REPO, "main")
    calls = dict(lake.standin.calls)
    swept = lake.gc("--sweep", mark["run_id"], "--json").json()
    assert lake.standin.calls["prepare_uncommitted"] > calls.get("prepare_uncommitted", 0), "the sweep asks again"
    still = {created["file_7"], created["file_9"]}
    assert swept["addresses"] == sorted(set(gone) - still)
    assert all(lake.exists(a) for a in still)
    assert not any(lake.exists(a) for a in set(gone) - still)


def test_a_mark_that_failed_or_never_was_is_not_swept(lake):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = snapshot(lake.blockstore / REPO / "data")
    from conftest import one_error

    one_error(lake.gc("--sweep", "no-such-mark", ok=False), "mark no-such-mark does not exist")
    lake.model.repo(REPO).ns.put("_lakefs/retention/gc/unified/bad/summary.json", b'{"success": false}')
    one_error(lake.gc("--sweep", "bad", ok=False), "failed run")
    one_error(lake.gc("--sweep", "bad", "--mark-only", ok=False), "--mark-only")
    assert snapshot(lake.blockstore / REPO / "data") == before


def test_without_gc_rules_every_commit_is_live(lake):
    model = lake.model
    old = model.upload(REPO, "main", "old")
    model.commit(REPO, "main", date=datetime.now(UTC) - 400 * DAY)
    model.delete(REPO, "main", "old")
    model.commit(REPO, "main")
    model.create_branch(REPO, "tmp", "main")
    left = model.upload(REPO, "tmp", "never-committed")
    model.reset_branch(REPO, "tmp")
    result = lake.gc("--min-age", "0s", "--json").json()
    assert result["addresses"] == [left]
    assert lake.exists(old) and not lake.exists(left)


def test_both_layouts_and_full_addresses(lake):
    model = lake.model
    model.set_gc_rules(REPO, 1)
    root_kept = model.upload(REPO, "main", "root-kept", layout="root")
    data_kept = model.upload(REPO, "main", "data-kept")
    full = model.stage(REPO, "main", "full", f"local://{REPO}/data/imported/x", full=True, data=b"x")
    model.commit(REPO, "main")
    model.create_branch(REPO, "tmp", "main")
    root_gone = model.upload(REPO, "tmp", "root-gone", layout="root")
    data_gone = model.upload(REPO, "tmp", "data-gone")
    model.reset_branch(REPO, "tmp")
    outside = lake.blockstore / "elsewhere" / "y"
    outside.parent.mkdir()
    outside.write_bytes(b"y")
    model.stage(REPO, "main", "outside", f"local://{lake.blockstore}/elsewhere/y", full=True)
    result = lake.gc("--min-age", "0s", "--json").json()
    assert result["addresses"] == sorted([root_gone, data_gone])
    assert all(lake.exists(a) for a in (root_kept, data_kept, "data/imported/x", "dummy"))
    assert outside.exists() and full.address


def test_young_objects_and_lakefs_metadata_are_never_listed(lake):
    model = lake.model
    model.create_branch(REPO, "tmp", "main")
    young = model.upload(REPO, "tmp", "young")
    model.reset_branch(REPO, "tmp")
    result = lake.gc("--json").json()  # default --min-age 1d
    assert result["addresses"] == [] and lake.exists(young)
    files = {p.relative_to(lake.blockstore / REPO).as_posix() for p in (lake.blockstore / REPO).rglob("*")}
    assert any(f.startswith("_lakefs/") for f in files)


def test_the_runs_are_recorded_and_read_back(lake):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    first = lake.gc("--min-age", "0s", "--dry-run", "--json").json()
    cli = make_cli(lake.env)
    runs = cli("lakefs", "runs", REPO, "--runs", str(lake.runs), "--json").json()
    assert [r["run_id"] for r in runs] == [first["run_id"]]
    assert cli("lakefs", "runs", "other", "--runs", str(lake.runs), "--json").json() == []
    shown = cli("lakefs", "show", first["run_id"], "--runs", str(lake.runs), "--json").json()
    assert shown["num_candidates"] == 6
    rows = cli("lakefs", "candidates", first["run_id"], "--runs", str(lake.runs), "--json").json()
    assert sorted(r["address"] for r in rows) == first["addresses"]


def test_a_budget_holds(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    result = lake.gc("--min-age", "0s", "--max-deletes", "2", "--json").json()
    assert len(result["addresses"]) == 2
    gone = [k for k, there in UNIFIED_GC_KEPT.items() if not there]
    assert sum(not lake.exists(created[k]) for k in gone) == 2
    assert all(lake.exists(created[k]) for k, there in UNIFIED_GC_KEPT.items() if there)
