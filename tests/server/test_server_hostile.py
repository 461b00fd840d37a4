"""`lakegc serve` against hostile and careless input: every route, with odd names and paths in each
place a client can put one, malformed bodies, ranges and preconditions. Nothing a client sends may
give a 500, and every error carries a JSON `message` (the fixture also checks the server's log for
a traceback)."""

from __future__ import annotations

import itertools
import json

import pytest

pytestmark = pytest.mark.slow  # 5,400 requests to a server process: the second CI step

WEIRD = ["", "..", "%2e%2e", "a%2fb", "%00", "x" * 3000, "\u00e9", "a b", "a//b", "/", "main~1", "main^", "%ff",
         "*", "?", "#", "a\\b", "-1", "0", "null", "[]", "{}"]  # fmt: skip
BODIES = [
    b"", b"{", b"[]", b"null", b'{"name": 1}', b'{"type": 5}', b'{"message": null}', b"\xff\xfe",
    json.dumps({"paths": ["a"] * 1001}).encode(),
    b'{"staging": {}, "checksum": "", "size_bytes": -1}',
    b'{"staging": {"physical_address": "local:///etc/passwd"}, "checksum": "x", "size_bytes": 1}',
    b'{"ref": "nope"}', b'{"id": "", "ref": ""}', b'{"src_path": "../x"}',
    b'{"default_retention_days": -5, "branches": []}', b'{"default_retention_days": "x"}',
]  # fmt: skip
ROUTES = [
    ("GET", "/repositories/{w}"), ("DELETE", "/repositories/{w}"), ("GET", "/repositories/{w}/metadata"),
    ("GET", "/repositories/repo/branches/{w}"), ("DELETE", "/repositories/repo/branches/{w}"),
    ("PUT", "/repositories/repo/branches/{w}"), ("POST", "/repositories/repo/branches/{w}/revert"),
    ("POST", "/repositories/repo/branches/{w}/cherry-pick"), ("GET", "/repositories/repo/branches/{w}/diff"),
    ("POST", "/repositories/repo/branches/{w}/commits"), ("GET", "/repositories/repo/commits/{w}"),
    ("GET", "/repositories/repo/refs/{w}/commits"), ("POST", "/repositories/repo/refs/{w}/merge/main"),
    ("GET", "/repositories/repo/refs/{w}/diff/main"), ("GET", "/repositories/repo/refs/main/diff/{w}"),
    ("GET", "/repositories/repo/tags/{w}"), ("DELETE", "/repositories/repo/tags/{w}"),
    ("POST", "/repositories/repo/tags"), ("POST", "/repositories/repo/branches"), ("POST", "/repositories"),
    ("POST", "/repositories/repo/branches/main/objects?path={w}"),
    ("GET", "/repositories/repo/refs/main/objects?path={w}"), ("HEAD", "/repositories/repo/refs/main/objects?path={w}"),
    ("GET", "/repositories/repo/refs/main/objects/stat?path={w}"),
    ("GET", "/repositories/repo/refs/main/objects/ls?prefix={w}&delimiter={w}&after={w}&amount={w}"),
    ("DELETE", "/repositories/repo/branches/main/objects?path={w}"),
    ("POST", "/repositories/repo/branches/main/objects/delete"),
    ("POST", "/repositories/repo/branches/main/objects/copy?dest_path={w}"),
    ("GET", "/repositories/repo/branches/main/staging/backing?path={w}"),
    ("PUT", "/repositories/repo/branches/main/staging/backing?path={w}"),
    ("PUT", "/repositories/repo/settings/gc_rules"), ("POST", "/repositories/repo/gc/rules"),
    ("GET", "/repositories?amount={w}&after={w}&prefix={w}"),
    ("GET", "/repositories/repo/refs/main/commits?since={w}&stop_at={w}&objects={w}&amount={w}"),
    ("GET", "/repositories/repo/refs/main/diff/main?type={w}&delimiter={w}"),
]  # fmt: skip


def test_nothing_a_client_sends_gives_a_500_or_an_error_without_a_message(server, sdk) -> None:
    server.request("POST", "/repositories/repo/branches/main/objects?path=a/b.txt", body=b"hello")
    bad = []

    def send(method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> None:
        response = server.request(method, path, body=body, headers=headers or {})
        if response.status >= 500:
            bad.append((method, path, body, response.status, response.data[:200]))
        elif method != "HEAD" and response.status >= 400:
            try:
                assert json.loads(response.data)["message"]
            except (ValueError, KeyError, AssertionError):
                bad.append((method, path, body, response.status, response.data[:200]))

    for (method, route), weird in itertools.product(ROUTES, WEIRD):
        for body in BODIES if method in ("POST", "PUT") else [None]:
            send(method, route.format(w=weird), body, {"Content-Type": "application/json"} if body is not None else {})
    for value in ("bytes=a-b", "bytes=5-1", "items=0-1", "bytes=0-1,3-4", "bytes=-0", "bytes=99999999999999999999-"):
        send("GET", "/repositories/repo/refs/main/objects?path=a/b.txt", headers={"Range": value})
    for headers in ({"If-None-Match": "abc"}, {"If-Match": "*"}, {"Content-Type": "multipart/form-data; boundary=x"},
                    {"Content-Type": "multipart/form-data"}):  # fmt: skip
        send("POST", "/repositories/repo/branches/main/objects?path=c", b"--x\r\nbroken", headers)
    assert bad == []
    assert server.request("GET", "/repositories/repo/refs/main/objects?path=a/b.txt").data == b"hello"
