"""lakeFS's committed trees are Pebble SSTables (RocksDB block-based format version 2); this reads them.

Pure functions over a file's bytes: the caller does the I/O, so the same code serves a test, the
driver and a Spark executor. A garbage collector that misreads a range deletes live data, so every
byte of the file is accounted for: each block's CRC32C is checked, the blocks must tile the file up
to its footer, and any decoding failure becomes one `SSTableError` line naming the file.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

import cramjam
import google_crc32c

from lakegc.errors import LakegcError

FOOTER_SIZE = 53  # checksum type, two block handles padded to 40 bytes, format version, magic
MAGIC = 0x88E241B785F4CFF7
LEVELDB_MAGIC = 0xDB4775248B80FB57
FORMAT_VERSION = 2
CRC32C = 1
BLOCK_TRAILER = 5  # compression type byte + masked CRC32C
KIND_SET = 1
PROPERTIES_BLOCK = b"rocksdb.properties"
INDEX_TYPE = "rocksdb.block.based.table.index.type"
TWO_LEVEL_INDEX = 2
OWN_PREFIXES = ("rocksdb.", "pebble.")
# Properties lakeFS sets after it has hashed the file, so they are not part of its id.
UNHASHED = frozenset({"min_key", "max_key", "count", "estimated_size_bytes"})


class SSTableError(LakegcError):
    """A lakeFS metadata file that cannot be trusted: corrupt, truncated, foreign or not its id."""


class _Corrupt(ValueError):
    """Raised deep in the decoder; `read_sstable` names the file once, at the edge."""


@dataclass(frozen=True, slots=True)
class SSTable:
    """User keys in file order (SET records only); `properties` are the writer's own (lakeFS's `type`,
    min/max key, count, size), `table_properties` RocksDB's and Pebble's, raw as stored."""

    records: tuple[tuple[bytes, bytes], ...]
    properties: dict[str, str] = field(default_factory=dict)
    table_properties: dict[str, bytes] = field(default_factory=dict)


def _fail(name: str, detail: str) -> SSTableError:
    return SSTableError(" ".join(f"lakeFS metadata file {name}: {detail}".split()))


def _uvarint(buf: bytes, i: int) -> tuple[int, int]:
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    result, shift = b & 0x7F, 7
    while True:
        i += 1
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i + 1
        shift += 7
        if shift > 63:
            raise _Corrupt(f"varint longer than 10 bytes at {i}")


def _handle(buf: bytes, i: int) -> tuple[tuple[int, int], int]:
    offset, i = _uvarint(buf, i)
    size, i = _uvarint(buf, i)
    return (offset, size), i


def _mask(crc: int) -> int:
    """RocksDB stores CRCs masked, so a CRC computed over bytes holding CRCs is not trivially related."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _block(data: bytes, handle: tuple[int, int], end: int) -> bytes:
    """The block's contents once its checksum holds; `end` is where blocks stop (the footer)."""
    offset, size = handle
    stop = offset + size + BLOCK_TRAILER
    if stop > end:
        raise _Corrupt(f"block at offset {offset} ({size} bytes) runs past the end of the blocks ({end})")
    body = data[offset : offset + size + 1]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if _mask(google_crc32c.value(body)) != stored:
        raise _Corrupt(f"block checksum mismatch at offset {offset}")
    compression = body[-1]
    if compression == 0:
        return body[:-1]
    if compression == 1:
        try:
            return bytes(cramjam.snappy.decompress_raw(body[:-1]))
        except cramjam.DecompressionError as e:
            raise _Corrupt(f"block at offset {offset} is not valid Snappy: {e}") from None
    raise _Corrupt(f"block at offset {offset} uses compression type {compression} (only none and Snappy are read)")


def _entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """Entries share a prefix with the one before; restart points begin with a whole key."""
    n = len(block)
    if n < 4:
        raise _Corrupt(f"block of {n} bytes has no restart count")
    (restarts,) = struct.unpack_from("<I", block, n - 4)
    end = n - 4 - 4 * restarts
    if restarts == 0 or end < 0:
        raise _Corrupt(f"block of {n} bytes claims {restarts} restart points")
    points = struct.unpack_from(f"<{restarts}I", block, end)
    if points[0] != 0 or any(p >= end for p in points[1:]):
        raise _Corrupt("block restart points lie outside its entries")
    out: list[tuple[bytes, bytes]] = []
    key, i = b"", 0
    while i < end:
        shared, i = _uvarint(block, i)
        unshared, i = _uvarint(block, i)
        length, i = _uvarint(block, i)
        k_end = i + unshared
        v_end = k_end + length
        if shared > len(key) or v_end > end:
            raise _Corrupt(f"block entry at {i} overruns its block")
        key = key[:shared] + block[i:k_end] if shared else block[i:k_end]
        out.append((key, block[k_end:v_end]))
        i = v_end
    return out


