"""The Python worker daemon (`lakegc.workers`): a worker the JVM hangs up on says nothing.

When a task of a stage fails, Spark cancels the rest and closes their workers' sockets, sometimes
before a freshly forked worker has read its handshake. PySpark's daemon printed that worker's
ConnectionResetError traceback on the stderr the driver shares, under the run's one `error:` line
(seen in CI on `test_a_sweep_failing_on_an_executor_is_one_error_line_naming_the_cause`). Spark
decides when that race happens; here each way the JVM can hang up is made to happen for sure.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakegc import workers


@pytest.fixture(autouse=True)
def _signal_handlers() -> Iterator[None]:
    """PySpark's worker loop resets the process's signal handlers, as a forked worker should."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def _loopback_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        jvm = socket.create_connection(server.getsockname())
        worker, _ = server.accept()
    return jvm, worker


def test_a_worker_whose_jvm_resets_its_socket_exits_quietly(capfd) -> None:
    jvm, worker = _loopback_pair()
    jvm.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    jvm.close()  # linger 0: the peer gets a reset, as a cancelled task's worker did
    with worker:
        assert workers.serve(worker, authenticated=False) == 1
    assert capfd.readouterr() == ("", "")


def test_a_worker_whose_jvm_closes_before_the_handshake_exits_quietly(capfd) -> None:
    jvm, worker = socket.socketpair()
    jvm.close()
    with worker:
        assert workers.serve(worker, authenticated=False) == 1
    assert capfd.readouterr() == ("", "")


def test_a_worker_whose_jvm_half_sent_the_handshake_exits_quietly(capfd, monkeypatch) -> None:
    """The short secret is refused, and the refusal written to a socket nobody reads any more."""
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "the real one")
    jvm, worker = socket.socketpair()
    jvm.sendall(struct.pack(">i", 64) + b"only part of the secret")
    jvm.close()
    with worker:
        assert workers.serve(worker, authenticated=False) == 1
    assert capfd.readouterr() == ("", "")


def test_a_worker_with_a_wrong_secret_is_refused_as_pyspark_refuses_it(monkeypatch) -> None:
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "the real one")
    jvm, worker = socket.socketpair()
    secret = b"a guess"
    jvm.sendall(struct.pack(">i", len(secret)) + secret)
    with jvm, worker:
        assert workers.serve(worker, authenticated=False) == 1
        assert jvm.recv(16) == struct.pack(">i", 3) + b"err"


def test_what_is_not_a_hang_up_still_fails_loudly() -> None:
    jvm, worker = socket.socketpair()
    jvm.close()
    worker.close()  # our own socket closed: a bug here, not the JVM leaving
    with pytest.raises(OSError) as raised:
        workers.serve(worker, authenticated=False)
    assert not isinstance(raised.value, ConnectionError)


def _gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def test_the_daemon_spark_starts_forks_workers_that_hang_ups_leave_silent() -> None:
    """The module Spark runs (`spark.python.daemon.module`), spoken to as the JVM does: its port on
    stdout, a worker's pid per connection, stdin closed to stop it. Two workers are hung up on
    (a reset, a close) before their handshake; the daemon's stderr, the one the driver shares,
    stays empty. With PySpark's own worker loop in place it held both tracebacks."""
    env = {**os.environ, "PYTHON_WORKER_FACTORY_SECRET": "the secret"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "lakegc.workers"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        (port,) = struct.unpack(">i", daemon.stdout.read(4))
        for linger in (True, False):
            jvm = socket.create_connection(("127.0.0.1", port), timeout=30)
            (pid,) = struct.unpack(">i", jvm.recv(4, socket.MSG_WAITALL))
            if linger:
                jvm.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            jvm.close()
            assert _gone(pid), f"worker {pid} still running"
        daemon.stdin.close()  # the JVM's way of stopping it
        daemon.wait(timeout=30)  # its exit code is PySpark's (1, whatever the reason), not ours
        assert daemon.stderr.read() == b""
    finally:
        if daemon.poll() is None:
            daemon.kill()
