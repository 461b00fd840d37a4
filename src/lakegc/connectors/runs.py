"""Connector runs: what a repository GC run is (an id that sorts newest first, the checked state
machine, candidates/ and deleted/ as Parquet, summary.json and report.html), kept in a run folder
of their own, `$LAKEGC_HOME/runs/<run-id>/` by default: the lakes they clean are not ours to write
into, and a file of ours under a table's location would itself look like an orphan.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator

from lakegc.errors import LakegcError
from lakegc.failures import cause
from lakegc.gc.ages import listing_tally
from lakegc.gc.arrowio import read_parquet, write_parquet
from lakegc.gc.mark import CANDIDATES_SCHEMA
from lakegc.gc.report import age_histogram, bars_svg, human_bytes, page, report_top
from lakegc.gc.runs import RunState, check_transition, new_run_id
from lakegc.gc.sweep import deletion_tally
from lakegc.metastore import lakegc_home
from lakegc.redact import mask_doc
from lakegc.storage import Storage, open_storage
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def default_runs_location() -> str:
    return str(lakegc_home() / "runs")


@dataclass
class ConnectorRun:
    """What one connector run did; `details` holds what is the connector's own (catalog rows,
    expired snapshots, per-table figures)."""

    run_id: str
    connector: str  # "catalog" | "iceberg"
    target: str  # what it cleaned, as the user named it
    dry_run: bool
    started_at: str
    cutoff_time: str  # objects modified at or after this are never candidates
    settings: dict[str, Any]
    location: str  # the run folder: summary.json, report.html, candidates/, deleted/
    state: RunState = RunState.MARKING
    finished_at: str | None = None
    num_listed: int = 0
    num_candidates: int = 0
    bytes_candidates: int = 0
    candidates_by_reason: dict[str, int] = field(default_factory=dict)
    num_deleted: int = 0
    bytes_deleted: int = 0
    num_failed: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    object_ages: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["state"] = str(self.state)
        return doc

    def masked(self) -> "ConnectorRun":
        """The run as it may be written down: every credential in it masked."""
        return ConnectorRun(**{**mask_doc(asdict(self)), "state": self.state})

    def transition(self, to: RunState) -> None:
        check_transition(self.run_id, self.state, to)
        self.state = to
        if to in (RunState.SWEPT, RunState.FAILED) or (to is RunState.MARKED and self.dry_run):
            self.finished_at = utcnow().isoformat()


class RunFolder:
    """A connector run's folder: its storage, and the keys of its outputs in it."""

    def __init__(self, runs_location: str, run_id: str):
        self.storage: Storage = open_storage(runs_location)
        self.storage.prepare()
        self.prefix = f"{run_id}/"
        self.location = self.storage.full_uri(self.prefix.rstrip("/"))

    def key(self, name: str) -> str:
        return self.prefix + name

    def parts(self, name: str) -> list[str]:
        """The Parquet parts of one output (`candidates`, `deleted`)."""
        return [o.key for o in self.storage.list(self.key(name) + "/") if o.key.endswith(".parquet")]

    def write_summary(self, run: ConnectorRun) -> None:
        run = run.masked()
        self.storage.write(self.key("summary.json"), json.dumps(run.to_json(), indent=2).encode())
        self.storage.write(self.key("report.html"), render_report(run).encode())


def start_run(connector: str, target: str, dry_run: bool, now: datetime, cutoff: datetime,
              settings: dict[str, Any], runs_location: str) -> tuple[ConnectorRun, RunFolder]:
    run_id = new_run_id(now)
    folder = RunFolder(runs_location, run_id)
    run = ConnectorRun(run_id, connector, target, dry_run, now.isoformat(), cutoff.isoformat(), settings,
                       folder.location)
    return run, folder


@contextmanager
def recorded(run: ConnectorRun, folder: RunFolder) -> Iterator[None]:
    """A failure inside marks the run failed, keeps its error, writes the summary and re-raises
    (unexpected errors as one readable LakegcError line)."""
    try:
        yield
    except BaseException as exc:
        run.error = cause(exc)
        run.transition(RunState.FAILED)
        folder.write_summary(run)
        if isinstance(exc, Exception) and not isinstance(exc, LakegcError):
            raise LakegcError(f"{run.connector} GC run {run.run_id} failed: {run.error}") from exc
        raise


