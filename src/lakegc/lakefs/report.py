"""lakeFS's own GC report, and the run folder's list of trees read.

The report is where lakeFS's tooling reads it, `<ns>/_lakefs/retention/gc/unified/<run_id>/`:
`deleted/` (Parquet, one column `address`: what the run deleted; after a mark alone, what a sweep
of it would) and `summary.json` (`run_id`, `success`, `first_slice`, `start_time`, `cutoff_time`,
`num_deleted_objects`). A failed run writes its summary with `success` false, which a sweep refuses.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakegc.engine.arrowio import read_parquet, write_counted
from lakegc.engine.candidates import run_rows
from lakegc.errors import LakegcError, ObjectNotFound

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakegc.engine.collector import Stage
    from lakegc.engine.runs import Run
    from lakegc.lakefs.gc import LakeFSPlan
    from lakegc.storage import Storage

UNIFIED = "_lakefs/retention/gc/unified"


class MarkError(LakegcError):
    """A mark that cannot be swept: missing, failed, or unreadable."""


def report_folder(run_id: str) -> str:
    return f"{UNIFIED}/{run_id}"


def check_mark(storage: Storage, mark_id: str) -> datetime:
    """Refuse to sweep a mark that does not exist or did not succeed (as lakeFS's client does);
    returns its cutoff: an object modified since was written after the mark judged it (or was
    never what the mark listed), and is kept."""
    key = f"{report_folder(mark_id)}/summary.json"
    try:
        summary = json.loads(storage.read(key))
    except ObjectNotFound:
        raise MarkError(f"mark {mark_id} does not exist (no {key} in the namespace)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MarkError(f"mark {mark_id}: {key} is not a lakeFS GC summary ({exc})") from None
    if not isinstance(summary, dict) or summary.get("success") is not True:
        raise MarkError(f"mark {mark_id} is of a failed run: nothing of it is swept")
    cutoff, started = _time(summary, "cutoff_time"), _time(summary, "start_time")
    if cutoff is None or (started is not None and cutoff > started) or cutoff > datetime.now(UTC):
        raise MarkError(f"mark {mark_id}: {key} has no cutoff_time before its start lakegc can trust")
    return cutoff


def _time(summary: dict, field: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(summary.get(field)).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def marked_addresses(spark: SparkSession, storage: Storage, mark_id: str) -> DataFrame:
    """The addresses a mark listed in its `deleted/` (none written: none)."""
    folder = f"{report_folder(mark_id)}/deleted/"
    keys = [i.key for i in storage.list(folder) if i.key.endswith(".parquet")]
    return read_parquet(spark, storage, keys, "address string")


def write(spark: SparkSession, plan: LakeFSPlan, stage: Stage, output: str, success: bool = True) -> None:
    """The run's report: `deleted/` from the run's `candidates` (a mark alone) or from what its
    sweep deleted (`deleted`), then `summary.json`, last, so a report with a summary is whole."""
    rows = run_rows(spark, stage.folder, swept=output == "deleted")
    folder = report_folder(stage.run.run_id)
    count = write_counted(rows, plan.storage, f"{folder}/deleted")
    _summary(plan, stage.run, success, count)


def failed(plan: LakeFSPlan, run: Run) -> None:
    """A failed run's summary (no `deleted/`): a sweep of it is refused. Best effort: the run's own
    error is what is reported."""
    with contextlib.suppress(Exception):  # the failure being recorded matters more than its report
        _summary(plan, run, False, 0)


def _summary(plan: LakeFSPlan, run: Run, success: bool, count: int) -> None:
    doc = {
        "run_id": run.run_id,
        "success": success,
        "first_slice": run.details.get("first slice", "") if isinstance(run.details, dict) else "",
        "start_time": _instant(run.started_at),
        "cutoff_time": _instant(run.cutoff_time),
        "num_deleted_objects": count,
    }
    plan.storage.write(f"{report_folder(run.run_id)}/summary.json", json.dumps(doc).encode())


def _instant(text: str) -> str:
    """ISO 8601 in UTC with a Z, as lakeFS's client writes its times."""
    return datetime.fromisoformat(text).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
