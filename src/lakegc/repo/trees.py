"""Committed trees as content-defined, content-addressed Parquet ranges.

A tree is a metarange: the ordered list of its ranges. A range is a Parquet file of entries sorted
by path. A range ends after a path whose hash hits a mask (a *natural* cut), or after MAX_ENTRIES.
Cuts depend only on the paths since the last cut, so chunking is canonical: the same entries always
give the same ranges, whatever history produced them. That is what lets `apply` rewrite only the
ranges a change touches and lets trees share every other range, and what lets GC read each distinct
range once.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import io
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakegc.errors import CorruptMetadata, ObjectNotFound, PathEscapesNamespace, first_line
from lakegc.repo.model import AddressKind, Change, ChangeType, Entry
from lakegc.storage import Storage
from lakegc.timeutil import as_utc

RANGES_PREFIX = "_lakegc/ranges/"
METARANGES_PREFIX = "_lakegc/metaranges/"
CUT_BITS = 10  # a natural cut every ~1,024 entries
MAX_ENTRIES = 8 * (1 << CUT_BITS)  # forced cuts are rare: P(gap > 8x mean) = e^-8
_CUT_MASK = (1 << CUT_BITS) - 1

RANGE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("address", pa.string()),
        ("address_kind", pa.string()),
        ("size", pa.int64()),
        ("checksum", pa.string()),
        ("mtime", pa.timestamp("us", tz="UTC")),
        ("metadata", pa.string()),
    ]
)
METARANGE_SCHEMA = pa.schema(
    [
        ("range_id", pa.string()),
        ("min_path", pa.string()),
        ("max_path", pa.string()),
        ("count", pa.int64()),
    ]
)


@dataclass(frozen=True, slots=True)
class RangeRef:
    id: str
    min_path: str
    max_path: str
    count: int


def is_natural_cut(path: str) -> bool:
    digest = hashlib.blake2b(path.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & _CUT_MASK == 0


def chunk(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """Split sorted entries into ranges: the canonical chunking."""
    current: list[Entry] = []
    for entry in entries:
        current.append(entry)
        if is_natural_cut(entry.path) or len(current) >= MAX_ENTRIES:
            yield current
            current = []
    if current:
        yield current


def range_id(entries: list[Entry]) -> str:
    h = hashlib.sha256()
    for e in entries:
        h.update(
            "\x00".join(
                (
                    e.path,
                    e.address,
                    e.address_kind,
                    str(e.size),
                    e.checksum,
                    as_utc(e.mtime).isoformat(),
                    "\x02" if e.metadata is None else e.metadata,
                )
            ).encode()
        )
        h.update(b"\x01")
    return h.hexdigest()


def metarange_id(ranges: list[RangeRef]) -> str:
    return hashlib.sha256("\n".join(r.id for r in ranges).encode()).hexdigest()


# -- verified reads: a tree file is trusted only when its content hashes to its id ------------------
def verify_range(table: pa.Table, rid: str) -> pa.Table:
    """`table`, when it is the range `rid`: exactly the bytes `range_id` hashes, built column-wise
    in Arrow (GC reads about a million entries a run; a Python loop over them would cost seconds).
    Anything else, a truncated, replaced or reshaped range included, raises CorruptMetadata."""
    what = f"range {RANGES_PREFIX}{rid}"
    _check_shape(table, RANGE_SCHEMA, what, nullable="metadata")
    last = pc.binary_join_element_wise(pc.fill_null(table["metadata"], _text("\x02")), _text("\x01"), _text(""))
    entries = pc.binary_join_element_wise(
        table["path"],
        table["address"],
        table["address_kind"],
        pc.cast(table["size"], pa.string()),
        table["checksum"],
        _isoformat(table["mtime"]),
        last,  # ends the entry
        _text("\x00"),
    )
    if _sha256(entries) != rid:
        raise CorruptMetadata(f"{what}: its content does not match its id")
    return table


def verify_metarange(table: pa.Table, mid: str) -> pa.Table:
    """`table`, when it is the metarange `mid` (its range ids, in order, hash to `mid`); else raises
    CorruptMetadata. Only the ids are hashed: the paths and counts beside them are hints."""
    what = f"metarange {METARANGES_PREFIX}{mid}"
    _check_shape(table, METARANGE_SCHEMA, what)
    lines = pc.binary_join_element_wise(table["range_id"], _text(""), _text("\n"))
    if _sha256(lines, drop_last=1) != mid:  # the ids joined by "\n": every id's "\n" but the last
        raise CorruptMetadata(f"{what}: its content does not match its id")
    return table


def read_range(storage: Storage, rid: str, trusted: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """The range `rid`, verified; or, when its file still has the facts `trusted` (recorded when
    a run last verified it, see `repogc.trust`), read as it is, only `columns` of it."""
    key = RANGES_PREFIX + rid
    data, same = _read_tree_bytes(storage, "range", key, trusted)
    if same:
        return _parse(data, "range", key, columns)
    table = verify_range(_parse(data, "range", key), rid)
    return table.select(columns) if columns else table


def read_metarange(storage: Storage, mid: str, trusted: str | None = None) -> pa.Table:
    """The metarange `mid`, verified unless its file still has the facts `trusted` (`read_range`)."""
    key = METARANGES_PREFIX + mid
    data, same = _read_tree_bytes(storage, "metarange", key, trusted)
    table = _parse(data, "metarange", key)
    return table if same else verify_metarange(table, mid)


def tree_facts(storage: Storage) -> dict[str, str]:
    """Key -> facts (`Storage.facts`) of every tree file there is now: one listing per folder. A
    tree folder reached through a symlink is not listed (lakegc lists nothing through one): its
    files have no facts, so they are verified whenever they are read, as they always were."""
    found: dict[str, str] = {}
    for folder in (METARANGES_PREFIX, RANGES_PREFIX):
        with contextlib.suppress(PathEscapesNamespace):
            found.update(storage.facts(folder))
    return found


def _read_tree_bytes(storage: Storage, kind: str, key: str, trusted: str | None) -> tuple[bytes, bool]:
    """A tree file's bytes, and whether they are the ones a run verified: read with their facts,
    which must equal `trusted` (facts taken before the read would trust a file swapped after)."""
    try:
        if trusted is None:
            return storage.read(key), False
        data, facts = storage.read_with_facts(key)
        return data, facts == trusted
    except ObjectNotFound:
        raise CorruptMetadata(f"{kind} {key} is missing: a tree refers to it") from None


def _parse(data: bytes, kind: str, key: str, columns: list[str] | None = None) -> pa.Table:
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns)
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptMetadata(
            f"{kind} {key}: its content does not match its id (not Parquet: {first_line(exc, 200)})"
        ) from None


def _check_shape(table: pa.Table, schema: pa.Schema, what: str, nullable: str = "") -> None:
    if not table.schema.equals(schema):
        columns = ", ".join(f"{f.name} {f.type}" for f in table.schema)
        raise CorruptMetadata(f"{what}: its content does not match its id (columns: {columns or 'none'})")
    nulls = [name for name in table.column_names if name != nullable and table[name].null_count]
    if nulls:
        raise CorruptMetadata(f"{what}: its content does not match its id (nulls in {', '.join(nulls)})")


def _isoformat(mtimes: pa.ChunkedArray) -> pa.ChunkedArray:
    """`as_utc(mtime).isoformat()` of UTC microsecond timestamps: `2026-01-02T03:04:05+00:00`, with
    `.ffffff` when the microseconds are not zero. Arrow's own casts (YYYY-MM-DD, HH:MM:SS.ffffff)
    cost a tenth of `strftime`; a clock's ".000000" can only be its fraction."""
    date = pc.cast(mtimes, pa.date32()).cast(pa.string())
    clock = mtimes.cast(pa.timestamp("us")).cast(pa.time64("us")).cast(pa.string())
    clock = pc.replace_substring(clock, ".000000", "")
    return pc.binary_join_element_wise(date, _text("T"), clock, _text("+00:00"), _text(""))


