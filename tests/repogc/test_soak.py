"""Soak: writers and GC together for minutes, and nothing a reader should see is lost.

Writers run as fast as they go, each on its own connection to the metastore: one commits uploads
to main, one makes a branch from main, writes, commits, merges it back and deletes it, one writes
through `lakegc serve` with lakefs-sdk and commits on its own branch, one tags and untags. GC
runs in a loop meanwhile on the shortest retention (0 days: only HEADs stay) with a 20-second
min-age, every third run with a restore window of seconds, so quarantines are purged along the way.
At the end, after a last run, every entry of every branch HEAD and every tag reads with the
content its writer gave it, and no run failed.

`./dev test -m soak` runs 10 minutes (LAKEGC_SOAK_SECONDS); the slow CI step runs 45 seconds.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from conftest import Env
from support.lakegc_server import running_server

from lakegc.engine.runs import MetastoreRunLog
from lakegc.errors import LakegcError, ObjectGone
from lakegc.repo.fence import FencedByGc
from lakegc.repo.repository import Lake
from lakegc.repogc.job import GcOptions, run_gc
from lakegc.retention.rules import GcRules

NAME = "repo"
MIN_AGE = timedelta(seconds=20)


def content(path: str, n: int) -> bytes:
    """What a writer puts at `path`: the path itself comes first, so a read proves it got its own object."""
    return f"{path}\n{n}\n".encode() + os.urandom(64)


class Writers:
    """The writers' threads and what they counted."""

    def __init__(self, env: Env, seconds: float):
        self.env, self.until = env, time.monotonic() + seconds
        self.counts: Counter = Counter()
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def going(self) -> bool:
        return time.monotonic() < self.until and not self.errors

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def start(self, name: str, work: Callable[[Lake, random.Random], None]) -> None:
        def loop() -> None:
            lake, rng = self.env.lake(), random.Random(name)
            while self.going():
                try:
                    work(lake, rng)
                except FencedByGc:
                    self.count("refused by the fence")
                    time.sleep(0.05)
                except LakegcError as exc:  # a lost race between writers: counted, not a failure
                    self.count(f"race: {type(exc).__name__}")
                except Exception as exc:  # noqa: BLE001 - anything else ends the soak, named
                    self.errors.append(f"{name}: {type(exc).__name__}: {exc}")

        thread = threading.Thread(target=loop, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)


def main_writer(w: Writers) -> Callable[[Lake, random.Random], None]:
    def work(lake: Lake, rng: random.Random) -> None:
        repo = lake.repository(NAME)
        for _ in range(rng.randint(1, 5)):
            path = f"main/t{rng.randrange(40)}"
            repo.upload("main", path, content(path, rng.randrange(10**9)))
            w.count("objects written")
        repo.commit("main", "main writer")
        w.count("commits")

    return work


def branch_writer(w: Writers) -> Callable[[Lake, random.Random], None]:
    def work(lake: Lake, rng: random.Random) -> None:
        repo = lake.repository(NAME)
        name = f"feat-{rng.randrange(10**9)}"
        repo.create_branch(name, "main")
        for _ in range(rng.randint(1, 4)):
            path = f"feat/f{rng.randrange(20)}"
            repo.upload(name, path, content(path, rng.randrange(10**9)))
            w.count("objects written")
        repo.commit(name, "feature")
        repo.merge(name, "main")
        w.count("merges")
        if rng.random() < 0.8:
            repo.delete_branch(name)
            w.count("branches deleted")

    return work


def tagger(w: Writers) -> Callable[[Lake, random.Random], None]:
    def work(lake: Lake, rng: random.Random) -> None:
        repo = lake.repository(NAME)
        tags = [t.name for t in repo.tags()]
        if len(tags) > 3:
            repo.delete_tag(rng.choice(tags))
            w.count("tags deleted")
        repo.create_tag(f"v{rng.randrange(10**9)}", "main")
        w.count("tags made")
        time.sleep(0.5)

    return work


