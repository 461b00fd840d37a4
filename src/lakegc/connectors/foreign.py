"""Tables nobody told lakegc about: found by the marker every such table leaves on storage.

A collector knows the tables of the catalogs it reads, and the deletion guard knows the places the
lakegc metastore and the configured catalogs name. A table of a catalog nobody configured is known
to neither, but it announces itself on storage: an Iceberg table by `metadata/*.metadata.json`, a
Delta table by `_delta_log/`, a lakegc namespace by `_lakegc/repository.json`, a lakeFS namespace by
`_lakefs/`. A folder below a collected location that holds such a marker, and that is not one of the
collector's own tables, belongs to someone else: it is left out of the listing whole, so nothing in
it is ever a candidate. A marker at the collected location itself (another system owns the very
same folder) refuses the run: there is nothing the collector could safely list.

Markers are matched in the JVM (one regular expression over the persisted listing, no Python
worker); only the folders that hold one (a few rows per foreign table) reach the driver.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakegc.errors import UnsafeLocation

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakegc.engine.progress import PhaseTimer
    from lakegc.engine.runs import Run

ICEBERG, DELTA, LAKEGC, LAKEFS = "Iceberg table", "Delta table", "lakegc namespace", "lakeFS namespace"

# What each kind leaves in its folder, as a regular expression over the rest of a key below that
# folder (Java and Python read these the same way). Iceberg's metadata files may be compressed
# (`.gz.metadata.json`, `.metadata.json.gz`); a Hadoop catalog also writes `version-hint.text`.
MARKERS = {
    DELTA: r"_delta_log/",
    ICEBERG: r"metadata/(?:[^/]*\.metadata\.json(?:\.gz)?|version-hint\.text)$",
    LAKEGC: r"_lakegc/repository\.json$",
    LAKEFS: r"_lakefs/",
}
# A substring every key holding a marker has: a cheap first filter, so the expression below runs
# only on the few keys that may match (a million-key listing: 0.7 s for the expression alone).
HINTS = ("_delta_log/", "metadata/", "version-hint.text", "_lakegc/repository.json", "_lakefs/")
# Group 1: the folder holding the marker (shortest first: `??` tries no folder, then the outermost,
# so a marker inside a foreign table never hides the table itself); groups 2.. say which kind.
# `(?s)`: `.` matches any character, line terminators too, in Java as in Python (without it Java's
# stops at `\r`, `\u0085`, `\u2028`, `\u2029` and Python's at `\n`: a folder named with one would hide).
PATTERN = "(?s)^(.*?/)??(?:" + "|".join(f"({p})" for p in MARKERS.values()) + ")"


@dataclass(frozen=True)
class Foreign:
    """A folder (a key prefix below the collected location, `` for the location itself) that holds
    a table marker of `kind`; `slice` says which of the run's listed locations it was found in."""

    slice: str
    prefix: str
    kind: str

    def shown(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.prefix} ({self.kind})"


@dataclass(frozen=True)
class Prefixes:
    """Folder key prefixes (each ends in `/`) to leave out, kept outermost only and sorted, so that
    whether a key lies under one is a single binary search, however many there are (a warehouse
    root holding thousands of other tables). It is exact: when a key starts with a kept prefix p,
    nothing sorts between p and the key but keys that start with p, and those were folded into p."""

    sorted: tuple[str, ...]

    @classmethod
    def of(cls, prefixes: Iterable[str]) -> Prefixes:
        outermost: list[str] = []
        for p in sorted(set(prefixes)):
            if not (outermost and p.startswith(outermost[-1])):
                outermost.append(p)
        return cls(tuple(outermost))

    def hold(self, key: str) -> bool:
        i = bisect_right(self.sorted, key) - 1
        return i >= 0 and key.startswith(self.sorted[i])


def leave_out_foreign(
    run: Run,
    listing: DataFrame,
    bases: dict[str, str],
    timed: PhaseTimer,
    own: Container[Foreign] = frozenset(),
    refuse: frozenset[str] = frozenset(),
) -> list[Foreign]:
    """What every collector does with a listing before it judges anything: find the markers
    (`find_markers`), decide which folders are someone else's (`foreign_folders`: `own`, `refuse`),
    and say so (`_report`: `bases` is each slice's location). The caller leaves those folders out of
    what it judges (`outside_foreign`, or its own filter)."""
    foreign = foreign_folders(find_markers(listing), own, refuse)
    _report(run, foreign, bases, timed)
    return foreign


