"""The demo lake: lakeFS's worked example of retention rules (main keeps 21 days, dev 7, GC "on 2022-03-31"), dated back
from today, plus uncommitted leftovers of every kind GC has to tell apart from live data.

Objects are aged to match their commits (file mtimes set back), as if the history had really taken
a month: otherwise every object would be younger than GC's minimum age.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from lakegc.repo.model import Commit
from lakegc.repo.repository import Lake, Repository
from lakegc.storage import LocalStorage
from lakegc.timeutil import utcnow

RULES = {
    "default_retention_days": 21,
    "branches": [{"branch_id": "main", "retention_days": 21}, {"branch_id": "dev", "retention_days": 7}],
}
_LEFTOVER_AGE = timedelta(days=3)


@dataclass
class DemoLake:
    repo: Repository
    today: datetime
    commits: dict[str, Commit] = field(default_factory=dict)  # label (the example's date) -> commit


def build_demo(lake: Lake, namespace: Path, today: datetime | None = None, name: str = "demo") -> DemoLake:
    today = today or utcnow()
    lake.create_repository(name, str(namespace))
    demo = DemoLake(lake.repository(name), today)
    repo = demo.repo

    def day(example_date: str) -> datetime:
        """The example's calendar (GC on 2022-03-31) shifted so that GC day is today."""
        return today - (datetime(2022, 3, 31) - datetime.fromisoformat(example_date)).days * timedelta(days=1)

    def commit(branch: str, label: str, files: dict[str, str | None]) -> None:
        when = day(label.removeprefix("d: "))
        for path, content in files.items():
            if content is None:
                repo.remove(branch, path)
            else:
                _age(repo, repo.upload(branch, path, content.encode()).address, when)
        demo.commits[label] = repo.commit(branch, f"{branch}: {label}", date=when)

    commit("main", "2022-02-27", {"events/part-0": "events v1", "users/all": "users v1"})
    commit("main", "2022-03-01", {"events/part-0": "events v2"})
    commit("main", "2022-03-09", {"events/part-1": "more events"})
    repo.create_branch("dev", "main")
    commit("main", "2022-03-12", {"users/all": "users v2"})
    commit("dev", "d: 2022-03-14", {"experiments/a": "experiment a v1"})
    commit("dev", "d: 2022-03-16", {"experiments/a": "experiment a v2"})
    commit("main", "2022-03-18", {"events/part-2": "even more events"})
    commit("dev", "d: 2022-03-20", {"experiments/a": None, "experiments/b": "experiment b"})
    commit("dev", "d: 2022-03-23", {"experiments/c": "experiment c"})
    demo.commits["merge dev"] = repo.merge("dev", "main", date=day("2022-03-25"))
    commit("main", "2022-03-26", {"users/all": "users v3"})
    _leftovers(demo)
    return demo


def _leftovers(demo: DemoLake) -> None:
    """Uncommitted garbage and uncommitted live data, side by side."""
    repo, old = demo.repo, demo.today - _LEFTOVER_AGE
    for path, content in (("staging/report", "draft 1"), ("staging/report", "draft 2")):
        _age(repo, repo.upload("main", path, content.encode()).address, old)  # draft 1 is now garbage
    repo.copy("main", "staging/report", "main", "staging/report-copy")  # shares draft 2's object
    for branch, finish in (("scratch", repo.reset_branch), ("abandoned", repo.delete_branch)):
        repo.create_branch(branch, "main")
        for i in range(3):
            _age(repo, repo.upload(branch, f"tmp/{i}", f"{branch} {i}".encode()).address, old)
        finish(branch)
    claims = repo.get_physical_address("main", "direct/upload")
    repo.storage.write(claims.address, b"uploaded directly, never linked")  # live while its token is


def _age(repo: Repository, key: str, when: datetime) -> None:
    if isinstance(repo.storage, LocalStorage):
        ts = when.timestamp()
        os.utime(repo.storage.root / key, (ts, ts))


def namespace_objects(repo: Repository) -> int:
    return sum(1 for _ in repo.storage.list("data/"))


__all__ = ["DemoLake", "RULES", "build_demo", "namespace_objects"]
