"""What a full VACUUM of a Delta table deletes, decided as delta-rs decides it (`vacuum(full=True)`).

Two sets of files go, both only when nothing keeps them:
- *expired removes*: every remove action in the state's log segment (the checkpoint's and each
  later commit's, one entry per action) whose deletionTimestamp (none: 0) is older than
  now - retention. They are named by the log, so they count whether or not the file still exists.
- *unreferenced files*: what a listing of the table finds that no action of the segment names,
  last modified at least the retention ago.
Kept, whatever else holds: the files of the state's live adds and of every `--keep-versions`
version's live adds; hidden paths (`hidden`); an unreferenced-looking file some remove names.

Two deliberate differences, both for safety, where delta-rs would break reads it promises:
- delta-rs protects only the data files of live adds, so a full vacuum deletes a live add's
  deletion-vector file once it is older than the retention, and the table can no longer be read
  (or deleted rows come back). lakegc keeps the deletion-vector files of live adds, of kept
  versions and of removes inside the retention.
- a file removed, added again and removed again inside the retention: delta-rs deletes it for the
  old remove, and time travel to the versions before the new one fails. lakegc keeps a file while
  any remove naming it is inside the retention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakegc.connectors.delta.actions import ADD, REMOVE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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


def live_files(actions: DataFrame) -> DataFrame:
    """The state's live adds (path, dv): per (path, deletion vector id) the newest action wins
    (`_order`), and it is an add."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    return (
        actions.where(kind.isin(ADD, REMOVE))
        .groupBy("path", "dv_id")
        .agg(F.max_by(kind == ADD, _order()).alias("live"), F.max_by("dv", _order()).alias("dv"))
        .where("live")
        .select("path", "dv")
    )


def judge(
    listing: DataFrame,
    actions: DataFrame,
    vectors: DataFrame,
    kept: DataFrame | None,
    partition_columns: Sequence[str],
    now_ms: int,
    retention_ms: int,
) -> DataFrame:
    """The files a full VACUUM deletes: address, size, mtime (null for a file the listing did not
    find), reason, and `count`, how often delta-rs lists it (once, or once per expired remove
    action naming it). `listing`: LISTING rows of the table, hidden paths included; `actions`: the
    segment's ACTIONS; `vectors`: those of them that carry a deletion vector (a second, cheap
    read); `kept`: (path, dv) of the live adds of the versions to keep.

    Everything about a path meets in one place: the listing, the actions and the kept files are
    shuffled by path once, then grouped by (path, deletion vector id) to replay the log, then by
    path to decide (no further shuffle: the partitioning by path serves both groupings)."""
    cutoff_ms = now_ms - retention_ms
    per_path = _per_path(_path_rows(listing, actions, kept), partition_columns, cutoff_ms)
    decided = _deletable(per_path, now_ms, retention_ms)
    return decided.join(_named_vectors(vectors, kept, cutoff_ms), "address", "left_anti")


_LISTED, _KEPT = "listed", "kept"  # the judge's own row kinds, beside the log's add and remove


def _path_rows(listing: DataFrame, actions: DataFrame, kept: DataFrame | None) -> DataFrame:
    """The segment's adds and removes, the listing's files (kind `_LISTED`) and the kept versions'
    live adds (kind `_KEPT`) as rows of one shape, so that everything about a path meets in one
    shuffle."""
    from pyspark.sql import functions as F

    columns = ["path", "dv_id", "kind", "version", "line", "deletion_ts", "size", "dv", "mtime"]
    rows = (
        actions.where(F.col("kind").isin(ADD, REMOVE) & F.col("path").isNotNull())
        .withColumn("mtime", F.lit(None).cast("timestamp"))
        .select(*columns)
    )
    rows = rows.unionByName(
        listing.select(
            F.col("address").alias("path"),
            F.lit("").alias("dv_id"),
            F.lit(_LISTED).alias("kind"),
            *(F.lit(None).cast("long").alias(c) for c in ("version", "line", "deletion_ts")),
            "size",
            F.lit(None).cast("string").alias("dv"),
            "mtime",
        )
    )
    if kept is not None:
        rows = rows.unionByName(
            kept.select(
                "path",
                F.lit("").alias("dv_id"),
                F.lit(_KEPT).alias("kind"),
                *(F.lit(None).cast("long").alias(c) for c in ("version", "line", "deletion_ts", "size")),
                "dv",
                F.lit(None).cast("timestamp").alias("mtime"),
            )
        )
    return rows


def _expired_remove(cutoff_ms: int) -> Column:
    """Whether a row is an expired remove: a remove action whose deletionTimestamp (none: 0) is
    older than the cutoff."""
    from pyspark.sql import functions as F

    return (F.col("kind") == REMOVE) & (F.coalesce(F.col("deletion_ts"), F.lit(0)) < F.lit(cutoff_ms))


