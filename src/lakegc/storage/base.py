"""The storage protocol every backend implements. Keys are relative to the namespace root."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, BinaryIO, Protocol

from lakegc.errors import PathEscapesNamespace

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def object_columns() -> pa.Schema:
    """A listing as Arrow columns: GC lists millions of objects and must not pay for a Python
    object each. Arrow loads here, not with the module: a command that never lists (a `log`, a
    `stat` answered from staging) does not pay for it."""
    import pyarrow as pa

    return pa.schema([("key", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC"))])


LISTING_BATCH = 10_000


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    mtime: datetime
    checksum: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """One key's result: `ok` is True when the object is gone afterwards (missing counts as deleted)."""

    key: str
    ok: bool
    error: str | None = None


class Storage(Protocol):
    """A namespace: a local folder or an object-store prefix."""

    uri: str

    def prepare(self) -> None:
        """Check the namespace can be used (and create it where that means something)."""

    def full_uri(self, key: str) -> str: ...

    def list(self, prefix: str = "", *, recursive: bool = True) -> Iterator[ObjectInfo]: ...

    def list_batches(self, prefix: str = "", *, recursive: bool = True) -> Iterator[pa.RecordBatch]:
        """The objects of `list`, as `object_columns()` batches in no particular order."""
        ...

    def list_dirs(self, prefix: str = "") -> list[str]:
        """Names of the folders (common prefixes) directly under `prefix`, sorted."""
        ...

    def is_empty(self) -> bool:
        """Nothing at all under the root (a local folder counts symlinks and special files too)."""
        ...

    def read(self, key: str) -> bytes: ...

    def open_read(self, key: str) -> BinaryIO: ...

    def write(self, key: str, data: bytes | BinaryIO) -> ObjectInfo: ...

    def delete_many(self, keys: Iterable[str]) -> list[DeleteOutcome]: ...

    def move_many(self, moves: Iterable[tuple[str, str]]) -> list[DeleteOutcome]:
        """Move objects (key, destination key) inside the namespace, never replacing an object at
        a destination; one outcome per source key, ok when nothing is left at it."""
        ...

    def exists(self, key: str) -> bool: ...

    def stat(self, key: str) -> ObjectInfo | None:
        """Size and mtime of one object, or None when there is none."""
        ...

    def facts(self, folder: str) -> dict[str, str]:
        """Key -> *facts* of every object directly in `folder`: what the store tells of an object
        without reading it, and which any rewrite changes (see `read_with_facts`). GC records them
        for the tree files it verified, and trusts a file again only while they stay the same."""
        ...

    def read_with_facts(self, key: str) -> tuple[bytes, str | None]:
        """An object's bytes and the facts (`facts`) of exactly those bytes; None for the facts when
        the object changed while it was read."""
        ...


def check_key(key: str) -> str:
    """Refuse keys that could leave the namespace, whatever the backend."""
    if not key or key.startswith("/") or "\x00" in key or any(p in ("", ".", "..") for p in key.split("/")):
        raise PathEscapesNamespace(f"invalid storage key {key!r}: it would escape the namespace")
    return key


def listing_batch(infos: list[ObjectInfo]) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [
            pa.array([o.key for o in infos], pa.string()),
            pa.array([o.size for o in infos], pa.int64()),
            pa.array([o.mtime for o in infos], pa.timestamp("us", tz="UTC")),
        ],
        schema=object_columns(),
    )


def read_table(storage: Storage, key: str, columns: list[str] | None = None) -> pa.Table:
    """A whole Parquet object (a range, a metarange, a run output part), parsed from memory without
    the dataset layer, which costs three times as much per file; GC reads thousands of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.ParquetFile(pa.BufferReader(storage.read(key))).read(columns=columns)
