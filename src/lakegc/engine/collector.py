"""One shape for every collector: plan -> mark -> sweep, driven by `collect`.

A collector (a Delta table, Iceberg tables, an IOx-style catalog) says only what is its own:

    plan()                    -> its plan (frozen): every check that can fail, done before the run
                                 exists; `.run` is the part every run has (`RunPlan`)
    mark(spark, plan, stage)  -> Marked (frozen): what was listed, what the candidates add up to
    sweep(spark, plan, stage) -> Swept (frozen): what the deletes did, what a budget left

`collect` does the rest the same way for all of them: it opens the run's record, moves the run
through its states (`engine.runs`), times the phases, records each stage's result in one step,
holds every sweep to the run's budget (`--max-deletes`, `--max-delete-rate`) and fails the run on
a delete the store refused. A collector never moves a run or writes its record itself.

The `Stage` a collector is handed is the run's folder and figures while it works: the listing's
tally, the candidates written, the delete results recorded; each returns what it counted, and the
collector returns it inside Marked or Swept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lakegc.engine.ages import ListingTally, listing_tally
from lakegc.engine.arrowio import read_parquet, write_counted, write_parquet
from lakegc.engine.candidates import write_candidates
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.delete import Budget, DeleteTally, check_budget, record_deletes
from lakegc.engine.progress import Phase, PhaseTimer, no_progress
from lakegc.engine.recorder import Recorder
from lakegc.engine.runs import CandidateCounts, FolderRunLog, Run, RunFolder, RunState, new_run_id
from lakegc.errors import LakegcError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class RunOptions:
    """What every collector's run is told besides what it collects: the one place these options
    are defined (the CLI's and the API's come from here)."""

    dry_run: bool = False  # mark and report, delete nothing
    runs_location: str | None = None  # None: `LAKEGC_RUNS`, the settings' `runs`, or $LAKEGC_HOME/runs
    master: str | None = None  # the Spark master (None: the settings', else local)
    conf: Mapping[str, str] = field(default_factory=dict)  # Spark conf
    metastore: str | None = None  # the lakegc metastore whose places no run may touch
    budget: Budget = Budget()  # --max-deletes, --max-delete-rate

    def __post_init__(self) -> None:
        check_budget(self.budget)  # a bad budget fails before anything is read

    def plan(self, kind: str, target: str, now: datetime, cutoff: datetime, runs_location: str) -> RunPlan:
        return RunPlan(kind, target, now, cutoff, self.dry_run, runs_location, budget=self.budget)

    def start(self) -> SparkSession:
        """The run's Spark session (called once the plan holds, see `collect`)."""
        from lakegc.engine.spark import spark_session

        return spark_session(self.master, dict(self.conf))


@dataclass(frozen=True)
class RunPlan:
    """The part of every collector's plan that the run's record is made from."""

    kind: str  # the collector: "delta", "iceberg", "catalog"
    target: str  # what it cleans, as people name it
    now: datetime
    cutoff: datetime  # objects modified at or after this are never candidates
    dry_run: bool
    runs_location: str  # where the run's folder goes (`FolderRunLog`)
    settings: Mapping[str, Any] = field(default_factory=dict)  # the options, as people read them
    budget: Budget = Budget()
    run_id: str | None = None  # None: a new one; a collector whose system names runs gives that name
    mark_only: bool = False  # stop at marked: a later run sweeps what it marked

    def to_json(self) -> dict[str, Any]:
        """The plan as the run's folder keeps it (plan.json)."""
        return {
            "kind": self.kind,
            "target": self.target,
            "now": self.now.isoformat(),
            "cutoff": self.cutoff.isoformat(),
            "dry_run": self.dry_run,
            "settings": dict(self.settings),
            "budget": asdict(self.budget),
        }


class Planned(Protocol):
    @property
    def run(self) -> RunPlan: ...


P = TypeVar("P", bound=Planned)


@dataclass(frozen=True)
class Marked:
    """What a mark found: its listing, its candidates (written as the run's candidates/), and, when
    the run must not sweep them, why (the run then fails with its figures recorded)."""

    listing: ListingTally
    candidates: CandidateCounts
    refusal: str | None = None


@dataclass(frozen=True)
class Swept:
    """What a sweep did: its deletes (a failed one fails the run: a rerun retries it), and how many
    objects it sent to be deleted, of which the budget may have left some."""

    deletes: DeleteTally
    sent: int

    @property
    def stopped(self) -> int:
        return max(self.sent - self.deletes.deleted - self.deletes.failed, 0)


