"""`gc run --inventory MANIFEST` (lakegc.repogc.inventory): a run that reads
the namespace from an S3 Inventory instead of listing it must delete exactly what a plain run
deletes, and nothing an inventory says (stale, tampered, of another namespace, naming `_lakegc/`
or keys that climb out) may make it delete more.

(a) Pure decisions: which slices are listed directly, which rows are kept, where data files are,
    when an inventory is too old, what a manifest must hold.
(b) Runs on a fake clock (slices only close an hour after they open): CSV and Parquet inventories
    against a plain run on the same state, objects written after the inventory, objects gone since,
    tampered rows, hostile keys, an incremental run, an S3 namespace on a loopback S3 server.
(c) Refusals through the CLI: one `error:` line, exit 1, nothing deleted, and for everything wrong
    with the manifest itself, no run recorded.

Inventories are written here as S3 writes them: gzip'd CSV without a header (keys URL-encoded, a
space as `+`) or Parquet, a `manifest.json` with `creationTimestamp` in epoch milliseconds.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import Bucket, one_error, snapshot

import lakegc.cli.main  # noqa: F401  (loaded before the clock fixture patches every lakegc module)
import lakegc.repogc.job  # noqa: F401
import lakegc.repogc.lease  # noqa: F401
import lakegc.timeutil
from lakegc.engine.runs import MetastoreRunLog, Run
from lakegc.errors import InvalidArgument, LakegcError
from lakegc.repo.repository import Lake, Repository
from lakegc.repo.slices import SliceWindow, slice_name
from lakegc.repogc.inventory import INVENTORY_MARGIN, keep_rows, lists_marker, must_list, present
from lakegc.repogc.inventory_format import (
    Format,
    Inventory,
    as_raw,
    check_age,
    check_source,
    data_location,
    parse_manifest,
    schema_fields,
)
from lakegc.repogc.job import GcOptions, run_gc
from lakegc.storage import ObjectInfo

HOUR = timedelta(hours=1)
MIN_AGE = 2 * HOUR
OPTIONS = GcOptions(min_age=MIN_AGE, default_cutoff="1", clean=True)  # c1 expires: only HEAD's commit stays
CSV_FIELDS = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass"
PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (UTF8); required binary key (UTF8); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP_MILLIS); "
    "optional binary e_tag (UTF8); optional binary storage_class (UTF8);}"
)


# ================================================================================================
# The fake clock
# ================================================================================================

_real_utcnow = lakegc.timeutil.utcnow


class Clock:
    """A fake `utcnow`: whole seconds, a day ahead of real time (files written for real are in its
    past), moving only when told."""

    def __init__(self) -> None:
        self.now = (_real_utcnow() + timedelta(days=1)).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    for name, module in list(sys.modules.items()):
        if name.startswith("lakegc") and getattr(module, "utcnow", None) is _real_utcnow:
            monkeypatch.setattr(module, "utcnow", fake)
    return fake


# ================================================================================================
# Inventories, written as S3 writes them
# ================================================================================================


@dataclass
class Row:
    key: str
    size: int
    mtime: datetime
    bucket: str = ""
    encoded: str | None = None  # the key as written in a CSV, when not simply URL-encoded


def rows_of_folder(ns: Path) -> list[Row]:
    """Every regular file of a folder namespace (symlinks are no objects), as an inventory lists it."""
    out = []
    for folder, _, files in os.walk(ns):
        for name in files:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                out.append(
                    Row(
                        path.relative_to(ns).as_posix(),
                        st.st_size,
                        datetime.fromtimestamp(st.st_mtime_ns // 1_000_000 / 1000, UTC),
                    )
                )
    return sorted(out, key=lambda r: r.key)


def csv_gz(rows: Iterable[Row], encode: Callable[[str], str] = lambda k: quote_plus(k, safe="/")) -> bytes:
    lines = [
        ",".join(
            f'"{v}"'
            for v in (
                r.bucket,
                r.encoded or encode(r.key),
                r.size,
                r.mtime.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "d41d8cd98f00b204e9800998ecf8427e",
                "STANDARD",
            )
        )
        for r in rows
    ]
    return gzip.compress("".join(line + "\n" for line in lines).encode())


def parquet(rows: Iterable[Row]) -> bytes:
    rows = list(rows)
    table = pa.table(
        {
            "bucket": pa.array([r.bucket for r in rows], pa.string()),
            "key": pa.array([r.key for r in rows], pa.string()),
            "size": pa.array([r.size for r in rows], pa.int64()),
            "last_modified_date": pa.array([r.mtime for r in rows], pa.timestamp("ms", tz="UTC")),
            "e_tag": pa.array(["x"] * len(rows), pa.string()),
            "storage_class": pa.array(["STANDARD"] * len(rows), pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def manifest_doc(
    fmt: str, created: datetime, files: dict[str, bytes], *, source: str = "", destination: str = ""
) -> dict[str, Any]:
    return {
        "sourceBucket": source,
        "destinationBucket": destination,
        "version": "2016-11-30",
        "creationTimestamp": str(int(created.timestamp() * 1000)),
        "fileFormat": fmt,
        "fileSchema": CSV_FIELDS if fmt == "CSV" else PARQUET_SCHEMA,
        "files": [
            {"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()} for key, body in files.items()
        ],
    }


def write_inventory(
    folder: Path,
    fmt: str,
    rows: list[Row],
    created: datetime,
    *,
    source: str = "",
    beside: bool = True,
    **doc_changes: Any,
) -> Path:
    """A local inventory in two data files: beside the manifest (keys relative to its folder), or
    laid out as in a destination bucket (`beside=False`: destinationBucket names the folder, keys
    are `src/config/data/...` under it, the manifest in `src/config/<date>/`)."""
    encode = csv_gz if fmt == "CSV" else parquet
    ext = "csv.gz" if fmt == "CSV" else "parquet"
    half = len(rows) // 2
    bodies = [encode(rows[:half]), encode(rows[half:])]
    stamp = created.strftime("%Y-%m-%dT%H-%MZ")
    if beside:
        where, keys, destination = folder / stamp, [f"part-{i}.{ext}" for i in range(2)], ""
        paths = [where / k for k in keys]
    else:
        where, destination = folder / "src" / "cfg" / stamp, folder.as_uri()
        keys = [f"src/cfg/data/part-{i}.{ext}" for i in range(2)]
        paths = [folder / k for k in keys]
    for path, body in zip(paths, bodies):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    doc = {**manifest_doc(fmt, created, dict(zip(keys, bodies)), source=source, destination=destination), **doc_changes}
    where.mkdir(parents=True, exist_ok=True)
    (where / "manifest.json").write_text(json.dumps(doc))
    return where / "manifest.json"


# ================================================================================================
# (a) pure decisions
# ================================================================================================

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_slices_an_object_may_have_landed_in_since_the_inventory_are_listed_directly():
    taken = T0 + 10 * HOUR
    since = taken - INVENTORY_MARGIN
    old, at_edge, late, newer = (
        slice_name(T0),
        slice_name(T0 + HOUR),
        slice_name(T0 + 2 * HOUR),
        slice_name(taken + HOUR),
    )
    windows = {
        old: SliceWindow(old, T0, T0 + HOUR),  # closed long before: the inventory has it all
        at_edge: SliceWindow(at_edge, T0 + HOUR, since),  # a write at the margin's edge may be missing
        late: SliceWindow(late, T0 + 2 * HOUR, taken + 3 * HOUR),  # a token still writable after it
        newer: SliceWindow(newer, taken + HOUR, taken + HOUR),  # opened after it
        "v1": SliceWindow("v1", T0, None),  # a window from before schema v2: unknown
    }
    names = [newer, late, at_edge, old, "v1", "unknown-to-the-metastore", slice_name(taken)]
    assert must_list(names, windows, taken) == [
        newer,
        late,
        at_edge,
        "v1",
        "unknown-to-the-metastore",
        slice_name(taken),
    ]
    just_before = SliceWindow(at_edge, T0 + HOUR, since - timedelta(microseconds=1))
    assert must_list([at_edge], {at_edge: just_before}, taken) == []
    # a name says the slice opened after the inventory even when its recorded window says otherwise
    renamed = slice_name(taken)
    assert must_list([renamed], {renamed: SliceWindow(renamed, T0, T0)}, taken) == [renamed]


def raw_rows(*rows: tuple[str | None, str | None, int | None, datetime | None]) -> pa.RecordBatch:
    return as_raw(
        {
            "bucket": pa.array([r[0] for r in rows], pa.string()),
            "key": pa.array([r[1] for r in rows], pa.string()),
            "size": pa.array([r[2] for r in rows], pa.int64()),
            "mtime": pa.array([r[3] for r in rows], pa.timestamp("ms", tz="UTC")),
        }
    )


@pytest.mark.parametrize(
    "row_bucket, bucket, prefix, key, kept",
    [
        ("", "", "", "data/s1/obj", True),
        ("", "", "", "data/s1/sub/obj", True),  # a slice is listed recursively
        ("", "", "", "data/s2/obj", False),  # a slice listed directly: its rows are not taken twice
        ("", "", "", "stray-at-root", False),  # the root is always listed directly
        ("", "", "", "_lakegc/repository.json", False),
        ("", "", "", "_lakegc/gc/r/summary.json", False),
        ("", "", "", "other/data/s1/obj", False),
        ("", "", "", "data/s1/../../_lakegc/repository.json", False),
        ("", "", "", "data/s1/./obj", False),
        ("", "", "", "data/s1//obj", False),
        ("", "", "", "data/s1/", False),
        ("", "", "", "/data/s1/obj", False),
        ("", "", "", "data/s1/ob\x00j", False),
        (None, "", "", "data/s1/obj", True),  # Parquet leaves an empty bucket null
        ("elsewhere", "", "", "data/s1/obj", False),  # another bucket's row
        ("b", "b", "lake/", "lake/data/s1/obj", True),
        ("b", "b", "lake/", "lake2/data/s1/obj", False),  # beside the namespace, not in it
        ("b", "b", "lake/", "data/s1/obj", False),
        ("b", "b", "lake/", "lake/_lakegc/repository.json", False),
        ("", "b", "lake/", "lake/data/s1/obj", False),  # the namespace's bucket is b
    ],
)
def test_only_addressable_keys_of_the_slices_the_inventory_stands_for_are_kept(row_bucket, bucket, prefix, key, kept):
    out = keep_rows(raw_rows((row_bucket, key, 5, T0)), bucket, prefix, pa.array(["s1"]), T0)
    assert out.to_pylist() == (
        [{"address": key[len(prefix) :], "size": 5, "mtime": T0, "slice": "s1", "young": True}] if kept else []
    )


def test_rows_without_size_or_date_and_versions_that_are_not_current_are_not_objects():
    batch = as_raw(
        {
            "bucket": pa.array(["", "", "", "", ""]),
            "key": pa.array([f"data/s1/{i}" for i in range(5)]),
            "size": pa.array([1, None, 1, 1, 1], pa.int64()),
            "mtime": pa.array([T0, T0, None, T0, T0], pa.timestamp("ms", tz="UTC")),
            "is_latest": pa.array([True, True, True, False, True]),
            "is_delete_marker": pa.array([False, False, False, False, True]),
        }
    )
    out = keep_rows(batch, "", "", pa.array(["s1"]), T0 + HOUR)
    assert out.to_pylist() == [{"address": "data/s1/0", "size": 1, "mtime": T0, "slice": "s1", "young": False}]


MARKER_AT = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "listed, ok",
    [
        (("", "_lakegc/repository.json", 50, MARKER_AT.replace(microsecond=123000)), True),  # S3's milliseconds
        (("", "_lakegc/repository.json", 50, MARKER_AT.replace(microsecond=0)), True),  # a writer giving seconds
        (("", "_lakegc/repository.json", 50, MARKER_AT.replace(microsecond=124000)), False),  # another marker's date
        (("", "_lakegc/repository.json", 50, MARKER_AT + timedelta(seconds=1)), False),
        (("", "_lakegc/repository.json", 51, MARKER_AT), False),  # another size
        (("other", "_lakegc/repository.json", 50, MARKER_AT), False),
        (("", "lake/_lakegc/repository.json", 50, MARKER_AT), False),  # another namespace's marker in the bucket
        (("", "data/s1/_lakegc/repository.json", 50, MARKER_AT), False),
    ],
)
def test_the_namespace_marker_is_recognised_only_as_it_is(listed, ok):
    marker = ObjectInfo("_lakegc/repository.json", 50, MARKER_AT)
    assert lists_marker(raw_rows(listed), "", "", marker) is ok


@pytest.mark.parametrize(
    "key, manifest, destination, location",
    [
        ("part-0.csv.gz", "file:///inv/2030/manifest.json", "", "file:///inv/2030/part-0.csv.gz"),
        ("../data/part-0.csv.gz", "file:///inv/2030/manifest.json", "", "file:///inv/data/part-0.csv.gz"),
        ("/abs/part.csv.gz", "file:///inv/2030/manifest.json", "", "file:///abs/part.csv.gz"),
        (
            "src/cfg/data/p.csv.gz",
            "file:///inv/src/cfg/2030/manifest.json",
            "file:///inv",
            "file:///inv/src/cfg/data/p.csv.gz",
        ),
        ("src/cfg/data/p.csv.gz", "file:///m/manifest.json", "/inv", "file:///inv/src/cfg/data/p.csv.gz"),
        (
            "src/cfg/data/p.csv.gz",
            "s3://inv/src/cfg/2030/manifest.json",
            "arn:aws:s3:::dest",
            "s3://dest/src/cfg/data/p.csv.gz",
        ),
        ("src/cfg/data/p.csv.gz", "file:///m/manifest.json", "arn:aws:s3:::dest", "s3://dest/src/cfg/data/p.csv.gz"),
        ("src/cfg/data/p.csv.gz", "s3://inv/src/cfg/2030/manifest.json", "", "s3://inv/src/cfg/data/p.csv.gz"),
        ("x/p.parquet", "s3://inv/m.json", "s3://dest", "s3://dest/x/p.parquet"),
    ],
)
def test_data_files_are_keys_of_the_destination_or_paths_beside_the_manifest(key, manifest, destination, location):
    assert data_location(key, manifest, destination) == location


@pytest.mark.parametrize(
    "key, destination, needle",
    [
        ("a/../../b.csv.gz", "arn:aws:s3:::dest", "invalid"),
        ("p.csv.gz", "dest-bucket", "destinationbucket"),
    ],
)
def test_data_file_keys_that_cannot_be_located_are_refused(key, destination, needle):
    with pytest.raises(InvalidArgument, match=f"(?i){needle}"):
        data_location(key, "s3://inv/m.json", destination)


def inventory(created: datetime = T0, source: str = "") -> Inventory:
    return Inventory("file:///inv/manifest.json", source, created, Format.CSV, ("Bucket", "Key"), ())


def test_an_inventory_older_than_min_age_is_refused_and_one_exactly_that_old_is_not():
    check_age(inventory(T0), T0 + 24 * HOUR, 24 * HOUR)
    with pytest.raises(InvalidArgument, match=r"1d ago: older than --min-age 23h 59m"):
        check_age(inventory(T0), T0 + 24 * HOUR, 24 * HOUR - timedelta(seconds=1))
    check_age(inventory(T0 + timedelta(minutes=5)), T0, HOUR)  # clocks differ a little
    with pytest.raises(InvalidArgument, match="in the future"):
        check_age(inventory(T0 + timedelta(minutes=5, seconds=1)), T0, HOUR)


@pytest.mark.parametrize(
    "source, namespace, ok",
    [
        ("", "file:///lake/ns", True),
        ("/lake/ns", "file:///lake/ns", True),
        ("file:///lake/ns/", "file:///lake/ns", True),
        ("local:///lake/ns", "file:///lake/ns", True),
        ("/lake/other", "file:///lake/ns", False),
        ("bucket", "file:///lake/ns", False),
        ("bucket", "s3://bucket/lake", True),
        ("other", "s3://bucket/lake", False),
        ("", "s3://bucket/lake", False),
    ],
)
def test_an_inventory_of_another_bucket_or_folder_is_refused(source, namespace, ok):
    if ok:
        check_source(inventory(source=source), namespace)
    else:
        with pytest.raises(InvalidArgument, match="another namespace's inventory is refused"):
            check_source(inventory(source=source), namespace)


def test_file_schemas_give_their_field_names_in_order():
    assert schema_fields(CSV_FIELDS, Format.CSV) == (
        "Bucket",
        "Key",
        "Size",
        "LastModifiedDate",
        "ETag",
        "StorageClass",
    )
    assert schema_fields(PARQUET_SCHEMA, Format.PARQUET)[:4] == ("bucket", "key", "size", "last_modified_date")
    for bad, fmt in (("Bucket,, Key", Format.CSV), ("Key, Key", Format.CSV), ("bucket, key", Format.PARQUET)):
        with pytest.raises(InvalidArgument, match="is not a"):
            schema_fields(bad, fmt)


def test_a_manifest_parses_into_a_typed_value():
    doc = manifest_doc(
        "CSV", T0, {"d/a.csv.gz": b"12", "d/b.csv.gz": b"345"}, source="bucket", destination="arn:aws:s3:::dest"
    )
    got = parse_manifest(json.dumps(doc), "s3://dest/m/manifest.json")
    assert (got.source_bucket, got.created, got.format, got.fields[:2]) == ("bucket", T0, Format.CSV, ("Bucket", "Key"))
    assert [(f.location, f.size) for f in got.files] == [("s3://dest/d/a.csv.gz", 2), ("s3://dest/d/b.csv.gz", 3)]
    assert (
        parse_manifest(
            json.dumps({**doc, "fileFormat": "parquet", "fileSchema": PARQUET_SCHEMA}), "s3://dest/m.json"
        ).format
        is Format.PARQUET
    )


# ================================================================================================
# (b) runs on the fake clock
# ================================================================================================


@dataclass
class World:
    """A repository whose first slice is three hours old, with garbage of every kind in it:
    A1 (main's `a` in c1, which expires), D1 (a staged draft overwritten), a stray file at the root
    and a hand-written file whose name needs URL-encoding."""

    lake: Lake
    repo: Repository
    ns: Path
    root: Path
    clock: Clock
    spark: Any
    keys: dict[str, str]

    def upload(self, name: str, branch: str, path: str, data: bytes, when: datetime | None = None) -> str:
        key = self.keys[name] = self.repo.upload(branch, path, data).address
        self.touch(key, when or self.clock.now)
        return key

    def touch(self, key: str, when: datetime) -> None:
        os.utime(self.ns / key, (when.timestamp(), when.timestamp()))

    def write(self, name: str, key: str, data: bytes, when: datetime) -> str:
        """An object written into the namespace behind lakegc's back."""
        (self.ns / key).parent.mkdir(parents=True, exist_ok=True)
        (self.ns / key).write_bytes(data)
        self.touch(key, when)
        self.keys[name] = key
        return key

    def run(self, options: GcOptions = OPTIONS, **changes: Any) -> Run:
        return run_gc(self.lake, "repo", replace(options, **changes), spark=self.spark)

    def candidates(self, run: Run) -> dict[str, str]:
        return {r["address"]: r["reason"] for r in outputs(self.ns, run.run_id, "candidates")}

    def named(self, candidates: dict[str, str]) -> dict[str, str]:
        by_key = {key: name for name, key in self.keys.items()}
        return {by_key.get(key, key): reason for key, reason in candidates.items()}

    def take_inventory(self, fmt: str, **kwargs: Any) -> Path:
        """An inventory of the namespace as it is now, taken half an hour ago."""
        return write_inventory(
            self.root / "inventory", fmt, rows_of_folder(self.ns), self.clock.now - timedelta(minutes=30), **kwargs
        )


def without_runs(files: dict[str, Any]) -> dict[str, Any]:
    """A namespace snapshot without the runs' own outputs."""
    return {k: v for k, v in files.items() if not k.startswith("_lakegc/gc/")}


def outputs(ns: Path, run_id: str, name: str) -> list[dict[str, Any]]:
    return [
        row
        for part in sorted((ns / "_lakegc" / "gc" / run_id / name).rglob("*.parquet"))
        for row in pq.read_table(part).to_pylist()
    ]


GARBAGE = {"A1": "expired", "D1": "uncommitted", "stray": "uncommitted", "odd": "uncommitted"}


def build_world(root: Path, clock: Clock, spark: Any) -> World:
    lake = Lake(f"sqlite:///{root / 'lakegc.db'}")
    lake.create_repository("repo", str(root / "ns"))
    w = World(lake, lake.repository("repo"), root / "ns", root, clock, spark, {})
    w.upload("K", "main", "keep", b"kept forever")
    w.upload("A1", "main", "a", b"a version 1")
    w.repo.commit("main", "c1")
    w.upload("A2", "main", "a", b"a version 2!")
    w.repo.commit("main", "c2")
    w.upload("D1", "main", "draft", b"draft one")
    w.upload("D2", "main", "draft", b"draft two..")
    first = w.keys["K"].split("/")[1]
    w.write("stray", "stray.bin", b"at the root", clock.now)
    w.write("odd", f"data/{first}/my file+1 100%.bin", b"named by hand", clock.now)
    clock.advance(3 * HOUR)
    return w


@pytest.fixture
def world(tmp_path: Path, clock: Clock, spark: Any) -> World:
    return build_world(tmp_path, clock, spark)


def write_after_the_inventory(w: World) -> None:
    """N1 (overwritten by N2, and old enough to judge) and Y1 (overwritten, but young) land in a
    new slice after the inventory was taken."""
    w.upload("N1", "main", "new", b"new one", when=w.clock.now - 5 * HOUR)
    w.upload("N2", "main", "new", b"new two")
    w.upload("Y1", "main", "young", b"young one")
    w.upload("Y2", "main", "young", b"young two")
    assert w.keys["N1"].split("/")[1] != w.keys["A1"].split("/")[1]


@pytest.mark.parametrize("fmt, beside", [("CSV", True), ("Parquet", False)])
def test_an_inventory_run_deletes_exactly_what_a_plain_run_deletes(world: World, fmt: str, beside: bool):
    w = world
    manifest = w.take_inventory(fmt, beside=beside)
    write_after_the_inventory(w)

    plain = w.run(dry_run=True)
    dry = w.run(dry_run=True, inventory=str(manifest))
    expected = {**GARBAGE, "N1": "uncommitted"}  # N1: its slice is newer than the inventory, listed directly
    assert w.named(w.candidates(plain)) == expected
    assert w.candidates(dry) == w.candidates(plain)
    assert (dry.num_candidates, dry.bytes_candidates) == (plain.num_candidates, plain.bytes_candidates)
    assert "listed from the inventory taken" in dry.repo.mode_reason and "inventory" not in plain.repo.mode_reason
    _, params = MetastoreRunLog(w.lake.metastore, "repo").get(dry.run_id)
    assert params["inventory"]["manifest"] == manifest.as_uri()

    before = snapshot(w.ns)
    run = w.run(inventory=str(manifest))
    assert (run.state, run.num_deleted, run.num_failed) == ("swept", 5, 0)
    assert set(before) - set(snapshot(w.ns)) == {w.keys[name] for name in expected}
    for ref, path, content in (
        ("main", "keep", b"kept forever"),
        ("main", "a", b"a version 2!"),
        ("main", "draft", b"draft two.."),
        ("main", "young", b"young two"),
    ):
        assert w.repo.read(ref, path) == content
    assert (w.ns / w.keys["Y1"]).is_file()  # young: never a candidate


def test_an_object_gone_since_the_inventory_is_skipped_and_not_counted_as_deleted(world: World):
    w = world
    first = w.keys["A1"].split("/")[1]
    rows = rows_of_folder(w.ns) + [Row(f"data/{first}/never-existed", 99, w.clock.now - 9 * HOUR)]
    manifest = write_inventory(w.root / "inventory", "CSV", rows, w.clock.now - timedelta(minutes=30))
    (w.ns / w.keys["D1"]).unlink()  # garbage someone else removed after the inventory
    (w.ns / w.keys["stray"]).unlink()

    run = w.run(inventory=str(manifest))
    assert (run.state, run.num_failed) == ("swept", 0)
    assert w.named(w.candidates(run)) == {"A1": "expired", "odd": "uncommitted"}
    deleted = outputs(w.ns, run.run_id, "deleted")
    assert sorted(r["address"] for r in deleted) == sorted([w.keys["A1"], w.keys["odd"]])
    assert (run.num_deleted, run.bytes_deleted) == (2, len(b"a version 1") + len(b"named by hand"))


def test_what_an_inventory_misses_is_not_a_candidate_of_this_run(world: World):
    """An object written into an old slice behind lakegc's back after the inventory: a plain run
    finds it, an inventory run does not (the next plain or later inventory run will)."""
    w = world
    manifest = w.take_inventory("CSV")
    first = w.keys["A1"].split("/")[1]
    w.write("late", f"data/{first}/late-arrival", b"late", w.clock.now - 5 * HOUR)

    assert w.named(w.candidates(w.run(dry_run=True))) == {**GARBAGE, "late": "uncommitted"}
    assert w.named(w.candidates(w.run(dry_run=True, inventory=str(manifest)))) == GARBAGE


def test_tampered_dates_and_sizes_cannot_make_a_young_object_a_candidate(world: World):
    """Every object row claims to be a month old and a terabyte large; an object written into the old slice
    a minute ago (young) is listed too. Candidates, their sizes and what is deleted are the plain
    run's: the store's mtime and size count, not the inventory's."""
    w = world
    first = w.keys["A1"].split("/")[1]
    young = w.write("young", f"data/{first}/written-a-minute-ago", b"young", w.clock.now - timedelta(minutes=1))
    rows = [
        replace(r, size=10**12, mtime=w.clock.now - timedelta(days=30)) if r.key.startswith("data/") else r
        for r in rows_of_folder(w.ns)
    ]
    manifest = write_inventory(w.root / "inventory", "Parquet", rows, w.clock.now - timedelta(minutes=30))

    plain = w.run(dry_run=True)
    run = w.run(inventory=str(manifest))
    assert w.named(w.candidates(run)) == GARBAGE == w.named(w.candidates(plain))
    assert run.bytes_candidates == plain.bytes_candidates < 100
    assert run.bytes_deleted == plain.bytes_candidates
    assert (w.ns / young).is_file() and w.repo.read("main", "a") == b"a version 2!"


def test_hostile_keys_never_delete_metadata_or_anything_outside_the_slices(world: World):
    """Rows naming `_lakegc/`, keys that climb out (plainly or URL-encoded), keys outside the
    namespace, a symlink to a file outside, a file behind a symlinked folder, another bucket's
    row: the run succeeds, deletes only the plain run's garbage, and every one of them is intact."""
    w = world
    first = w.keys["A1"].split("/")[1]
    outside = w.root / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"not the lake's")
    os.symlink(outside / "precious", w.ns / "data" / first / "link")
    os.symlink(outside, w.ns / "data" / first / "dirlink")
    w.write("foreign", f"data/{first}/foreign-row", b"only another bucket lists me", w.clock.now - 5 * HOUR)
    old = w.clock.now - 5 * HOUR
    hostile = [
        Row("_lakegc/repository.json", 1, old),
        Row(f"data/{first}/../../_lakegc/repository.json", 1, old),
        Row("", 1, old, encoded=f"data%2F{first}%2F%2E%2E%2F%2E%2E%2F_lakegc%2Frepository.json"),
        Row(f"data/{first}/../../../outside/precious", 1, old),
        Row("../outside/precious", 1, old),
        Row(f"data/{first}//x", 1, old),
        Row(f"data/{first}/link", 1, old),
        Row(f"data/{first}/dirlink/precious", 1, old),
        Row(str(outside / "precious"), 1, old),
    ]
    rows = [r for r in rows_of_folder(w.ns) if r.key != w.keys["foreign"]]
    rows += hostile + [Row(w.keys["foreign"], 28, old, bucket="another-bucket")]
    manifest = write_inventory(w.root / "inventory", "CSV", rows, w.clock.now - timedelta(minutes=30))
    metadata = {k: v for k, v in snapshot(w.ns).items() if k.startswith("_lakegc/")}

    run = w.run(inventory=str(manifest))
    assert (run.state, run.num_failed) == ("swept", 0)
    assert w.named(w.candidates(run)) == GARBAGE
    assert (outside / "precious").read_bytes() == b"not the lake's"
    assert (w.ns / "data" / first / "link").is_symlink() and (w.ns / "data" / first / "dirlink").is_symlink()
    assert (w.ns / w.keys["foreign"]).is_file()
    now = snapshot(w.ns)
    assert all(now.get(k) == v for k, v in metadata.items())


