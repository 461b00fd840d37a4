"""The records of lakeFS ranges and metaranges: its value framing around two small protobuf messages.

Decoded by hand, because the two messages have a handful of scalar fields and a generated-code
dependency on every Spark executor would cost more than these few lines; unknown fields are skipped
by wire type, so newer lakeFS versions that add fields still read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from lakegc.lakefs.sstable import SSTable, SSTableError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    address: str
    size: int
    etag: str
    address_type: int | None  # 0 by prefix (deprecated), 1 relative, 2 full; None when not written
    last_modified: datetime | None


@dataclass(frozen=True, slots=True)
class RangeRef:
    range_id: str
    min_key: str
    max_key: str
    estimated_size: int
    count: int


class _Malformed(ValueError):
    pass


def _uvarint(buf: bytes, i: int) -> tuple[int, int]:
    result = buf[i]
    if result < 0x80:  # tags, lengths and small numbers: nearly every varint here
        return result, i + 1
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): varints as ints, everything else as its bytes."""
    i, n = 0, len(buf)
    while i < n:
        tag = buf[i]
        if tag < 0x80:
            i += 1
        else:
            tag, i = _uvarint(buf, i)
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            value, i = _uvarint(buf, i)
            yield number, wire, value
            continue
        if wire == _BYTES:
            size = buf[i]
            if size < 0x80:
                i += 1
            else:
                size, i = _uvarint(buf, i)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
        else:
            raise _Malformed(f"field {number} has wire type {wire}")
        if number == 0 or i + size > n:
            raise _Malformed(f"field {number} overruns its message")
        yield number, wire, buf[i : i + size]
        i += size


def _framed(value: bytes) -> tuple[bytes, bytes]:
    """lakeFS frames a value as identity then data, each behind a zigzag-varint length."""
    parts, i = [], 0
    for _ in range(2):
        raw, i = _uvarint(value, i)
        size = (raw >> 1) ^ -(raw & 1)
        if size < 0 or i + size > len(value):
            raise _Malformed(f"value part of {size} bytes overruns the value's {len(value)}")
        parts.append(value[i : i + size])
        i += size
    return parts[0], parts[1]


def _expect(wire: int, wanted: int, number: int) -> None:
    if wire != wanted:
        raise _Malformed(f"field {number} has wire type {wire}, not {wanted}")


def _timestamp(buf: bytes) -> datetime:
    seconds = nanos = 0
    for number, wire, value in _fields(buf):
        if number == 1:
            _expect(wire, _VARINT, number)
            seconds = _int64(value)  # type: ignore[arg-type]
        elif number == 2:
            _expect(wire, _VARINT, number)
            nanos = _int64(value)  # type: ignore[arg-type]
    return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)


def _entry(path: bytes, data: bytes) -> Entry:
    address, etag, size, address_type, modified = b"", b"", 0, None, None
    for number, wire, value in _fields(data):
        if number in (1, 2, 4):
            _expect(wire, _BYTES, number)
        elif number in (3, 6):
            _expect(wire, _VARINT, number)
        if number == 1:
            address = value
        elif number == 2:
            modified = _timestamp(value)  # type: ignore[arg-type]
        elif number == 3:
            size = _int64(value)  # type: ignore[arg-type]
        elif number == 4:
            etag = value
        elif number == 6:
            address_type = value
    return Entry(path.decode(), address.decode(), size, etag.decode(), address_type, modified)  # type: ignore[union-attr,arg-type]


def _range(identity: bytes, data: bytes) -> RangeRef:
    found: dict[int, int | bytes] = {}
    for number, wire, value in _fields(data):
        if number in (1, 2, 3, 4):
            _expect(wire, _BYTES if number <= 2 else _VARINT, number)
            found[number] = value
    min_key, max_key = found.get(1, b""), found.get(2, b"")
    return RangeRef(
        range_id=identity.decode("ascii"),
        min_key=min_key.decode(),  # type: ignore[union-attr]
        max_key=max_key.decode(),  # type: ignore[union-attr]
        estimated_size=found.get(3, 0),  # type: ignore[arg-type]
        count=_int64(found.get(4, 0)),  # type: ignore[arg-type]
    )


def _decode_all(table: SSTable, name: str, decode: Callable[[bytes, bytes, bytes], T]) -> Iterator[T]:
    """Malformed records fail as the file's error, with the key they were found at."""
    for key, value in table.records:
        try:
            identity, data = _framed(value)
            yield decode(key, identity, data)
        except (_Malformed, IndexError, ValueError, OverflowError) as e:
            detail = str(e) if isinstance(e, _Malformed) else f"{type(e).__name__}: {e}"
            raise SSTableError(" ".join(f"lakeFS metadata file {name}: record {key!r}: {detail}".split())) from None


def range_entries(table: SSTable, name: str) -> Iterator[Entry]:
    """The objects a range lists, in path order."""
    return _decode_all(table, name, lambda key, _identity, data: _entry(key, data))


def metarange_ranges(table: SSTable, name: str) -> Iterator[RangeRef]:
    """The ranges a metarange lists, in key order (each keyed by its max key)."""
    return _decode_all(table, name, lambda _key, identity, data: _range(identity, data))