def delete_recorded(run: ConnectorRun, spark: "SparkSession", folder: RunFolder,
                    delete: Callable[["DataFrame"], "DataFrame"]) -> None:
    """Delete what the run's to_delete/ holds, keep the outcome in deleted/ and its figures in the
    run; any failed delete fails the run (a rerun retries it)."""
    to_delete = read_parquet(spark, folder.storage, folder.parts("to_delete"), CANDIDATES_SCHEMA)
    _, tally = write_parquet(delete(to_delete), folder.storage, folder.key("deleted"), tally=(deletion_tally, []))
    run.num_deleted, run.bytes_deleted, run.num_failed = (
        (0, 0, 0) if tally is None else (tally["deleted"][0].as_py(), tally["bytes"][0].as_py(), tally["failed"][0].as_py()))
    if run.num_failed:
        raise LakegcError(f"{run.num_failed} object(s) could not be deleted; see {run.location}/deleted/")


def tally_listing(run: ConnectorRun, listing: "DataFrame", now: datetime) -> int:
    """Record the listing's age histogram and size in the run; returns how many objects are old
    enough to be judged."""
    old, _, run.object_ages = listing_tally(listing, now)
    run.num_listed = sum(bucket["count"] for bucket in run.object_ages)
    return old


def count_candidates(run: ConnectorRun, spark: "SparkSession", folder: RunFolder) -> None:
    """Candidates by reason, from the run's candidates/ (a row per reason reaches the driver)."""
    from pyspark.sql import functions as F

    rows = (read_parquet(spark, folder.storage, folder.parts("candidates"), CANDIDATES_SCHEMA)
            .groupBy("reason").agg(F.count("*").alias("n"), F.sum("size").alias("bytes")).collect())
    run.candidates_by_reason = {r["reason"]: int(r["n"]) for r in sorted(rows, key=lambda r: r["reason"])}
    run.num_candidates = sum(run.candidates_by_reason.values())
    run.bytes_candidates = sum(int(r["bytes"] or 0) for r in rows)


def summary_rows(run: ConnectorRun) -> list[list[object]]:
    """The run as people read it, for the CLI's table and the report."""
    rows: list[list[object]] = [
        ["state", str(run.state) + (f" ({run.error})" if run.error else "")],
        ["target", run.target],
        ["mode", "dry run: nothing deleted, nothing changed" if run.dry_run else "collect"],
        ["started / finished", f"{run.started_at[:19]} / {(run.finished_at or '-')[:19]}"],
        *[[name, value] for name, value in run.settings.items()],
        ["objects listed", run.num_listed],
    ]
    by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(run.candidates_by_reason.items()))
    rows.append(["candidates", f"{run.num_candidates} ({human_bytes(run.bytes_candidates)})"
                 + (f": {by_reason}" if by_reason else "")])
    if not run.dry_run and run.state in (RunState.SWEPT, RunState.FAILED):
        rows.append(["deleted", f"{run.num_deleted} ({human_bytes(run.bytes_deleted)}), {run.num_failed} failed"])
    rows += [[name, value] for name, value in run.details.items() if not isinstance(value, (list, dict))]
    rows.append(["report", f"{run.location}/report.html"])
    return rows


def render_report(run: ConnectorRun) -> str:
    reclaimed = (f"{human_bytes(run.bytes_deleted)} reclaimed: {run.num_deleted:,} objects deleted"
                 if not run.dry_run and run.state is RunState.SWEPT else
                 f"{human_bytes(run.bytes_candidates)} would be reclaimed by {run.num_candidates:,} candidates "
                 "(nothing deleted)")
    cutoff_days = (datetime.fromisoformat(run.started_at) - datetime.fromisoformat(run.cutoff_time)).total_seconds() / 86400
    parts = [
        *report_top(f"{run.connector} GC run {run.run_id} · {run.target}", str(run.state), run.started_at,
                    run.finished_at, reclaimed, summary_rows(run), run.phases, run.candidates_by_reason),
        bars_svg([(r, n, "#0969da") for r, n in sorted(run.candidates_by_reason.items())]),
        "<h2>Ages of the listed objects</h2>",
        age_histogram(run.object_ages, cutoff_days, cutoff="cutoff",
                      note="Age = time since the object was last modified, for every object this run listed."),
    ]
    return page(f"lakegc {run.connector} run {run.run_id}", parts)
