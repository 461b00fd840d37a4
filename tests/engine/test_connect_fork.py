"""A Connect session whose first call is stuck in another thread, then forks (a fallback session's
JVM launch): gRPC's fork handlers must not run. CI once saw them abort the forked child
(`ev_epoll1_linux.cc Check failed`), and the fallback died with "Java gateway process exited".

The script goes through `connect_session` itself, as a command does: gRPC reads its setting as it
loads, so the test must load it in the order the product does, not set the variable by hand first."""

from __future__ import annotations

import os
import subprocess
import sys

STUCK_THEN_FORK = """
import os, socket, subprocess, sys, threading
from lakegc.engine.connect import connect_session
from lakegc.errors import LakegcError
server = socket.create_server(("127.0.0.1", 0))  # takes the connection, never answers
threading.Thread(target=lambda: [server.accept() for _ in range(10)], daemon=True).start()
try:
    connect_session(f"sc://127.0.0.1:{server.getsockname()[1]}", {}, first_answer=2)
except LakegcError as exc:
    print("not taken:", "did not answer" in str(exc))  # its first call stays stuck in a thread
for _ in range(20):
    subprocess.run(["true"], preexec_fn=lambda: None, check=True)  # forks as PySpark's launcher does
print("forked")
sys.stdout.flush()
os._exit(0)  # as the console script leaves: the interpreter's teardown would wait on the stuck call
"""


def test_forks_beside_a_stuck_connect_call_run_no_grpc_fork_handler(tmp_path) -> None:  # noqa: ANN001
    """Against the setting made after the channel builders had loaded gRPC, this failed: a forked
    child aborted (SIGABRT) and the script exited 1."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    env["LAKEGC_HOME"] = str(tmp_path)  # no warm engine's record: the address's own channel
    done = subprocess.run(
        [sys.executable, "-c", STUCK_THEN_FORK], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "not taken: True\nforked\n", "")


# The control: the same stuck call and forks on gRPC alone, with gRPC's default setting.
RAW_STUCK_THEN_FORK = """
import socket, subprocess, threading, time
import grpc
server = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=lambda: [server.accept() for _ in range(10)], daemon=True).start()
call = grpc.insecure_channel(f"127.0.0.1:{server.getsockname()[1]}").unary_unary("/never/answers")
threading.Thread(target=lambda: call(b"", timeout=10), daemon=True).start()
time.sleep(1)
for _ in range(20):
    subprocess.run(["true"], preexec_fn=lambda: None, check=True)
"""


def test_by_default_grpc_s_fork_handlers_do_run() -> None:
    """The case above means something: by default gRPC's handlers run at these forks (and here
    they made a forked child fail too, as in CI)."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", RAW_STUCK_THEN_FORK], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert "fork_posix.cc" in done.stderr, done.stderr
