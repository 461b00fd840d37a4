"""`lakegc lakefs gc` when lakeFS or its metadata cannot be trusted: every fault (a tree missing,
corrupt, or not hashing to its id; a commits file lakegc cannot read; the API answering 401, 404
or 500, or not at all) fails the run with one error line, and nothing is deleted. Plus the same
scenario on a real S3-API server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import one_error, snapshot
from support.lakefs_sst import write_range
from test_lakefs_gc import REPO, UNIFIED_GC_KEPT, Lake, open_lake, unified_gc_scenario

from lakegc.lakefs.entries import metarange_ranges
from lakegc.lakefs.namespace import FILE_ID
from lakegc.lakefs.sstable import read_sstable


@pytest.fixture
def lake(tmp_path: Path, spark) -> Iterator[Lake]:
    yield from open_lake(tmp_path)


def data(lake: Lake) -> dict:
    return snapshot(lake.blockstore / REPO / "data")


def tree_files(lake: Lake) -> list[Path]:
    return sorted(p for p in (lake.blockstore / REPO / "_lakefs").iterdir() if FILE_ID.fullmatch(p.name))


def ranges(lake: Lake) -> list[Path]:
    """The range files of the active commits' trees: the ones the run must read."""
    from lakegc.lakefs.entries import metarange_ranges
    from lakegc.lakefs.sstable import read_sstable

    r, folder = lake.model.repo(REPO), lake.blockstore / REPO / "_lakefs"
    found = set()
    for commit in lake.model.active(REPO):
        metarange = r.commits[commit].metarange_id
        if metarange and (folder / metarange).exists():
            table = read_sstable((folder / metarange).read_bytes(), metarange)
            found.update(folder / ref.range_id for ref in metarange_ranges(table, metarange))
    assert found, "the scenario has active commits with trees"
    return sorted(found)


def missing(lake: Lake) -> str:
    victim = ranges(lake)[0]
    victim.unlink()
    return victim.name[:8]


