"""Listing a namespace from an S3 Inventory instead of listing it (docs/cli.md, `gc run --inventory`).

An inventory is a listing S3 writes once a day or week: a `manifest.json` naming data files
(gzip'd CSV or Parquet) whose rows are the objects that existed when it was taken
(`creationTimestamp`). A folder namespace uses the same format with an empty bucket and keys
relative to its root. Reading one costs a few large reads where listing costs a request per 1,000
objects.

What a run takes from it, and why that is safe:
- Only the slices no object can have landed in since it was taken (`must_list` keeps the others,
  and every slice the metastore does not know, for a direct listing; the root is always listed).
- Only keys of those slices: `_lakegc/`, other buckets' rows, keys outside the namespace and keys
  no store could address unambiguously (`..`, empty segments) are dropped (`keep_rows`).
- An inventory only *suggests* objects. Every candidate it suggested is looked up in the store
  before it is written down (`confirm_present`): one that is gone is left out (not an error, never
  counted as deleted), and the store's size and mtime replace the inventory's, so neither a stale
  nor a tampered row can make a young object a candidate. What an inventory misses is simply not a
  candidate this run.
- An inventory older than min-age is refused (it could predate objects still in their grace
  period), and so is another namespace's: its sourceBucket must be the namespace's bucket (for a
  folder: empty, or the folder), and it must list the namespace's marker `_lakegc/repository.json`
  with the size and date the marker has. A folder inventory's Bucket is empty, so only its content
  can say whose it is; the marker also shows a bucket inventory covers the namespace's prefix.
"""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.columns import LISTING, ddl
from lakegc.engine.tasks import parallelism, work_items
from lakegc.errors import InvalidArgument, LakegcError, first_line
from lakegc.repo.slices import SliceWindow, slice_created
from lakegc.repogc.inventory_format import Format, Inventory, open_data_file, read_objects
from lakegc.repogc.listing import list_namespace
from lakegc.repogc.refset import slice_of
from lakegc.storage import LocalStorage, ObjectInfo, S3Settings, S3Storage, Storage
from lakegc.storage.namespace import MARKER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# S3 Inventory is eventually consistent: an object written shortly before the inventory was taken
# may be missing from it. Slices still open that close to it are listed directly (about one more).
INVENTORY_MARGIN = timedelta(hours=1)
_UNADDRESSABLE = r"^/|//|/$|(^|/)\.\.?(/|$)|\x00"  # what `check_key` refuses, as a regex


# -- decisions: pure functions ---------------------------------------------------------------------------
def must_list(
    slice_names: list[str], windows: dict[str, SliceWindow], taken: datetime, margin: timedelta = INVENTORY_MARGIN
) -> list[str]:
    """The slices to list directly: those an object may have landed in at or after the inventory
    (minus `margin`) was taken: still writable then, of unknown window, unknown to the metastore, or
    opened since (by the metastore or by their name)."""
    since = taken - margin

    def open_since(name: str) -> bool:
        window = windows.get(name)
        return (
            window is None
            or window.writable_until is None
            or window.writable_until >= since
            or window.created_at >= since
            or _named_since(name, since)
        )

    return [name for name in slice_names if open_since(name)]


def _named_since(name: str, since: datetime) -> bool:
    try:
        return slice_created(name) >= since.timestamp()
    except ValueError:
        return True  # not a name lakegc gives: nothing says how old it is


def keep_rows(raw: pa.RecordBatch, bucket: str, prefix: str, covered: pa.Array, cutoff: datetime) -> pa.RecordBatch:
    """Inventory rows (`inventory_format.RAW`) as listing rows (`columns.LISTING`): only current
    objects of `bucket` under `prefix`, in a `covered` slice, with an addressable key ('..', empty
    segments and the like are left out, as an S3 listing leaves them out), keyed relative to the
    namespace."""
    keys, mtimes = raw.column("key"), raw.column("mtime")
    relative = pc.utf8_slice_codeunits(keys, len(prefix))
    slices = slice_of(relative)
    keep = _all(
        pc.equal(pc.fill_null(raw.column("bucket"), ""), bucket),
        pc.starts_with(keys, prefix),
        pc.invert(pc.match_substring_regex(relative, _UNADDRESSABLE)),
        pc.is_in(slices, value_set=covered),
        raw.column("current"),
        pc.is_valid(raw.column("size")),
        pc.is_valid(mtimes),
    )
    mtimes = mtimes.filter(keep)
    return pa.RecordBatch.from_arrays(
        [
            relative.filter(keep),
            raw.column("size").filter(keep),
            mtimes,
            slices.filter(keep),
            pc.greater_equal(mtimes, pa.scalar(cutoff, mtimes.type)),
        ],
        schema=LISTING,
    )


