"""Runs: one record for every GC run, of a repository or of a connector.

    marking -> marked -> sweeping -> swept        (and any of them -> failed, with the error kept)

A sweep that stops short (a `--max-deletes` budget, a killed process, objects the store would not
delete) leaves its run `sweeping`, its progress recorded, and `gc sweep` goes on from there.

A run has an id that sorts by the time it started (`new_run_id`), a state that only moves along the
arrows above (anything else is loud: `IllegalTransition`), a folder for its outputs (`RunFolder`:
candidates/, to_delete/, deleted/ as Parquet, summary.json and report.html), and one record, `Run`,
that summary.json, the `--json` output, the report and `gc runs` are all made from.

Where the records are kept is a `RunLog`:
- a repository's runs in the metastore (`MetastoreRunLog`, table gc_runs), where each state change
  is a compare-and-set, so a run taken over by another (its lease ran out) cannot carry on as if
  nothing happened; their folders are under `_lakegc/gc/<run>/` in the namespace;
- a connector's runs in a folder of their own (`FolderRunLog`, `$LAKEGC_HOME/runs/` by default),
  where each run's summary.json is its record: the lakes they clean are not ours to write into,
  and a machine with no lakegc metastore needs none.

`engine.recorder.Recorder` is the one piece that moves a run: it checks the transition, stamps the
end time, tells the log, and writes summary.json (and report.html once the run has ended).
"""

from __future__ import annotations

import copy
import json
import secrets
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from lakegc.errors import AmbiguousRef, LakegcError, NotFound
from lakegc.metastore import Metastore
from lakegc.metastore import schema as t
from lakegc.metastore.sql import starts_with
from lakegc.redact import mask_doc, mask_secrets
from lakegc.storage import Storage, open_storage

if TYPE_CHECKING:
    from lakegc.engine.ages import ListingTally
    from lakegc.engine.delete import DeleteTally

REPOSITORY = "repository"  # the kind of a repository's runs; connectors' runs are of their connector's kind


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


class SweepIncomplete(LakegcError):
    """A sweep that stopped short (objects the store would not delete, a lost lease): the run stays
    `sweeping`, its progress recorded, for `gc sweep` to continue."""


def check_transition(run_id: str, frm: RunState, to: RunState) -> None:
    if to not in _NEXT[frm]:
        raise IllegalTransition(f"run {run_id}: cannot go from {frm} to {to}")


def new_run_id(now: datetime) -> str:
    """The start time to the millisecond (UTC, ISO 8601's basic form), then randomness: ids sort by
    time, read as a date, and a few leading characters select a run (`RunLog.resolve`)."""
    at = now.astimezone(UTC)
    return f"{at:%Y%m%dT%H%M%S}{at.microsecond // 1000:03d}Z-{secrets.token_hex(3)}"


@dataclass(slots=True)  # a misspelt or moved field is an error, never a new attribute
class RepositoryDetails:
    """What only a repository run records: which commits stayed and why, the base of an
    incremental run, what holds the candidates' bytes, and its restore window."""

    policy: str = ""  # which commits stay, as the run was told
    mode_reason: str = ""
    base_run_id: str | None = None
    active_commits: int = 0
    expired_commits: int = 0
    num_slices_listed: int = 0
    num_slices_skipped: int = 0
    num_rechecked: int = 0
    num_revived: int = 0  # candidates referenced again by the time the sweep re-checked them
    refs_sha256: str | None = None  # the run's reference set manifest (gc.refset), as written
    candidate_ages: list[dict[str, Any]] = field(default_factory=list)  # candidates by slice age and reason
    # what holds the candidates' bytes (repogc.names): {"prefixes", "branches", "commits": [{name, candidates, bytes}]}
    top: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    retention_curve: list[dict[str, Any]] = field(default_factory=list)  # gc run --curve: simulate's points
    # The restore window: a run with one deletes nothing itself; its sweep moves what it collects
    # into the window (num_moved), from where each object is either restored (once, however often
    # asked) or purged when the window ends (at quarantine_until); what is left is still in it.
    quarantine_until: str | None = None
    purged_at: str | None = None  # when the quarantine was purged (its objects are gone for good)
    restored: list[dict[str, Any]] = field(default_factory=list)  # each restore: {at, path, num_restored}
    num_moved: int = 0
    bytes_moved: int = 0
    num_restored: int = 0
    bytes_restored: int = 0
    num_purged: int = 0
    bytes_purged: int = 0

    @property
    def num_in_window(self) -> int:
        """Objects still in the restore window: moved, and neither restored nor purged."""
        return self.num_moved - self.num_restored - self.num_purged

    @property
    def bytes_in_window(self) -> int:
        return self.bytes_moved - self.bytes_restored - self.bytes_purged


