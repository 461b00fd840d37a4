"""`lakegc serve`: objects through the real clients (lakefs-sdk, lakefs, lakefs-spec with pandas),
ranged reads, and a collected object's 410 after a GC run."""

from __future__ import annotations

import json
from datetime import timedelta

import lakefs
import lakefs_sdk
import pandas as pd
import pytest
from lakefs_spec import LakeFSFileSystem
from support.lakegc_server import status_of

from lakegc.timeutil import utcnow

# Each test starts a server process and drives several clients (one runs GC on Spark): the slow CI
# step, which keeps the first within its 12 minutes.
pytestmark = pytest.mark.slow


def test_objects_through_lakefs_sdk_with_ranges_listing_copy_and_delete(server, sdk) -> None:
    objects = lakefs_sdk.ObjectsApi(sdk)
    body = b"0123456789"

    def local(name: str, data: bytes) -> str:  # lakefs-sdk uploads a local file, as multipart/form-data
        path = server.env.root / f"upload-{name}"
        path.write_bytes(data)
        return str(path)

    made = objects.upload_object("repo", "main", "dir/a.bin", content=local("a", body))
    assert (made.path, made.size_bytes, made.path_type) == ("dir/a.bin", 10, "object")
    assert bytes(objects.get_object("repo", "main", "dir/a.bin")) == body
    assert objects.stat_object("repo", "main", "dir/a.bin").checksum == made.checksum
    ranged = [
        ("bytes=2-4", 206, b"234", "bytes 2-4/10"),
        ("bytes=7-", 206, b"789", "bytes 7-9/10"),
        ("bytes=-3", 206, b"789", "bytes 7-9/10"),
        ("bytes=5-100", 206, b"56789", "bytes 5-9/10"),
    ]
    for header, status, content, content_range in ranged:
        response = server.request(
            "GET", "/repositories/repo/refs/main/objects?path=dir/a.bin", headers={"Range": header}
        )
        assert (response.status, response.data, response.headers["content-range"]) == (status, content, content_range)
    past = server.request("GET", "/repositories/repo/refs/main/objects?path=dir/a.bin", headers={"Range": "bytes=10-"})
    assert past.status == 416 and past.headers["content-range"] == "bytes */10" and json.loads(past.data)["message"]
    assert server.request("HEAD", "/repositories/repo/refs/main/objects?path=dir/a.bin").status == 200
    assert server.request("HEAD", "/repositories/repo/refs/main/objects?path=nope").status == 404

    objects.upload_object("repo", "main", "dir/sub/b.bin", content=local("b", b"b"))
    objects.upload_object("repo", "main", "top.bin", content=local("t", b"t"))
    listed = objects.list_objects("repo", "main", delimiter="/")
    assert [(o.path, o.path_type) for o in listed.results] == [("dir/", "common_prefix"), ("top.bin", "object")]
    inside = objects.list_objects("repo", "main", prefix="dir/", delimiter="/")
    assert [o.path for o in inside.results] == ["dir/a.bin", "dir/sub/"]
    flat = objects.list_objects("repo", "main", amount=2)
    assert [o.path for o in flat.results] == ["dir/a.bin", "dir/sub/b.bin"] and flat.pagination.has_more
    assert [o.path for o in objects.list_objects("repo", "main", after="dir/sub/b.bin").results] == ["top.bin"]

    copied = objects.copy_object("repo", "main", "copy.bin", lakefs_sdk.ObjectCopyCreation(src_path="top.bin"))
    assert copied.checksum == objects.stat_object("repo", "main", "top.bin").checksum
    objects.delete_object("repo", "main", "copy.bin")
    assert status_of(lambda: objects.stat_object("repo", "main", "copy.bin")) == 404
    result = objects.delete_objects("repo", "main", lakefs_sdk.PathList(paths=["top.bin", "no-such", "dir/"]))
    assert result.errors == []
    assert [o.path for o in objects.list_objects("repo", "main").results] == ["dir/a.bin", "dir/sub/b.bin"]


def test_the_lakefs_package_uploads_reads_commits_and_merges(server, sdk) -> None:
    client = lakefs.Client(host=server.url, username=server.key, password=server.secret)
    repo = lakefs.Repository("repo", client=client)
    main = repo.branch("main")
    main.object("hello.txt").upload(data=b"hello, lake", content_type="text/plain")  # the raw, chunked body
    assert main.object("hello.txt").reader().read() == b"hello, lake"
    with main.object("hello.txt").reader() as reader:
        reader.seek(7)
        assert reader.read(4) == b"lake"
    main.object("empty").upload(data=b"")
    assert main.object("empty").stat().size_bytes == 0 and main.object("empty").reader().read() == b""
    main.commit(message="first")
    feature = repo.branch("feature").create(source_reference="main")
    feature.object("more.txt").upload(data=b"more")
    feature.commit(message="more")
    feature.merge_into(main)
    assert main.object("more.txt").exists()
    assert [c.message for c in main.log(max_amount=3)][1:] == ["more", "first"]
    assert repo.branch("feature").create(source_reference="main", exist_ok=True).id == "feature"


