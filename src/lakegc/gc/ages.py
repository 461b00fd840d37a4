"""Ages for the run report: how old the listed objects are, and how old the slices holding the
candidates are. Counted on the executors; only the buckets (a dozen rows) reach the driver."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lakegc.repo.slices import DATA_PREFIX, SLICE_EPOCH_END

if TYPE_CHECKING:
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


def candidate_ages(candidates: "DataFrame", now: datetime) -> list[dict]:
    """Candidates by the age of their slice and by reason: [{bucket, label, reason, count, bytes}]."""
    from pyspark.sql import functions as F

    name = F.regexp_extract("address", rf"^{DATA_PREFIX}(\d+)/", 1)
    age = (F.lit(now.timestamp()) - (F.lit(SLICE_EPOCH_END) - name.cast("long"))) / 86400
    bucket = F.when(name == "", F.lit(NO_SLICE)).otherwise(_bucket(age))
    rows = (candidates.groupBy(bucket.alias("bucket"), "reason")
            .agg(F.count("*").alias("count"), F.sum("size").alias("bytes")).collect())
    out = [{"bucket": int(r["bucket"]), "label": bucket_label(int(r["bucket"])), "reason": r["reason"],
            "count": int(r["count"]), "bytes": int(r["bytes"] or 0)} for r in rows]
    return sorted(out, key=lambda b: (b["bucket"], b["reason"]))
