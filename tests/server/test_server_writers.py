"""`lakegc serve`: the writer's side through the real clients: staging links (write the object
yourself, then link it) with the server's address rule, reset of one path or a prefix,
conditional writes, objects larger than any buffer, and the GC fence for API writes."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import time
from pathlib import Path

import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ObjectExistsException
from support.expiring import NAME, PARAMS, expiring_lake, gc_while_hammered, readable
from support.lakegc_server import Server, running_server, status_of

pytestmark = pytest.mark.slow  # server processes, one GC on Spark: the slow CI step


def local_path(address: str) -> Path:
    assert address.startswith("local:///"), address
    return Path(address.removeprefix("local://"))


def staging_metadata(address: str, data: bytes, checksum: str | None = None) -> lakefs_sdk.StagingMetadata:
    return lakefs_sdk.StagingMetadata(
        staging=lakefs_sdk.StagingLocation(physical_address=address),
        checksum=checksum or hashlib.md5(data).hexdigest(),
        size_bytes=len(data),
    )


def test_staging_links_accept_only_the_addresses_the_server_handed_out(server, sdk, tmp_path: Path) -> None:
    staging, objects = lakefs_sdk.StagingApi(sdk), lakefs_sdk.ObjectsApi(sdk)
    location = staging.get_physical_address("repo", "main", "big.bin")
    address = location.physical_address
    assert location.presigned_url is None and local_path(address).is_relative_to(server.env.namespace())
    data = b"written by an external writer" * 1000
    local_path(address).parent.mkdir(parents=True, exist_ok=True)
    local_path(address).write_bytes(data)

    # what is refused changes nothing, and leaves the address usable
    refused = {
        "another path": lambda: staging.link_physical_address(
            "repo", "main", "other.bin", staging_metadata(address, data)
        ),
        "a wrong checksum": lambda: staging.link_physical_address(
            "repo", "main", "big.bin", staging_metadata(address, data, "0" * 32)
        ),
        "presigning": lambda: staging.get_physical_address("repo", "main", "x", presign=True),
    }
    for what, call in refused.items():
        assert status_of(call) == 400, what
    linked = staging.link_physical_address("repo", "main", "big.bin", staging_metadata(address, data))
    assert (linked.path, linked.size_bytes, linked.physical_address) == ("big.bin", len(data), address)
    assert bytes(objects.get_object("repo", "main", "big.bin")) == data
    assert (
        status_of(lambda: staging.link_physical_address("repo", "main", "big.bin", staging_metadata(address, data)))
        == 400
    )

    # never handed out: another entry's object, a made-up key, a file outside the namespace
    mine = tmp_path / "outside.bin"
    mine.write_bytes(b"secret")
    for stolen in (address, address.rsplit("/", 1)[0] + "/made-up", f"local://{mine}", "local:///etc/passwd"):
        response = server.request(
            "PUT",
            "/repositories/repo/branches/main/staging/backing?path=stolen",
            body=staging_metadata(stolen, b"secret").to_json(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status == 400 and json.loads(response.data)["message"], stolen
    assert status_of(lambda: objects.stat_object("repo", "main", "stolen")) == 404


def test_an_allowed_external_prefix_admits_links_under_it_and_nothing_beside_it(env, tmp_path: Path) -> None:
    allowed, beside = tmp_path / "imports", tmp_path / "imports-not"
    for folder in (allowed, beside):
        folder.mkdir()
        (folder / "f.csv").write_bytes(b"a,b\n")
    (allowed / "escape").symlink_to(beside)  # a symlink under the prefix does not widen it
    env.lake().create_repository("repo", str(env.namespace()))
    with running_server(env, "--allowed-external-prefix", str(allowed)) as server:
        conf = lakefs_sdk.Configuration(host=server.api, username=server.key, password=server.secret)
        with lakefs_sdk.ApiClient(conf) as client:
            staging = lakefs_sdk.StagingApi(client)
            ok = staging.link_physical_address(
                "repo", "main", "f", staging_metadata(f"local://{allowed}/f.csv", b"a,b\n")
            )
            assert ok.size_bytes == 4
            for where in (f"local://{beside}/f.csv", f"local://{allowed}/escape/f.csv"):
                assert (
                    status_of(
                        lambda w=where: staging.link_physical_address(
                            "repo", "main", "g", staging_metadata(w, b"a,b\n")
                        )
                    )
                    == 400
                )
            assert bytes(lakefs_sdk.ObjectsApi(client).get_object("repo", "main", "f")) == b"a,b\n"


def test_reset_of_one_object_or_a_prefix_and_exclusive_writes(server, sdk) -> None:
    client = lakefs.Client(host=server.url, username=server.key, password=server.secret)
    main = lakefs.Repository("repo", client=client).branch("main")
    for path in ("a/1", "a/2", "b/1", "c"):
        main.object(path).upload(data=path.encode())
    main.reset_changes(path_type="object", path="c")
    main.reset_changes(path_type="common_prefix", path="a/")
    assert [c.path for c in main.uncommitted()] == ["b/1"]
    assert (
        server.request(
            "PUT",
            "/repositories/repo/branches/main",
            body=b'{"type": "object"}',
            headers={"Content-Type": "application/json"},
        ).status
        == 400
    )  # an object reset without a path

    with pytest.raises(ObjectExistsException):
        main.object("b/1").upload(data=b"again", mode="xb")  # If-None-Match: *
    assert main.object("b/1").reader().read() == b"b/1"
    response = server.request(
        "POST", "/repositories/repo/branches/main/objects?path=b/1", body=b"x", headers={"If-None-Match": "*"}
    )
    assert response.status == 412 and json.loads(response.data)["message"]
    etag = main.object("b/1").stat().checksum
    for match, status in (("wrong", 412), (f'"{etag}"', 201)):
        response = server.request(
            "POST", "/repositories/repo/branches/main/objects?path=b/1", body=b"v2", headers={"If-Match": match}
        )
        assert response.status == status, match
    assert main.object("b/1").reader().read() == b"v2"


def test_objects_larger_than_any_buffer_stream_in_and_out(server, sdk) -> None:
    """64 MiB through each upload form (a raw chunked body from `lakefs`, multipart from
    `lakefs-sdk`), then read whole and by range: the bytes are the same."""
    data = hashlib.sha256(b"seed").digest() * (2 << 20)  # 64 MiB
    client = lakefs.Client(host=server.url, username=server.key, password=server.secret)
    main = lakefs.Repository("repo", client=client).branch("main")
    main.object("raw.bin").upload(data=data)
    file = server.env.root / "multipart.bin"
    file.write_bytes(data)
    objects = lakefs_sdk.ObjectsApi(sdk)
    objects.upload_object("repo", "main", "multipart.bin", content=str(file))
    for path in ("raw.bin", "multipart.bin"):
        assert objects.stat_object("repo", "main", path).size_bytes == len(data)
        assert hashlib.sha256(bytes(objects.get_object("repo", "main", path))).digest() == hashlib.sha256(data).digest()
        tail = server.request(
            "GET", f"/repositories/repo/refs/main/objects?path={path}", headers={"Range": "bytes=50000000-50000099"}
        )
        assert tail.status == 206 and tail.data == data[50_000_000:50_000_100]
    with main.object("raw.bin").reader() as reader:
        reader.seek(len(data) - 5)
        assert reader.read() == data[-5:]


def test_api_writes_meet_the_sweeps_fence(env, spark, monkeypatch) -> None:
    """While a sweep's fence stands, every way the API offers back to an expiring commit is refused
    with 423 (not 409, which lakeFS's clients read as "exists") and a message naming the run; other
    work goes on; and a writer hammering the API during a real run loses no object."""
    lake, repo, old, paths = expiring_lake(env, objects=200)
    with running_server(env) as server:
        conf = lakefs_sdk.Configuration(host=server.api, username=server.key, password=server.secret)
        with lakefs_sdk.ApiClient(conf) as client:
            _refused_behind_a_raised_fence(server, client, repo, old, paths)
            created, refused, deleted = _hammer_during_a_run(client, lake, old, spark, monkeypatch)
    assert refused > 0, "the writer never ran while the fence stood"
    assert created == [] and deleted == len(paths) and not readable(repo, old, paths)


def _refused_behind_a_raised_fence(server: Server, client, repo, old: str, paths: list[str]) -> None:
    branches, tags = lakefs_sdk.BranchesApi(client), lakefs_sdk.TagsApi(client)
    objects, refs = lakefs_sdk.ObjectsApi(client), lakefs_sdk.RefsApi(client)
    repo.gc_source().raise_fence("run-x", {b.head for b in repo.branches()}, PARAMS)
    attempts = {
        "branch": lambda: branches.create_branch(NAME, lakefs_sdk.BranchCreation(name="revive", source=old)),
        "tag": lambda: tags.create_tag(NAME, lakefs_sdk.TagCreation(id="keep", ref=old)),
        "copy": lambda: objects.copy_object(
            NAME, "main", "copied", lakefs_sdk.ObjectCopyCreation(src_path=paths[0], src_ref=old)
        ),
        "merge": lambda: refs.merge_into_branch(NAME, old, "main", lakefs_sdk.Merge(allow_empty=True)),
        "rules": lambda: lakefs_sdk.RepositoriesApi(client).set_gc_rules(
            NAME, lakefs_sdk.GarbageCollectionRules(default_retention_days=90, branches=[])
        ),
    }
    for what, attempt in attempts.items():
        response = None
        try:
            attempt()
        except lakefs_sdk.exceptions.ApiException as exc:
            response = exc
        assert response is not None and response.status == 423, what
        assert "run-x" in json.loads(response.body)["message"], what
    branches.create_branch(NAME, lakefs_sdk.BranchCreation(name="feature", source="main"))  # other work goes on
    repo.gc_source().lower_fence("run-x")
    branches.delete_branch(NAME, "feature")


def _hammer_during_a_run(client, lake, old: str, spark, monkeypatch) -> tuple[list[str], int, int]:
    """A writer creates tags and branches on `old` through the API from the moment the fence
    stands until it comes down; returns what it created, how many 423s it got, what GC deleted."""
    branches, tags = lakefs_sdk.BranchesApi(client), lakefs_sdk.TagsApi(client)

    def attempt(name: str) -> bool | None:
        try:
            if name[-1] in "13579":
                tags.create_tag(NAME, lakefs_sdk.TagCreation(id=name, ref=old))
            else:
                branches.create_branch(NAME, lakefs_sdk.BranchCreation(name=name, source=old))
            return True
        except lakefs_sdk.exceptions.ApiException as exc:
            return False if exc.status == 423 else None

    return gc_while_hammered(lake, spark, monkeypatch, attempt)


def test_a_client_that_hangs_up_mid_upload_leaves_nothing_behind(server, sdk) -> None:
    """Half a chunked body, then the connection drops: nothing staged, no partial file left in
    the namespace, and no traceback in the server's log (the fixture checks it)."""
    host, port = server.url.removeprefix("http://").split(":")
    auth = base64.b64encode(f"{server.key}:{server.secret}".encode()).decode()
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(
            b"POST /api/v1/repositories/repo/branches/main/objects?path=half HTTP/1.1\r\n"
            + f"Host: {host}\r\nAuthorization: Basic {auth}\r\n".encode()
            + b"Transfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n"
            + b"100000\r\n"
            + b"x" * 300_000
        )
    objects = lakefs_sdk.ObjectsApi(sdk)
    deadline = time.monotonic() + 30  # the server notices the hang-up on its own time
    while time.monotonic() < deadline and any(server.env.namespace().rglob(".lakegc-tmp-*")):
        time.sleep(0.1)
    assert not any(server.env.namespace().rglob(".lakegc-tmp-*"))
    assert status_of(lambda: objects.stat_object("repo", "main", "half")) == 404
    objects.upload_object("repo", "main", "after", content=__file__)  # the server goes on