class Collector(Protocol[P]):
    """See the module."""

    def plan(self) -> P: ...

    def mark(self, spark: SparkSession, plan: P, stage: Stage) -> Marked: ...

    def sweep(self, spark: SparkSession, plan: P, stage: Stage) -> Swept: ...


@dataclass(frozen=True)
class Stage:
    """A run under way, as a collector's stages see it: its record (for details only), its folder,
    its phase timer and its budget."""

    run: Run
    folder: RunFolder
    timed: PhaseTimer
    budget: Budget

    def tally_listing(self, listing: DataFrame) -> ListingTally:
        """The listing's size and age histogram (one Spark job), in the record at once: a mark that
        fails later still says what it listed."""
        tally = listing_tally(listing, datetime.fromisoformat(self.run.started_at))
        self.run.record_listing(tally)
        return tally

    def write_candidates(self, candidates: DataFrame) -> CandidateCounts:
        return write_candidates(candidates, self.folder)[0]

    def read(self, spark: SparkSession, output: str = "candidates") -> DataFrame:
        """One of the run's outputs of candidates (`candidates`, `to_delete`)."""
        return read_parquet(spark, self.folder.storage, self.folder.parts(output), ddl(CANDIDATES))

    def write_to_delete(self, to_delete: DataFrame) -> int:
        """Write what the sweep is to delete as the run's to_delete/ (the budget's total: what is
        sent less what was deleted or failed is what the budget left); returns how many."""
        return write_counted(to_delete, self.folder.storage, self.folder.key("to_delete"))

    def within_budget(self, spark: SparkSession, to_delete: DataFrame) -> DataFrame:
        """At most --max-deletes of `to_delete`, chosen once and written (budgeted/): for a sweep
        that deletes through several plans (one per storage), which must all read the same rows;
        `to_delete` itself when there is no such budget."""
        if self.budget.max_deletes is None:
            return to_delete
        write_parquet(to_delete.limit(self.budget.max_deletes), self.folder.storage, self.folder.key("budgeted"))
        return self.read(spark, "budgeted")

    def record_deletes(self, results: DataFrame) -> DeleteTally:
        """Record delete results (`engine.delete.delete_objects` rows) as deleted/."""
        return record_deletes(results, self.folder.storage, self.folder.key("deleted"))


def collect(
    collector: Collector[P],
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
    start: Callable[[], SparkSession] | None = None,
) -> Run:
    """Plan, open the run, mark, and unless a dry run, sweep (see the module). `start` gives a Spark
    session when none is given; it is called only once the plan holds."""
    plan = collector.plan()
    log = FolderRunLog(plan.run.runs_location, plan.run.kind)
    run = _opened(plan.run)
    recorder = Recorder(log, log.folder(run.run_id))
    recorder.start(run, plan.run.to_json())
    stage = Stage(run, recorder.folder, PhaseTimer(run, phase), plan.run.budget)
    with recorder.recording(run):
        spark = spark or (start or RunOptions().start)()
        marked = collector.mark(spark, plan, stage)
        stage.timed.stop()
        run.record_mark(marked.listing, marked.candidates)
        if marked.refusal:
            raise LakegcError(marked.refusal)
        recorder.transition(run, RunState.MARKED)
        if plan.run.dry_run or plan.run.mark_only:
            return run
        recorder.transition(run, RunState.SWEEPING)
        swept = collector.sweep(spark, plan, stage)
        stage.timed.stop()
        run.record_sweep(swept.deletes, swept.stopped)
        if swept.deletes.failed:
            raise LakegcError(f"{swept.deletes.failed} object(s) could not be deleted; see {run.location}/deleted/")
        if swept.stopped:
            run.error = (
                f"stopped by --max-deletes with {swept.stopped} file(s) left: run `lakegc {run.kind} gc` "
                "again to delete them (they are judged again)"
            )
        recorder.transition(run, RunState.SWEPT)
    return run


def _opened(plan: RunPlan) -> Run:
    return Run(
        plan.run_id or new_run_id(plan.now),
        plan.kind,
        plan.target,
        RunState.MARKING,
        plan.dry_run,
        plan.now.isoformat(),
        plan.cutoff.isoformat(),
        (plan.now - plan.cutoff).total_seconds(),
        mark_only=plan.mark_only,
        settings=dict(plan.settings),
    )
