"""A real S3-API server on loopback for the tests (moto in server mode, its own process), and a
fault-injecting HTTP proxy in front of it.

The proxy forwards every request unchanged, except what a test asks it to break: every Nth request
answered `503 SlowDown` (as S3 does under load), or chosen keys of `DeleteObjects` reported as
failed (and really left in place), as S3 reports partial batch failures.
"""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from support.loopback import free_port

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "expect"}
_EMPTY_DELETE_RESULT = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>'
)
_SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class MotoServer:
    """`moto_server` in a process of its own, on a free loopback port."""

    def __init__(self, log: Path):
        self.port = free_port()
        exe = Path(sys.executable).with_name("moto_server")
        if not exe.exists():
            pytest.fail(f"moto_server not found next to {sys.executable}: install the test extras (moto[server])")
        self._log = open(log, "wb")  # noqa: SIM115 (the server writes to it until stop() closes it)
        self.proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"moto_server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


@dataclass
class Faults:
    """What the proxy breaks, and what it counted. Keys are matched by their end (`Key` suffix)."""

    slowdown_every: int = 0  # every Nth request gets 503 SlowDown (0: never)
    fail_delete: dict[str, int] = field(default_factory=dict)  # key suffix -> failures left (-1: always)
    fail_delete_batches: int = 0  # whole DeleteObjects requests answered 500 (-1: always)
    delete_error_code: str = "InternalError"  # the code of a key fail_delete fails ("SlowDown": throttled)
    drop_every: int = 0  # every Nth request: the connection closed with no answer (0: never)
    fail_list: int = 0  # ListObjectsV2 requests answered 500 InternalError (-1: always)
    dropped: int = 0
    list_errors: int = 0
    requests: int = 0
    slowdowns: int = 0
    delete_requests: int = 0
    delete_errors: int = 0
    multipart_uploads: int = 0
    # key suffix -> LastModified the listings report (S3 sets it on write; tests of age cutoffs need old objects)
    backdate: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.slowdown_every, self.fail_delete, self.fail_delete_batches, self.backdate = 0, {}, 0, {}
            self.delete_error_code, self.drop_every, self.fail_list = "InternalError", 0, 0


class FaultProxy:
    """A threaded HTTP proxy to `upstream_port`, breaking what `faults` says."""

    def __init__(self, upstream_port: int):
        self.faults = Faults()
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
                pass

            def _any(self) -> None:
                proxy._handle(self, upstream_port)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()

    def _handle(self, h: BaseHTTPRequestHandler, upstream_port: int) -> None:
        body = _read_body(h)
        f = self.faults
        with f.lock:
            f.requests += 1
            slowdown = f.slowdown_every > 0 and f.requests % f.slowdown_every == 0
            f.slowdowns += slowdown
            is_delete = h.command == "POST" and re.search(r"[?&]delete(=|&|$)", h.path) is not None
            f.multipart_uploads += h.command == "POST" and re.search(r"[?&]uploads(=|&|$)", h.path) is not None
            whole_batch = is_delete and f.fail_delete_batches != 0
            if whole_batch and f.fail_delete_batches > 0:
                f.fail_delete_batches -= 1
            drop = f.drop_every > 0 and f.requests % f.drop_every == 0 and not slowdown
            f.dropped += drop
            is_list = h.command == "GET" and "list-type=2" in h.path
            list_error = is_list and f.fail_list != 0
            if list_error:
                f.list_errors += 1
                f.fail_list -= f.fail_list > 0
        if drop:  # the connection closes with no answer at all
            h.close_connection = True
            return None
        if list_error:
            return _answer(
                h,
                500,
                b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                {"Content-Type": "application/xml"},
            )
        if slowdown:
            return _answer(h, 503, _SLOWDOWN, {"Content-Type": "application/xml"})
        if whole_batch:
            with f.lock:
                f.delete_requests += 1
            return _answer(
                h,
                500,
                b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                {"Content-Type": "application/xml"},
            )
        failed: list[str] = []
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
        if is_delete:
            body, failed = self._drop_failing_keys(body)
            headers = {
                k: v
                for k, v in headers.items()
                if k.lower() not in ("content-md5",)
                and not k.lower().startswith("x-amz-checksum")
                and k.lower() != "x-amz-sdk-checksum-algorithm"
            }
        head_length = None  # a HEAD answer has no body but says how long the object is
        if failed and b"<Object>" not in body:  # every key fails: S3 answers with errors only
            status, data, out = 200, _EMPTY_DELETE_RESULT, {"Content-Type": "application/xml"}
        else:
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
            try:
                conn.request(h.command, h.path, body=body, headers={**headers, "Content-Length": str(len(body))})
                resp = conn.getresponse()
                status, data = resp.status, resp.read()
                if h.command == "HEAD":
                    head_length = int(resp.getheader("Content-Length") or 0)
                out = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP}
            finally:
                conn.close()
        if failed:
            errors = "".join(
                f"<Error><Key>{escape(k)}</Key><Code>{f.delete_error_code}</Code>"
                "<Message>injected failure</Message></Error>"
                for k in failed
            )
            data = data.replace(b"</DeleteResult>", errors.encode() + b"</DeleteResult>")
            out = {k: v for k, v in out.items() if k.lower() not in ("content-md5", "etag")}
        if h.command == "GET" and "list-type=2" in h.path and f.backdate:
            data = self._backdated(data)
        _answer(h, status, b"" if h.command == "HEAD" else data, out, length=head_length)

    def _backdated(self, listing: bytes) -> bytes:
        """A ListObjectsV2 answer with the chosen keys' LastModified replaced."""

        def rewrite(m: re.Match[bytes]) -> bytes:
            key = m.group(1).decode()
            for suffix, when in self.faults.backdate.items():
                if key.endswith(suffix):
                    return m.group(0).replace(m.group(2), when.encode())
            return m.group(0)

        return re.sub(rb"<Key>(.*?)</Key>.*?<LastModified>(.*?)</LastModified>", rewrite, listing, flags=re.S)

    def _drop_failing_keys(self, body: bytes) -> tuple[bytes, list[str]]:
        """Take the keys chosen to fail out of a DeleteObjects request (so they stay), and name them."""
        f = self.faults
        failed: list[str] = []
        with f.lock:
            f.delete_requests += 1
            if not f.fail_delete:
                return body, failed

            def keep_or_drop(m: re.Match[bytes]) -> bytes:
                key = m.group(2).decode()
                for suffix, left in f.fail_delete.items():
                    if key.endswith(suffix) and left != 0:
                        f.fail_delete[suffix] = left - 1 if left > 0 else left
                        f.delete_errors += 1
                        failed.append(key)
                        return b""
                return m.group(0)

            body = re.sub(rb"<Object>(\s*)<Key>(.*?)</Key>.*?</Object>", keep_or_drop, body, flags=re.S)
        return body, failed


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    return h.rfile.read(int(h.headers.get("Content-Length") or 0))


def _answer(
    h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str], length: int | None = None
) -> None:
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body) if length is None else length))
    h.end_headers()
    if body:
        h.wfile.write(body)


def aws_env(endpoint: str) -> dict[str, str]:
    """The variables a lakegc process needs to reach the test server."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
