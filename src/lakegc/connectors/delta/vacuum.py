"""What a full VACUUM of a Delta table deletes, decided as delta-rs decides it (`vacuum(full=True)`).

Two sets of files go, both only when nothing keeps them:
- *expired removes*: every remove action in the state's log segment (the checkpoint's and each
  later commit's, one entry per action) whose deletionTimestamp (none: 0) is older than
  now - retention. They are named by the log, so they count whether or not the file still exists.
- *unreferenced files*: what a listing of the table finds that no action of the segment names,
  last modified at least the retention ago.
Kept, whatever else holds: the files of the state's live adds and of every `--keep-versions`
version's live adds; hidden paths (`hidden`); a listed file some remove inside the retention still
names (time travel to those versions must work).

One deliberate difference, for safety: delta-rs only protects the data files of live adds, so a
full vacuum deletes a live add's deletion-vector file once it is older than the retention, and
the table can no longer be read (or deleted rows come back). lakegc keeps the deletion-vector files
of live adds, of kept versions and of removes inside the retention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakegc.connectors.delta.actions import ADD, REMOVE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EXPIRED_REMOVE, UNREFERENCED = "expired remove", "unreferenced"
_VISIBLE_UNDERSCORE = ("_delta_index", "_change_data")


def hidden(key: str, partition_columns: Sequence[str]) -> bool:
    """Whether VACUUM leaves a path alone: one starting with `_` or `.` (the log, `_SUCCESS`,
    `.crc` files), except `_delta_index…`, `_change_data…` and partition folders `<column>=…`.
    With more than one partition column delta-rs lists the table folder by folder and never enters
    a top-level folder starting with `.`, whatever its name."""
    if len(partition_columns) > 1 and key.startswith(".") and "/" in key:
        return True
    if key[:1] not in ("_", "."):
        return False
    if key.startswith(_VISIBLE_UNDERSCORE):
        return False
    return not any(key.startswith(f"{column}=") for column in partition_columns)


def old_enough(mtime_ms: int, now_ms: int, retention_ms: int) -> bool:
    """An unreferenced file goes once its age reaches the retention (younger: a write in flight)."""
    return now_ms - mtime_ms >= retention_ms


def live_files(actions: DataFrame) -> DataFrame:
    """The state's live adds (path, dv): per (path, deletion vector id) the newest action wins,
    the first line within a version, and it is an add."""
    from pyspark.sql import functions as F

    files = actions.where(F.col("kind").isin(ADD, REMOVE))
    newest = files.groupBy("path", "dv_id").agg(
        F.max(F.struct(F.col("version"), (-F.col("line")).alias("order"), F.col("kind"), F.col("dv"))).alias("w")
    )
    return newest.where(F.col("w.kind") == ADD).select("path", F.col("w.dv").alias("dv"))


def judge(
    listing: DataFrame,
    actions: DataFrame,
    kept: DataFrame | None,
    partition_columns: Sequence[str],
    now_ms: int,
    retention_ms: int,
) -> DataFrame:
    """The files a full VACUUM deletes, one row per entry of delta-rs's list (an expired remove
    named twice is two rows): address, size, mtime (null for a file the listing did not find),
    reason. `listing`: LISTING rows of the table, hidden paths included; `actions`: the segment's
    ACTIONS; `kept`: (path, dv) of the live adds of the versions to keep."""
    from pyspark.sql import functions as F

    cutoff_ms = now_ms - retention_ms
    live = live_files(actions)
    if kept is not None:
        live = live.unionByName(kept)
    removes = actions.where(F.col("kind") == REMOVE).where(F.col("path").isNotNull())
    expired = F.coalesce(F.col("deletion_ts"), F.lit(0)) < F.lit(cutoff_ms)
    protected_paths = live.select("path")
    protected_dvs = (
        live.select(F.col("dv").alias("address"))
        .unionByName(removes.where(~expired).select(F.col("dv").alias("address")))
        .where(F.col("address").isNotNull())
    )

    listed = listing.select("address", "size", "mtime")
    stale = (
        removes.where(expired).join(protected_paths, "path", "left_anti").select(F.col("path").alias("address"), "size")
    )
    stale = _visible(stale, partition_columns)
    stale = stale.join(listed.select("address", "mtime"), "address", "left").withColumn("reason", F.lit(EXPIRED_REMOVE))

    orphans = (
        _visible(listed, partition_columns)
        .join(removes.select(F.col("path").alias("address")), "address", "left_anti")
        .join(protected_paths.withColumnRenamed("path", "address"), "address", "left_anti")
        .where(F.lit(now_ms) - F.floor(F.unix_micros("mtime") / 1000) >= F.lit(retention_ms))
        .withColumn("reason", F.lit(UNREFERENCED))
    )
    return (
        stale.select("address", "size", "mtime", "reason")
        .unionByName(orphans.select("address", "size", "mtime", "reason"))
        .join(protected_dvs, "address", "left_anti")
    )


def _visible(frame: DataFrame, partition_columns: Sequence[str]) -> DataFrame:
    """Rows (`address`) whose path is not hidden, as a Spark filter (a UDF-free form of `hidden`)."""
    from pyspark.sql import functions as F

    address = F.col("address")
    dotted_or_underscore = address.startswith("_") | address.startswith(".")
    shown = address.startswith(_VISIBLE_UNDERSCORE[0]) | address.startswith(_VISIBLE_UNDERSCORE[1])
    for column in partition_columns:
        shown = shown | address.startswith(f"{column}=")
    keep = ~dotted_or_underscore | shown
    if len(partition_columns) > 1:
        keep = keep & ~(address.startswith(".") & address.contains("/"))
    return frame.where(keep)
