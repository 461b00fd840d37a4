"""What the repository and the connector API both use: the metastore a call opens, durations, and
the candidates a run marked, read back from its folder."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow.parquet as pq

from lakegc.engine.runs import RunFolder
from lakegc.errors import InvalidArgument
from lakegc.repo.repository import Lake
from lakegc.timeutil import parse_duration

Duration = timedelta | str
Metastore = Lake | str | None


def open_lake(metastore: Metastore = None) -> Lake:
    """The metastore and the repositories in it (see the module for where `None` leads)."""
    return metastore if isinstance(metastore, Lake) else Lake(metastore)


def duration(value: Duration) -> timedelta:
    return value if isinstance(value, timedelta) else parse_duration(value)


@dataclass(frozen=True)
class Candidate:
    """An object a run marked for deletion, and why (`expired`, `uncommitted`, `orphan`, ...)."""

    address: str
    size: int
    mtime: datetime
    reason: str
    path: str | None = None  # a repository run's: a path an expired commit held it at (None: uncommitted)
    commit: str | None = None  # the newest commit that held it: the one whose expiry freed it
    branch: str | None = None  # that commit's branch ("(dangling)" for a dangling commit)


@dataclass(frozen=True)
class CandidateFilter:
    """Which candidates to show: all of `prefix` (of the path), `branch` and `reason` that are set."""

    prefix: str | None = None
    branch: str | None = None
    reason: str | None = None

    def __call__(self, row: dict) -> bool:
        path = row.get("path")
        return (
            (self.reason is None or row["reason"] == self.reason)
            and (self.prefix is None or (path is not None and path.startswith(self.prefix)))
            and (self.branch is None or row.get("branch") == self.branch)
        )


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise InvalidArgument("limit must be at least 1")


def read_candidates(folder: RunFolder, limit: int | None, wanted: CandidateFilter | None = None) -> Iterator[Candidate]:
    shown = 0
    for key in folder.parts("candidates"):
        with folder.storage.open_read(key) as f:
            source = pq.ParquetFile(f if f.seekable() else _buffer(f.read()))
            for batch in source.iter_batches(batch_size=10_000):
                for row in batch.to_pylist():
                    if wanted is not None and not wanted(row):
                        continue
                    if limit is not None and shown >= limit:
                        return
                    shown += 1
                    yield Candidate(
                        row["address"], row["size"], row["mtime"], row["reason"],
                        row.get("path"), row.get("commit"), row.get("branch"),
                    )  # fmt: skip


def _buffer(data: bytes):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.BufferReader(data)
