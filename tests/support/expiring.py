"""A lake whose old commit expires: the subject of the fence's tests, through the Python API
(tests/repogc/test_gc_fence.py) and through `lakegc serve` (tests/server)."""

from __future__ import annotations

import threading
from collections.abc import Callable
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


def gc_while_hammered(lake: Lake, spark, monkeypatch, attempt: Callable[[str], bool]) -> tuple[list[str], int, int]:
    """Run GC on the expiring lake while, from the moment its fence stands until it comes down, a
    writer calls `attempt(name)` with fresh ref names as fast as it can. `attempt` makes a ref
    (True), reports the fence refusing it (False) or raises nothing else worth counting (None).
    Returns the refs made, how many the fence refused, and how many objects the run deleted."""
    from lakegc.repo.gc_source import RepositoryGcSource
    from lakegc.repogc.job import GcOptions, run_gc

    stop, created, refused = threading.Event(), [], [0]

    def hammer() -> None:
        i = 0
        while not stop.is_set():
            made = attempt(f"r{i}")
            if made:
                created.append(f"r{i}")
            refused[0] += made is False
            i += 1
            stop.wait(0.005)  # a busy writer, not a lock-hog starving the sweep of the metastore

    writer = threading.Thread(target=hammer, daemon=True)
    raise_fence, lower_fence = RepositoryGcSource.raise_fence, RepositoryGcSource.lower_fence

    def raise_then_hammer(self: RepositoryGcSource, *args: object) -> list[set[str]]:
        active = raise_fence(self, *args)  # the writer starts once the fence stands
        writer.start()
        return active

    def lower(self: RepositoryGcSource, *args: object) -> None:
        if writer.is_alive():  # refs made after the fence is down may point at deleted objects (410)
            stop.set()
            writer.join()
        lower_fence(self, *args)

    monkeypatch.setattr(RepositoryGcSource, "raise_fence", raise_then_hammer)
    monkeypatch.setattr(RepositoryGcSource, "lower_fence", lower)
    summary = run_gc(lake, NAME, GcOptions(min_age=timedelta(hours=1)), spark=spark)
    return created, refused[0], summary.num_deleted