def test_keys_encoded_slash_by_slash_are_decoded_too(world: World):
    """S3 may encode `/` as `%2F` as well as a space as `+`: both decode to the same keys."""
    w = world
    rows = rows_of_folder(w.ns)
    body = csv_gz(rows, encode=lambda k: quote_plus(k, safe=""))
    assert b"%2F" in gzip.decompress(body) and b"my+file%2B1+100%25.bin" in gzip.decompress(body)
    folder = w.root / "inventory"
    folder.mkdir()
    (folder / "part.csv.gz").write_bytes(body)
    doc = manifest_doc("CSV", w.clock.now - timedelta(minutes=30), {"part.csv.gz": body})
    (folder / "manifest.json").write_text(json.dumps(doc))
    assert w.named(w.candidates(w.run(dry_run=True, inventory=str(folder / "manifest.json")))) == GARBAGE


def test_an_inventory_run_may_build_on_an_earlier_run(world: World):
    """Run 1 (an inventory run) settles the first slice; a second slice, still too young to judge
    then, is read from the inventory by run 2, which is incremental (it looks up what the branch
    reset took the reference of in the settled slice) and chooses exactly what a clean run chooses."""
    w = world
    options = replace(OPTIONS, clean=False)
    w.upload("E1", "main", "e", b"e one")
    w.upload("E2", "main", "e", b"e two")
    first, second = w.keys["A1"].split("/")[1], w.keys["E1"].split("/")[1]
    assert first != second
    w.clock.advance(2 * HOUR)
    r1 = w.run(options, inventory=str(w.take_inventory("CSV")))
    assert r1.mode == "clean" and w.named(w.candidates(r1)) == GARBAGE  # E1 is still young
    settled = json.loads((w.ns / "_lakegc" / "gc" / r1.run_id / "settled_slices.json").read_text())
    assert settled == [first]
    w.repo.reset_branch("main")  # the staged D2 and E2 lose their last reference
    w.clock.advance(HOUR)
    manifest = write_inventory(
        w.root / "inventory-2", "Parquet", rows_of_folder(w.ns), w.clock.now - timedelta(minutes=10)
    )
    clean = w.run(options, dry_run=True, clean=True)
    r2 = w.run(options, inventory=str(manifest))
    assert r2.mode == "incremental" and (r2.repo.num_slices_skipped, r2.repo.num_slices_listed) == (1, 1)
    expected = {"D2": "uncommitted", "E1": "uncommitted", "E2": "uncommitted"}
    assert w.named(w.candidates(r2)) == w.named(w.candidates(clean)) == expected
    assert not any((w.ns / w.keys[name]).exists() for name in expected)


