"""GC runs the same way from the CLI with --master and as a spark-submit application, in local mode.

Slow set only: tests/test_spark_cluster.py checks both ways on a real standalone cluster in every run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import age_objects

from lakegc.submit import SCRIPT
from lakegc.timeutil import utcnow

pytestmark = pytest.mark.slow


@pytest.fixture
def garbage_repo(env, cli, put):
    """Two garbage objects (an overwritten staged upload, a reset branch's upload), one live one."""
    cli("repo", "create", "lakegc://repo", str(env.namespace()))
    put("lakegc://repo/main/a", b"old")
    put("lakegc://repo/main/a", b"new")
    cli("branch", "create", "lakegc://repo/tmp", "--source", "lakegc://repo/main")
    put("lakegc://repo/tmp/b", b"scratch")
    cli("branch", "reset", "lakegc://repo/tmp", "--yes")
    age_objects(env.namespace(), utcnow() - timedelta(days=2))
    return env


def _summary(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def test_gc_run_with_master_url_collects_the_same_garbage(garbage_repo, sh, cli):
    result = sh("gc", "run", "lakegc://repo", "--master", "local[1]", "--json")
    summary = json.loads(result.stdout)
    assert (summary["state"], summary["num_deleted"], summary["candidates_by_reason"]) == (
        "swept",
        2,
        {"uncommitted": 2},
    )
    assert cli("fs", "cat", "lakegc://repo/main/a").stdout == "new"


def test_spark_submit_runs_the_gc_job(garbage_repo):
    spark_submit = Path(sys.executable).with_name("spark-submit")
    proc = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            SCRIPT,
            "--metastore",
            garbage_repo.metastore,
            "gc",
            "run",
            "lakegc://repo",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **garbage_repo.environ(), "PYSPARK_PYTHON": sys.executable},
    )
    summary = _summary(proc)
    assert (summary["state"], summary["num_deleted"]) == ("swept", 2)
    assert sum(1 for p in (garbage_repo.namespace() / "data").rglob("*") if p.is_file()) == 1
