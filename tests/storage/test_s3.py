"""S3 namespaces against a real S3-API server on loopback (moto's server, its own process), with a
fault-injecting proxy in front: the storage contract, GC end to end through the CLI on Spark, and
GC under 503 SlowDown storms and partial `DeleteObjects` failures.

Spark's Python workers were started without any AWS variables: that GC works at all proves the
executors build their clients from the settings the driver read.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import Bucket, CliResult, one_error
from support.loopback import free_port

from lakegc.engine.delete import RETRIES
from lakegc.errors import ObjectNotFound, PathEscapesNamespace
from lakegc.storage import S3Settings, S3Storage, open_storage
from lakegc.timeutil import utcnow

Cli = Callable[..., CliResult]
REPO = "lakegc://repo"
RULES = {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 21}]}


# -- the storage contract --------------------------------------------------------------------------
def test_listing_pages_through_thousands_of_keys_in_key_order_and_stays_inside_its_prefix(bucket: Bucket):
    storage = open_storage(bucket.ns)
    keys = [f"data/s1/{i:05d}" for i in range(1_050)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: bucket.put(f"lake/{k}"), keys))
    for outside in ("lake2/data/s1/x", "lakeside/y", "other/lake/data/s1/z", "lake-/q"):
        bucket.put(outside)
    storage.write("root-object", b"r")

    listed = [o.key for o in storage.list("data/")]
    assert listed == sorted(keys)  # > 1,000: the listing paged
    assert [o.key for o in storage.list("", recursive=False)] == ["root-object"]
    assert storage.list_dirs("data/") == ["s1"] and storage.list_dirs() == ["data"]
    assert len(list(storage.list())) == 1_051  # nothing from lake2/, lakeside/, lake-/ or other/


def test_deletes_go_in_batches_of_1000_and_missing_keys_count_as_deleted(bucket: Bucket):
    storage = open_storage(bucket.ns)
    keys = [f"data/s1/{i:05d}" for i in range(1_500)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: bucket.put(f"lake/{k}"), keys))
    bucket.put("lake2/data/s1/00001")
    before = bucket.faults.delete_requests

    outcomes = storage.delete_many([*keys, "data/s1/never-existed"])
    assert bucket.faults.delete_requests - before == 2
    assert all(o.ok and o.error is None for o in outcomes) and len(outcomes) == 1_501
    assert bucket.keys() == {"lake2/data/s1/00001"}


def test_no_request_leaves_after_a_rounds_deadline_and_its_keys_stay(bucket: Bucket):
    """A delete round's deadline holds for every request the S3 client sends, its own retries
    too (a before-send hook): past it, nothing reaches the store, the keys are reported not
    deleted, and a move stops before its copy's delete."""
    from lakegc.storage.deadline import sends_until

    storage = open_storage(bucket.ns)
    keys = [f"data/s1/late-{i}" for i in range(3)]
    for key in keys:
        bucket.put(f"lake/{key}")
    before = bucket.faults.delete_requests
    with sends_until(time.time() - 1):
        deleted = storage.delete_many(keys)
        moved = storage.move_many([(keys[0], "_lakegc/quarantine/r/" + keys[0])])
    assert bucket.faults.delete_requests == before
    assert not any(o.ok for o in deleted + moved) and all("deadline" in o.error for o in deleted + moved)
    assert {f"lake/{key}" for key in keys} <= bucket.keys()
    assert all(o.ok for o in storage.delete_many(keys))  # outside a round: as before