@dataclass(slots=True)
class Run:
    """What one GC run did: the fields every run has, and the collector's own in `details` (a
    repository run's `RepositoryDetails`; a connector's figures as people read them: expired
    snapshots, catalog rows...). Stage results are recorded in one step each (`record_mark`,
    `record_sweep`); summary.json, `--json`, the report and `gc runs` are all made from it."""

    run_id: str
    kind: str  # REPOSITORY, or the collector: "iceberg", "delta", "catalog", ...
    target: str  # what it cleaned: the repository's name, the tables, the store
    state: RunState
    dry_run: bool
    started_at: str
    cutoff_time: str  # objects modified at or after this are never candidates
    min_age_seconds: float
    location: str = ""  # the run folder (summary.json, report.html, candidates/, deleted/)
    mode: str = "clean"
    mark_only: bool = False  # marked for a later sweep
    finished_at: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # a connector run's options, as people read them
    num_listed: int = 0  # objects the listing found
    num_young: int = 0  # of which younger than the cutoff: never candidates
    num_candidates: int = 0
    bytes_candidates: int = 0
    candidates_by_reason: dict[str, int] = field(default_factory=dict)
    num_deleted: int = 0  # deleted for good (a repository run with a restore window moves instead)
    bytes_deleted: int = 0
    num_failed: int = 0
    num_stopped: int = 0  # candidates a --max-deletes budget left (for a later `gc sweep`; a connector's next run)
    num_slowdowns: int = 0  # delete requests the store throttled (the sweep slowed down for them)
    failed: list[dict[str, Any]] = field(default_factory=list)  # the first objects num_failed counts: {address, error}
    object_ages: list[dict[str, Any]] = field(default_factory=list)  # listed objects by age (engine.ages)
    phases: dict[str, float] = field(default_factory=dict)
    phase_jobs: dict[str, int] = field(default_factory=dict)  # Spark jobs each phase started (when counted)
    spark_jobs: int | None = None  # Spark jobs the run started, mark and sweep (None: not counted)
    error: str | None = None
    details: RepositoryDetails | dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind == REPOSITORY and not isinstance(self.details, RepositoryDetails):
            self.details = RepositoryDetails(**self.details)

    @property
    def repository(self) -> str | None:
        return self.target if self.kind == REPOSITORY else None

    @property
    def repo(self) -> RepositoryDetails:
        """A repository run's own details (a connector run has none: its details are a dict)."""
        if not isinstance(self.details, RepositoryDetails):
            raise TypeError(f"run {self.run_id} is a {self.kind} run, not a repository run")
        return self.details

    def __getattr__(self, name: str) -> Any:
        """A repository run's own fields read as they always could be (`run.num_moved`), for the
        Python API's users; they live in `details` (a connector run has none of them: their empty
        values). Only reading: setting one is an error (slots), so the record has one place each."""
        if name in _DETAIL_FIELDS or name in ("num_in_window", "bytes_in_window"):
            own = object.__getattribute__(self, "details")
            return getattr(own if isinstance(own, RepositoryDetails) else _NO_DETAILS, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def figures(self) -> dict[str, Any]:
        """A connector run's details as people read them (none for a repository run)."""
        return self.details if isinstance(self.details, dict) else {}

    def to_json(self) -> dict[str, Any]:
        """The record as summary.json and `--json` have always shown it: a repository run's details
        flat among the common fields, a connector's under "details"."""
        doc = copy.deepcopy({f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"})
        doc["state"] = str(self.state)
        if isinstance(self.details, RepositoryDetails):
            doc.pop("settings")
            return {"repository": self.target, **doc, **asdict(self.details)}
        shown = {k: v for k, v in doc.items() if k not in _REPOSITORY_ONLY}
        return {"connector": self.kind, **shown, "details": copy.deepcopy(self.details)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Run:
        """A record as `to_json` wrote it, or as lakegc wrote one before runs had one record (a
        repository run's `repository`, a connector run's `connector`)."""
        values = {k: v for k, v in doc.items() if k in _FIELDS}
        if "kind" not in values:
            values["kind"] = doc.get("connector") or REPOSITORY
        values.setdefault("target", doc.get("repository") or "")
        values.setdefault("min_age_seconds", 0.0)
        values["state"] = RunState(values["state"])
        if values["kind"] == REPOSITORY:
            own = {k: v for k, v in doc.items() if k in _DETAIL_FIELDS}
            if own.get("quarantine_until") and "num_moved" not in doc:
                own.update(_moved_counts(doc))
                values["num_deleted"], values["bytes_deleted"] = 0, 0
            values["details"] = RepositoryDetails(**own)
        else:
            values["details"] = dict(doc.get("details") or {})
        return cls(**values)

    def masked(self) -> Run:
        """The run as it may be written down: every credential in it masked."""
        return Run.from_json(mask_doc(self.to_json()))

    def record_counts(self, counts: CandidateCounts) -> None:
        self.num_candidates, self.bytes_candidates = counts.total, counts.bytes
        self.candidates_by_reason = dict(counts.by_reason)

    def record_listing(self, listing: ListingTally) -> None:
        self.num_listed, self.num_young, self.object_ages = listing.listed, listing.young, listing.ages

    def record_mark(self, listing: ListingTally, candidates: CandidateCounts) -> None:
        """A mark's result, in one step (`engine.collector.Marked`)."""
        self.record_listing(listing)
        self.record_counts(candidates)

    def record_sweep(self, deletes: DeleteTally, stopped: int) -> None:
        """A sweep's result, in one step (`engine.collector.Swept`)."""
        self.num_deleted, self.bytes_deleted, self.num_failed = deletes.deleted, deletes.bytes, deletes.failed
        self.num_stopped, self.num_slowdowns = stopped, self.num_slowdowns + deletes.slowdowns


def _moved_counts(values: dict[str, Any]) -> dict[str, Any]:
    """A record written before runs counted moves apart (lakegc < 0.6), when `num_deleted` counted
    what a window run moved: its moves as moved; its restores as far as the record knows them (at
    most what it moved; their bytes it kept only when all came back, so a purged window's bytes
    count as purged); a purged window's rest as purged. The next restore or purge of the run counts all of it again
    from its records (`repogc.quarantine.recount`)."""
    moved, moved_bytes = values.get("num_deleted", 0), values.get("bytes_deleted", 0)
    restored = min(moved, sum(r.get("num_restored", 0) for r in values.get("restored", [])))
    counts = {"num_moved": moved, "bytes_moved": moved_bytes}
    counts["num_restored"], counts["bytes_restored"] = restored, moved_bytes if restored == moved else 0
    if values.get("purged_at"):
        counts["num_purged"], counts["bytes_purged"] = moved - restored, moved_bytes - counts["bytes_restored"]
    return counts


_FIELDS = {f.name for f in fields(Run)} - {"details"}
_DETAIL_FIELDS = {f.name for f in fields(RepositoryDetails)}
_NO_DETAILS = RepositoryDetails()
_REPOSITORY_ONLY = {"mark_only", "failed"}  # not in a connector run's JSON (as before runs had one record)


@dataclass(frozen=True)
class CandidateCounts:
    """What a run's candidates add up to (counted as they are written, see `engine.candidates`)."""

    total: int
    bytes: int
    by_reason: dict[str, int]


@dataclass(frozen=True)
class RunFolder:
    """Where one run's outputs live: a storage and the key prefix of the run's folder in it."""

    storage: Storage
    prefix: str  # ends with "/"

    @property
    def location(self) -> str:
        return self.storage.full_uri(self.prefix.rstrip("/"))

    def key(self, name: str) -> str:
        return self.prefix + name

    def parts(self, name: str) -> list[str]:
        """The Parquet parts of one output (`candidates`, `to_delete`, `deleted`, ...)."""
        return [o.key for o in self.storage.list(self.key(name) + "/") if o.key.endswith(".parquet")]

    def write_summary(self, run: Run) -> None:
        """summary.json, the record as the folder keeps it (credentials masked). The report beside
        it is written when the run ends (`engine.recorder`)."""
        self.storage.write(self.key("summary.json"), json.dumps(run.masked().to_json(), indent=2).encode())


class RunLog(Protocol):
    """Where a collector's run records are kept (see the module)."""

    def create(self, run: Run, parameters: dict[str, Any]) -> None: ...

    def move(self, run: Run, frm: RunState) -> None:
        """Record that `run` moved from `frm` to `run.state`; IllegalTransition when it was no
        longer in `frm`."""
        ...

    def get(self, run_id: str) -> tuple[Run, dict[str, Any]]: ...

    def list(self) -> list[Run]:
        """Newest first."""
        ...

    def resolve(self, given: str) -> str:
        """The id of the run `given` names: its whole id or a prefix only it has."""
        ...


def pick(given: str, ids: list[str]) -> str:
    """The one id equal to `given` or starting with it; RunNotFound or AmbiguousRef otherwise."""
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)] if given else []
    if not matches:
        raise RunNotFound(f"no GC run {given!r}")
    if len(matches) > 1:
        shown = ", ".join(sorted(matches)[:3]) + (" ..." if len(matches) > 3 else "")
        raise AmbiguousRef(f"run id prefix {given!r} is ambiguous: it starts {len(matches)} runs ({shown})")
    return matches[0]


class MetastoreRunLog:
    """A repository's runs: rows of gc_runs, each state change a compare-and-set."""

    def __init__(self, metastore: Metastore, repository: str):
        self.ms, self.repository = metastore, repository

    def create(self, run: Run, parameters: dict[str, Any]) -> None:
        with self.ms.write() as conn:
            conn.execute(
                t.gc_runs.insert().values(
                    id=run.run_id,
                    repository=self.repository,
                    kind=run.kind,
                    state=str(run.state),
                    started_at=datetime.fromisoformat(run.started_at),
                    parameters=parameters,
                    counts=run.masked().to_json(),
                    error=None,
                )
            )

    def move(self, run: Run, frm: RunState) -> None:
        with self.ms.write() as conn:
            moved = conn.execute(
                t.gc_runs.update()
                .where(
                    t.gc_runs.c.id == run.run_id,
                    t.gc_runs.c.state == str(frm),
                )
                .values(
                    state=str(run.state),
                    counts=run.masked().to_json(),
                    error=mask_secrets(run.error) if run.error else None,
                    finished_at=datetime.fromisoformat(run.finished_at) if run.finished_at else None,
                )
            ).rowcount
            if not moved:
                current = conn.execute(sa.select(t.gc_runs.c.state).where(t.gc_runs.c.id == run.run_id)).scalar()
                raise IllegalTransition(f"run {run.run_id}: expected state {frm}, but it is {current}")

    def get(self, run_id: str) -> tuple[Run, dict[str, Any]]:
        with self.ms.read() as conn:
            row = conn.execute(
                sa.select(t.gc_runs).where(t.gc_runs.c.repository == self.repository, t.gc_runs.c.id == run_id)
            ).first()
        if row is None:
            raise RunNotFound(f"GC run {run_id!r} not found in repository {self.repository!r}")
        return _from_row(row), dict(row.parameters)

    def list(self) -> list[Run]:
        with self.ms.read() as conn:
            rows = conn.execute(
                sa.select(t.gc_runs)
                .where(t.gc_runs.c.repository == self.repository)
                .order_by(t.gc_runs.c.started_at.desc(), t.gc_runs.c.id.desc())
            ).all()
        return [_from_row(row) for row in rows]

    def resolve(self, given: str) -> str:
        with self.ms.read() as conn:
            ids = list(
                conn.execute(
                    sa.select(t.gc_runs.c.id).where(
                        t.gc_runs.c.repository == self.repository, starts_with(t.gc_runs.c.id, given)
                    )
                ).scalars()
            )
        try:
            return pick(given, ids)
        except RunNotFound:
            raise RunNotFound(f"GC run {given!r} not found in repository {self.repository!r}") from None


def _from_row(row: sa.Row) -> Run:
    """The row's own state, error and end time win over the counts document (a lease takeover
    closes the runs of a dead process by updating only those)."""
    run = Run.from_json({"target": row.repository, **dict(row.counts)})
    run.state, run.error = RunState(row.state), row.error
    if row.finished_at is not None:
        run.finished_at = row.finished_at.isoformat()
    return run


class FolderRunLog:
    """A connector's runs: one folder per run under `location`, its summary.json the record."""

    def __init__(self, location: str, kind: str):
        self.storage, self.kind = open_storage(location), kind

    def folder(self, run_id: str) -> RunFolder:
        self.storage.prepare()
        return RunFolder(self.storage, f"{run_id}/")

    def create(self, run: Run, parameters: dict[str, Any]) -> None:
        folder = self.folder(run.run_id)
        folder.write_summary(run)
        if parameters:  # the plan the run was made from, as its collector persisted it
            folder.storage.write(folder.key("plan.json"), json.dumps(mask_doc(parameters), indent=2).encode())

    def move(self, run: Run, frm: RunState) -> None:
        pass  # one process runs a connector run from start to end: the Recorder's check is the whole story

    def get(self, run_id: str) -> tuple[Run, dict[str, Any]]:
        try:
            run = Run.from_json(json.loads(self.storage.read(f"{run_id}/summary.json")))
        except (LakegcError, OSError, ValueError, KeyError, TypeError):
            raise RunNotFound(f"no {self.kind} GC run {run_id!r} in {self.storage.uri}") from None
        if run.kind != self.kind:
            raise RunNotFound(f"run {run_id!r} in {self.storage.uri} is a {run.kind} run, not a {self.kind} one")
        return run, {}

    def list(self) -> list[Run]:
        runs = []
        for run_id in self._ids():
            try:
                runs.append(self.get(run_id)[0])
            except RunNotFound:
                continue  # another connector's run, or a folder that is not a run
        return sorted(runs, key=lambda r: (r.started_at, r.run_id), reverse=True)

    def resolve(self, given: str) -> str:
        return pick(given, [run.run_id for run in self.list()])

    def _ids(self) -> list[str]:
        try:
            return self.storage.list_dirs("")
        except LakegcError:
            return []