def _all(*conditions: pa.Array) -> pa.Array:
    """True where every condition is (null counts as false)."""
    return pc.fill_null(functools.reduce(pc.and_kleene, conditions), False)


def lists_marker(raw: pa.RecordBatch, bucket: str, prefix: str, marker: ObjectInfo) -> bool:
    """The rows hold the namespace's marker as it is: the same size, and the same date to the
    millisecond (S3 Inventory's precision; to the second when the row gives no more than that)."""
    rows = raw.filter(pc.fill_null(pc.equal(raw.column("key"), prefix + MARKER), False)).to_pylist()
    return any(
        (r["bucket"] or "") == bucket
        and r["size"] == marker.size
        and r["mtime"] is not None
        and _same_date(r["mtime"], marker.mtime)
        for r in rows
    )


def _same_date(listed: datetime, actual: datetime) -> bool:
    unit = 1000 if listed.microsecond else 1_000_000  # microseconds in a millisecond, or in a second
    return _epoch_us(listed) // unit == _epoch_us(actual) // unit


def _epoch_us(when: datetime) -> int:
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


# -- reading data files, on the executors ------------------------------------------------------------------
@dataclass(frozen=True)
class _Reader:
    """One `mapInArrow` task over the inventory's data files (by index, see `tasks.work_items`):
    their rows the namespace may take, as listing rows, and after each file that lists the
    namespace's marker as it is, one `_SEEN` row saying so (tasks have no other way to tell the
    driver something on Spark Connect, where there are no accumulators)."""

    inventory: Inventory
    bucket: str
    prefix: str
    covered: tuple[str, ...]
    cutoff: datetime
    marker: ObjectInfo
    s3: S3Settings

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        covered = pa.array(self.covered, pa.string())
        for batch in batches:
            for index in batch.column(0).to_pylist():
                location = self.inventory.files[index].location
                found = False
                for raw in self._rows(location):
                    found = found or lists_marker(raw, self.bucket, self.prefix, self.marker)
                    kept = keep_rows(raw, self.bucket, self.prefix, covered, self.cutoff)
                    if kept.num_rows:
                        yield kept
                if found:
                    yield _seen_row(self.cutoff)

    def _rows(self, location: str) -> Iterator[pa.RecordBatch]:
        fmt = self.inventory.format
        try:
            with open_data_file(location, self.s3) as source:
                yield from read_objects(source, fmt, self.inventory.fields)
        except LakegcError as exc:
            raise InvalidArgument(f"inventory data file {location} cannot be read as {fmt}: {exc}") from None
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
            detail = first_line(exc, 1000)
            what = "gzip'd CSV" if fmt is Format.CSV else "Parquet"
            raise InvalidArgument(
                f"inventory data file {location} is not {what} with the manifest's fileSchema: {detail}"
            ) from None


def _seen_row(cutoff: datetime) -> pa.RecordBatch:
    """The row a task adds for a data file listing the marker: its slice no slice can be named (a
    slice is one folder), and young, so nothing would ever count it as a candidate."""
    return pa.RecordBatch.from_pylist(
        [{"address": MARKER, "size": 0, "mtime": cutoff, "slice": _SEEN, "young": True}], schema=LISTING
    )


_SEEN = "/marker seen"


# -- the listing, and the look-up of what it suggested ---------------------------------------------------
@dataclass(frozen=True)
class Listing:
    """A run's listing, persisted: `rows` (`columns.LISTING`) to read, `cached` to unpersist when
    the run is done, and the slices an inventory stood for (their candidates go through
    `confirm_present`)."""

    rows: DataFrame
    cached: DataFrame
    from_inventory: list[str]


