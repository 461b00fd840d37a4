"""A lake whose old commit expires: the subject of the fence's tests, through the Python API
(tests/repogc/test_gc_fence.py) and through `lakegc serve` (tests/server)."""

from __future__ import annotations

from datetime import timedelta

from conftest import Env, age_objects

from lakegc.errors import ObjectGone
from lakegc.repo.repository import Lake, Repository
from lakegc.retention.rules import GcRules
from lakegc.timeutil import utcnow

NAME = "repo"
OLD = utcnow() - timedelta(days=60)
PARAMS = {"cutoffs": [], "default_cutoff": None, "now": utcnow().isoformat()}


def expiring_lake(env: Env, objects: int = 40) -> tuple[Lake, Repository, str, list[str]]:
    """main keeps 7 days; `old` (60 days ago) held `objects` files that main has since overwritten,
    so `old` expires and all its objects are deletion candidates. Returns the old commit and paths."""
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    repo = lake.repository(NAME)
    repo.set_gc_rules(GcRules.model_validate({"default_retention_days": 7, "branches": []}))
    paths = [f"t/part-{i:05d}" for i in range(objects)]
    for p in paths:
        repo.upload("main", p, f"old {p}".encode())
    old = repo.commit("main", "old", date=OLD).id
    age_objects(env.namespace(), OLD)
    for p in paths:
        repo.upload("main", p, f"new {p}".encode())
    repo.commit("main", "new", date=OLD + timedelta(days=1))
    age_objects(env.namespace(), OLD)
    return lake, repo, old, paths


def readable(repo: Repository, ref: str, paths: list[str]) -> bool:
    try:
        return all(repo.read(ref, p) == f"old {p}".encode() for p in paths)
    except ObjectGone:
        return False
