"""What every connector run does the same way: start a run in the connector's run folder, tally
what it listed, write its candidates, delete and record the outcome. The run itself, its states,
record and report, are the engine's (`engine.runs`), as for repository runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakegc.engine.ages import listing_tally
from lakegc.engine.arrowio import read_parquet
from lakegc.engine.candidates import write_candidates
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.delete import record_deletes
from lakegc.engine.runs import FolderRunLog, Recorder, Run, RunFolder, RunState, new_run_id
from lakegc.errors import LakegcError
from lakegc.settings import lakegc_home, load_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def default_runs_location() -> str:
    """`LAKEGC_RUNS`, else the settings file's `runs`, else `$LAKEGC_HOME/runs`."""
    return load_settings().runs or str(lakegc_home() / "runs")


@dataclass(frozen=True)
class ConnectorRun:
    """A connector run under way: its record and the recorder that moves it."""

    run: Run
    recorder: Recorder

    @property
    def folder(self) -> RunFolder:
        return self.recorder.folder

    @classmethod
    def start(
        cls,
        kind: str,
        target: str,
        dry_run: bool,
        now: datetime,
        cutoff: datetime,
        settings: dict[str, Any],
        runs_location: str,
    ) -> ConnectorRun:
        log = FolderRunLog(runs_location, kind)
        run_id = new_run_id(now)
        run = Run(
            run_id,
            kind,
            target,
            RunState.MARKING,
            dry_run,
            now.isoformat(),
            cutoff.isoformat(),
            (now - cutoff).total_seconds(),
            settings=settings,
        )
        recorder = Recorder(log, log.folder(run_id))
        recorder.start(run)
        return cls(run, recorder)

    def tally_listing(self, listing: DataFrame, now: datetime) -> int:
        """Record the listing's age histogram and size in the run; returns how many objects are
        old enough to be judged."""
        tally = listing_tally(listing, now)
        self.run.num_listed, self.run.num_young, self.run.object_ages = tally.listed, tally.young, tally.ages
        return tally.judged

    def write_candidates(self, candidates: DataFrame) -> None:
        counts, _ = write_candidates(candidates, self.folder)
        self.run.record_counts(counts)

    def candidates(self, spark: SparkSession) -> DataFrame:
        return self.read(spark, "candidates")

    def read(self, spark: SparkSession, output: str) -> DataFrame:
        """One of the run's outputs of candidates (`candidates`, `to_delete`)."""
        return read_parquet(spark, self.folder.storage, self.folder.parts(output), ddl(CANDIDATES))

    def record_deletes(self, results: DataFrame) -> None:
        """Record delete results (`engine.delete.delete_objects` rows) as deleted/, their figures in
        the run; any failed delete fails the run (a rerun retries it)."""
        tally = record_deletes(results, self.folder.storage, self.folder.key("deleted"))
        self.run.num_deleted, self.run.bytes_deleted, self.run.num_failed = tally.deleted, tally.bytes, tally.failed
        if tally.failed:
            raise LakegcError(f"{tally.failed} object(s) could not be deleted; see {self.run.location}/deleted/")