def _per_path(rows: DataFrame, partition_columns: Sequence[str], cutoff_ms: int) -> DataFrame:
    """What the log and the listing say of each visible path: the log replayed per (path,
    deletion vector id) (the newest add or remove wins: `live`), then folded by path: live or
    kept by any, how many expired removes name it, whether any remove does and any inside the
    retention, and its listed size and mtime (null: not listed) and removed size. Shuffled by path
    once: the partitioning serves both groupings."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    remove = kind == REMOVE
    expired = _expired_remove(cutoff_ms)
    replayed = (
        _visible_paths(rows.repartition("path"), partition_columns)
        .groupBy("path", "dv_id")
        .agg(
            F.max_by(kind == ADD, F.when(kind.isin(ADD, REMOVE), _order())).alias("live"),
            F.sum(F.when(expired, 1).otherwise(0)).alias("expired"),
            F.max(remove).alias("removed"),
            F.max(remove & ~expired).alias("recent"),
            F.max(kind == _KEPT).alias("kept"),
            F.max(F.when(kind == _LISTED, F.col("size"))).alias("listed_size"),
            F.max(F.when(kind == _LISTED, F.col("mtime"))).alias("mtime"),
            F.max(F.when(remove, F.col("size"))).alias("removed_size"),
        )
    )
    return replayed.groupBy("path").agg(
        F.max("live").alias("live"),
        F.max("kept").alias("kept"),
        F.sum("expired").alias("expired"),
        F.max("removed").alias("removed"),
        F.max("recent").alias("recent"),
        F.max("listed_size").alias("listed_size"),
        F.max("mtime").alias("mtime"),
        F.max("removed_size").alias("removed_size"),
    )


def _deletable(per_path: DataFrame, now_ms: int, retention_ms: int) -> DataFrame:
    """The paths a full VACUUM deletes (`judge`'s rows), decided from `_per_path`: never a live or
    kept one; an expired remove's file unless a remove inside the retention names it too; an
    unreferenced listed file no remove names, once old enough."""
    from pyspark.sql import functions as F

    protected = F.coalesce(F.col("live"), F.lit(False)) | F.coalesce(F.col("kept"), F.lit(False))
    # a file removed again inside the retention stays: time travel to the versions before that
    # remove reads it (delta-rs deletes it for its older, expired remove)
    stale = ~protected & (F.col("expired") > 0) & ~F.coalesce(F.col("recent"), F.lit(False))
    orphan = (
        ~protected
        & F.col("listed_size").isNotNull()
        & ~F.coalesce(F.col("removed"), F.lit(False))
        # old enough: its age (delta-rs counts whole milliseconds) reaches the retention; younger
        # is a write in flight
        & (F.lit(now_ms) - F.floor(F.unix_micros("mtime") / 1000) >= F.lit(retention_ms))
    )
    return per_path.where(stale | orphan).select(
        F.col("path").alias("address"),
        F.coalesce(F.col("listed_size"), F.col("removed_size")).alias("size"),
        "mtime",
        F.when(stale, F.lit(EXPIRED_REMOVE)).otherwise(F.lit(UNREFERENCED)).alias("reason"),
        F.when(stale, F.col("expired")).otherwise(F.lit(1)).cast("long").alias("count"),
    )


def _named_vectors(vectors: DataFrame, kept: DataFrame | None, cutoff_ms: int) -> DataFrame:
    """The deletion-vector files that stay (`address`): a deletion vector's file is its own path,
    and the ones a live add, a kept version or a remove inside the retention names stay (delta-rs
    protects only data files). Always looked up, not only when the newest protocol has the
    feature: older versions may still need them."""
    from pyspark.sql import functions as F

    live_dvs = live_files(vectors).select(F.col("dv").alias("address"))
    other_dvs = vectors.where((F.col("kind") == REMOVE) & ~_expired_remove(cutoff_ms)).select(
        F.col("dv").alias("address")
    )
    if kept is not None:
        other_dvs = other_dvs.unionByName(kept.select(F.col("dv").alias("address")))
    return live_dvs.unionByName(other_dvs).where(F.col("address").isNotNull())


def _order() -> Column:
    """An action's place in the log as one number, larger for newer: the version, then the earlier
    line first (a number, not a struct, so Spark aggregates it in a hash table)."""
    from pyspark.sql import functions as F

    return F.col("version") * F.lit(1 << 32) - F.col("line")


def _visible_paths(frame: DataFrame, partition_columns: Sequence[str]) -> DataFrame:
    return _visible(frame.withColumnRenamed("path", "address"), partition_columns).withColumnRenamed("address", "path")


def _visible(frame: DataFrame, partition_columns: Sequence[str]) -> DataFrame:
    """Rows (`address`) whose path is not hidden: `hidden` as a Spark filter (no Python UDF on a
    million rows); a test holds the two to the same answers."""
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
