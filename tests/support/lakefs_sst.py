"""Writes lakeFS-format ranges and metaranges for tests and benchmarks, through RocksDB's own writer.

RocksDB (rocksdict's `SstFileWriter`) rather than a writer of ours, so the reader is checked against
an independent implementation of the format. rocksdict has no way to add user properties (no table
property collectors), so these files carry no `type`, min/max key or count: their ids are lakeFS's
formula over the records and an empty property map, computed by reading the written bytes back.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import rocksdict

from lakegc.lakefs.sstable import lakefs_id, read_sstable

MODIFIED = 1_700_000_000  # every entry's last_modified, in Unix seconds


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _varint_field(number: int, value: int) -> bytes:
    """proto3 leaves zero values out, so an address type of 0 reads back as absent."""
    return _varint(number << 3) + _varint(value & (1 << 64) - 1) if value else b""


def frame(identity: bytes, data: bytes) -> bytes:
    """lakeFS's value: zigzag-varint length and identity, zigzag-varint length and data."""
    return _varint(len(identity) << 1) + identity + _varint(len(data) << 1) + data


_TIMESTAMP = _bytes_field(2, _varint_field(1, MODIFIED))


def entry_value(address: str, size: int, address_type: int) -> bytes:
    etag = hashlib.md5(address.encode()).hexdigest().encode()
    data = b"".join(
        (
            _bytes_field(1, address.encode()),
            _TIMESTAMP,
            _varint_field(3, size),
            _bytes_field(4, etag),
            _varint_field(6, address_type),
        )
    )
    return frame(hashlib.sha256(data).digest(), data)


def range_value(range_id: str, min_key: str, max_key: str, count: int, est_size: int) -> bytes:
    data = b"".join(
        (
            _bytes_field(1, min_key.encode()),
            _bytes_field(2, max_key.encode()),
            _varint_field(3, est_size),
            _varint_field(4, count),
        )
    )
    return frame(range_id.encode(), data)


def _options(compression: bool, two_level: bool) -> rocksdict.Options:
    options = rocksdict.Options(raw_mode=True)
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(2)
    table.set_checksum_type(rocksdict.ChecksumType.crc32c())
    if two_level:
        table.set_index_type(rocksdict.BlockBasedIndexType.two_level_index_search())
        table.set_metadata_block_size(1024)  # small index partitions, so there are many
    options.set_block_based_table_factory(table)
    none = rocksdict.DBCompressionType.none()
    options.set_compression_type(rocksdict.DBCompressionType.snappy() if compression else none)
    return options


def write_sstable(
    records: list[tuple[bytes, bytes | None]], *, compression: bool = True, two_level: bool = False
) -> bytes:
    """The bytes of an SSTable of `records` (sorted here, a None value a deletion); SstFileWriter
    only writes to a path."""
    with tempfile.TemporaryDirectory(prefix="lakegc-sst-") as folder:
        path = str(Path(folder) / "table.sst")
        writer = rocksdict.SstFileWriter(_options(compression, two_level))
        writer.open(path)
        for key, value in sorted(records, key=lambda record: record[0]):
            if value is None:
                del writer[key]
            else:
                writer[key] = value
        writer.finish()
        return Path(path).read_bytes()


def _identified(data: bytes) -> tuple[str, bytes]:
    return lakefs_id(read_sstable(data, "written by rocksdict")), data


def write_range(entries: list[tuple[str, str, int, int]], **options: bool) -> tuple[str, bytes]:
    """(path, address, size, address type) each; returns the range's lakeFS id and bytes."""
    records = [(path.encode(), entry_value(address, size, kind)) for path, address, size, kind in entries]
    return _identified(write_sstable(records, **options))


def write_metarange(ranges: list[tuple[str, str, str, int, int]], **options: bool) -> tuple[str, bytes]:
    """(range id, min key, max key, count, estimated size) each, keyed by max key as lakeFS does."""
    records = [(hi.encode(), range_value(rid, lo, hi, count, size)) for rid, lo, hi, count, size in ranges]
    return _identified(write_sstable(records, **options))
