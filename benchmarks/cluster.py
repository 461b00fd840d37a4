"""A Spark standalone cluster on loopback for `python -m benchmarks --cluster`: one master and two
workers of one core each, started from pyspark's bundled `spark-class` as tests/test_spark_cluster.py
starts its own (same commands, Spark's own JVM flags here: the run is timed). The cluster shares this
machine's filesystem, so its executors reach the lake's folder namespace."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

WORKERS = 2
WORKER_MEMORY = "3g"
# For `gc run --master`: both workers' cores, and executors sized like local mode's heap over two JVMs.
RUN_CONF = ("--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=2g")
START_TIMEOUT = 180  # seconds for three JVMs on a busy two-core machine


@contextmanager
def standalone_cluster(root: Path) -> Iterator[str]:
    """Start the master and workers (logs and work folders under `root`), wait until both workers
    are registered, yield the master's URL; stop them all on the way out."""
    port, webui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    conf = root / "conf"  # an empty conf dir: Spark's default INFO log, to the files below
    conf.mkdir(parents=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    commands = {
        "master": [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(webui),
        ]
    }
    for i in range(1, WORKERS + 1):
        commands[f"worker{i}"] = [
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            WORKER_MEMORY,
            "--webui-port",
            str(_free_port()),
            "--work-dir",
            str(root / f"worker{i}"),
            url,
        ]
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, args in commands.items():  # workers retry until the master listens
            with open(root / f"{name}.log", "wb") as log:
                procs[name] = subprocess.Popen(
                    [str(_spark_home() / "bin" / "spark-class"), *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
        _wait_for_workers(root, procs, webui)
        yield url
    finally:
        _stop(procs)


def run_env(env: dict[str, str]) -> dict[str, str]:
    """A `gc run --master` process's environment: its driver bound to loopback, as the cluster is."""
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1"}


def _wait_for_workers(root: Path, procs: dict[str, subprocess.Popen], webui: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        dead = [name for name, proc in procs.items() if proc.poll() is not None]
        if dead:
            raise RuntimeError(f"Spark standalone cluster: {', '.join(dead)} exited (logs in {root})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=5) as resp:
                if sum(w["state"] == "ALIVE" for w in json.load(resp)["workers"]) == WORKERS:
                    return
        except (OSError, ValueError):  # ValueError: a JSON page not served yet (an empty body, seen once in CI)
            pass  # the master's web UI is not up yet
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Spark standalone cluster: no {WORKERS} ALIVE workers after {START_TIMEOUT} s (logs in {root})"
            )
        time.sleep(0.5)


def _stop(procs: dict[str, subprocess.Popen]) -> None:
    for proc in procs.values():  # each process group holds the JVM and, for workers, their executors
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
