"""The restore window of a connector run (`lakegc lakefs gc`, `lakegc warehouse gc`, with
`--quarantine DURATION`): what a run collects is moved under `_lakegc/quarantine/<run_id>/` in the
location it cleans instead of being deleted, and stays there until the window passes; the
connector's `restore` moves it back. Neither lakeFS (its GC lists `data/` and the root's files) nor
a warehouse run (it never lists its location's own `_lakegc/`) looks there, so a quarantined object
reads as gone, as a deleted one does, until it is restored.

Each quarantine has a marker beside its folder, `_lakegc/quarantine/<run_id>.json` (`until`),
written before anything moves: a run that dies mid-move still leaves a window a later run purges.
Every later sweep purges the quarantines whose window has passed; a restore after that is a clear
error naming what is gone.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakegc.engine.delete import QUARANTINE_PREFIX, quarantine_folder
from lakegc.errors import LakegcError, NotFound, ObjectNotFound
from lakegc.timeutil import shown_time, utcnow

if TYPE_CHECKING:
    from datetime import timedelta

    from pyspark.sql import SparkSession

    from lakegc.engine.runs import Run
    from lakegc.storage import Storage

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # a run id a marker's name may carry (lakegc's, lakeFS's)

_MOVES = 1_000  # objects moved back per request


class QuarantineGone(NotFound):
    """The quarantine of a run no longer exists: its window passed and it was purged, or it never
    held anything."""


@dataclass(frozen=True)
class Restored:
    restored: int  # moved back to their addresses
    kept: int  # not moved back: something is at the address again (never replaced)

    def to_json(self) -> dict[str, int]:
        return {"restored": self.restored, "kept": self.kept}


def marker_key(run_id: str) -> str:
    return f"{QUARANTINE_PREFIX}{run_id}.json"


def open_window(storage: Storage, run_id: str, until: datetime) -> str:
    """Write the quarantine's marker (before anything moves); returns the folder objects move to."""
    storage.write(marker_key(run_id), json.dumps({"run_id": run_id, "until": until.isoformat()}).encode())
    return quarantine_folder(run_id)


def expired(storage: Storage, now: datetime) -> list[str]:
    """The run ids whose quarantine window has passed (a marker lakegc cannot read: kept, and not
    purged, since its window is unknown)."""
    found = []
    for info in storage.list(QUARANTINE_PREFIX, recursive=False):
        run_id = info.key.removeprefix(QUARANTINE_PREFIX).removesuffix(".json")
        if not info.key.endswith(".json") or not RUN_ID.fullmatch(run_id):
            continue
        try:
            until = datetime.fromisoformat(json.loads(storage.read(info.key))["until"])
        except (ValueError, KeyError, TypeError, ObjectNotFound):
            continue
        if until.tzinfo is not None and until <= now:  # a window without a zone is unknown: kept
            found.append(run_id)
    return sorted(found)


def purge(spark: SparkSession, storage: Storage, run_id: str) -> int:
    """Delete a quarantine whose window passed, through the engine's delete rounds (retries; no
    delete outside its folder), then its marker (last, so a purge that dies is finished by the
    next). Returns how many objects went."""
    from pyspark.sql import functions as F

    from lakegc.engine.delete import delete_objects
    from lakegc.engine.listing import Folder, list_folders

    folder = quarantine_folder(run_id)
    listed = list_folders(spark, storage, [Folder(folder, True, "quarantine")], datetime.now(UTC))
    to_purge = listed.select("address", "size", "mtime", F.lit("restore window passed").alias("reason"))
    done = delete_objects(spark, storage, to_purge, allowed=folder)
    tally = done.agg(
        F.count(F.when(F.col("deleted"), 1)).alias("deleted"), F.first(F.when(~F.col("deleted"), F.col("error")), True)
    ).first()
    if tally[1] is not None:
        raise LakegcError(f"could not purge the quarantine of run {run_id}: {tally[1]}")
    storage.delete_many([marker_key(run_id)])
    return int(tally[0])


def restore(storage: Storage, run_id: str, path_glob: str | None = None) -> Restored:
    """Move a run's quarantined objects (those whose address matches `path_glob`, when given) back
    to their addresses; an address that holds an object again keeps it."""
    folder = quarantine_folder(run_id)
    if not storage.exists(marker_key(run_id)):
        raise QuarantineGone(
            f"run {run_id} has no quarantine: its restore window passed and it was purged, or it had none"
        )
    restored = kept = 0
    moves: list[tuple[str, str]] = []
    for info in storage.list(folder):
        address = info.key.removeprefix(folder)
        if path_glob and not fnmatch.fnmatchcase(address, path_glob):
            continue
        if storage.exists(address):
            kept += 1
            continue
        moves.append((info.key, address))
        if len(moves) == _MOVES:
            restored += _moved(storage, moves)
            moves = []
    restored += _moved(storage, moves) if moves else 0
    return Restored(restored, kept)


def _moved(storage: Storage, moves: list[tuple[str, str]]) -> int:
    outcomes = storage.move_many(moves)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise LakegcError(f"could not restore {failed[0].key}: {failed[0].error}")
    return len(outcomes)


def window_for(spark: SparkSession, storage: Storage, run: Run, quarantine: timedelta | None) -> str | None:
    """What every windowed sweep does before it deletes: purge the windows that have passed, and
    open the run's own when it has one. Returns the folder its objects move to (None: deleted)."""
    now = utcnow()
    purged = sum(purge(spark, storage, run_id) for run_id in expired(storage, now))
    if purged:
        run.details["objects purged from passed restore windows"] = purged
    if not quarantine:
        return None
    until = now + quarantine
    run.details["restore window until"] = shown_time(until)
    return open_window(storage, run.run_id, until)