def inventory_listing(
    spark: SparkSession,
    storage: Storage,
    manifest: Inventory,
    slice_names: list[str],
    windows: dict[str, SliceWindow],
    older_than: datetime,
) -> Listing:
    """LISTING rows for `slice_names` and the root: the slices `must_list` names and the root
    listed directly, the others read from the inventory's data files (one task per file). Returns
    the listing, read once here to check the inventory is this namespace's."""
    from pyspark.sql import functions as F

    direct = must_list(slice_names, windows, manifest.created)
    listed_directly = set(direct)
    covered = tuple(name for name in slice_names if name not in listed_directly)
    # a listing gives the marker's date to the millisecond at least, where an S3 HEAD gives seconds
    marker = next((o for o in storage.list(posixpath.dirname(MARKER) + "/", recursive=False) if o.key == MARKER), None)
    if marker is None:
        raise InvalidArgument(f"namespace {storage.uri} has no {MARKER}")
    bucket, prefix = (storage.bucket, storage.prefix) if isinstance(storage, S3Storage) else ("", "")
    reader = _Reader(manifest, bucket, prefix, covered, older_than, marker, S3Settings.from_env())
    from_inventory = work_items(spark, len(manifest.files), parallelism(spark) * 2).mapInArrow(reader, ddl(LISTING))
    rows = list_namespace(spark, storage, direct, older_than).unionByName(from_inventory).persist()
    said = F.col("slice").eqNullSafe(_SEEN)
    if not rows.where(said).count():  # reads every row, so the listing is cached whole
        rows.unpersist()
        raise InvalidArgument(
            f"inventory {manifest.manifest} does not list {prefix}{MARKER} as it is in namespace "
            f"{storage.uri}: it is not an inventory of this namespace (or not of all of it)"
        )
    return Listing(rows.where(~said), rows, list(covered))


def namespace_listing(
    spark: SparkSession,
    storage: Storage,
    slice_names: list[str],
    windows: dict[str, SliceWindow],
    older_than: datetime,
    inventory: Inventory | None,
) -> Listing:
    """A run's listing (see `listing.list_namespace`), from `inventory` when there is one."""
    if inventory is None:
        rows = list_namespace(spark, storage, slice_names, older_than).persist()
        return Listing(rows, rows, [])
    return inventory_listing(spark, storage, inventory, slice_names, windows, older_than)


def confirm_present(storage: Storage, candidates: DataFrame, from_inventory: list[str], cutoff: datetime) -> DataFrame:
    """Candidates, those of the slices read from an inventory looked up one by one (on the
    executors): gone, not a file, or younger than `cutoff` now, they are left out; otherwise they
    take the store's size and mtime. Only candidates are looked up: a few per cent of a lake.

    One pass over the candidates, split in Arrow by their slice: a Spark `isin` of the slice
    names costs a JVM round trip per name on the driver (~1.5 ms each, 12K names at 1M objects),
    and a union of two filtered halves computes the candidates' anti-join twice."""
    if not from_inventory:
        return candidates
    suggested_slices = pa.array(sorted(set(from_inventory)), pa.string())

    def look_up(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        folders: dict[str, bool] = {}  # this task's
        for batch in batches:
            suggested = pc.is_in(slice_of(batch.column("address")), value_set=suggested_slices)
            kept = batch.filter(pc.invert(suggested))
            if kept.num_rows:
                yield kept
            rows = [
                {**row, "size": info.size, "mtime": info.mtime}
                for row in batch.filter(suggested).to_pylist()
                if (info := present(storage, row["address"], folders)) is not None and info.mtime < cutoff
            ]
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=batch.schema)

    return candidates.mapInArrow(look_up, candidates.schema)


def present(storage: Storage, key: str, folders: dict[str, bool] | None = None) -> ObjectInfo | None:
    """The object as the store has it now; None when it is gone, is not a file, or (in a folder) is
    or lies behind a symlink, which no listing would have offered. `folders` remembers which
    folders were checked to be real (candidates come a slice at a time: one check per folder, not
    a `realpath` of every key, which cost three quarters of a look-up)."""
    info = storage.stat(key)
    if info is None or not isinstance(storage, LocalStorage):
        return info
    folders = {} if folders is None else folders
    folder = posixpath.dirname(key)
    if folder not in folders:
        folders[folder] = storage.reached_directly(folder)
    return info if folders[folder] and not os.path.islink(storage.root / key) else None