def test_objects_round_trip_with_md5_checksums_and_large_ones_go_in_parts(bucket: Bucket):
    storage = open_storage(bucket.ns)
    small = storage.write("data/s/small", b"hello")
    assert (small.size, small.checksum) == (5, hashlib.md5(b"hello").hexdigest())
    assert abs(small.mtime - utcnow()) < timedelta(minutes=1)
    big_bytes = bytes(range(256)) * (70 * 1024)  # 17.5 MiB: above the multipart threshold
    parts_before = bucket.faults.multipart_uploads
    big = storage.write("data/s/big", io.BytesIO(big_bytes))
    assert bucket.faults.multipart_uploads == parts_before + 1
    assert (big.size, big.checksum) == (len(big_bytes), hashlib.md5(big_bytes).hexdigest())
    assert storage.read("data/s/big") == big_bytes
    stat = storage.stat("data/s/small")
    assert stat is not None and stat.size == 5 and storage.exists("data/s/small")
    assert storage.stat("data/s/none") is None and not storage.exists("data/s/none")
    with pytest.raises(ObjectNotFound):
        storage.read("data/s/none")
    for bad in ("../escape", "data/../../x", "/abs", "a//b"):
        with pytest.raises(PathEscapesNamespace):
            storage.write(bad, b"no")
    assert bucket.keys() == {"lake/data/s/small", "lake/data/s/big"}


