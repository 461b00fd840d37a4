"""`lakegc serve` as a child process: for notebooks, tests and benchmarks that want a real server
on a free loopback port for as long as a `with` block lasts."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import urllib3


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[str]

    @property
    def api(self) -> str:
        return self.url + "/api/v1"


class ServerDidNotStart(RuntimeError):
    pass


def free_port() -> int:
    """A port nobody listens on now (the OS picks it; a server started next takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(environ: Mapping[str, str], *options: str, timeout: float = 60.0) -> Iterator[Served]:
    """Start `lakegc serve [options]` with `environ` (LAKEGC_METASTORE, LAKEGC_HOME, ...) on a free
    loopback port, wait until its health check answers, and stop it when the block ends. Its stderr
    is kept: `process.stderr` can be read once the block has ended."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakegc", "serve", "--port", str(port), *options],
        env=dict(environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if urllib3.request("GET", url + "/api/v1/healthcheck", retries=False).status == 204:
                break
        except urllib3.exceptions.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise ServerDidNotStart(f"lakegc serve did not come up: {proc.communicate()[1].strip()[-2000:]}")
        time.sleep(0.1)
    served = Served(url, proc)
    try:
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
