"""The Python API (`import lakegc`): what a scheduler or a notebook calls instead of the CLI, with
the same run records and the same one-line errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import Env, age_objects

import lakegc
from lakegc.engine.runs import RunState
from lakegc.errors import InvalidArgument, RepoNotFound
from lakegc.retention.rules import GcRules
from lakegc.timeutil import utcnow


@pytest.fixture
def lake(env: Env) -> lakegc.Lake:
    """A repository whose first upload was overwritten (uncommitted garbage) two days ago."""
    lake = lakegc.Lake(env.metastore)
    lake.create_repository("repo", str(env.namespace()))
    repo = lake.repository("repo")
    repo.upload("main", "a", b"first")
    repo.upload("main", "a", b"second")
    repo.commit("main", "a")
    age_objects(env.namespace(), utcnow() - timedelta(days=2))
    return lake


def test_import_lakegc_is_cheap_and_names_the_api():
    import subprocess
    import sys

    probe = (
        "import sys, lakegc; before = 'lakegc.api' in sys.modules; gc = lakegc.gc; "
        "print(before, 'lakegc.api' in sys.modules, 'pyspark' in sys.modules, gc.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    # the API loads on first use, PySpark once a run starts; gc is the repository API's
    assert out == ["False", "True", "False", "lakegc.api.repository"]
    assert {"gc", "sweep", "runs", "run", "candidates", "iceberg_gc", "catalog_gc", "Run", "Lake"} <= set(dir(lakegc))


def test_a_dry_run_then_a_run_through_the_api_return_their_records(lake: lakegc.Lake, spark):
    phases: list[str] = []
    dry = lakegc.gc(
        "repo",
        metastore=lake,
        dry_run=True,
        min_age="1h",
        progress=lambda name, detail="": phases.append(name),
        spark=spark,
    )
    assert isinstance(dry, lakegc.Run) and dry.state is RunState.MARKED and dry.dry_run
    assert (dry.num_candidates, dry.candidates_by_reason) == (1, {"uncommitted": 1})
    assert phases[0] == "listing the namespace" and "writing candidates" in phases
    (candidate,) = lakegc.candidates("repo", dry.run_id, metastore=lake)
    assert candidate.reason == "uncommitted" and candidate.size == len(b"first")

    run = lakegc.gc("repo", metastore=lake, min_age=timedelta(hours=1), spark=spark)
    assert (run.state, run.num_deleted, run.num_failed) == (RunState.SWEPT, 1, 0)
    assert lake.repository("repo").read("main", "a") == b"second"
    assert [r.run_id for r in lakegc.runs("repo", metastore=lake)] == [run.run_id, dry.run_id]
    assert lakegc.run("repo", run.run_id[:-2], metastore=lake).to_json() == run.to_json()


def test_mark_only_then_sweep_through_the_api(lake: lakegc.Lake, spark):
    marked = lakegc.gc("repo", metastore=lake, mark_only=True, min_age="1h", spark=spark)
    assert (marked.state, marked.num_deleted) == (RunState.MARKED, 0)
    swept = lakegc.sweep("repo", marked.run_id, metastore=lake, spark=spark)
    assert (swept.run_id, swept.state, swept.num_deleted) == (marked.run_id, RunState.SWEPT, 1)


def test_rules_through_the_api(lake: lakegc.Lake):
    assert lakegc.get_rules("repo", metastore=lake) is None
    set_ = lakegc.set_rules("repo", {"default_retention_days": 7, "branches": []}, metastore=lake)
    assert isinstance(set_, GcRules) and lakegc.get_rules("repo", metastore=lake) == set_
    assert (
        lakegc.set_rules("repo", '{"default_retention_days": 3, "branches": []}', metastore=lake).default_retention_days
        == 3
    )
    assert lakegc.delete_rules("repo", metastore=lake) is True
    assert lakegc.delete_rules("repo", metastore=lake) is False


def test_the_api_raises_the_clis_errors_before_anything_runs(lake: lakegc.Lake):
    with pytest.raises(RepoNotFound, match="repository 'missing' not found"):
        lakegc.gc("missing", metastore=lake)
    with pytest.raises(InvalidArgument, match="invalid duration"):
        lakegc.gc("repo", metastore=lake, min_age="soon")
    with pytest.raises(InvalidArgument, match="limit must be at least 1"):
        lakegc.candidates("repo", "no-such-run", metastore=lake, limit=0)