class Trickle(io.RawIOBase):
    """A pipe-like reader: never more than 64 KiB a read, whatever was asked."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._data.read(min(size if size >= 0 else 1 << 16, 1 << 16))


def test_an_objects_facts_are_the_same_from_a_listing_and_a_get_and_change_with_every_put(bucket: Bucket):
    """What GC trusts a verified tree file by (`Storage.facts`): ETag, size and LastModified, the
    same whether a listing or the GET that read the bytes gives them; a PUT of other bytes, and
    of the same bytes a second later, changes them."""
    storage = open_storage(bucket.ns)
    storage.write("_lakegc/ranges/r1", b"first")
    storage.write("_lakegc/ranges/sub/r2", b"not directly in the folder")
    listed = storage.facts("_lakegc/ranges/")
    assert set(listed) == {"_lakegc/ranges/r1"}
    data, facts = storage.read_with_facts("_lakegc/ranges/r1")
    assert (data, facts) == (b"first", listed["_lakegc/ranges/r1"])
    storage.write("_lakegc/ranges/r1", b"other")
    assert storage.facts("_lakegc/ranges/")["_lakegc/ranges/r1"] != facts
    time.sleep(1.1)  # LastModified has whole seconds
    before = storage.facts("_lakegc/ranges/")["_lakegc/ranges/r1"]
    storage.write("_lakegc/ranges/r1", b"other")
    assert storage.facts("_lakegc/ranges/")["_lakegc/ranges/r1"] != before


def test_a_source_that_hands_over_less_than_asked_is_stored_whole(bucket: Bucket):
    storage = open_storage(bucket.ns)
    for key, data in (("data/s/small", b"abc" * 50_000), ("data/s/big", bytes(range(256)) * (70 * 1024))):
        info = storage.write(key, Trickle(data))  # type: ignore[arg-type]
        assert (info.size, info.checksum) == (len(data), hashlib.md5(data).hexdigest())
        assert storage.read(key) == data


def test_a_storage_pickles_with_its_settings_and_not_its_client(bucket: Bucket):
    storage = open_storage(bucket.ns)
    storage.write("k", b"v")
    copy = pickle.loads(pickle.dumps(storage))
    assert isinstance(copy, S3Storage) and copy._client is None
    assert copy.settings == storage.settings and copy.settings.endpoint_url == bucket.endpoint
    assert copy.read("k") == b"v"
    assert "testing" not in repr(copy.settings)  # secrets stay out of logs


def test_settings_come_from_the_usual_aws_variables(monkeypatch: pytest.MonkeyPatch):
    for key, value in {
        "AWS_ENDPOINT_URL": "http://a:1",
        "AWS_ENDPOINT_URL_S3": "http://s3:2",
        "AWS_REGION": "",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "sk",
        "AWS_MAX_ATTEMPTS": "9",
    }.items():
        monkeypatch.setenv(key, value)
    s = S3Settings.from_env()
    assert (s.endpoint_url, s.region, s.access_key_id, s.secret_access_key, s.max_attempts) == (
        "http://s3:2",
        "eu-west-1",
        "id",
        "sk",
        9,
    )


# -- GC end to end ---------------------------------------------------------------------------------
@dataclass
class Lake:
    bucket: Bucket
    keys: dict[str, str]  # name -> namespace key
    commits: dict[str, str]
    outside: set[str]  # bucket keys that are not the lake's


def build_lake(cli: Cli, bucket: Bucket) -> Lake:
    """main: c1 (60 days ago) a=A1 b=B1; c2 (50 days ago) a=A2, rm b; c3 (yesterday) a=A3, plus a
    shallow copy of a and an object linked from outside the namespace. dev (from c3): D1 staged then
    overwritten by D2; E1 staged then removed; T1 written with a token and linked. With 21 days of
    retention, c2 stays (main's HEAD until yesterday), so A1 and B1 are expired garbage, and D1 and
    E1 uncommitted garbage."""
    now = utcnow()
    keys: dict[str, str] = {}
    commits: dict[str, str] = {}

    def put(name: str, branch: str, path: str) -> None:
        doc = cli("fs", "upload", f"{REPO}/{branch}/{path}", "--source", "-", "--json", input=f"{name} data").json()
        keys[name] = bucket.key_of(doc["physical_address"])

    def commit(label: str, branch: str, days_ago: float) -> None:
        when = (now - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        commits[label] = cli("commit", f"{REPO}/{branch}", "-m", label, "--date", when, "--json").json()["id"]

    outside = {"lake2/data/x", "lakeside/y", "external/linked", "lake-other/_lakegc/z"}
    for key in outside:
        bucket.put(key, b"not the lake's")
    cli("repo", "create", REPO, bucket.ns)
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    put("A1", "main", "a")
    put("B1", "main", "b")
    commit("c1", "main", 60)
    put("A2", "main", "a")
    cli("fs", "rm", f"{REPO}/main/b")
    commit("c2", "main", 50)
    put("A3", "main", "a")
    cli("fs", "cp", f"{REPO}/main/a", f"{REPO}/main/a-copy")
    cli(
        "fs",
        "link",
        f"{REPO}/main/ext",
        "--address",
        f"s3://{bucket.name}/external/linked",
        "--size",
        "14",
        "--checksum",
        "0" * 32,
    )
    commit("c3", "main", 1)
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    put("D1", "dev", "d")
    put("D2", "dev", "d")
    put("E1", "dev", "e")
    cli("fs", "rm", f"{REPO}/dev/e")
    claim = cli("fs", "get-address", f"{REPO}/dev/t", "--json").json()
    keys["T1"] = bucket.key_of(claim["physical_address"])
    bucket.put(f"lake/{keys['T1']}", b"T1 data")
    cli(
        "fs",
        "link",
        f"{REPO}/dev/t",
        "--address",
        claim["physical_address"],
        "--token",
        claim["token"],
        "--size",
        "7",
        "--checksum",
        hashlib.md5(b"T1 data").hexdigest(),
    )
    return Lake(bucket, keys, commits, outside)


EXPIRED = {"A1", "B1"}
UNCOMMITTED = {"D1", "E1"}


def expected_candidates(lake: Lake) -> dict[str, str]:
    return {lake.keys[n]: "expired" for n in EXPIRED} | {lake.keys[n]: "uncommitted" for n in UNCOMMITTED}


def lake_data(lake: Lake) -> set[str]:
    return {k.removeprefix("lake/") for k in lake.bucket.keys("lake/data/")}


def candidates(cli: Cli, run_id: str) -> dict[str, str]:
    return {c["address"]: c["reason"] for c in cli("gc", "candidates", REPO, run_id, "--json").json()}


def assert_live_intact(cli: Cli, lake: Lake) -> None:
    """Everything a ref still shows reads back, and nothing that is not the lake's moved."""
    assert cli("fs", "cat", f"{REPO}/main/a").stdout == "A3 data"
    assert cli("fs", "cat", f"{REPO}/main/a-copy").stdout == "A3 data"
    assert cli("fs", "cat", f"{REPO}/main/ext").stdout == "not the lake's"
    assert cli("fs", "cat", f"{REPO}/dev/d").stdout == "D2 data"
    assert cli("fs", "cat", f"{REPO}/dev/t").stdout == "T1 data"
    assert lake.outside <= lake.bucket.keys()
    assert "lake/_lakegc/repository.json" in lake.bucket.keys("lake/_lakegc/")


def test_gc_on_s3_deletes_exactly_the_garbage_and_nothing_young(cli: Cli, bucket: Bucket, spark):
    lake = build_lake(cli, bucket)
    before = lake_data(lake)

    young = cli("gc", "run", REPO, "--dry-run", "--json").json()  # default min-age 24h: all objects are new
    assert young["state"] == "marked" and young["num_candidates"] == 0 and lake_data(lake) == before

    dry = cli("gc", "run", REPO, "--dry-run", "--min-age", "0s", "--json").json()
    assert candidates(cli, dry["run_id"]) == expected_candidates(lake)
    assert dry["num_deleted"] == 0 and lake_data(lake) == before

    run = cli("gc", "run", REPO, "--min-age", "0s", "--clean", "--json").json()
    assert run["state"] == "swept" and run["num_failed"] == 0
    assert candidates(cli, run["run_id"]) == expected_candidates(lake)
    assert before - lake_data(lake) == set(expected_candidates(lake))
    assert run["num_deleted"] == 4 and run["bytes_deleted"] == 4 * len("A1 data")
    one_error(cli("fs", "cat", f"{REPO}/{lake.commits['c1']}/a", ok=False), "gone (410)")
    one_error(cli("fs", "cat", f"{REPO}/{lake.commits['c1']}/b", ok=False), "gone (410)")
    assert cli("fs", "cat", f"{REPO}/{lake.commits['c2']}/a").stdout == "A2 data"
    assert_live_intact(cli, lake)
    summary = json.loads(
        bucket.client.get_object(Bucket=bucket.name, Key=f"lake/_lakegc/gc/{run['run_id']}/summary.json")["Body"].read()
    )
    assert summary["num_deleted"] == 4


def test_gc_under_a_slowdown_storm_gives_the_same_result(cli: Cli, bucket: Bucket, spark):
    """One request in four answered 503 SlowDown, while building the lake and while collecting."""
    bucket.faults.slowdown_every = 4
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    run = cli("gc", "run", REPO, "--min-age", "0s", "--json").json()
    assert run["state"] == "swept" and run["num_failed"] == 0 and run["num_deleted"] == 4
    assert before - lake_data(lake) == set(expected_candidates(lake))
    assert bucket.faults.slowdowns >= 20, bucket.faults
    print(f"slowdown storm: {bucket.faults.slowdowns} of {bucket.faults.requests} requests answered 503")
    bucket.faults.slowdown_every = 0
    assert_live_intact(cli, lake)


def test_a_restore_window_on_s3_copies_aside_restores_and_purges(cli: Cli, bucket: Bucket, spark):
    """On S3 a quarantine is a server-side copy then a batched delete: the objects leave their
    keys (reads answer 410), come back with `gc restore`, and a purge deletes only inside the
    quarantine prefix."""
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    garbage = set(expected_candidates(lake))
    run = cli("gc", "run", REPO, "--min-age", "0s", "--quarantine", "2s", "--json").json()
    assert run["state"] == "swept" and run["num_moved"] == 4 and run["num_deleted"] == 0 and run["quarantine_until"]
    folder = f"lake/_lakegc/quarantine/{run['run_id']}/"
    assert {k.removeprefix(folder) for k in bucket.keys(folder)} == garbage
    assert before - lake_data(lake) == garbage
    one_error(cli("fs", "cat", f"{REPO}/{lake.commits['c1']}/a", ok=False), "gone (410)")
    done = cli("gc", "restore", REPO, run["run_id"], "--path", "a", "--json").json()
    assert done["num_restored"] == 1 and cli("fs", "cat", f"{REPO}/{lake.commits['c1']}/a").stdout == "A1 data"
    assert bucket.keys(folder) == {folder + k for k in garbage - {lake.keys["A1"]}}
    time.sleep(2.5)
    purged = cli("gc", "purge", REPO, "--json").json()
    assert purged["num_purged"] == 3 and bucket.keys(folder) == set()
    assert lake_data(lake) == (before - garbage) | {lake.keys["A1"]}
    assert_live_intact(cli, lake)


def deleted_outputs(bucket: Bucket, run_id: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for key in bucket.keys(f"lake/_lakegc/gc/{run_id}/deleted/"):
        body = bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read()
        rows |= {r["address"]: r for r in pq.read_table(io.BytesIO(body)).to_pylist()}
    return rows


def stopped_run(cli: Cli, *needles: str) -> dict[str, Any]:
    """Run GC expecting its sweep to stop short (one error line, exit 1); its summary."""
    one_error(cli("gc", "run", REPO, "--min-age", "0s", "--json", ok=False), *needles)
    return cli("gc", "runs", REPO, "--json").json()[0]


def test_keys_a_delete_batch_fails_are_retried_then_recorded_never_counted(cli: Cli, bucket: Bucket, spark):
    """A key the store keeps refusing is retried, then recorded: the run stays `sweeping` (its
    progress kept), `gc show` names the key and the store's error, and once the store heals
    `gc sweep RUN` deletes it, and nothing it already deleted is counted twice."""
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    stuck, flaky = lake.keys["A1"], lake.keys["D1"]
    errors_before = bucket.faults.delete_errors
    bucket.faults.fail_delete = {stuck: -1, flaky: 2}  # A1 always fails; D1 fails twice, then goes

    run = stopped_run(cli, "could not be deleted", "gc sweep")
    assert run["state"] == "sweeping" and run["num_failed"] == 1 and run["num_deleted"] == 3
    assert stuck in lake_data(lake) and flaky not in lake_data(lake)
    assert before - lake_data(lake) == set(expected_candidates(lake)) - {stuck}
    recorded = deleted_outputs(bucket, run["run_id"])
    assert recorded[stuck]["deleted"] is False and "injected failure" in recorded[stuck]["error"]
    assert recorded[flaky]["deleted"] is True and recorded[flaky]["error"] is None
    assert bucket.faults.delete_errors - errors_before == RETRIES + 2  # A1 failed every attempt of the sweep, D1 twice
    shown = cli("gc", "show", REPO, run["run_id"], "--json").json()
    assert shown["failed"] == [{"address": stuck, "error": recorded[stuck]["error"]}]
    table = cli("gc", "show", REPO, run["run_id"]).stdout
    assert "Not deleted: 1" in table and stuck in table
    assert_live_intact(cli, lake)

    bucket.faults.reset()  # the store heals: the run's own sweep goes on with what is left
    again = cli("gc", "sweep", REPO, run["run_id"], "--json").json()
    assert again["state"] == "swept" and again["num_deleted"] == 4 and again["num_failed"] == 0
    assert cli("gc", "show", REPO, run["run_id"], "--json").json()["failed"] == []
    assert before - lake_data(lake) == set(expected_candidates(lake))
    assert_live_intact(cli, lake)


def test_a_delete_batch_that_fails_whole_deletes_nothing_and_counts_nothing(cli: Cli, bucket: Bucket, spark):
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    bucket.faults.fail_delete_batches = -1
    run = stopped_run(cli, "4 object(s) could not be deleted")
    assert run["state"] == "sweeping" and run["num_deleted"] == 0 and run["num_failed"] == 4
    assert lake_data(lake) == before
    assert all(
        not r["deleted"] and "InternalError" in r["error"] for r in deleted_outputs(bucket, run["run_id"]).values()
    )
    bucket.faults.reset()
    assert cli("gc", "sweep", REPO, run["run_id"], "--json").json()["num_deleted"] == 4
    assert_live_intact(cli, lake)


def test_keys_the_store_throttles_slow_the_sweep_down_and_all_go_once_it_recovers(cli: Cli, bucket: Bucket, spark):
    """DeleteObjects answering SlowDown for some keys (a 200 with per-key errors, which no client
    retries by itself): the sweep counts the throttled requests, slows down, retries with jitter,
    and deletes everything once the store recovers; nothing is counted twice."""
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    errors_before = bucket.faults.delete_errors
    bucket.faults.delete_error_code = "SlowDown"
    bucket.faults.fail_delete = {lake.keys["A1"]: 2, lake.keys["B1"]: 3}
    run = cli("gc", "run", REPO, "--min-age", "0s", "--json").json()
    assert run["state"] == "swept" and run["num_deleted"] == 4 and run["num_failed"] == 0
    assert run["num_slowdowns"] >= 2, run  # the task saw the store throttle, and paced itself
    assert bucket.faults.delete_errors - errors_before == 5
    assert before - lake_data(lake) == set(expected_candidates(lake))
    answers = bucket.faults.delete_errors - errors_before
    print(f"throttled keys: {answers} SlowDown answers, {run['num_slowdowns']} slowed requests")
    assert_live_intact(cli, lake)


def test_dropped_connections_are_survived_with_the_same_result(cli: Cli, bucket: Bucket, spark):
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    dropped_before = bucket.faults.dropped
    bucket.faults.drop_every = 5  # every fifth request: the connection closes with no answer
    run = cli("gc", "run", REPO, "--min-age", "0s", "--json").json()
    assert run["state"] == "swept" and run["num_deleted"] == 4 and run["num_failed"] == 0
    assert bucket.faults.dropped - dropped_before >= 5, bucket.faults
    bucket.faults.drop_every = 0
    assert before - lake_data(lake) == set(expected_candidates(lake))
    print(f"dropped connections: {bucket.faults.dropped} of {bucket.faults.requests} requests")
    assert_live_intact(cli, lake)


def test_a_listing_that_keeps_failing_fails_the_run_before_anything_is_deleted(cli: Cli, bucket: Bucket, spark):
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    deletes_before, list_errors_before = bucket.faults.delete_requests, bucket.faults.list_errors
    bucket.faults.fail_list = -1
    one_error(cli("gc", "run", REPO, "--min-age", "0s", ok=False), "InternalError")
    bucket.faults.fail_list = 0
    run = cli("gc", "runs", REPO, "--json").json()
    assert [r["state"] for r in run] in ([], ["failed"]) and all(r["num_deleted"] == 0 for r in run)
    assert lake_data(lake) == before and bucket.faults.list_errors - list_errors_before >= 3
    assert bucket.faults.delete_requests == deletes_before  # not one delete request


def test_an_unreachable_store_is_one_error_line_and_nothing_moves(
    cli: Cli, bucket: Bucket, spark, monkeypatch: pytest.MonkeyPatch
):
    lake = build_lake(cli, bucket)
    before = lake_data(lake)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    line = one_error(cli("gc", "run", REPO, "--min-age", "0s", ok=False), "s3://", "connect")
    assert lake.bucket.name in line
    monkeypatch.setenv("AWS_ENDPOINT_URL", bucket.endpoint)
    assert lake_data(lake) == before and cli("gc", "runs", REPO, "--json").json() == []


def test_a_missing_bucket_or_a_taken_prefix_is_refused(cli: Cli, bucket: Bucket):
    one_error(cli("repo", "create", REPO, "s3://no-such-bucket-here/lake", ok=False), "does not exist")
    bucket.put("lake/stray", b"x")
    one_error(cli("repo", "create", REPO, bucket.ns, ok=False), "not empty")
    cli("repo", "create", "lakegc://other", f"s3://{bucket.name}/fresh")
    one_error(cli("repo", "create", REPO, f"s3://{bucket.name}/fresh", ok=False), "overlaps repository 'other'")


def test_hand_written_keys_with_dot_or_empty_segments_are_never_touched_and_do_not_break_gc(
    cli: Cli, bucket: Bucket, spark
):
    """Keys put into the namespace by hand that a path-normalising store or proxy would read as
    another object (`..`, `.` and empty segments, issue 16) are left alone; the run still
    collects the real garbage. Percent-encoded names are ordinary keys: garbage, deleted as written."""
    lake = build_lake(cli, bucket)
    slice_name = next(iter(lake_data(lake))).split("/")[1]
    odd = [
        f"lake/data/{slice_name}/../../../evil",
        f"lake/data/{slice_name}//double",
        f"lake/data/{slice_name}/./dot",
        "lake/data//empty-slice/x",
        "lake/data/../outside-ish",
    ]
    for key in odd:
        bucket.put(key, b"odd")
    bucket.put("evil", b"must stay")  # where `..` would lead: outside the namespace
    encoded = f"lake/data/{slice_name}/%2e%2e%2f%2e%2e%2fevil"
    bucket.put(encoded, b"garbage")
    listed = bucket.keys("lake/")
    assert set(odd) <= listed, "the S3 server normalised a key: this test proves nothing"
    run = cli("gc", "run", REPO, "--min-age", "0s", "--clean", "--json").json()
    assert run["state"] == "swept" and run["num_failed"] == 0
    assert set(odd) | {"evil"} <= bucket.keys()
    assert encoded not in bucket.keys("lake/")
    assert run["num_deleted"] == 5  # the four of expected_candidates and the encoded one
    assert_live_intact(cli, lake)


# -- moves (a run's quarantine, and back) -------------------------------------------------------------
def test_objects_move_to_their_destination_and_back_on_s3(bucket: Bucket):
    storage = open_storage(bucket.ns)
    big = bytes(range(256)) * (70 * 1024)  # 17.5 MiB: a multipart copy
    storage.write("data/s1/a", b"a")
    storage.write("data/s1/big", io.BytesIO(big))
    moves = [(k, f"_lakegc/quarantine/r1/{k}") for k in ("data/s1/a", "data/s1/big", "data/s1/missing")]
    assert sorted((o.key, o.ok) for o in storage.move_many(moves)) == [
        ("data/s1/a", True),
        ("data/s1/big", True),
        ("data/s1/missing", True),
    ]
    assert bucket.keys("lake/data/") == set()
    assert storage.read("_lakegc/quarantine/r1/data/s1/big") == big
    assert all(o.ok for o in storage.move_many([(d, k) for k, d in moves[:2]]))
    assert storage.read("data/s1/a") == b"a" and storage.read("data/s1/big") == big
    assert bucket.keys("lake/_lakegc/") == set()


def test_a_move_never_replaces_another_object_but_completes_its_own_copy(bucket: Bucket):
    storage = open_storage(bucket.ns)
    storage.write("data/s1/a", b"a")
    storage.write("_lakegc/quarantine/r1/data/s1/a", b"someone else's")
    [refused] = storage.move_many([("data/s1/a", "_lakegc/quarantine/r1/data/s1/a")])
    assert not refused.ok and "already holds another object" in refused.error
    assert storage.read("data/s1/a") == b"a"
    # a crash after the copy, before the delete: the retry recognises its own copy and finishes
    storage.write("data/s1/b", b"b")
    storage._copy_for_move("data/s1/b", "_lakegc/quarantine/r1/data/s1/b")
    assert all(o.ok for o in storage.move_many([("data/s1/b", "_lakegc/quarantine/r1/data/s1/b")]))
    assert not storage.exists("data/s1/b") and storage.read("_lakegc/quarantine/r1/data/s1/b") == b"b"