def _report(run: Run, foreign: list[Foreign], bases: dict[str, str], timed: PhaseTimer) -> None:
    """Say which folders holding a table nobody named were left out: a line as the run goes, a
    count in its summary, each folder in its JSON."""
    shown = [f.shown(bases[f.slice]) for f in foreign]
    run.details["foreign table folders left out"] = len(shown)
    run.details["foreign tables left out"] = shown
    if shown:
        timed("leaving out tables nobody named", "; ".join(shown))


def foreign_folders(
    found: Iterable[Foreign], own: Container[Foreign] = frozenset(), refuse: frozenset[str] = frozenset()
) -> list[Foreign]:
    """The folders to leave out, outermost only, sorted: every marker folder that is not one of the
    collector's own (`own`: its own tables' markers, an Iceberg collector's `metadata/` in each of
    its tables' folders). A foreign marker at the location itself, or one of a kind in `refuse`
    (what this collector would take for its own files: a Delta table inside a Delta table), refuses
    the run instead: nothing could be listed safely."""
    outside = sorted({f for f in found if f not in own}, key=lambda f: (f.slice, len(f.prefix), f.prefix, f.kind))
    for f in outside:
        if f.prefix == "" or f.kind in refuse:
            raise UnsafeLocation(_refusal(f))
    outermost: list[Foreign] = []
    for f in outside:
        if not any(o.slice == f.slice and f.prefix.startswith(o.prefix) for o in outermost):
            outermost.append(f)
    return sorted(outermost, key=lambda f: (f.slice, f.prefix))


def _refusal(f: Foreign) -> str:
    marker = {ICEBERG: "metadata/*.metadata.json", DELTA: "_delta_log/", LAKEGC: "_lakegc/repository.json"}
    where = "the location itself is" if f.prefix == "" else f"another table lies inside this one, at {f.prefix}:"
    return (
        f"{where} a {f.kind} ({marker.get(f.kind, '_lakefs/')} found there): its files are not this run's to judge; "
        "collect each table on its own, by the system that owns it (nothing was deleted)"
    )


def marker_of(key: str) -> tuple[str, str] | None:
    """The (folder, kind) of the marker a key reveals, or None: the rule `find_markers` runs in the
    JVM, written for Python (tests and single keys)."""
    import re

    match = re.match(PATTERN, key)
    if match is None:
        return None
    kind = next(k for k, g in zip(MARKERS, match.groups()[1:]) if g is not None)
    return match.group(1) or "", kind


def find_markers(listing: DataFrame) -> list[Foreign]:
    """Every (slice, folder, kind) of a marker in a listing (`columns.LISTING`): one pass in the JVM,
    and only the distinct folders (a handful per table) reach the driver."""
    from pyspark.sql import functions as F

    address = F.col("address")
    kind: Column = F.lit(None)
    for index, name in reversed(list(enumerate(MARKERS, start=2))):
        kind = F.when(F.regexp_extract(address, PATTERN, index) != "", F.lit(name)).otherwise(kind)
    hinted = F.lit(False)
    for hint in HINTS:
        hinted = hinted | address.contains(hint)
    rows = (
        listing.where(hinted)
        .where(address.rlike(PATTERN))
        .select("slice", F.regexp_extract(address, PATTERN, 1).alias("prefix"), kind.alias("kind"))
        .distinct()
        .collect()
    )
    return [Foreign(r["slice"], r["prefix"], r["kind"]) for r in rows]


_JVM_FILTER_MOST = 64  # foreign folders a JVM filter tests one by one; past that, a binary search per key


def outside_foreign(listing: DataFrame, foreign: list[Foreign]) -> DataFrame:
    """The listing less every object under a foreign folder of its slice: a JVM filter for a few
    folders (the usual case: none or one), a binary search per key (`Prefixes`) for many."""
    from pyspark.sql import functions as F

    if not foreign:
        return listing
    if len(foreign) <= _JVM_FILTER_MOST:
        under = F.lit(False)
        for f in foreign:
            under = under | ((F.col("slice") == f.slice) & F.col("address").startswith(f.prefix))
        return listing.where(~under)
    from lakegc.engine.columns import LISTING, ddl

    by_slice = {s: Prefixes.of(f.prefix for f in foreign if f.slice == s) for s in {f.slice for f in foreign}}
    empty = Prefixes(())

    def outside(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            pairs = zip(batch.column("address").to_pylist(), batch.column("slice").to_pylist())
            yield batch.filter(pa.array([not by_slice.get(s, empty).hold(k) for k, s in pairs], pa.bool_()))

    return listing.mapInArrow(outside, ddl(LISTING))
