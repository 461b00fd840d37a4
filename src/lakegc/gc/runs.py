"""GC runs: ids that sort newest first, a checked state machine in the metastore, and run outputs.

    marking -> marked -> sweeping -> swept        (and any of them -> failed, with the error kept)
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from lakegc.errors import LakegcError, NotFound
from lakegc.metastore import Metastore
from lakegc.metastore import schema as t
from lakegc.gc.report import render_report
from lakegc.redact import mask_doc, mask_secrets
from lakegc.storage import Storage
from lakegc.timeutil import utcnow

RUNS_PREFIX = "_lakegc/gc/"
# The crash tests' hook: a run state at which the process that moved a run there stops itself.
STOP_AFTER = "LAKEGC_TEST_STOP_AFTER"


class RunState(StrEnum):
    MARKING = "marking"
    MARKED = "marked"
    SWEEPING = "sweeping"
    SWEPT = "swept"
    FAILED = "failed"


_NEXT: dict[RunState, set[RunState]] = {
    RunState.MARKING: {RunState.MARKED, RunState.FAILED},
    RunState.MARKED: {RunState.SWEEPING, RunState.FAILED},
    RunState.SWEEPING: {RunState.SWEPT, RunState.FAILED},
    RunState.SWEPT: set(),
    RunState.FAILED: set(),
}


class IllegalTransition(LakegcError):
    pass


class RunNotFound(NotFound):
    pass


def check_transition(run_id: str, frm: RunState, to: RunState) -> None:
    if to not in _NEXT[frm]:
        raise IllegalTransition(f"run {run_id}: cannot go from {frm} to {to}")


def new_run_id(now: datetime) -> str:
    """Inverted milliseconds, then randomness: a plain string sort lists the newest run first."""
    return f"{10**13 - int(now.timestamp() * 1000):013d}-{secrets.token_hex(3)}"


def _stop_point(run_id: str, state: RunState) -> None:
    """With LAKEGC_TEST_STOP_AFTER=<state>, say so on stderr and stop (SIGSTOP) right after the run
    entered <state>: a crash test then kills the process exactly there, even between two steps
    that no phase line separates (a mark recorded as finished, a sweep not yet started)."""
    if os.environ.get(STOP_AFTER) == str(state):
        print(f"lakegc: run {run_id} is {state}; stopped ({STOP_AFTER})", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)


def run_prefix(run_id: str) -> str:
    return f"{RUNS_PREFIX}{run_id}/"


@dataclass
class RunSummary:
    """What a run did. Stored in the metastore (counts) and as summary.json beside its outputs."""

    run_id: str
    repository: str
    state: RunState
    mode: str
    dry_run: bool
    mark_only: bool
    started_at: str
    finished_at: str | None
    cutoff_time: str
    min_age_seconds: float
    policy: str
    num_listed: int = 0
    num_candidates: int = 0
    bytes_candidates: int = 0
    candidates_by_reason: dict[str, int] = field(default_factory=dict)
    num_deleted: int = 0
    bytes_deleted: int = 0
    num_failed: int = 0
    num_revived: int = 0
    active_commits: int = 0
    expired_commits: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    mode_reason: str = ""
    base_run_id: str | None = None
    num_slices_listed: int = 0
    num_slices_skipped: int = 0
    num_rechecked: int = 0
    refs_sha256: str | None = None  # the run's reference set manifest (gc.refset), as written
    object_ages: list[dict[str, Any]] = field(default_factory=list)  # listed objects by age (gc.ages)
    candidate_ages: list[dict[str, Any]] = field(default_factory=list)  # candidates by slice age and reason

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["state"] = str(self.state)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "RunSummary":
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in doc.items() if k in known}
        values["state"] = RunState(values["state"])
        return cls(**values)

    def masked(self) -> "RunSummary":
        """The summary as it may be written down: every credential in it masked."""
        return RunSummary.from_json(mask_doc(self.to_json()))


class RunStore:
    """The gc_runs table: one row per run, state changes are compare-and-set."""

    def __init__(self, metastore: Metastore, repository: str):
        self.ms = metastore
        self.repository = repository

    def create(self, summary: RunSummary, parameters: dict[str, Any]) -> None:
        with self.ms.write() as conn:
            conn.execute(t.gc_runs.insert().values(
                id=summary.run_id, repository=self.repository, kind="repository", state=str(summary.state),
                started_at=datetime.fromisoformat(summary.started_at), parameters=parameters,
                counts=summary.masked().to_json(), error=None))

    def transition(self, summary: RunSummary, to: RunState) -> None:
        """Move `summary` to state `to`, but only from the state it is in: anything else is loud."""
        check_transition(summary.run_id, summary.state, to)
        frm = summary.state
        summary.state = to
        if to in (RunState.SWEPT, RunState.FAILED) or (to is RunState.MARKED and (summary.dry_run or summary.mark_only)):
            summary.finished_at = utcnow().isoformat()
        with self.ms.write() as conn:
            moved = conn.execute(t.gc_runs.update().where(
                t.gc_runs.c.id == summary.run_id, t.gc_runs.c.state == str(frm),
            ).values(state=str(to), counts=summary.masked().to_json(),
                     error=mask_secrets(summary.error) if summary.error else None,
                     finished_at=datetime.fromisoformat(summary.finished_at) if summary.finished_at else None)).rowcount
            if not moved:
                current = conn.execute(sa.select(t.gc_runs.c.state).where(t.gc_runs.c.id == summary.run_id)).scalar()
                summary.state = frm
                raise IllegalTransition(f"run {summary.run_id}: expected state {frm}, but it is {current}")
        _stop_point(summary.run_id, to)

    def get(self, run_id: str) -> tuple[RunSummary, dict[str, Any]]:
        with self.ms.read() as conn:
            row = conn.execute(sa.select(t.gc_runs).where(
                t.gc_runs.c.repository == self.repository, t.gc_runs.c.id == run_id)).first()
        if row is None:
            raise RunNotFound(f"GC run {run_id!r} not found in repository {self.repository!r}")
        return _summary(row), dict(row.parameters)

    def list(self) -> list[RunSummary]:
        with self.ms.read() as conn:
            rows = conn.execute(sa.select(t.gc_runs).where(t.gc_runs.c.repository == self.repository)
                                .order_by(t.gc_runs.c.id)).all()
        return [_summary(row) for row in rows]


def _summary(row: sa.Row) -> RunSummary:
    """The row's own state, error and end time win over the counts document (the lease closes the
    runs of a dead process by updating only those)."""
    summary = RunSummary.from_json(dict(row.counts))
    summary.state, summary.error = RunState(row.state), row.error
    if row.finished_at is not None:
        summary.finished_at = row.finished_at.isoformat()
    return summary


def write_summary(storage: Storage, summary: RunSummary) -> None:
    """summary.json and the report people read, side by side (also for failed runs)."""
    summary = summary.masked()
    storage.write(run_prefix(summary.run_id) + "summary.json", json.dumps(summary.to_json(), indent=2).encode())
    storage.write(report_key(summary.run_id), render_report(summary).encode())


def report_key(run_id: str) -> str:
    return run_prefix(run_id) + "report.html"


def output_keys(storage: Storage, run_id: str, name: str) -> list[str]:
    """The Parquet parts of one output (`candidates`, `deleted`, ...) of a run."""
    return [o.key for o in storage.list(f"{run_prefix(run_id)}{name}/") if o.key.endswith(".parquet")]
