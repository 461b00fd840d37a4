"""GC on a real Spark standalone cluster (one master, two workers on loopback) finds and deletes
exactly what local mode does, from `lakegc gc run --master spark://...` and from `spark-submit`.

One small lake is built once and cloned into three identical twins (namespace as hard links, the
metastore through SQLite's backup API, the repository pointed at its twin's folder); each twin is
collected once: A in local mode, B by the CLI against the cluster, C by spark-submit to the cluster.
The cluster shares this machine's filesystem, so executors reach the local-folder namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from conftest import CliResult, Env, age_objects, clone_lake, make_cli, snapshot
from support.loopback import free_port

from lakegc.submit import SCRIPT
from lakegc.timeutil import utcnow

# A standalone cluster (a master and two workers) takes a minute and a half to start: every test here
# runs in the CI's second step (./dev test), with the other slow cases.
pytestmark = pytest.mark.slow

REPO = "lakegc://repo"
RULES = {
    "default_retention_days": 7,
    "branches": [{"branch_id": "main", "retention_days": 14}, {"branch_id": "dev", "retention_days": 5}],
}
# Objects GC must take, by the name the lake builder gives them (see `template`).
EXPIRED = {"a1", "b1", "a2", "x1", "x2", "g"}
UNCOMMITTED = {"draft1", "s1", "s2"}
CLUSTER_CONF = ("--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2")
# Given to spark-submit, it must reach the executors: lakegc's own default must not replace it.
SUBMIT_JAVA_OPTION = "-Dlakegc.test=spark-submit-conf"
START_TIMEOUT = 180  # seconds for three JVMs on a busy two-core machine
# For every JVM here (cluster daemons, their executors, the drivers): short-lived JVMs on two cores
# spend most of their CPU compiling; the first JIT tier and the serial GC nearly halve the test's CPU.
FAST_JVM = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


# -- the cluster ---------------------------------------------------------------------------------


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


@dataclass
class Cluster:
    """A standalone master and two workers, started at once; `ready()` waits for them to register."""

    root: Path
    port: int = field(default_factory=free_port)
    webui: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    _ready: bool = False

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> None:
        conf = self.root / "conf"  # an empty conf dir: Spark's default INFO log, to files
        conf.mkdir(parents=True)
        env = {
            **os.environ,
            **FAST_JVM,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }  # no fixed REST port 6066
        spark_class = str(spark_home() / "bin" / "spark-class")
        commands = {
            "master": [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui),
            ]
        }
        for i in (1, 2):
            commands[f"worker{i}"] = [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(self.work_dir(f"worker{i}")),
                self.url,
            ]
        for name, args in commands.items():  # workers retry until the master listens
            with open(self.root / f"{name}.log", "wb") as log:
                self.procs[name] = subprocess.Popen(
                    [spark_class, *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )

    def work_dir(self, worker: str) -> Path:
        return self.root / worker / "work"

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui}/json/", timeout=5) as resp:
            return json.load(resp)

    def ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                self.fail(f"{', '.join(dead)} exited")
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
                self._ready = len(alive) == 2
            except OSError:
                pass  # the master's web UI is not up yet
            if not self._ready and time.monotonic() > deadline:
                self.fail(f"no master with 2 ALIVE workers after {START_TIMEOUT}s")
            time.sleep(0.5)

    def lakegc_apps(self) -> dict[str, dict[str, Any]]:
        """Applications named lakegc the master has seen, by id (running or completed)."""
        state = self.state()
        return {a["id"]: a for a in state["activeapps"] + state["completedapps"] if a["name"] == "lakegc"}

    def finished_app(self, known: set[str]) -> dict[str, Any]:
        """The one new lakegc application once the master lists it as finished."""
        deadline = time.monotonic() + 30
        while True:
            new = {i: a for i, a in self.lakegc_apps().items() if i not in known}
            if len(new) == 1 and next(iter(new.values()))["state"] == "FINISHED":
                return next(iter(new.values()))
            if time.monotonic() > deadline:
                self.fail(f"expected one new finished lakegc application, master lists {new}")
            time.sleep(0.5)

    def fail(self, why: str) -> None:
        logs = "\n".join(
            f"--- {name}.log\n" + (self.root / f"{name}.log").read_text(errors="replace")[-3000:] for name in self.procs
        )
        pytest.fail(f"Spark standalone cluster: {why}\n{logs}", pytrace=False)

    def stop(self) -> None:
        for proc in self.procs.values():  # the process group holds the JVM and, for workers, executors
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# -- the lake and its twins ----------------------------------------------------------------------
@dataclass
class Twin:
    env: Env
    keys: dict[str, str]  # object name -> namespace key

    @property
    def ns(self) -> Path:
        return self.env.namespace()


def iso_days_ago(days: float) -> str:
    return (utcnow() - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_lake(env: Env) -> dict[str, str]:
    """Branches with backdated commits under retention rules, overwritten and abandoned uploads,
    a deleted branch's dangling commit, and young garbage. Returns object name -> namespace key."""
    cli = make_cli(env)
    ns = env.namespace()
    keys: dict[str, str] = {}
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))

    def put(name: str, branch: str, path: str) -> None:
        doc = cli(
            "fs", "upload", f"{REPO}/{branch}/{path}", "--source", "-", "--json", input=f"{name} at {path}"
        ).json()
        keys[name] = Path(unquote(urlparse(doc["physical_address"]).path)).relative_to(ns).as_posix()

    def commit(branch: str, days: float, **files: str | None) -> None:
        for path, name in files.items():
            if name is None:
                cli("fs", "rm", f"{REPO}/{branch}/{path}")
            else:
                put(name, branch, path)
        cli("commit", f"{REPO}/{branch}", "-m", f"{days} days ago", "--date", iso_days_ago(days))

    commit("main", 30, a="a1", b="b1", keep="k")
    commit("main", 25, a="a2", b=None)
    commit("main", 20, a="a3")  # the commit main showed 14 days ago: still active
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    commit("dev", 18, x="x1")
    commit("dev", 12, x="x2")
    commit("dev", 9, x="x3", y="y")  # dev's head: active though older than dev's 5 days
    commit("main", 10, c="c1")
    commit("main", 3, a="a4")
    cli("branch", "create", f"{REPO}/gone", "--source", f"{REPO}/main")
    commit("gone", 20, g="g")
    cli("branch", "delete", f"{REPO}/gone", "--yes")  # a dangling commit past the default 7 days
    put("draft1", "main", "draft")
    put("draft2", "main", "draft")  # overwrites draft1, which no ref ever shows again
    cli("branch", "create", f"{REPO}/scratch", "--source", f"{REPO}/main")
    put("s1", "scratch", "tmp/1")
    put("s2", "scratch", "tmp/2")
    cli("branch", "reset", f"{REPO}/scratch", "--yes")
    age_objects(ns, utcnow() - timedelta(days=3))
    put("young1", "main", "young")
    put("young2", "main", "young")  # young1 is garbage, but younger than the 24h min-age
    return keys