def _footer(data: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    if len(data) < 8:
        raise _Corrupt(f"{len(data)} bytes is too short for an SSTable")
    (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
    if magic == LEVELDB_MAGIC:
        raise _Corrupt("not a RocksDB/Pebble SSTable (LevelDB table?)")
    if magic != MAGIC or len(data) < FOOTER_SIZE:
        raise _Corrupt("not a RocksDB/Pebble SSTable (no footer magic at its end: truncated or another format)")
    footer = data[-FOOTER_SIZE:]
    (version,) = struct.unpack_from("<I", footer, 41)
    if footer[0] != CRC32C or version != FORMAT_VERSION:
        raise _Corrupt(
            f"SSTable format version {version} with checksum type {footer[0]}"
            f" (only version {FORMAT_VERSION} with CRC32C is read)"
        )
    metaindex, i = _handle(footer, 1)
    index, i = _handle(footer, i)
    if i > 41 or any(footer[i:41]):
        raise _Corrupt("footer block handles are malformed")
    return metaindex, index


def _properties(block: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    user: dict[str, str] = {}
    own: dict[str, bytes] = {}
    for raw_key, value in _entries(block):
        key = raw_key.decode("utf-8", "surrogateescape")
        if key.startswith(OWN_PREFIXES):
            own[key] = value
        else:
            user[key] = value.decode("utf-8", "surrogateescape")
    return user, own


def _index_handles(data: bytes, index: tuple[int, int], end: int, two_level: bool) -> tuple[list, list]:
    """The data blocks' handles, and the index partitions' handles (also blocks of the file)."""
    tops = [_handle(value, 0)[0] for _, value in _entries(_block(data, index, end))]
    if not two_level:
        return tops, []
    handles = [_handle(value, 0)[0] for top in tops for _, value in _entries(_block(data, top, end))]
    return handles, tops


def _records(data: bytes, handles: list[tuple[int, int]], end: int) -> tuple[tuple[bytes, bytes], ...]:
    out: list[tuple[bytes, bytes]] = []
    previous = None
    for handle in handles:
        for key, value in _entries(_block(data, handle, end)):
            if len(key) < 8:
                raise _Corrupt(f"internal key of {len(key)} bytes in the block at offset {handle[0]}")
            kind = key[-8]
            user_key = key[:-8]
            if kind != KIND_SET:
                raise _Corrupt(f"record of kind {kind} at key {user_key!r} (a lakeFS file holds SET records only)")
            if previous is not None and user_key <= previous:
                raise _Corrupt(f"keys out of order at {user_key!r} in the block at offset {handle[0]}")
            previous = user_key
            out.append((user_key, value))
    return tuple(out)


def _check_count(own: dict[str, bytes], found: int) -> None:
    """The entry count RocksDB keeps includes range deletions, which live in their own meta block."""
    if "rocksdb.num.entries" not in own:
        return
    expected = _uvarint(own["rocksdb.num.entries"], 0)[0]
    if "rocksdb.num.range-deletions" in own:
        expected -= _uvarint(own["rocksdb.num.range-deletions"], 0)[0]
    if expected != found:
        raise _Corrupt(f"{found} records where its properties count {expected}")


def _check_tiling(blocks: list[tuple[int, int]], end: int) -> None:
    """Blocks laid end to end from 0 to the footer: no byte of the file escapes a checksum."""
    at = 0
    for offset, size in sorted(blocks):
        if offset != at:
            raise _Corrupt(f"bytes {at}..{offset} belong to no block")
        at = offset + size + BLOCK_TRAILER
    if at != end:
        raise _Corrupt(f"bytes {at}..{end} belong to no block")


def _decode(data: bytes) -> SSTable:
    metaindex, index = _footer(data)
    end = len(data) - FOOTER_SIZE
    meta = {key: _handle(value, 0)[0] for key, value in _entries(_block(data, metaindex, end))}
    for handle in meta.values():
        _block(data, handle, end)  # filters and the like are not read, but their bytes are checked
    user, own = _properties(_block(data, meta[PROPERTIES_BLOCK], end)) if PROPERTIES_BLOCK in meta else ({}, {})
    index_type = struct.unpack("<I", own[INDEX_TYPE])[0] if INDEX_TYPE in own else 0
    if index_type > TWO_LEVEL_INDEX:
        raise _Corrupt(f"index type {index_type} is not a one- or two-level index")
    handles, partitions = _index_handles(data, index, end, index_type == TWO_LEVEL_INDEX)
    records = _records(data, handles, end)
    _check_count(own, len(records))
    _check_tiling([*handles, *partitions, index, metaindex, *meta.values()], end)
    return SSTable(records=records, properties=user, table_properties=own)


def read_sstable(data: bytes, name: str) -> SSTable:
    """Every decoding failure, whatever Python raises for it, becomes one line naming the file."""
    try:
        return _decode(bytes(data))
    except _Corrupt as e:
        raise _fail(name, str(e)) from None
    except (IndexError, struct.error, ValueError, OverflowError) as e:
        raise _fail(name, f"malformed SSTable ({type(e).__name__}: {e})") from None


def _int64(value: int) -> bytes:
    return b"\x02\x08" + struct.pack(">q", value)


def _string(value: bytes) -> bytes:
    return b"\x01" + _int64(len(value)) + value


def lakefs_id(table: SSTable) -> str:
    """lakeFS names a file by the hash of its records and of the properties it set before closing it,
    so an id that does not match means the file is not what the commit points at."""
    h = hashlib.sha256()
    parts: list[bytes] = []
    for key, value in table.records:
        parts += (b"%d" % len(key), key, b"|", b"%d" % len(value), value, b"|")
        if len(parts) > 6000:
            h.update(b"".join(parts))
            parts.clear()
    h.update(b"".join(parts))
    hashed = sorted(
        (k.encode("utf-8", "surrogateescape"), v.encode("utf-8", "surrogateescape"))
        for k, v in table.properties.items()
        if k not in UNHASHED
    )
    h.update(b"\x04" + _int64(len(hashed)) + b"".join(_string(k) + _string(v) for k, v in hashed))
    return h.hexdigest()


def read_lakefs_file(data: bytes, file_id: str, kind: str | None = None) -> SSTable:
    """A range or metarange read only once it is proven to be the file its id names."""
    table = read_sstable(data, file_id)
    actual = lakefs_id(table)
    if actual != file_id.lower():
        raise _fail(file_id, f"does not hash to its id (its contents hash to {actual})")
    stored = table.properties.get("type")
    if kind is not None and stored is not None and stored != kind:
        raise _fail(file_id, f"is a file of {stored}, where {kind} were expected")
    return table
