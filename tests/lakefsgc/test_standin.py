"""The lakeFS stand-in answers what lakeFS answers: every endpoint called through the real lakeFS
Python SDK (so the JSON parses into its models), its GC inputs read back with lakegc's own SSTable
reader, and the retention it computes checked against lakeFS's end-to-end GC scenario."""

from __future__ import annotations

import base64
import csv
import io
import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pyarrow.parquet as pq
import pytest
from lakefs_sdk.exceptions import ApiException
from support.lakefs_model import FULL, Model
from support.lakefs_retention import CommitNode, active_commits, xid_time
from support.lakefs_standin import StandIn, running_standin

from lakegc.lakefs.entries import metarange_ranges, range_entries
from lakegc.lakefs.sstable import read_lakefs_file

NOW = datetime.now(UTC)


def days_ago(n: float) -> datetime:
    return NOW - timedelta(days=n)


@pytest.fixture
def lakefs(tmp_path: Path):
    with running_standin(tmp_path / "blockstore", range_size=2, uncommitted_page_size=2) as standin:
        standin.model.create_repository("repo", "local://lake/repo")
        yield standin


def client(standin: StandIn, secret: str | None = None) -> lakefs_sdk.ApiClient:
    config = lakefs_sdk.Configuration(
        host=standin.endpoint + "/api/v1",
        username=standin.access_key_id,
        password=secret or standin.secret_access_key,
    )
    return lakefs_sdk.ApiClient(config)


def error_of(call) -> tuple[int, dict]:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


def test_get_repository_and_unknown_repository(lakefs: StandIn):
    repo = lakefs_sdk.RepositoriesApi(client(lakefs)).get_repository("repo")
    assert (repo.id, repo.default_branch, repo.storage_namespace) == ("repo", "main", "local://lake/repo")
    assert (repo.storage_id, repo.read_only) == ("", False)
    assert abs(repo.creation_date - time.time()) < 600  # made during this test (a loaded machine: minutes)
    assert error_of(lambda: lakefs_sdk.RepositoriesApi(client(lakefs)).get_repository("nope")) == (
        404,
        {"message": "repository not found"},
    )
    dummy = lakefs.model.local_path / "lake/repo/_lakefs/dummy"  # lakeFS's accessibility check
    assert dummy.read_text().startswith("this is dummy data")