# -- the runs ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    summary: dict[str, Any]
    candidates: set[tuple[str, str]]  # (address, reason)
    deleted: set[str]
    after: dict[str, tuple[int, int, str]]  # the namespace but this run's own outputs
    runs: list[dict[str, Any]]
    app: dict[str, Any] | None = None  # the cluster application that ran it
    seconds: float = 0.0


def outcome(env: Env, before: set[str], summary: dict[str, Any], seconds: float) -> Outcome:
    cli = make_cli(env)
    rows = cli("gc", "candidates", REPO, summary["run_id"], "--json").json()
    after = {k: v for k, v in snapshot(env.namespace()).items() if not k.startswith("_lakegc/gc/")}
    return Outcome(
        summary,
        {(r["address"], r["reason"]) for r in rows},
        before - set(after),
        after,
        cli("gc", "runs", REPO, "--json").json(),
        seconds=round(seconds, 1),
    )


def lakegc_process(env: Env, *args: str) -> CliResult:
    """`lakegc ARGS` in its own process (as the `sh` fixture runs it), its driver bound to loopback."""
    proc = subprocess.run(
        [sys.executable, "-m", "lakegc", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env.environ(), **FAST_JVM, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def spark_submit(env: Env, master: str, *args: str) -> CliResult:
    """spark-submit of the GC job, as tests/test_gc_submit.py does, to `master`."""
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master",
            master,
            *args,
            SCRIPT,
            "--metastore",
            env.metastore,
            "gc",
            "run",
            REPO,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            **env.environ(),
            **FAST_JVM,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def summary_of(result: CliResult, what: str) -> dict[str, Any]:
    assert result.exit_code == 0, f"{what} -> {result.exit_code}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return json.loads(result.stdout[result.stdout.index("{") :])  # spark-submit may print before the JSON


@dataclass
class Runs:
    keys: dict[str, str]
    before: set[str]
    local: Outcome
    cli: Outcome
    submit: Outcome
    cluster: Cluster


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("spark-cluster")
    cluster = Cluster(root / "cluster")
    cluster.start()  # the JVMs boot while the lake is built and collected in local mode
    try:
        template = Env(
            root / "template" / "home", f"sqlite:///{root / 'template' / 'home' / 'lakegc.db'}", root / "template"
        )
        keys = build_lake(template)
        twins = {
            mode: clone_lake(template.home, template.namespace(), root / mode) for mode in ("local", "cli", "submit")
        }
        before = set(snapshot(template.namespace()))

        started = time.monotonic()
        # local mode: no --master, so local[*], the default
        local_summary = summary_of(lakegc_process(twins["local"], "gc", "run", REPO, "--json"), "lakegc gc run")
        local = outcome(twins["local"], before, local_summary, time.monotonic() - started)

        cluster.ready()
        known = set(cluster.lakegc_apps())
        started = time.monotonic()
        summary = summary_of(
            lakegc_process(twins["cli"], "gc", "run", REPO, "--master", cluster.url, *CLUSTER_CONF, "--json"),
            "lakegc gc run --master",
        )
        by_cli = outcome(twins["cli"], before, summary, time.monotonic() - started)
        by_cli.app = cluster.finished_app(known)

        known = set(cluster.lakegc_apps())
        started = time.monotonic()
        summary = summary_of(
            spark_submit(
                twins["submit"],
                cluster.url,
                *CLUSTER_CONF,
                "--conf",
                f"spark.executor.extraJavaOptions={SUBMIT_JAVA_OPTION}",
            ),
            "spark-submit",
        )
        by_submit = outcome(twins["submit"], before, summary, time.monotonic() - started)
        by_submit.app = cluster.finished_app(known)
        yield Runs(keys, before, local, by_cli, by_submit, cluster)
    finally:
        cluster.stop()


# -- the checks ----------------------------------------------------------------------------------
def test_local_mode_collects_exactly_the_expected_garbage(runs):
    """The baseline is right, so agreeing with it means something."""
    keys = runs.keys
    assert runs.local.candidates == (
        {(keys[n], "expired") for n in EXPIRED} | {(keys[n], "uncommitted") for n in UNCOMMITTED}
    )
    assert runs.local.deleted == {keys[n] for n in EXPIRED | UNCOMMITTED}


@pytest.mark.parametrize("mode", ["cli", "submit"])
def test_cluster_run_finds_and_deletes_what_local_mode_does(runs, mode):
    run = getattr(runs, mode)
    assert run.candidates == runs.local.candidates
    assert run.deleted == runs.local.deleted
    assert {
        k: run.summary[k]
        for k in (
            "num_candidates",
            "candidates_by_reason",
            "num_deleted",
            "bytes_deleted",
            "active_commits",
            "expired_commits",
            "num_listed",
        )
    } == {
        k: runs.local.summary[k]
        for k in (
            "num_candidates",
            "candidates_by_reason",
            "num_deleted",
            "bytes_deleted",
            "active_commits",
            "expired_commits",
            "num_listed",
        )
    }


@pytest.mark.parametrize("mode", ["cli", "submit"])
def test_cluster_run_leaves_the_same_namespace_as_local_mode(runs, mode):
    """Same keys, sizes, mtimes and contents, outside the runs' own `_lakegc/gc/<run>/` outputs."""
    assert getattr(runs, mode).after == runs.local.after
    assert {runs.keys[n] for n in ("a3", "a4", "k", "x3", "y", "c1", "draft2", "young1", "young2")} <= set(
        runs.local.after
    )


@pytest.mark.parametrize("mode", ["local", "cli", "submit"])
def test_every_run_is_swept_and_recorded(runs, mode):
    run = getattr(runs, mode)
    assert (run.summary["state"], run.summary["num_failed"], run.summary["error"]) == ("swept", 0, None)
    assert [(r["run_id"], r["state"]) for r in run.runs] == [(run.summary["run_id"], "swept")]
    assert run.summary["num_deleted"] == run.summary["num_candidates"] == len(run.deleted) > 0


@pytest.mark.parametrize("mode", ["cli", "submit"])
def test_cluster_runs_ran_on_both_workers_executors(runs, mode):
    """The master lists the run as a finished application with the two cores of both workers, and
    each worker launched an executor for it (its work dir has the application's folder)."""
    app = getattr(runs, mode).app
    assert (app["name"], app["state"], app["cores"], app["memoryperexecutor"]) == ("lakegc", "FINISHED", 2, 512)
    for worker in ("worker1", "worker2"):
        assert [p.name for p in (runs.cluster.work_dir(worker) / app["id"]).iterdir()], f"{worker} ran no executor"


def executor_commands(runs: Runs, app_id: str) -> list[str]:
    """The command line each worker launched an executor of `app_id` with (first line of its log)."""
    return [
        log.read_text().splitlines()[0]
        for worker in ("worker1", "worker2")
        for log in sorted((runs.cluster.work_dir(worker) / app_id).glob("*/stderr"))
    ]


def test_spark_submit_conf_is_not_overridden_by_lakegc_defaults(runs):
    """`spark-submit --conf spark.executor.extraJavaOptions=...` reaches the executors; without it,
    lakegc's default (its quiet log4j2 configuration) does."""
    submitted, by_cli = executor_commands(runs, runs.submit.app["id"]), executor_commands(runs, runs.cli.app["id"])
    assert len(submitted) == len(by_cli) == 2
    assert all(SUBMIT_JAVA_OPTION in c and "lakegc/engine/sparkconf" not in c for c in submitted), submitted
    assert all("lakegc/engine/sparkconf/log4j2.properties" in c for c in by_cli), by_cli
