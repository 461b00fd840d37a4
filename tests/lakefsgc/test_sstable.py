"""lakeFS's metadata files read to exactly what lakeFS wrote, and a damaged or foreign file never reads.

The fixtures are lakeFS's and Pebble's own files (kept in the shared folder beside the project, not in
it); larger and unusual files are written at test time by RocksDB itself (`sstwriter`)."""

from __future__ import annotations

import random
import struct
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.lakefs_sst import MODIFIED, entry_value, frame, write_metarange, write_range, write_sstable

from lakegc.lakefs.entries import Entry, RangeRef, metarange_ranges, range_entries
from lakegc.lakefs.sstable import SSTableError, lakefs_id, read_lakefs_file, read_sstable

ROOT = Path(__file__).resolve().parents[2]
RANGE_ID = "a83af763ba098c15369d9d6d723731eb9ce18b8dfac4f88c6f1287e772393d0e"
METARANGE_ID = "732d4016245c5547113e0cd0f1a588fc55e36c21f460ac670cca4396922f5c11"
OK1_ID = "0e4c319008ebb087332f165559960f7e53d32e9331c8338e147239fd008bd662"
BIG_ID = "56569996e174e06211632b143e7160a003e107c30790e1bd7267f3f227a06159"
PEBBLE = [
    "h.block-bloom.no-compression.sst",
    "h.no-compression.sst",
    "h.no-compression.two_level_index.sst",
    "h.sst",
    "h.table-bloom.no-compression.prefix_extractor.no_whole_key_filter.sst",
    "h.table-bloom.no-compression.sst",
    "h.table-bloom.sst",
]


def _main_checkout_parent() -> Path | None:
    """In a git worktree the shared folder sits beside the main checkout, not beside the worktree."""
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return Path(common).parent.parent


def fixtures_dir() -> Path:
    first = ROOT.parent / "shared" / "fixtures" / "lakefs-sstables"
    candidates = [first]
    if (beside_main := _main_checkout_parent()) is not None:
        candidates.append(beside_main / "shared" / "fixtures" / "lakefs-sstables")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    pytest.skip(f"lakeFS fixtures not found at {first}: the shared folder beside the project holds them")


def fixture(name: str) -> bytes:
    folder = "pebble" if name.startswith("h.") else "lakefs"
    return (fixtures_dir() / folder / name).read_bytes()


def refused(data: bytes, name: str = "the-file") -> str:
    with pytest.raises(SSTableError) as caught:
        read_sstable(data, name)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"lakeFS metadata file {name}: "), message
    return message


def test_lakefs_range_reads_to_its_two_entries_and_hashes_to_its_id():
    table = read_lakefs_file(fixture("range.sst"), RANGE_ID, "ranges")
    assert table.properties["type"] == "ranges" and lakefs_id(table) == RANGE_ID
    entries = list(range_entries(table, RANGE_ID))
    assert [(e.path, e.address, e.size, e.address_type) for e in entries] == [
        ("a/b/c/no", "b0c968736d8f42a2b1c6284835f08226", 11, 1),
        ("a/b/c/yes", "fdf87fcf9ec849f98514ddb7e041ad56", 4, 1),
    ]
    assert entries[0].last_modified is not None and entries[0].last_modified.tzinfo is UTC


def test_lakefs_metarange_points_at_the_range():
    table = read_lakefs_file(fixture("metarange.sst"), METARANGE_ID, "metaranges")
    assert [key for key, _ in table.records] == [b"a/b/c/yes"]
    assert list(metarange_ranges(table, METARANGE_ID)) == [RangeRef(RANGE_ID, "a/b/c/no", "a/b/c/yes", 1190, 2)]


def test_an_older_range_has_no_address_type():
    table = read_lakefs_file(fixture("ok1.sst"), OK1_ID, "ranges")
    entries = list(range_entries(table, OK1_ID))
    assert len(entries) == 105 and entries[0].path == "first"
    assert entries[0].address == "4e068d1a46734113abd2218e87aace4c" and entries[0].address_type is None


def test_an_imported_range_with_a_two_level_index():
    table = read_lakefs_file(fixture("56569996.sst"), BIG_ID, "ranges")
    assert table.table_properties["rocksdb.block.based.table.index.type"] == struct.pack("<I", 2)
    entries = list(range_entries(table, BIG_ID))
    full = [e for e in entries if e.address_type == 2]
    assert len(entries) == 13_868 and len(full) == 13_867
    assert all(e.address.startswith("s3://oz-repo/") for e in full)
    assert [e.address_type for e in entries if e.address_type != 2] == [1]


@pytest.mark.parametrize("name", PEBBLE)
def test_pebble_tables_read_to_the_listed_pairs(name):
    listed = [line.split() for line in (fixtures_dir() / "pebble" / "h.txt").read_text().splitlines()]
    expected = [(key.encode(), value.encode()) for value, key in listed]
    assert len(expected) == 1_710
    assert list(read_sstable(fixture(name), name).records) == expected


def test_a_leveldb_table_is_refused_as_such():
    message = refused(fixture("h.ldb"), "h.ldb")
    assert message == "lakeFS metadata file h.ldb: not a RocksDB/Pebble SSTable (LevelDB table?)"


