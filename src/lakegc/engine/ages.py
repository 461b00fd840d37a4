"""Ages for a run's record and report: how old the listed objects are. Counted on the executors;
only the buckets (a dozen rows) reach the driver."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Lower edges of the age buckets, in days; the last one is open-ended.
BUCKETS_DAYS = (0, 1, 2, 7, 14, 21, 30, 60, 90, 180, 365)
NO_SLICE = -1  # the bucket of candidates outside any slice (a namespace's root)


def bucket_label(index: int) -> str:
    if index == NO_SLICE:
        return "no slice (namespace root)"
    low = BUCKETS_DAYS[index]
    return f"{low}d+" if index == len(BUCKETS_DAYS) - 1 else f"{low}-{BUCKETS_DAYS[index + 1]}d"


def _bucket(age_days: Column) -> Column:
    from pyspark.sql import functions as F

    index = F.lit(0)
    for i, low in enumerate(BUCKETS_DAYS[1:], start=1):
        index = F.when(age_days >= low, F.lit(i)).otherwise(index)
    return index


@dataclass(frozen=True)
class ListingTally:
    """What a listing held: objects old enough to judge, objects younger than the cutoff (never
    candidates), the slices holding young objects, and every listed object by age
    ([{bucket, label, count, bytes}])."""

    judged: int
    young: int
    young_slices: frozenset[str]
    ages: list[dict[str, Any]]

    @property
    def listed(self) -> int:
        return self.judged + self.young


def listing_tally(listing: DataFrame, now: datetime) -> ListingTally:
    """One pass over a listing (`columns.LISTING`). The rows grouped here are few: age buckets
    times the slices with young objects."""
    from pyspark.sql import functions as F

    age = (F.lit(now.timestamp()) - F.unix_micros(F.col("mtime")) / 1e6) / 86400
    rows = (
        listing.groupBy(_bucket(age).alias("bucket"), "young", F.when(F.col("young"), F.col("slice")).alias("slice"))
        .agg(F.count("*").alias("count"), F.sum("size").alias("bytes"))
        .collect()
    )
    totals: dict[int, list[int]] = {}
    for r in rows:
        total = totals.setdefault(int(r["bucket"]), [0, 0])
        total[0] += int(r["count"])
        total[1] += int(r["bytes"] or 0)
    ages = [{"bucket": b, "label": bucket_label(b), "count": c, "bytes": n} for b, (c, n) in sorted(totals.items())]
    return ListingTally(
        judged=sum(int(r["count"]) for r in rows if not r["young"]),
        young=sum(int(r["count"]) for r in rows if r["young"]),
        young_slices=frozenset(r["slice"] for r in rows if r["young"]),
        ages=ages,
    )
