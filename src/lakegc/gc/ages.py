"""Ages for the run report: how old the listed objects are, and how old the slices holding the
candidates are. Counted on the executors; only the buckets (a dozen rows) reach the driver."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable

from lakegc.repo.slices import SLICE_EPOCH_END

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

# Lower edges of the age buckets, in days; the last one is open-ended.
BUCKETS_DAYS = (0, 1, 2, 7, 14, 21, 30, 60, 90, 180, 365)
NO_SLICE = -1  # the bucket of candidates at the namespace root, outside any slice


def bucket_label(index: int) -> str:
    if index == NO_SLICE:
        return "no slice (namespace root)"
    low = BUCKETS_DAYS[index]
    return f"{low}d+" if index == len(BUCKETS_DAYS) - 1 else f"{low}-{BUCKETS_DAYS[index + 1]}d"


def _bucket(age_days: "Column") -> "Column":
    from pyspark.sql import functions as F

    index = F.lit(0)
    for i, low in enumerate(BUCKETS_DAYS[1:], start=1):
        index = F.when(age_days >= low, F.lit(i)).otherwise(index)
    return index


def listing_tally(listing: "DataFrame", now: datetime) -> tuple[int, set[str], list[dict]]:
    """One pass over the listing: (objects old enough to judge, slices holding young objects, all
    listed objects by age [{bucket, label, count, bytes}]). The rows grouped here are few: age
    buckets times the slices with young objects."""
    from pyspark.sql import functions as F

    age = (F.lit(now.timestamp()) - F.unix_micros(F.col("mtime")) / 1e6) / 86400
    rows = (listing.groupBy(_bucket(age).alias("bucket"), "young", F.when(F.col("young"), F.col("slice")).alias("slice"))
            .agg(F.count("*").alias("count"), F.sum("size").alias("bytes")).collect())
    judged = sum(int(r["count"]) for r in rows if not r["young"])
    young = {r["slice"] for r in rows if r["young"]}
    totals: dict[int, list[int]] = {}
    for r in rows:
        total = totals.setdefault(int(r["bucket"]), [0, 0])
        total[0] += int(r["count"])
        total[1] += int(r["bytes"] or 0)
    ages = [{"bucket": b, "label": bucket_label(b), "count": c, "bytes": n} for b, (c, n) in sorted(totals.items())]
    return judged, young, ages


CANDIDATE_TALLY_KEYS = ["bucket", "reason"]


def candidate_tally(now: datetime) -> "Callable[[pa.RecordBatch], pa.Table]":
    """What one batch of candidates adds to `candidate_ages`: rows of (bucket, reason, count,
    bytes), counted in Arrow by the task that writes the candidates (see `arrowio.write_parquet`).
    A candidate's bucket is the age of its slice (`slices.slice_created`) at `now`; the root's
    objects, outside any slice, have NO_SLICE."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakegc.gc.refset import slice_of

    edges = np.array(BUCKETS_DAYS, dtype=np.float64)
    now_s = now.timestamp()

    def tally(batch: pa.RecordBatch) -> pa.Table:
        names = slice_of(batch.column("address"))
        matched = pc.match_substring_regex(names, r"^\d{1,18}$")  # lakegc's slice names: an inverted timestamp
        in_slice = matched.to_numpy(zero_copy_only=False)
        created = SLICE_EPOCH_END - pc.cast(pc.if_else(matched, names, "0"), pa.int64()).to_numpy(zero_copy_only=False)
        age_days = (now_s - created.astype(np.float64)) / 86400
        buckets = np.maximum(np.searchsorted(edges, age_days, side="right") - 1, 0)
        buckets = np.where(in_slice, buckets, NO_SLICE)
        return pa.table({"bucket": pa.array(buckets, pa.int64()), "reason": batch.column("reason"),
                         "count": pa.repeat(pa.scalar(1, pa.int64()), batch.num_rows),
                         "bytes": pc.fill_null(batch.column("size"), 0)})

    return tally


def candidate_ages(tallied: "pa.Table | None") -> list[dict]:
    """Candidates by the age of their slice and by reason, from their tally (`candidate_tally`):
    [{bucket, label, reason, count, bytes}], by bucket then reason."""
    rows = tallied.to_pylist() if tallied is not None else []
    out = [{"bucket": int(r["bucket"]), "label": bucket_label(int(r["bucket"])), "reason": r["reason"],
            "count": int(r["count"]), "bytes": int(r["bytes"] or 0)} for r in rows]
    return sorted(out, key=lambda b: (b["bucket"], b["reason"]))
