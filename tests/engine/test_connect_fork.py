"""A Connect call stuck in another thread, then forks (a fallback session's JVM launch): gRPC's
fork handlers must not run. CI once saw them abort the forked child (`ev_epoll1_linux.cc Check
failed`), and the fallback died with "Java gateway process exited"."""

from __future__ import annotations

import subprocess
import sys

STUCK_THEN_FORK = """
import socket, subprocess, sys, threading, time
if sys.argv[1] == "lakegc":
    from lakegc.engine.connect import fork_safe_grpc
    fork_safe_grpc()
import grpc
server = socket.create_server(("127.0.0.1", 0))  # takes the connection, never answers
threading.Thread(target=lambda: [server.accept() for _ in range(10)], daemon=True).start()
call = grpc.insecure_channel(f"127.0.0.1:{server.getsockname()[1]}").unary_unary("/never/answers")
threading.Thread(target=lambda: call(b"", timeout=10), daemon=True).start()
time.sleep(1)
for _ in range(20):
    subprocess.run(["true"], preexec_fn=lambda: None, check=True)  # forks as PySpark's launcher does
print("forked")
"""


def forks_with_a_stuck_call(setting: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", STUCK_THEN_FORK, setting], capture_output=True, text=True, timeout=120, check=False
    )


def test_forks_beside_a_stuck_connect_call_run_no_grpc_fork_handler() -> None:
    done = forks_with_a_stuck_call("lakegc")
    assert (done.returncode, done.stdout, done.stderr) == (0, "forked\n", "")


def test_without_the_setting_grpc_s_fork_handlers_do_run() -> None:
    """The case above means something: by default gRPC's handlers run at these forks (and here
    they made a forked child fail too, as in CI)."""
    done = forks_with_a_stuck_call("default")
    assert "fork_posix.cc" in done.stderr, done.stderr