def server_writer(w: Writers, server) -> Callable[[Lake, random.Random], None]:  # type: ignore[no-untyped-def]
    import lakefs_sdk

    conf = lakefs_sdk.Configuration(host=server.api, username=server.key, password=server.secret)
    client = lakefs_sdk.ApiClient(conf)
    spool = w.env.root / "server-upload"  # lakefs-sdk uploads a local file, as multipart/form-data

    def work(lake: Lake, rng: random.Random) -> None:
        objects, commits = lakefs_sdk.ObjectsApi(client), lakefs_sdk.CommitsApi(client)
        try:
            for _ in range(rng.randint(1, 4)):
                path = f"srv/s{rng.randrange(20)}"
                spool.write_bytes(content(path, rng.randrange(10**9)))
                objects.upload_object(NAME, "srv", path, content=str(spool))
                w.count("objects written through the server")
            commits.commit(NAME, "srv", lakefs_sdk.CommitCreation(message="through the server"))
            w.count("server commits")
        except lakefs_sdk.ApiException as exc:
            if exc.status == 423:  # the fence: try again later, as a client would
                w.count("refused by the fence")
                time.sleep(0.05)
                return
            raise

    return work


def unreadable(lake: Lake) -> list[str]:
    """Every entry of every branch HEAD (staged ones included) and every tag that does not read
    back as its writer wrote it."""
    repo = lake.repository(NAME)
    refs = [b.name for b in repo.branches()] + [t.name for t in repo.tags()]
    lost = []
    for ref in refs:
        for entry in repo.list(ref):
            try:
                data = repo.read(ref, entry.path)
            except ObjectGone:
                lost.append(f"{ref}:{entry.path} (410)")
                continue
            if not data.startswith(entry.path.encode() + b"\n"):
                lost.append(f"{ref}:{entry.path} (wrong content)")
    return lost


def soak(env: Env, spark, seconds: float) -> dict[str, object]:
    lake = env.lake()
    lake.create_repository(NAME, str(env.namespace()))
    repo = lake.repository(NAME)
    repo.set_gc_rules(GcRules.model_validate({"default_retention_days": 0, "branches": []}))
    repo.upload("main", "seed", content("seed", 0))
    repo.commit("main", "seed")
    repo.create_branch("srv", "main")
    w = Writers(env, seconds)
    runs = deleted = 0
    with running_server(env) as server:
        for name, work in (
            ("main", main_writer(w)),
            ("branches", branch_writer(w)),
            ("tags", tagger(w)),
            ("server", server_writer(w, server)),
        ):
            w.start(name, work)
        started = time.monotonic()
        while w.going():
            window = timedelta(seconds=15) if runs % 3 == 2 else timedelta(0)
            summary = run_gc(lake, NAME, GcOptions(min_age=MIN_AGE, quarantine=window), spark=spark)
            runs += 1
            deleted += summary.num_deleted
        w.join()
        elapsed = time.monotonic() - started
    assert not w.errors, w.errors
    time.sleep(MIN_AGE.total_seconds())  # the last writes grow old enough to be collected
    summary = run_gc(lake, NAME, GcOptions(min_age=MIN_AGE, quarantine=timedelta(0)), spark=spark)
    runs, deleted = runs + 1, deleted + summary.num_deleted
    lost = unreadable(lake)
    recorded = MetastoreRunLog(lake.metastore, NAME).list()
    failed = [r for r in recorded if r.state != "swept"]
    figures = {
        "seconds": round(elapsed),
        "runs": runs,
        **dict(sorted(w.counts.items())),
        "deleted": deleted,
        "quarantines purged": sum(1 for r in recorded if r.repo.purged_at),
        "lost": len(lost),
        "failed runs": len(failed),
    }
    print("\n[soak] " + ", ".join(f"{k}={v}" for k, v in figures.items()))
    assert lost == [], lost[:10]
    assert failed == [], [(r.run_id, r.state, r.error) for r in failed]
    assert w.counts["objects written"] > 0 and w.counts["merges"] > 0 and w.counts["server commits"] > 0
    assert deleted > 0, "GC never collected anything: the soak proves nothing"
    return figures


@pytest.mark.slow
def test_writers_and_gc_together_for_a_while_lose_nothing(env: Env, spark) -> None:
    soak(env, spark, 45)


@pytest.mark.soak
def test_writers_and_gc_together_for_ten_minutes_lose_nothing(env: Env, spark) -> None:
    soak(env, spark, float(os.environ.get("LAKEGC_SOAK_SECONDS", 600)))
