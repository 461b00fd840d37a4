"""Writing a run's candidates (`columns.CANDIDATES`) to its folder, counted as they are written.

The tasks that write the candidates also add them up by reason (and, for a collector that asks,
by any other key: a repository run counts them by the age of their slice too), so nothing is read
back to count them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.arrowio import Tally, write_parquet
from lakegc.engine.runs import CandidateCounts, RunFolder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BY_REASON = ["reason"]


def reason_tally(batch: pa.RecordBatch) -> pa.Table:
    """What one batch of candidates adds up to, by reason: (reason, count, bytes)."""
    return pa.table(
        {
            "reason": batch.column("reason"),
            "count": pa.repeat(pa.scalar(1, pa.int64()), batch.num_rows),
            "bytes": pc.fill_null(batch.column("size"), 0),
        }
    )


def write_candidates(
    candidates: DataFrame, folder: RunFolder, tally: tuple[Tally, list[str]] = (reason_tally, BY_REASON)
) -> tuple[CandidateCounts, pa.Table | None]:
    """Write the candidates as `candidates/` of the run's folder; returns their counts and the
    whole tally (rows of the tally's keys with `count` and `bytes`)."""
    written = write_parquet(candidates, folder.storage, folder.key("candidates"), tally=tally)
    return counts_of(written.tally), written.tally


def counts_of(tallied: pa.Table | None) -> CandidateCounts:
    """Totals and counts by reason of a candidate tally (any keys, as long as `reason` is one)."""
    if tallied is None or not tallied.num_rows:
        return CandidateCounts(0, 0, {})
    by_reason: dict[str, int] = {}
    for row in tallied.select(["reason", "count"]).to_pylist():
        by_reason[row["reason"]] = by_reason.get(row["reason"], 0) + int(row["count"])
    return CandidateCounts(
        sum(by_reason.values()), int(pc.sum(tallied["bytes"]).as_py() or 0), dict(sorted(by_reason.items()))
    )


def run_rows(spark: SparkSession, folder: RunFolder, swept: bool) -> DataFrame:
    """The addresses (column `address`) a connector run deleted (`swept`), or marked (a dry run, a
    mark only): what its report lists and `--json` prints."""
    from lakegc.engine.arrowio import read_parquet
    from lakegc.engine.columns import CANDIDATES, DELETES, ddl

    if swept:
        rows = read_parquet(spark, folder.storage, folder.parts("deleted"), ddl(DELETES)).where("deleted")
    else:
        rows = read_parquet(spark, folder.storage, folder.parts("candidates"), ddl(CANDIDATES))
    return rows.select("address")


def address_list(spark: SparkSession, folder: RunFolder, swept: bool) -> Iterator[str]:
    """`run_rows`, sorted, streamed (never held whole on the driver)."""
    return (row["address"] for row in run_rows(spark, folder, swept).orderBy("address").toLocalIterator())