def test_pandas_round_trip_through_lakefs_spec(server, sdk) -> None:
    options = {"host": server.url, "username": server.key, "password": server.secret}
    frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    frame.to_parquet("lakefs://repo/main/tables/t.parquet", storage_options=options)
    assert pd.read_parquet("lakefs://repo/main/tables/t.parquet", storage_options=options).equals(frame)
    fs = LakeFSFileSystem(**options)
    assert fs.exists("repo/main/tables/t.parquet") and not fs.exists("repo/main/tables/nope")
    assert [p["name"] for p in fs.ls("repo/main/tables/")] == ["repo/main/tables/t.parquet"]
    lakefs_sdk.CommitsApi(sdk).commit("repo", "main", lakefs_sdk.CommitCreation(message="t"))  # a merge needs it clean
    with fs.transaction("repo", "main") as tx:
        fs.pipe(f"repo/{tx.branch.id}/tables/u.csv", b"x,y\n1,2\n")
        tx.commit(message="add u")
    assert pd.read_csv("lakefs://repo/main/tables/u.csv", storage_options=options).to_dict("list") == {
        "x": [1],
        "y": [2],
    }


def test_duckdb_reads_and_writes_through_lakefs_spec(server, sdk) -> None:
    import duckdb

    options = {"host": server.url, "username": server.key, "password": server.secret}
    pd.DataFrame({"id": [1, 2, 3], "v": [0.5, 1.5, 2.5]}).to_parquet(
        "lakefs://repo/main/in/t.parquet", storage_options=options
    )
    con = duckdb.connect()
    con.register_filesystem(LakeFSFileSystem(**options))
    assert con.sql("SELECT sum(id), sum(v) FROM read_parquet('lakefs://repo/main/in/t.parquet')").fetchall() == [
        (6, 4.5)
    ]
    con.sql("COPY (SELECT id * 10 AS id FROM read_parquet('lakefs://repo/main/in/t.parquet')) "
            "TO 'lakefs://repo/main/out/t.parquet' (FORMAT parquet)")  # fmt: skip
    assert pd.read_parquet("lakefs://repo/main/out/t.parquet", storage_options=options)["id"].tolist() == [10, 20, 30]


def test_a_collected_object_reads_410_gone(server, sdk, cli) -> None:
    objects, commits = lakefs_sdk.ObjectsApi(sdk), lakefs_sdk.CommitsApi(sdk)
    for version in ("v1", "v2"):
        (server.env.root / version).write_bytes(version.encode())
    objects.upload_object("repo", "main", "x", content=str(server.env.root / "v1"))
    old = commits.commit(
        "repo", "main", lakefs_sdk.CommitCreation(message="v1", date=int((utcnow() - timedelta(days=30)).timestamp()))
    )
    objects.upload_object("repo", "main", "x", content=str(server.env.root / "v2"))
    commits.commit(
        "repo", "main", lakefs_sdk.CommitCreation(message="v2", date=int((utcnow() - timedelta(days=20)).timestamp()))
    )
    rules = lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[])
    server.request(
        "PUT",
        "/repositories/repo/settings/gc_rules",
        body=rules.to_json(),
        headers={"Content-Type": "application/json"},
    )
    cli("gc", "set-config", "lakegc://repo", "-f", "-", input=json.dumps({"default_retention_days": 7, "branches": []}))
    cli("gc", "run", "lakegc://repo", "--min-age", "0s")
    gone = server.request("GET", f"/repositories/repo/refs/{old.id}/objects?path=x")
    assert gone.status == 410 and "gone" in json.loads(gone.data)["message"]
    # as lakeFS: the entry is still there (HEAD and stat answer for it), only its data is gone
    assert server.request("HEAD", f"/repositories/repo/refs/{old.id}/objects?path=x").status == 200
    assert objects.stat_object("repo", old.id, "x").size_bytes == 2
    fs = LakeFSFileSystem(host=server.url, username=server.key, password=server.secret)
    assert fs.exists(f"lakefs://repo/{old.id}/x") and fs.info(f"lakefs://repo/{old.id}/x")["size"] == 2
    with pytest.raises(OSError, match="410|[Gg]one"):  # lakefs-spec's error for a status it has no builtin for
        fs.cat_file(f"lakefs://repo/{old.id}/x")
    assert not fs.exists(f"lakefs://repo/{old.id}/no-such-path")
    assert server.request("HEAD", "/repositories/repo/refs/main/objects?path=x").status == 200
    assert bytes(objects.get_object("repo", "main", "x")) == b"v2"


@pytest.mark.parametrize("path", ["../escape", "a/../../escape", "%2e%2e/escape", "a//b", "/abs", ""])
def test_object_paths_that_would_leave_the_namespace_are_refused(server, sdk, path: str) -> None:
    before = sorted(p.relative_to(server.env.root) for p in server.env.root.rglob("*"))
    response = server.request("POST", f"/repositories/repo/branches/main/objects?path={path}", body=b"evil")
    assert response.status == 400 and json.loads(response.data)["message"]
    read = server.request("GET", f"/repositories/repo/refs/main/objects?path={path}")
    assert read.status in (400, 404) and json.loads(read.data)["message"]
    assert sorted(p.relative_to(server.env.root) for p in server.env.root.rglob("*")) == before
    assert not (server.env.root.parent / "escape").exists()
