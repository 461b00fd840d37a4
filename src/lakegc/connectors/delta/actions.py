"""Reading a Delta log segment's actions on the Spark executors, as rows of `ACTIONS`.

A checkpoint of a table with a million files is a Parquet file of a million add actions: it is read
a row group per task (only the columns GC needs: path, size, deletion timestamp, deletion vector),
commits a file per task, and nothing of it comes to the driver but the table's metadata and
protocol (one row each). V2 checkpoints name sidecar files: the driver reads the sidecar list (one
column of the checkpoint) and the sidecars are read like checkpoint parts.

Each file-action row carries its order in the log (`version`, `line`): the newest version wins,
and within one version the first line, as Delta readers replay a log.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.connectors.delta.log import ABSOLUTE, SIDECARS, BrokenLog, Segment, dv_id, dv_key, table_key
from lakegc.errors import ObjectNotFound, first_line
from lakegc.storage import LocalStorage, Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ADD, REMOVE, METADATA, PROTOCOL = "add", "remove", "metaData", "protocol"
ACTIONS = pa.schema(
    [
        ("kind", pa.string()),
        ("path", pa.string()),  # the file's key under the table root (add, remove)
        ("dv", pa.string()),  # the key of its deletion vector's file, if it has one in a file
        ("dv_id", pa.string()),  # the deletion vector's unique id ("" without one)
        ("version", pa.int64()),
        ("line", pa.int64()),
        ("deletion_ts", pa.int64()),  # a remove's deletionTimestamp (epoch ms)
        ("size", pa.int64()),
        ("detail", pa.string()),  # metaData and protocol actions, as JSON
    ]
)
ACTIONS_DDL = ", ".join(
    f"{f.name} {'string' if f.type == pa.string() else 'long'}" for f in ACTIONS
)  # every column is a string or a long
_DV_FIELDS = ("storageType", "pathOrInlineDv", "offset")
_ODD_PATH = r"%|^[^/]*:|^/|//|(^|/)\.\.?(/|$)|/$|^$"  # what table_key must see: the rest is a key as written


@dataclass(frozen=True)
class LogRead:
    """One task's share of the log: a file, the version its actions count at, and for Parquet
    the row groups to read (None: all)."""

    key: str
    version: int
    parquet: bool
    row_groups: tuple[int, ...] | None = None


def plan_reads(storage: Storage, seg: Segment) -> list[LogRead]:
    """The reads that cover the segment: checkpoint parts and sidecars split by row group, then
    the commits."""
    reads: list[LogRead] = []
    if seg.checkpoint is not None:
        files = [(k, k.endswith(".parquet")) for k in seg.checkpoint.keys]
        with _unreadable(", ".join(seg.checkpoint.keys)):
            files += [(k, True) for k in _sidecars(storage, seg.checkpoint.keys)]
        for key, parquet in files:
            if parquet:  # a task per row group: each reads the footer and its own columns' chunks
                with _unreadable(key), _opened(storage, key) as f:
                    groups = pq.ParquetFile(f).metadata.num_row_groups
                reads += [LogRead(key, seg.checkpoint.version, True, (g,)) for g in range(groups)]
            else:
                reads.append(LogRead(key, seg.checkpoint.version, parquet))
    reads += [LogRead(key, version, False) for version, key in seg.commits]
    return reads


def read_actions(
    spark: SparkSession, storage: Storage, seg: Segment, roots: tuple[str, ...], *, vectors_only: bool = False
) -> DataFrame:
    """Every action of the segment GC needs (ACTIONS rows), read on the executors; with
    `vectors_only`, only the add and remove actions that carry a deletion vector (a second, cheap
    read: checkpoints are read for their deletion-vector column first, and rows without one are
    never built)."""
    from lakegc.engine.tasks import parallelism, work_items

    reads = plan_reads(storage, seg)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        for batch in batches:
            for index in batch.column(0).to_pylist():
                for found in file_actions(storage, reads[index], roots, vectors_only):
                    yield found.filter(pc.not_equal(found.column("dv_id"), "")) if vectors_only else found

    tasks = parallelism(spark) * 4
    return work_items(spark, len(reads), tasks).mapInArrow(run, ACTIONS_DDL)


def file_actions(
    storage: Storage, read: LogRead, roots: tuple[str, ...], vectors_only: bool = False
) -> Iterator[pa.RecordBatch]:
    """The actions of one read, as ACTIONS batches (see `read_actions` for `vectors_only`)."""
    with _unreadable(read.key):
        if read.parquet:
            with _opened(storage, read.key) as f:
                yield from _parquet_actions(pq.ParquetFile(f), read, roots, vectors_only)
        else:
            yield _json_actions(storage.read(read.key), read, roots)


@contextmanager
def _unreadable(key: str) -> Iterator[None]:
    """A log file that is missing or cannot be parsed is BrokenLog: the state it is part of
    cannot be known."""
    try:
        yield
    except ObjectNotFound:
        raise BrokenLog(f"Delta log file {key} is gone (the log changed under the run); nothing was deleted") from None
    except (pa.ArrowException, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise BrokenLog(f"Delta log file {key} cannot be read ({first_line(exc)}); nothing was deleted") from None


def newest_metadata(storage: Storage, seg: Segment) -> tuple[dict, dict]:
    """The segment's newest metaData and protocol actions, read on the driver: the commits newest
    first until both are found, then the checkpoint's two columns (a million-row checkpoint holds
    one row of each). Missing either one is BrokenLog."""
    found: dict[str, dict] = {}
    for version, key in reversed(seg.commits):
        with _unreadable(key):
            for batch in [_json_actions(storage.read(key), LogRead(key, version, False), "")]:
                for kind, detail in zip(batch.column("kind").to_pylist(), batch.column("detail").to_pylist()):
                    if kind in (METADATA, PROTOCOL) and kind not in found:
                        found[kind] = json.loads(detail)
        if len(found) == 2:
            return found[METADATA], found[PROTOCOL]
    for key in seg.checkpoint.keys if seg.checkpoint else ():
        with _unreadable(key):
            if key.endswith(".json"):
                for text in storage.read(key).splitlines():
                    action = json.loads(text) if text.strip() else {}
                    for kind in (METADATA, PROTOCOL):
                        if action.get(kind) is not None:
                            found.setdefault(kind, action[kind])
                continue
            with _opened(storage, key) as f:
                file = pq.ParquetFile(f)
                wanted = [k for k in (METADATA, PROTOCOL) if k in file.schema_arrow.names]
                table = file.read(columns=wanted)
                for kind in wanted:
                    for _, body in _present(table.column(kind)):
                        found.setdefault(kind, _plain(body))
    missing = [kind for kind in (METADATA, PROTOCOL) if kind not in found]
    if missing:
        raise BrokenLog(f"the Delta log has no {missing[0]} action: not a complete table; nothing was deleted")
    return found[METADATA], found[PROTOCOL]


def _json_actions(data: bytes, read: LogRead, roots: tuple[str, ...]) -> pa.RecordBatch:
    rows: list[tuple[Any, ...]] = []
    for line, text in enumerate(data.splitlines()):
        if not text.strip():
            continue
        action = json.loads(text)
        if not isinstance(action, dict):
            raise ValueError(f"line {line + 1} is not an action")
        for kind in (ADD, REMOVE):
            if (body := action.get(kind)) is not None:
                rows += _file_rows(kind, body, read.version, line, roots)
        for kind in (METADATA, PROTOCOL):
            if (body := action.get(kind)) is not None:
                rows.append((kind, None, None, "", read.version, line, None, None, json.dumps(body)))
    return _batch(rows)


def _file_rows(kind: str, body: dict, version: int, line: int, roots: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """One ACTIONS row, and for an add whose path has `%` escapes a second one for the path as
    written (`_as_written`)."""
    path = body["path"]
    if not isinstance(path, str):
        raise ValueError(f"a {kind} action has no path")
    dv = body.get("deletionVector") or {}
    storage_type, where, offset = (dv.get(f) for f in _DV_FIELDS)
    row = (
        kind,
        table_key(path, roots, protects=kind == ADD),
        dv_key(storage_type, where, roots),
        dv_id(storage_type, where, offset),
        version,
        line,
        body.get("deletionTimestamp") if kind == REMOVE else None,
        body.get("size"),
        None,
    )
    return [row, (row[0], path, *row[2:])] if _as_written(kind, path) else [row]


def _as_written(kind: str, path: str) -> bool:
    """An add path with `%` escapes names, by the protocol, the file its decoded form names; a
    writer that does not escape (some converters) names the file spelled as written. An add
    protects both: one of them is usually absent, and keeping a file never loses data."""
    return kind == ADD and "%" in path and table_key(path, ()) is not None and ABSOLUTE.match(path) is None


def _parquet_actions(
    file: pq.ParquetFile, read: LogRead, roots: tuple[str, ...], vectors_only: bool = False
) -> Iterator[pa.RecordBatch]:
    """A checkpoint's (or sidecar's) actions: only the columns GC needs are read, and the file
    actions are built column-wise (a million adds in a checkpoint is the common case)."""
    schema = file.schema_arrow
    names = set(schema.names)
    nested = {n: set(schema.field(n).type.names) for n in names if pa.types.is_struct(schema.field(n).type)}
    fields = ("path", "size", "deletionTimestamp", "deletionVector")
    wanted = [f"{kind}.{c}" for kind in (ADD, REMOVE) for c in fields if c in nested.get(kind, ())]
    wanted += [kind for kind in (METADATA, PROTOCOL) if kind in names]
    if "path" not in nested.get(ADD, ()):
        raise ValueError("it has no add.path column")  # a checkpoint without its adds would orphan every file
    groups = list(read.row_groups) if read.row_groups is not None else list(range(file.metadata.num_row_groups))
    first = sum(file.metadata.row_group(g).num_rows for g in range(groups[0])) if groups else 0
    for group in groups:
        table = file.read_row_groups([group], columns=wanted).combine_chunks()
        for kind in (ADD, REMOVE):
            if kind in table.column_names:
                yield from _file_batches(
                    kind,
                    table.column(kind).chunk(0) if table.column(kind).num_chunks else None,
                    read.version,
                    first,
                    roots,
                    vectors_only,
                )
        rows = [
            (kind, None, None, "", read.version, first + i, None, None, json.dumps(_plain(body)))
            for kind in (METADATA, PROTOCOL)
            if kind in table.column_names
            for i, body in _present(table.column(kind))
        ]
        if rows:
            yield _batch(rows)
        first += table.num_rows


def _present(column: pa.ChunkedArray) -> Iterator[tuple[int, Any]]:
    """(row, value) of the non-null rows of a mostly-null column."""
    import pyarrow.compute as pc

    for i in pc.indices_nonzero(pc.is_valid(column)).to_pylist():
        yield i, column[i].as_py()


def _file_batches(
    kind: str,
    actions: pa.StructArray | None,
    version: int,
    first: int,
    roots: tuple[str, ...],
    vectors_only: bool = False,
) -> list[pa.RecordBatch]:
    """ACTIONS rows of the add (or remove) column of a checkpoint row group (and, for adds with
    `%` escapes, the rows of their paths as written: `_as_written`)."""
    import pyarrow.compute as pc

    if actions is None:
        return []
    names = set(actions.type.names)
    present = pc.is_valid(actions)
    if vectors_only:
        if "deletionVector" not in names:
            return []
        present = pc.and_(present, pc.is_valid(actions.field("deletionVector")))
    rows = pc.indices_nonzero(present)
    actions = actions.take(rows)
    n = len(actions)

    def field(name: str, kind: pa.DataType) -> pa.Array:
        return actions.field(name).cast(kind) if name in names else pa.nulls(n, kind)

    written = paths = field("path", pa.string())
    if paths.null_count:
        raise ValueError(f"a {kind} action has no path")
    odd = pc.match_substring_regex(paths, _ODD_PATH)
    if pc.any(odd).as_py():  # percent-encoded, absolute or climbing: through table_key one by one
        paths = pa.array(
            [table_key(p, roots, protects=kind == ADD) if o else p for p, o in zip(paths.to_pylist(), odd.to_pylist())],
            pa.string(),
        )
    dv_keys, dv_ids = pa.nulls(n, pa.string()), pa.repeat(pa.scalar("", pa.string()), n)
    if "deletionVector" in names and actions.field("deletionVector").null_count < n:
        dvs = actions.field("deletionVector").to_pylist()
        parts = [tuple((d or {}).get(f) for f in _DV_FIELDS) for d in dvs]
        dv_keys = pa.array([dv_key(t, w, roots) for t, w, _ in parts], pa.string())
        dv_ids = pa.array([dv_id(t, w, o) for t, w, o in parts], pa.string())
    batch = pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(kind, pa.string()), n),
            paths,
            dv_keys,
            dv_ids,
            pa.repeat(pa.scalar(version, pa.int64()), n),
            pc.add(rows.cast(pa.int64()), first),
            field("deletionTimestamp", pa.int64()) if kind == REMOVE else pa.nulls(n, pa.int64()),
            field("size", pa.int64()),
            pa.nulls(n, pa.string()),
        ],
        schema=ACTIONS,
    )
    if kind != ADD or not pc.any(pc.match_substring(written, "%")).as_py():
        return [batch]
    again = pa.array([_as_written(kind, p) for p in written.to_pylist()], pa.bool_())
    return [batch, batch.filter(again).set_column(1, "path", written.filter(again))]


def _plain(value: Any) -> Any:
    """A Parquet map column reads as a list of (key, value) pairs: make it the JSON object it is."""
    if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in ACTIONS]
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, ACTIONS)], schema=ACTIONS)


def _sidecars(storage: Storage, checkpoint_keys: tuple[str, ...]) -> list[str]:
    """The sidecar files a V2 checkpoint names (none for a classic one)."""
    found: list[str] = []
    for key in checkpoint_keys:
        if key.endswith(".json"):
            for text in storage.read(key).splitlines():
                if text.strip() and (body := json.loads(text).get("sidecar")) is not None:
                    found.append(_sidecar_key(body["path"]))
            continue
        with _opened(storage, key) as f:
            file = pq.ParquetFile(f)
            if "sidecar" not in file.schema_arrow.names:
                continue
            for body in file.read(columns=["sidecar"]).column("sidecar").to_pylist():
                if body is not None:
                    found.append(_sidecar_key(body["path"]))
    return found


def _sidecar_key(path: str) -> str:
    key = table_key(path, ())
    if key is None or "/" in key:
        raise BrokenLog(f"a V2 checkpoint names sidecar {path!r}, which is not a file of _delta_log/_sidecars/")
    return SIDECARS + key


class _opened:
    """A log file opened for Parquet: a local file, or on a store that reads ranges (S3) a file
    that fetches only what the reader asks for (the footer, the columns GC reads), so a
    checkpoint of gigabytes never comes whole to the driver or to one task; else read whole."""

    def __init__(self, storage: Storage, key: str):
        self.storage, self.key, self.file = storage, key, None

    def __enter__(self) -> Any:
        if isinstance(self.storage, LocalStorage):
            self.file = self.storage.open_read(self.key)
            return self.file
        read_range = getattr(self.storage, "read_range", None)
        info = self.storage.stat(self.key) if read_range is not None else None
        if read_range is not None and info is not None:
            return _Ranged(lambda start, length: read_range(self.key, start, length), info.size)
        return pa.BufferReader(self.storage.read(self.key))

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


class _Ranged(io.RawIOBase):
    """A read-only, seekable file over ranged reads (what pyarrow needs of a Python file)."""

    def __init__(self, read: Callable[[int, int], bytes], size: int):
        self._read, self._size, self._at = read, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(0, base + offset)
        return self._at

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._at + size)
        data = self._read(self._at, end - self._at) if end > self._at else b""
        self._at += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