def flipped(lake: Lake) -> str:
    victim = ranges(lake)[0]
    content = bytearray(victim.read_bytes())
    content[len(content) // 3] ^= 0x01
    victim.write_bytes(bytes(content))
    return victim.name[:8]


def swapped(lake: Lake) -> str:
    """A well-formed range, with one entry fewer, under the id of another."""
    victim = ranges(lake)[0]
    _, content = write_range([("other", "data/x/y", 1, 1)])
    victim.write_bytes(content)
    return victim.name[:8]


def truncated(lake: Lake) -> str:
    victim = ranges(lake)[-1]
    victim.write_bytes(victim.read_bytes()[:-20])
    return victim.name[:8]


@pytest.mark.parametrize("tamper", [missing, flipped, swapped, truncated])
def test_a_tree_that_cannot_be_trusted_deletes_nothing(lake, tamper):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    named = tamper(lake)
    before = data(lake)
    one_error(lake.gc("--min-age", "0s", "--json", ok=False), named, json_cmd=True)
    assert data(lake) == before


@pytest.mark.parametrize(
    ("endpoint", "status", "needle"),
    [
        ("get_repository", 404, "404"),
        ("get_repository", 401, "401"),
        ("prepare_uncommitted", 500, "prepare_uncommited answered 500"),
        ("get_meta_range", 404, "meta_range"),
        ("get_meta_range", 500, "meta_range"),
        ("prepare_commits_status", 500, "status"),
    ],
)
def test_an_api_error_deletes_nothing(lake, endpoint, status, needle):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    lake.standin.fail(endpoint, status)
    one_error(lake.gc("--min-age", "0s", ok=False), needle)
    assert data(lake) == before


def test_no_gc_rules_is_only_what_lakefs_says(lake):
    """Every commit is live only when lakeFS says the repository has no rules: its async task fails
    and the rules answer 404, or the blocking prepare answers 404 (a server without the async
    form). The rules answering 500 then is a failure, not "no rules"."""
    model = lake.model
    kept = model.upload(REPO, "main", "kept")
    model.commit(REPO, "main")
    model.delete(REPO, "main", "kept")
    model.commit(REPO, "main")
    model.create_branch(REPO, "tmp", "main")
    left = model.upload(REPO, "tmp", "never-committed")
    model.reset_branch(REPO, "tmp")
    before = data(lake)
    lake.standin.fail("get_gc_rules", 500)
    one_error(lake.gc("--min-age", "0s", ok=False), "gc_rules answered 500")
    assert data(lake) == before
    lake.standin.clear_faults()
    lake.standin.fail("prepare_commits_async", 404)  # no async form: the blocking prepare answers 404
    assert lake.gc("--min-age", "0s", "--json").json()["addresses"] == [left]
    assert lake.exists(kept) and lake.standin.calls["prepare_commits"] >= 1


def test_both_prepare_forms_failing_deletes_nothing_and_one_failing_falls_back(lake):
    """lakeFS's client falls back to the blocking prepare when the async one answers 500."""
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    lake.standin.fail("prepare_commits_async", 500)
    lake.standin.fail("prepare_commits", 500)
    one_error(lake.gc("--min-age", "0s", ok=False), "prepare_commits answered 500")
    assert data(lake) == before
    lake.standin.clear_faults()
    lake.standin.fail("prepare_commits_async", 500)  # the blocking form: on a local blockstore lakeFS answers 400
    one_error(lake.gc("--min-age", "0s", ok=False), "prepare_commits answered 400")
    assert data(lake) == before and len(created) == 10


def test_a_fault_during_the_sweeps_recheck_deletes_nothing(lake):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    lake.standin.fail("prepare_uncommitted", 500, times=None)
    # the plan's prepare succeeds once, the sweep's re-check fails: nothing may go
    lake.standin.clear_faults()
    lake.standin.fail("get_meta_range", 500)
    mark = lake.gc("--min-age", "0s", "--mark-only", "--json", ok=False)
    one_error(mark, "meta_range", json_cmd=True)
    assert data(lake) == before
    lake.standin.clear_faults()
    marked = lake.gc("--min-age", "0s", "--mark-only", "--json").json()
    lake.standin.fail("prepare_uncommitted", 500)
    one_error(lake.gc("--sweep", marked["run_id"], ok=False), "500")
    assert data(lake) == before


def test_wrong_credentials_and_a_dead_endpoint_delete_nothing(lake):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    one_error(lake.gc("--min-age", "0s", "--secret-access-key", "wrong", ok=False), "401")
    lake.standin.stop()
    one_error(lake.gc("--min-age", "0s", ok=False), "did not answer")
    assert data(lake) == before


def test_a_commits_file_lakegc_cannot_read_deletes_nothing(lake, monkeypatch):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    original = lake.model.prepare_commits

    def garbled(repo: str):
        answer = original(repo)
        lake.model.repo(repo).ns.put(_key(lake, answer), b"commit,gone\nc1,x\n")
        return answer

    monkeypatch.setattr(lake.model, "prepare_commits", garbled)
    one_error(lake.gc("--min-age", "0s", ok=False), "commits file")
    assert data(lake) == before


def _key(lake: Lake, answer: dict) -> str:
    location = answer["gc_commits_location"]
    return location.split(f"/{REPO}/", 1)[1]


def test_an_s3_namespace_is_collected_as_a_local_one(tmp_path, spark, bucket):
    """The same scenario on a real S3-API server: the namespace as lakeFS names it, full
    locations answered as s3:// URIs."""
    from conftest import Env
    from support.lakefs_standin import running_standin

    with running_standin(None, uncommitted_page_size=2) as standin:
        standin.model.create_repository(REPO, f"s3://{bucket.name}/lake")
        env = Env(tmp_path / "home", f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}", tmp_path)
        lake = Lake(standin, env, f"s3://{bucket.name}/lake", None)
        created = unified_gc_scenario(standin.model, datetime.now(UTC))
        result = lake.gc("--min-age", "0s", "--json").json()
        keys = bucket.keys("lake/")
        assert {k: f"lake/{a}" in keys for k, a in created.items()} == UNIFIED_GC_KEPT
        assert result["num_deleted_objects"] == 6
        assert f"lake/_lakefs/retention/gc/unified/{result['run_id']}/summary.json" in keys


def test_a_tampered_mark_list_deletes_only_what_may_go(lake):
    """A mark's deleted/ is a file in the namespace anyone with write access could edit: a sweep
    of it never takes lakeFS's metadata, the root's dummy, a path that climbs out, or anything
    referenced now, whatever the list says."""
    import pyarrow as pa

    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    (lake.blockstore / REPO / "dummy").write_bytes(b"x")
    outside = lake.blockstore / "neighbour.txt"
    outside.write_bytes(b"n")
    mark = lake.gc("--min-age", "0s", "--mark-only", "--json").json()
    tree = tree_files(lake)[0]
    fresh = "data/fresh/upload-in-flight"  # written after the mark: not what it judged
    lake.model.repo(REPO).ns.put(fresh, b"f")
    forged = [
        fresh,
        f"_lakefs/{tree.name}",
        "dummy",
        "../neighbour.txt",
        "data/../../neighbour.txt",
        created["file_1"],  # committed, active
        created["file_3"],  # uncommitted
    ]
    folder = lake.blockstore / REPO / "_lakefs/retention/gc/unified" / mark["run_id"] / "deleted"
    pq.write_table(pa.table({"address": forged}), folder / "part-forged.parquet")
    swept = lake.gc("--sweep", mark["run_id"], "--json").json()
    assert swept["addresses"] == mark["addresses"]
    assert tree.exists() and outside.exists() and (lake.blockstore / REPO / "dummy").exists()
    assert lake.exists(created["file_1"]) and lake.exists(created["file_3"]) and lake.exists(fresh)


def test_a_last_uncommitted_page_that_wrote_nothing_keeps_what_earlier_pages_wrote(lake):
    model = lake.model
    model.empty_last_page = True
    staged = [model.upload(REPO, "main", f"staged-{i}") for i in range(3)]  # pages of 2: two files, then none
    result = lake.gc("--min-age", "0s", "--json").json()
    assert result["addresses"] == [] and all(lake.exists(a) for a in staged)


def test_an_object_committed_during_the_recheck_is_kept(lake, monkeypatch):
    """The sweep asks for uncommitted objects first, then commits: an object staged again after
    the mark and committed while the sweep asks is in one answer or the other."""
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    mark = lake.gc("--min-age", "0s", "--mark-only", "--json").json()
    lake.model.stage(REPO, "main", "again/file_7", created["file_7"])
    original, committed = lake.model.prepare_commits, []

    def then_commit(repo: str):
        answer = original(repo)
        if not committed:
            committed.append(lake.model.commit(REPO, "main"))
        return answer

    monkeypatch.setattr(lake.model, "prepare_commits", then_commit)
    swept = lake.gc("--sweep", mark["run_id"], "--json").json()
    assert committed and lake.exists(created["file_7"])
    assert created["file_7"] not in swept["addresses"]


@pytest.mark.parametrize("content", [b"", b"commit_id,expired,metarange_id\n"])
def test_an_empty_commits_file_deletes_nothing(lake, monkeypatch, content):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    original = lake.model.prepare_commits

    def emptied(repo: str):
        answer = original(repo)
        lake.model.repo(repo).ns.put(_key(lake, answer), content)
        return answer

    monkeypatch.setattr(lake.model, "prepare_commits", emptied)
    one_error(lake.gc("--min-age", "0s", ok=False), "commits file")
    assert data(lake) == before


def test_without_rules_missing_trees_delete_nothing(lake):
    """No rules: every range file in _lakefs/ is read, and a range a metarange names must be there;
    a namespace with no _lakefs/ at all is not lakeFS's (a wrong --local-path)."""
    model = lake.model
    model.upload(REPO, "main", "kept")
    model.commit(REPO, "main")
    before = data(lake)
    head = model.repo(REPO).commits[model.resolve(REPO, "main")].metarange_id
    folder = lake.blockstore / REPO / "_lakefs"
    table = read_sstable((folder / head).read_bytes(), head)
    (folder / next(metarange_ranges(table, head)).range_id).unlink()
    one_error(lake.gc("--min-age", "0s", ok=False), "is missing")
    assert data(lake) == before
    import shutil

    shutil.rmtree(lake.blockstore / REPO / "_lakefs")
    one_error(lake.gc("--min-age", "0s", ok=False), "no _lakefs/")
    assert data(lake) == before


def test_an_empty_or_forged_sweep_is_refused(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    before = data(lake)
    one_error(lake.gc("--sweep", "", ok=False), "run id")
    mark = lake.gc("--min-age", "0s", "--mark-only", "--json").json()
    summary = lake.blockstore / REPO / "_lakefs/retention/gc/unified" / mark["run_id"] / "summary.json"
    doc = json.loads(summary.read_text())
    summary.write_text(json.dumps({**doc, "cutoff_time": "2999-01-01T00:00:00Z"}))
    one_error(lake.gc("--sweep", mark["run_id"], ok=False), "cutoff_time")
    assert data(lake) == before and len(created) == 10