@functools.cache
def _text(value: str) -> pa.StringScalar:
    """`value` as an Arrow string scalar, made from its bytes. pyarrow converting any Python object
    (a str given to a compute function, `pa.scalar`) first imports pandas when it is installed: a
    third of a second that an `fs stat` verifying one range would pay for its separators."""
    data = value.encode()
    offsets = struct.pack("<ii", 0, len(data))
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


def _sha256(strings: pa.ChunkedArray, drop_last: int = 0) -> str:
    """SHA-256 of the strings end to end (less their last `drop_last` bytes), straight from Arrow's
    value buffer: no Python object per string."""
    array = strings.combine_chunks()
    if not len(array):
        return hashlib.sha256().hexdigest()
    _, offsets, values = array.buffers()
    bounds = memoryview(offsets).cast("i")
    start, end = bounds[array.offset], bounds[array.offset + len(array)] - drop_last
    return hashlib.sha256(memoryview(values)[start:end]).hexdigest()


class TreeStore:
    """Reads and writes ranges and metaranges in one namespace; caches what it has read."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self._ranges: dict[str, list[Entry]] = {}
        self._metaranges: dict[str, list[RangeRef]] = {}

    # -- writing ------------------------------------------------------------
    def write_range(self, entries: list[Entry]) -> RangeRef:
        rid = range_id(entries)
        key = RANGES_PREFIX + rid
        if not self.storage.exists(key):
            self.storage.write(key, _to_parquet(_range_table(entries)))
        elif rid not in self._ranges:
            read_range(self.storage, rid)  # a new tree must not take up a tampered range
        self._ranges[rid] = entries
        return RangeRef(rid, entries[0].path, entries[-1].path, len(entries))

    def write_metarange(self, ranges: list[RangeRef]) -> str:
        mid = metarange_id(ranges)
        key = METARANGES_PREFIX + mid
        if self.storage.exists(key):
            if mid not in self._metaranges:
                read_metarange(self.storage, mid)  # a commit must not point at a tampered metarange
        else:
            table = pa.table(
                {
                    "range_id": [r.id for r in ranges],
                    "min_path": [r.min_path for r in ranges],
                    "max_path": [r.max_path for r in ranges],
                    "count": [r.count for r in ranges],
                },
                schema=METARANGE_SCHEMA,
            )
            self.storage.write(key, _to_parquet(table))
        self._metaranges[mid] = ranges
        return mid

    def build(self, entries: Iterable[Entry]) -> str:
        """A tree from scratch, from entries sorted by path."""
        return self.write_metarange([self.write_range(part) for part in chunk(entries)])

    # -- reading ------------------------------------------------------------
    def ranges(self, mid: str) -> list[RangeRef]:
        if mid not in self._metaranges:
            table = read_metarange(self.storage, mid)
            self._metaranges[mid] = [
                RangeRef(r["range_id"], r["min_path"], r["max_path"], r["count"]) for r in table.to_pylist()
            ]
        return self._metaranges[mid]

    def range_entries(self, rid: str) -> list[Entry]:
        if rid not in self._ranges:
            table = read_range(self.storage, rid)
            # mtimes as microseconds: pyarrow making datetimes of a zoned column first imports pandas
            micros = table["mtime"].cast(pa.int64()).to_pylist()
            rows = table.drop_columns(["mtime"]).to_pylist()
            self._ranges[rid] = [_entry(row, us) for row, us in zip(rows, micros, strict=True)]
        return self._ranges[rid]

    def entries(self, mid: str, prefix: str = "", after: str = "") -> Iterator[Entry]:
        """The tree's entries under `prefix` with a path greater than `after`, in path order; ranges
        wholly before either are never read (a listing's later pages skip to where they start)."""
        for ref in self.ranges(mid):
            if ref.max_path < prefix or (after and ref.max_path <= after):
                continue
            if prefix and ref.min_path > prefix and not ref.min_path.startswith(prefix):
                continue
            for entry in self.range_entries(ref.id):
                if entry.path.startswith(prefix):
                    if entry.path > after:
                        yield entry
                elif entry.path > prefix:
                    return

    def get(self, mid: str, path: str) -> Entry | None:
        refs = self.ranges(mid)
        i = bisect.bisect_right([r.min_path for r in refs], path) - 1
        if i < 0 or path > refs[i].max_path:
            return None
        entries = self.range_entries(refs[i].id)
        j = bisect.bisect_left([e.path for e in entries], path)
        return entries[j] if j < len(entries) and entries[j].path == path else None

    # -- changing -----------------------------------------------------------
    def apply(self, mid: str, changes: Mapping[str, Entry | None]) -> str:
        """The tree `mid` with `changes` applied, rewriting only the ranges they touch.

        Every range starts right after a cut, so re-chunking from the start of a touched range
        reproduces the canonical chunking. Once all changes are consumed and a cut lands exactly on
        the end of an old range, the old ranges that follow are the canonical ones: reuse them.
        """
        refs = self.ranges(mid)
        paths = sorted(changes)
        mins = [r.min_path for r in refs]
        # The range each change belongs in: the last one starting at or before it (or the first).
        owner = [max(bisect.bisect_right(mins, p) - 1, 0) for p in paths]
        out: list[RangeRef] = []
        pending: list[Entry] = []
        k = 0  # next change to apply
        for i, ref in enumerate(refs):
            lo = k
            while k < len(paths) and owner[k] == i:
                k += 1
            if not pending and lo == k:
                out.append(ref)  # untouched and in sync: shared with the old tree
                continue
            merged = _merge_sorted(self.range_entries(ref.id), [(p, changes[p]) for p in paths[lo:k]])
            for entry in merged:
                pending.append(entry)
                if is_natural_cut(entry.path) or len(pending) >= MAX_ENTRIES:
                    out.append(self.write_range(pending))
                    pending = []
        if k < len(paths):  # changes on an empty tree
            for entry in _merge_sorted([], [(p, changes[p]) for p in paths[k:]]):
                pending.append(entry)
                if is_natural_cut(entry.path) or len(pending) >= MAX_ENTRIES:
                    out.append(self.write_range(pending))
                    pending = []
        if pending:
            out.append(self.write_range(pending))
        return self.write_metarange(out)

    def diff(self, left: str, right: str) -> list[Change]:
        """Changes from `left` to `right`. Ranges present in both trees hold identical entries,
        and a path lives in one range per tree, so only unshared ranges need reading."""
        lrefs, rrefs = self.ranges(left), self.ranges(right)
        shared = {r.id for r in lrefs} & {r.id for r in rrefs}
        lmap = {e.path: e for r in lrefs if r.id not in shared for e in self.range_entries(r.id)}
        rmap = {e.path: e for r in rrefs if r.id not in shared for e in self.range_entries(r.id)}
        changes = []
        for path in sorted(lmap.keys() | rmap.keys()):
            a, b = lmap.get(path), rmap.get(path)
            if a == b:
                continue
            kind = ChangeType.ADDED if a is None else ChangeType.REMOVED if b is None else ChangeType.CHANGED
            changes.append(Change(path, kind, a, b))
        return changes


def _merge_sorted(entries: list[Entry], edits: list[tuple[str, Entry | None]]) -> Iterator[Entry]:
    i = 0
    for path, new in edits:
        while i < len(entries) and entries[i].path < path:
            yield entries[i]
            i += 1
        if i < len(entries) and entries[i].path == path:
            i += 1  # replaced or removed
        if new is not None:
            yield new
    yield from entries[i:]


def _range_table(entries: list[Entry]) -> pa.Table:
    return pa.table(
        {
            "path": [e.path for e in entries],
            "address": [e.address for e in entries],
            "address_kind": [str(e.address_kind) for e in entries],
            "size": [e.size for e in entries],
            "checksum": [e.checksum for e in entries],
            "mtime": [e.mtime for e in entries],
            "metadata": [e.metadata for e in entries],
        },
        schema=RANGE_SCHEMA,
    )


def _to_parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _entry(row: dict, mtime_us: int) -> Entry:
    return Entry(
        row["path"],
        row["address"],
        AddressKind(row["address_kind"]),
        row["size"],
        row["checksum"],
        _EPOCH + timedelta(microseconds=mtime_us),
        row["metadata"],
    )