def test_an_inventory_of_another_folder_namespace_fails_the_run_and_deletes_nothing(world: World, tmp_path: Path):
    """A folder inventory's Bucket is empty: only its content can say whose it is. One of another lake
    (whose marker differs) or one whose marker row was tampered with is refused before any candidate
    is chosen."""
    w = world
    other = build_world(tmp_path / "other", w.clock, w.spark)
    foreign = other.take_inventory("CSV")
    rows = [replace(r, size=r.size + 1) if r.key == "_lakegc/repository.json" else r for r in rows_of_folder(w.ns)]
    tampered = write_inventory(w.root / "tampered", "CSV", rows, w.clock.now - timedelta(minutes=30))
    before = snapshot(w.ns)
    for manifest in (foreign, tampered):
        with pytest.raises(LakegcError, match="not an inventory of this namespace"):
            w.run(inventory=str(manifest))
    assert without_runs(snapshot(w.ns)) == without_runs(before)
    runs = MetastoreRunLog(w.lake.metastore, "repo").list()
    assert [r.state for r in runs] == ["failed", "failed"] and all(r.num_candidates == 0 for r in runs)


# -- an S3 namespace, its inventory on S3 -----------------------------------------------------------------
def s3_rows(bucket: Bucket) -> list[Row]:
    pages = bucket.client.get_paginator("list_objects_v2").paginate(Bucket=bucket.name)
    return [
        Row(o["Key"], o["Size"], o["LastModified"], bucket=bucket.name)
        for page in pages
        for o in page.get("Contents", ())
    ]