@pytest.mark.parametrize("name", ["range.sst", "metarange.sst"])
def test_any_flipped_byte_is_refused(name):
    """Every byte is under a checksum or checked (the footer), so no single flip reads."""
    data = fixture(name)
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        refused(bytes(damaged), name)


def _footer_offsets(data: bytes) -> list[int]:
    """Where the footer says the metaindex and the index blocks start."""
    offsets, value, shift = [], 0, 0
    for byte in data[-52:]:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            offsets.append(value)
            value = shift = 0
    return offsets[0:4:2]


def test_flipped_bytes_in_each_part_of_a_large_table_are_refused():
    data = fixture("56569996.sst")
    metaindex, index = _footer_offsets(data)
    blocks = [10, len(data) // 2, metaindex + 3, index + 3]
    footer = [len(data) - n for n in (53, 52, 48, 30, 12, 3)]  # checksum type, handles, padding, version, magic
    for at in blocks + footer:
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        message = refused(bytes(damaged), BIG_ID)
        assert at not in blocks or "checksum mismatch" in message, (at, message)
    assert "checksum mismatch at offset 0" in refused(bytes([data[0] ^ 1]) + data[1:])


def test_a_truncated_file_is_refused():
    data = fixture("ok1.sst")
    for length in [0, 1, 7, 8, 52, 53, 54, 100, len(data) // 2, len(data) - 54, len(data) - 53, len(data) - 1]:
        refused(data[:length])
    assert "truncated" in refused(data[:-1])


def test_garbage_is_refused():
    rng = random.Random(7)
    tail = fixture("range.sst")[-53:]
    for size in [1, 100, 5000]:
        noise = bytes(rng.randrange(256) for _ in range(size))
        refused(noise)
        refused(noise + tail)  # a believable footer over nonsense blocks


def test_a_file_that_is_not_its_id_is_refused():
    with pytest.raises(SSTableError, match="does not hash to its id"):
        read_lakefs_file(fixture("range.sst"), METARANGE_ID)
    with pytest.raises(SSTableError, match=f"{RANGE_ID}: is a file of ranges, where metaranges were expected"):
        read_lakefs_file(fixture("range.sst"), RANGE_ID, "metaranges")


def _entries(n: int) -> list[tuple[str, str, int, int]]:
    return [(f"data/part-{i:07d}.parquet", f"s3://bucket/t/part-{i:07d}.parquet", i * 7, i % 3) for i in range(n)]


@pytest.mark.parametrize("compression", [True, False])
def test_rocksdb_ranges_read_back(compression):
    written = _entries(500)
    range_id, data = write_range(list(reversed(written)), compression=compression)
    table = read_lakefs_file(data, range_id)
    assert table.properties == {} and table.table_properties["rocksdb.num.entries"] == bytes([0xF4, 0x03])
    modified = datetime.fromtimestamp(MODIFIED, UTC)
    assert [(e.path, e.address, e.size, e.address_type, e.last_modified) for e in range_entries(table, range_id)] == [
        (path, address, size, kind or None, modified) for path, address, size, kind in written
    ]
    assert write_range(written, compression=compression)[0] == range_id


def test_a_large_rocksdb_range_with_a_partitioned_index_reads_back_quickly():
    written = _entries(50_000)
    range_id, data = write_range(written, two_level=True)
    started = time.perf_counter()
    table = read_lakefs_file(data, range_id)
    entries = list(range_entries(table, range_id))
    elapsed = time.perf_counter() - started
    assert table.table_properties["rocksdb.block.based.table.index.type"] == struct.pack("<I", 2)
    assert [e.address for e in entries] == [address for _, address, _, _ in written]
    assert elapsed < 5, f"reading a 50,000-entry range took {elapsed:.2f}s"


def test_rocksdb_metaranges_read_back():
    ranges = [(f"{i:064x}", f"k{i:03d}a", f"k{i:03d}z", i + 1, 1000 * i) for i in range(40)]
    metarange_id, data = write_metarange(ranges)
    table = read_lakefs_file(data, metarange_id)
    assert list(metarange_ranges(table, metarange_id)) == [RangeRef(*r[:3], r[4], r[3]) for r in ranges]


def test_a_deletion_record_is_refused():
    data = write_sstable([(b"a", entry_value("x", 1, 1)), (b"b", None)])
    assert "record of kind 0 at key b'b'" in refused(data)


@pytest.mark.parametrize(
    "value",
    [b"", b"\x02", frame(b"id", b"\x0a\x05abc"), frame(b"id", b"\x0b"), frame(b"id", b"\x0a\x02\xff\xfe")],
)
def test_a_malformed_value_is_refused_naming_the_file(value):
    table = read_sstable(write_sstable([(b"k", value)]), "f")
    with pytest.raises(SSTableError, match=r"^lakeFS metadata file f: record b'k': ") as caught:
        list(range_entries(table, "f"))
    assert "\n" not in str(caught.value)


def test_unknown_fields_are_skipped():
    data = b"\x0a\x01a" + b"\x41" + bytes(8) + b"\x4d" + bytes(4) + b"\x52\x02zz" + b"\x58\x05" + b"\x18\x03"
    table = read_sstable(write_sstable([(b"k", frame(b"", data))]), "f")
    assert list(range_entries(table, "f")) == [Entry("k", "a", 3, "", None, None)]