def test_wrong_or_missing_credentials_are_401(lakefs: StandIn):
    api = lakefs_sdk.RepositoriesApi(client(lakefs, secret="wrong"))
    assert error_of(lambda: api.get_repository("repo")) == (401, {"message": "error authenticating request"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{lakefs.endpoint}/api/v1/repositories/repo")
    assert caught.value.code == 401
    assert lakefs.calls["get_repository"] == 2


def test_gc_rules_on_both_paths(lakefs: StandIn):
    public, internal = lakefs_sdk.RepositoriesApi(client(lakefs)), lakefs_sdk.InternalApi(client(lakefs))
    assert error_of(lambda: public.get_gc_rules("repo")) == (404, {"message": "not found"})
    lakefs.model.set_gc_rules("repo", 7, {"main": 10, "dev": 3})
    with pytest.warns(DeprecationWarning):  # the SDK marks the internal path deprecated
        internal_rules = internal.internal_get_garbage_collection_rules("repo")
    for rules in (public.get_gc_rules("repo"), internal_rules):
        assert rules.default_retention_days == 7
        assert {r.branch_id: r.retention_days for r in rules.branches} == {"main": 10, "dev": 3}
    assert lakefs.model.local_path.joinpath("lake/repo/_lakefs/retention/gc/rules/config.json").stat().st_size > 0
    lakefs.model.set_gc_rules("repo", 5)  # no branch rules: Go encodes its nil slice as null ...
    raw = public.get_gc_rules_with_http_info("repo", _preload_content=False).raw_data
    assert json.loads(raw) == {"default_retention_days": 5, "branches": None}
    with pytest.raises(ValueError):  # ... which the SDK's model refuses
        public.get_gc_rules("repo")
    lakefs.model.delete_gc_rules("repo")
    assert error_of(lambda: public.get_gc_rules("repo"))[0] == 404


def read_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_prepare_commits_on_s3_answers_201_with_a_presigned_url(tmp_path: Path, bucket):
    with running_standin(tmp_path) as standin:
        standin.model.create_repository("repo", bucket.ns)
        standin.model.upload("repo", "main", "a.txt", b"a")
        head = standin.model.commit("repo", "main")
        internal = lakefs_sdk.InternalApi(client(standin))
        assert error_of(lambda: internal.prepare_garbage_collection_commits("repo")) == (
            404,
            {"message": "get gc rules: not found"},
        )
        standin.model.set_gc_rules("repo", 7)
        run = internal.prepare_garbage_collection_commits("repo")
        key = f"lake/_lakefs/retention/gc/commits/run_id={run.run_id}/commits.csv"
        assert run.gc_commits_location == f"s3://{bucket.name}/{key}"
        assert run.gc_addresses_location == f"{bucket.ns}/_lakefs/retention/gc/addresses/"
        descending = (64060588800 - time.time()) % 2**32  # xid keeps 32 bits of seconds
        assert abs(xid_time(run.run_id).timestamp() - descending) < 600
        stored = bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read().decode()
        with urllib.request.urlopen(run.gc_commits_presigned_url) as response:
            assert response.read().decode() == stored
        assert stored.startswith("commit_id,expired,metarange_id\n")
        rows = read_csv(stored)
        first = standin.model.repo("repo").commits[head].parents[0]
        assert {(r["commit_id"], r["expired"]) for r in rows} == {(head, "false"), (first, "false")}
        assert {r["metarange_id"] for r in rows if r["commit_id"] == first} == {""}  # "Repository created"
        assert bucket.client.get_object(Bucket=bucket.name, Key="lake/_lakefs/dummy")["ContentLength"] > 0


def test_prepare_commits_sync_on_local_is_lakefs_400_but_writes_the_csv(lakefs: StandIn):
    lakefs.model.set_gc_rules("repo", 7)
    status, body = 0, ""
    try:
        lakefs_sdk.InternalApi(client(lakefs)).prepare_garbage_collection_commits("repo")
    except ApiException as e:
        status, body = e.status, e.body
    assert status == 400
    first, second = body.strip().split("\n")
    assert json.loads(first) == {"message": "local adapter presigned URL: operation not supported"}
    location = json.loads(second)["gc_commits_location"]
    assert location.startswith(f"local://{lakefs.model.local_path}/lake/repo/_lakefs/retention/gc/commits/run_id=")
    assert Path(location.removeprefix("local://")).read_text().startswith("commit_id,expired,metarange_id\n")


def test_prepare_commits_async_polls_then_answers(lakefs: StandIn):
    internal = lakefs_sdk.InternalApi(client(lakefs))
    task = internal.prepare_garbage_collection_commits_async("repo")  # no rules: the TASK fails
    assert task.id.startswith("GCPC") and len(task.id) == 24
    status = internal.prepare_garbage_collection_commits_status("repo", task.id)
    assert (status.completed, status.result, status.error.message) == (True, None, "get gc rules: not found")
    lakefs.model.set_gc_rules("repo", 7)
    lakefs.async_pending_polls = 2
    task = internal.prepare_garbage_collection_commits_async("repo")
    polls = [internal.prepare_garbage_collection_commits_status("repo", task.id) for _ in range(3)]
    assert [p.completed for p in polls] == [False, False, True]
    assert polls[0].result is None and polls[0].error is None and polls[0].update_time.tzinfo is not None
    result = polls[-1].result
    assert result.gc_commits_presigned_url is None  # local: presigning fails, the status leaves it out
    assert Path(result.gc_commits_location.removeprefix("local://")).is_file()
    assert error_of(lambda: internal.prepare_garbage_collection_commits_status("repo", "GCPCnope"))[0] == 404
    assert lakefs.calls["prepare_commits_status"] == 5


def test_prepare_uncommitted_pages_with_continuation_tokens(lakefs: StandIn):
    m = lakefs.model
    expected = {m.upload("repo", "main", f"m{i}", b"x") for i in range(3)}
    m.upload("repo", "main", "gone", b"x")
    m.delete("repo", "main", "gone")  # the tombstone replaces the staged entry: not listed
    m.create_branch("repo", "dev", "main")
    expected.add(m.upload("repo", "dev", "d", b"x", layout="root"))
    inside = m.stage("repo", "dev", "imported", "local://lake/repo/data/imp/x", full=True, size=1)
    m.stage("repo", "dev", "outside", "s3://elsewhere/obj", full=True, size=1)  # outside: not listed
    expected.add("data/imp/x")
    internal, token, run_ids, rows = lakefs_sdk.InternalApi(client(lakefs)), None, set(), []
    for _ in range(10):
        request = lakefs_sdk.PrepareGCUncommittedRequest(continuation_token=token)
        page = internal.prepare_garbage_collection_uncommitted("repo", request)
        run_ids.add(page.run_id)
        assert page.gc_uncommitted_location.endswith(f"/_lakefs/retention/gc/uncommitted/{page.run_id}/uncommitted/")
        token = page.continuation_token
        if not token:
            break
        assert json.loads(base64.b64decode(token))["run_id"] == page.run_id
    assert len(run_ids) == 1 and lakefs.calls["prepare_uncommitted"] == 3
    folder = Path(page.gc_uncommitted_location.removeprefix("local://"))
    for file in sorted(folder.iterdir()):
        table = pq.read_table(file)
        assert str(table.schema) == "physical_address: string\ncreation_date: int64"
        assert pq.ParquetFile(file).metadata.row_group(0).column(0).compression == "GZIP"
        assert table.num_rows <= 2
        rows += table.to_pylist()
    assert {r["physical_address"] for r in rows} == expected and len(rows) == 5
    assert all(abs(r["creation_date"] - time.time()) < 600 for r in rows) and inside.address_type == FULL
    assert error_of(
        lambda: internal.prepare_garbage_collection_uncommitted(
            "repo", lakefs_sdk.PrepareGCUncommittedRequest(continuation_token="%%")
        )
    ) == (400, {"message": "invalid continuation token"})


def test_an_empty_staging_answers_no_location_and_no_token(lakefs: StandIn):
    page = lakefs_sdk.InternalApi(client(lakefs)).prepare_garbage_collection_uncommitted("repo")
    assert (page.gc_uncommitted_location, page.continuation_token) == ("", None)


def test_faults_answer_lakefs_errors_then_heal(lakefs: StandIn):
    api = lakefs_sdk.RepositoriesApi(client(lakefs))
    lakefs.fail("get_repository", status=503, times=2)
    lakefs.fail(r"/metadata/range/", status=500)
    assert error_of(lambda: api.get_repository("repo"))[0] == 503
    assert error_of(lambda: api.get_repository("repo")) == (503, {"message": "injected failure (503)"})
    assert api.get_repository("repo").id == "repo"
    metadata = lakefs_sdk.MetadataApi(client(lakefs))
    assert error_of(lambda: metadata.get_range("repo", "abc"))[0] == 500
    assert metadata.get_meta_range("repo", "abc").location == "_lakefs/abc"
    lakefs.clear_faults()
    assert metadata.get_range("repo", "abc").location == "_lakefs/abc"
    assert lakefs.calls["get_repository"] == 3 and lakefs.calls["get_range"] == 2


def test_round_trip_commits_csv_to_metarange_to_ranges(lakefs: StandIn):
    m = lakefs.model
    for i in range(7):
        m.upload("repo", "main", f"dir/f{i}", b"x" * i, layout="root" if i == 3 else "data")
    m.stage("repo", "main", "imported", "s3://other/key", full=True, size=5)
    head = m.commit("repo", "main")
    m.set_gc_rules("repo", 7)
    lakefs.async_pending_polls = 0
    internal, metadata = lakefs_sdk.InternalApi(client(lakefs)), lakefs_sdk.MetadataApi(client(lakefs))
    task = internal.prepare_garbage_collection_commits_async("repo")
    result = internal.prepare_garbage_collection_commits_status("repo", task.id).result
    rows = read_csv(Path(result.gc_commits_location.removeprefix("local://")).read_text())
    (metarange_id,) = {r["metarange_id"] for r in rows if r["commit_id"] == head}
    ns = m.local_path / "lake/repo"
    answer = metadata.get_meta_range_with_http_info("repo", metarange_id)
    assert answer.status_code == 200 and answer.headers["Location"] == answer.data.location
    table = read_lakefs_file((ns / answer.data.location).read_bytes(), metarange_id)
    found = {}
    ranges = list(metarange_ranges(table, metarange_id))
    assert len(ranges) == 4  # 8 entries, at most 2 a range
    for ref in ranges:
        location = metadata.get_range("repo", ref.range_id).location
        entries = list(range_entries(read_lakefs_file((ns / location).read_bytes(), ref.range_id), ref.range_id))
        assert (ref.min_key, ref.max_key, ref.count) == (entries[0].path, entries[-1].path, len(entries))
        found |= {e.path: (e.address, e.size, e.address_type) for e in entries}
    tree = m.tree("repo", head)
    assert found == {p: (e.address, e.size, e.address_type) for p, e in tree.items()}
    assert found["imported"] == ("s3://other/key", 5, 2) and len(found["dir/f3"][0]) == 32
    assert all(found[f"dir/f{i}"][0].startswith("data/") for i in (0, 1, 2, 4, 5, 6))
    assert all((ns / found[f"dir/f{i}"][0]).read_bytes() == b"x" * i for i in range(7))


# --- retention: lakeFS's own end-to-end GC scenario (TestUnifiedGC) and smaller cases


def unified_gc_scenario(tmp_path: Path) -> tuple[Model, dict[str, str]]:
    """TestUnifiedGC's events: rules main 10 days, dev 7, default 7. Returns the model and each
    file's physical address."""
    m = Model(tmp_path, range_size=2)
    m.create_repository("repo1", "local://repo1")
    m.create_branch("repo1", "dev", "main")
    m.create_branch("repo1", "dev2", "main")
    m.set_gc_rules("repo1", 7, {"main": 10, "dev": 7})
    address = {}
    created = [("file_1", "main"), ("file_2", "main"), ("file_5", "dev"), ("file_6", "dev")]
    for key, branch in [*created, ("file_8", "dev2"), ("file_9", "dev2")]:
        address[key] = m.upload("repo1", branch, key)
        m.commit("repo1", branch, date=days_ago(14))
    deletions = [("file_2", "main", 12), ("file_1", "main", 8), ("file_5", "dev", 8)]
    for key, branch, ago in [*deletions, ("file_9", "dev2", 8), ("file_8", "dev2", 6), ("file_6", "dev", 4)]:
        m.delete("repo1", branch, key)
        m.commit("repo1", branch, date=days_ago(ago))
    for key, branch in [("file_3", "main"), ("file_4", "main"), ("file_7", "dev"), ("file_10", "dev2")]:
        address[key] = m.upload("repo1", branch, key)
    m.delete("repo1", "main", "file_4")
    m.delete_branch("repo1", "dev2")
    m.reset_branch("repo1", "dev")
    return m, address


def test_unified_gc_scenario_keeps_exactly_what_lakefs_keeps(tmp_path: Path):
    m, address = unified_gc_scenario(tmp_path)
    repo = m.repo("repo1")
    kept = {e.address for c in m.active("repo1", NOW) for e in repo.commits[c].tree.values()}
    kept |= {row[2] for row in m.uncommitted("repo1")}
    expected = {"file_1": True, "file_2": False, "file_3": True, "file_4": False, "file_5": False}
    expected |= {"file_6": True, "file_7": False, "file_8": True, "file_9": False, "file_10": False}
    assert {key: address[key] in kept for key in expected} == expected


def test_dangling_commits_use_the_default_retention_from_their_own_date():
    commits = {
        "a": CommitNode((), days_ago(30)),
        "b": CommitNode(("a",), days_ago(20)),
        "c": CommitNode(("b",), days_ago(6)),  # a deleted branch's head: dangling, 6 days old
        "d": CommitNode(("b",), days_ago(1)),
    }
    assert active_commits(commits, {"main": "d"}, 7, {}, NOW) == {"d", "b", "c"}
    # c is past 5 days. lakeFS walks starting points in commit-id order and stops at a commit already
    # reached with an equal threshold BEFORE looking at the child's date: c's walk reached b first
    # (not keeping it), so d's walk stops at b and b is not kept although d replaced it 1 day ago.
    assert active_commits(commits, {"main": "d"}, 5, {}, NOW) == {"d"}
    renamed = {"e" if k == "c" else k: CommitNode(v.parents, v.created) for k, v in commits.items()}
    assert active_commits(renamed, {"main": "d"}, 5, {}, NOW) == {"d", "b"}  # d's walk first: b kept


def test_the_first_commit_before_the_period_stays_and_the_longest_branch_rule_wins():
    commits = {
        "a": CommitNode((), days_ago(40)),
        "b": CommitNode(("a",), days_ago(30)),
        "c": CommitNode(("b",), days_ago(20)),
        "h": CommitNode(("c",), days_ago(2)),  # HEAD of main (3 days) and of long (25 days)
    }
    assert active_commits(commits, {"main": "h"}, 3, {}, NOW) == {"h", "c"}  # c replaced inside the period
    assert active_commits(commits, {"main": "h", "long": "h"}, 3, {"long": 25}, NOW) == {"h", "c", "b"}
    assert active_commits(commits, {"main": "c"}, 1, {}, NOW) == {"c"}  # h dangles, older than 1 day
    assert active_commits(commits, {"main": "c"}, 3, {}, NOW) == {"c", "h"}