def test_an_s3_inventory_of_the_bucket_lists_an_s3_namespace(bucket: Bucket, clock: Clock, tmp_path: Path, spark):
    """The namespace is `lake/` of a bucket also holding other prefixes; the inventory (of the whole
    bucket, in the bucket, as S3 writes it) is read from S3. Candidates equal a plain run's; an
    object deleted since the inventory is skipped; nothing outside `lake/` moves."""
    lake = Lake(f"sqlite:///{tmp_path / 'lakegc.db'}")
    lake.create_repository("repo", bucket.ns)
    repo = lake.repository("repo")
    keys = {}
    for name, path, data in (("K", "keep", b"kept"), ("A1", "a", b"a one")):
        keys[name] = repo.upload("main", path, data).address
    repo.commit("main", "c1")
    keys["A2"] = repo.upload("main", "a", b"a two").address
    repo.commit("main", "c2")
    for name, path, data in (
        ("D1", "draft", b"draft one"),
        ("D2", "draft", b"draft two"),
        ("G1", "gone", b"gone soon"),
        ("G2", "gone", b"here"),
    ):
        keys[name] = repo.upload("main", path, data).address
    first = keys["K"].split("/")[1]
    bucket.put(f"lake/data/{first}/my file+1.bin", b"by hand")
    outside = {"lake2/data/x", f"lake-other/data/{first}/y", "lakeside"}
    for key in outside:
        bucket.put(key, b"not the lake's")
    clock.advance(3 * HOUR)
    rows = s3_rows(bucket)
    assert any(r.key == "lake/_lakegc/repository.json" for r in rows)
    bodies = {
        "inv/lake/cfg/data/part-0.csv.gz": csv_gz(rows[: len(rows) // 2]),
        "inv/lake/cfg/data/part-1.csv.gz": csv_gz(rows[len(rows) // 2 :]),
    }
    for key, body in bodies.items():
        bucket.put(key, body)
    doc = manifest_doc(
        "CSV", clock.now - timedelta(minutes=30), bodies, source=bucket.name, destination=f"arn:aws:s3:::{bucket.name}"
    )
    bucket.put("inv/lake/cfg/2030-01-01T00-00Z/manifest.json", json.dumps(doc).encode())
    manifest = f"s3://{bucket.name}/inv/lake/cfg/2030-01-01T00-00Z/manifest.json"
    bucket.client.delete_object(Bucket=bucket.name, Key=f"lake/{keys['G1']}")  # gone since the inventory

    def run(**changes: Any) -> Run:
        return run_gc(lake, "repo", replace(OPTIONS, **changes), spark=spark)

    def candidates(summary: Run) -> dict[str, str]:
        prefix = f"lake/_lakegc/gc/{summary.run_id}/candidates/"
        return {
            r["address"]: r["reason"]
            for key in bucket.keys(prefix)
            for r in pq.read_table(
                io.BytesIO(bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read())
            ).to_pylist()
        }

    plain = run(dry_run=True)
    expected = {keys["A1"]: "expired", keys["D1"]: "uncommitted", f"data/{first}/my file+1.bin": "uncommitted"}
    assert candidates(plain) == expected
    before = bucket.keys()
    summary = run(inventory=manifest)
    assert candidates(summary) == expected and "listed from the inventory" in summary.repo.mode_reason
    assert (summary.state, summary.num_deleted, summary.num_failed) == ("swept", 3, 0)
    assert before - bucket.keys() == {f"lake/{k}" for k in expected}
    assert outside <= bucket.keys() and "lake/_lakegc/repository.json" in bucket.keys()  # noqa: SIM118 (a listing)
    assert repo.read("main", "a") == b"a two" and repo.read("main", "draft") == b"draft two"

    wrong = {**doc, "sourceBucket": "another-bucket"}
    bucket.put("inv/wrong/manifest.json", json.dumps(wrong).encode())
    with pytest.raises(InvalidArgument, match="another namespace's inventory is refused"):
        run(inventory=f"s3://{bucket.name}/inv/wrong/manifest.json")


# ================================================================================================
# (c) refusals through the CLI
# ================================================================================================

REPO = "lakegc://repo"


@pytest.fixture
def cli_lake(env, cli, tmp_path: Path) -> tuple[Path, Path]:
    """A repository made through the CLI (real time), with an expired object and a stray file, and a
    folder for inventories. Returns (namespace, inventory folder)."""
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    for content in (b"one", b"two"):
        cli("fs", "upload", f"{REPO}/main/a", "--source", "-", input=content)
        cli("commit", f"{REPO}/main", "-m", content.decode())
    (ns / "stray.bin").write_bytes(b"garbage at the root")
    old = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    for path in ns.rglob("*"):
        os.utime(path, (old, old))
    return ns, tmp_path / "inventories"


def runs_of(cli) -> list[dict[str, Any]]:
    return cli("gc", "runs", REPO, "--json").json()


def fresh_inventory(
    ns: Path, folder: Path, fmt: str = "CSV", age: timedelta = timedelta(minutes=5), **changes: Any
) -> Path:
    return write_inventory(folder, fmt, rows_of_folder(ns), datetime.now(UTC) - age, **changes)


@pytest.mark.parametrize(
    "age, min_age, needles",
    [
        (timedelta(hours=25), None, ["older than --min-age 1d", "grace period"]),
        (timedelta(hours=2), "1h", ["2h ago: older than --min-age 1h"]),
        (-timedelta(hours=1), None, ["in the future"]),
    ],
)
def test_an_inventory_too_old_or_from_the_future_is_refused_before_the_run(env, cli, cli_lake, age, min_age, needles):
    ns, folder = cli_lake
    manifest = fresh_inventory(ns, folder, age=age)
    before = snapshot(ns)
    args = ["--min-age", min_age] if min_age else []
    one_error(cli("gc", "run", REPO, "--inventory", str(manifest), *args, "--json", ok=False), *needles, json_cmd=True)
    assert snapshot(ns) == before and runs_of(cli) == []


def _set(path: Path, **changes: Any) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


BAD_MANIFESTS: list[tuple[str, Callable[[Path, Path], str], list[str]]] = [
    ("missing", lambda m, ns: str(m.parent / "nope.json"), ["cannot read inventory manifest", "does not exist"]),
    ("a folder", lambda m, ns: str(m.parent), ["cannot read inventory manifest"]),
    ("not json", lambda m, ns: (m.write_text("{not json"), str(m))[-1], ["malformed"]),
    ("a list", lambda m, ns: (m.write_text("[]"), str(m))[-1], ["malformed"]),
    ("no files", lambda m, ns: (_set(m, files=[]), str(m))[-1], ["malformed", "files"]),
    ("no timestamp", lambda m, ns: (_set(m, creationTimestamp=None), str(m))[-1], ["malformed", "creationTimestamp"]),
    ("a date, not ms", lambda m, ns: (_set(m, creationTimestamp="2030-01-01"), str(m))[-1], ["not epoch milliseconds"]),
    ("ORC", lambda m, ns: (_set(m, fileFormat="ORC"), str(m))[-1], ["fileFormat 'ORC' is not supported"]),
    ("no sizes", lambda m, ns: (_set(m, fileSchema="Bucket, Key, LastModifiedDate"), str(m))[-1], ["lacks Size"]),
    (
        "a CSV schema for Parquet",
        lambda m, ns: (_set(m, fileFormat="Parquet"), str(m))[-1],
        ["is not a Parquet schema"],
    ),
    ("a data file missing", lambda m, ns: ((m.parent / "part-1.csv.gz").unlink(), str(m))[-1], ["does not exist"]),
    (
        "a data file truncated",
        lambda m, ns: ((m.parent / "part-0.csv.gz").write_bytes(b"x"), str(m))[-1],
        ["truncated or not this inventory's"],
    ),
    (
        "a data file key climbing out of S3",
        lambda m, ns: (_set(m, destinationBucket="arn:aws:s3:::b", files=[{"key": "a/../../x"}]), str(m))[-1],
        ["invalid"],
    ),
    (
        "another bucket's",
        lambda m, ns: (_set(m, sourceBucket="some-bucket"), str(m))[-1],
        ["another namespace's inventory is refused"],
    ),
    (
        "another folder's",
        lambda m, ns: (_set(m, sourceBucket=str(ns.parent / "other")), str(m))[-1],
        ["another namespace's inventory is refused"],
    ),
]


@pytest.mark.parametrize(
    "break_it, needles", [(b, n) for _, b, n in BAD_MANIFESTS], ids=[i for i, _, _ in BAD_MANIFESTS]
)
def test_a_bad_manifest_is_one_error_line_and_no_run(env, cli, cli_lake, break_it, needles):
    ns, folder = cli_lake
    manifest = break_it(fresh_inventory(ns, folder), ns)
    before = snapshot(ns)
    one_error(cli("gc", "run", REPO, "--inventory", manifest, ok=False), *needles)
    assert snapshot(ns) == before and runs_of(cli) == []


def test_a_data_file_that_is_not_what_the_manifest_says_fails_the_run_and_deletes_nothing(env, cli, cli_lake, spark):
    ns, folder = cli_lake
    manifest = fresh_inventory(ns, folder)
    part = manifest.parent / "part-0.csv.gz"
    plain = gzip.decompress(part.read_bytes())  # the same rows, not gzip'd
    part.write_bytes(plain)
    _set(manifest, files=[{"key": "part-0.csv.gz", "size": len(plain)}, {"key": "part-1.csv.gz"}])
    before = snapshot(ns)
    line = one_error(
        cli("gc", "run", REPO, "--inventory", str(manifest), "--json", ok=False), "is not gzip'd CSV", json_cmd=True
    )
    assert "part-0.csv.gz" in line
    assert without_runs(snapshot(ns)) == without_runs(before)
    assert [r["state"] for r in runs_of(cli)] == ["failed"]


def test_gc_run_help_names_the_inventory_option(cli):
    assert "--inventory" in cli("gc", "run", "--help").stdout


def test_a_looked_up_object_is_present_only_as_a_plain_file_with_no_symlink_on_its_way(tmp_path: Path):
    """What `confirm_present` trusts: a regular file reached through real folders. A symlinked
    file, a file behind a symlinked slice folder or a deeper symlinked folder, a folder and a
    missing key are not present, also when a task's folder cache already holds their folder's
    neighbours; a folder swapped for a symlink is caught by a look-up with a fresh cache."""
    from lakegc.storage.local import LocalStorage

    ns, outside = tmp_path / "ns", tmp_path / "outside"
    (ns / "data" / "s1" / "deep").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    for path in (ns / "data/s1/plain", ns / "data/s1/deep/plain", outside / "precious", outside / "deep/precious"):
        path.write_bytes(b"x")
    os.symlink(outside / "precious", ns / "data/s1/link")
    os.symlink(outside, ns / "data" / "s2")
    os.symlink(outside / "deep", ns / "data/s1/deeplink")
    storage = LocalStorage(str(ns))
    folders: dict[str, bool] = {}
    assert present(storage, "data/s1/plain", folders) is not None
    assert present(storage, "data/s1/deep/plain", folders) is not None
    for key in (
        "data/s1/link",
        "data/s2/precious",
        "data/s2/deep/precious",
        "data/s1/deeplink/precious",
        "data/s1/deep",
        "data/s1/missing",
    ):
        assert present(storage, key, folders) is None, key
        assert present(storage, key) is None, key
    os.rename(ns / "data/s1/deep", tmp_path / "moved")
    os.symlink(tmp_path / "moved", ns / "data/s1/deep")
    assert present(storage, "data/s1/deep/plain") is None
    assert (outside / "precious").exists() and (tmp_path / "moved" / "plain").exists()
