"""The S3 Inventory format: a `manifest.json`, parsed and checked for a run, and its data files,
read into Arrow.

A manifest (as S3 writes it) gives `sourceBucket`, `destinationBucket` (an ARN), `creationTimestamp`
(epoch milliseconds, as a string), `fileFormat` (`CSV`, `ORC` or `Parquet`; lakegc reads CSV and
Parquet), `fileSchema` (`Bucket, Key, Size, ...` for CSV, a Parquet message type for Parquet) and
`files[]` (`key`, `size`, `MD5checksum`). CSV data files are gzip'd, without a header, their
columns in fileSchema's order and their keys URL-encoded; Parquet columns are named in snake case
(`bucket`, `key`, `size`, `last_modified_date`). For a folder namespace the same format holds with
an empty bucket and keys relative to the folder.

MD5checksum is not checked: nothing a data file says can make a run delete what a plain run keeps
(see `inventory`), and a truncated file is caught by its size.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import BinaryIO
from urllib.parse import unquote, unquote_plus, urlparse

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakegc.errors import InvalidArgument, LakegcError, first_problem
from lakegc.storage import S3Settings, S3Storage, normalize_location, read_location
from lakegc.storage.s3 import split_s3

FUTURE_SLACK = timedelta(minutes=5)  # clock differences between the inventory's writer and GC
# a data file's rows as read, before `inventory.keep_rows` keeps the namespace's own
RAW = pa.schema(
    [
        ("bucket", pa.string()),
        ("key", pa.string()),
        ("size", pa.int64()),
        ("mtime", pa.timestamp("us", tz="UTC")),
        ("current", pa.bool_()),
    ]
)


class Format(StrEnum):
    CSV = "CSV"
    PARQUET = "Parquet"


@dataclass(frozen=True)
class Column:
    """A field lakegc reads: its name in a CSV fileSchema and in a Parquet file."""

    csv: str
    parquet: str
    arrow: pa.DataType
    required: bool


COLUMNS = {
    "bucket": Column("Bucket", "bucket", pa.string(), True),
    "key": Column("Key", "key", pa.string(), True),
    "size": Column("Size", "size", pa.int64(), True),
    "mtime": Column("LastModifiedDate", "last_modified_date", pa.timestamp("ms", tz="UTC"), True),
    # an inventory of all versions: only current objects count
    "is_latest": Column("IsLatest", "is_latest", pa.bool_(), False),
    "is_delete_marker": Column("IsDeleteMarker", "is_delete_marker", pa.bool_(), False),
}


@dataclass(frozen=True)
class DataFile:
    location: str  # file:///abs/path or s3://bucket/key
    size: int | None  # as the manifest says


@dataclass(frozen=True)
class Inventory:
    """A manifest, parsed and checked."""

    manifest: str
    source_bucket: str  # '' for a folder namespace
    created: datetime
    format: Format
    fields: tuple[str, ...]  # the fileSchema's field names, in order
    files: tuple[DataFile, ...]


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore")
    key: str = Field(min_length=1)
    size: int | None = Field(default=None, ge=0)


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sourceBucket: str = ""
    destinationBucket: str = ""
    creationTimestamp: str | int
    fileFormat: str
    fileSchema: str
    files: list[_File] = Field(min_length=1)


# -- the manifest: parsed and checked in the run's preflight -----------------------------------------
def load_inventory(location: str, namespace: str, now: datetime, min_age: timedelta) -> Inventory:
    """Read, parse and check a manifest for a run of `namespace` at `now`, and check its data files
    are there with the sizes it gives: everything that can be wrong before the run starts."""
    where = manifest_location(location)
    try:
        text = read_location(where)
    except LakegcError as exc:
        raise InvalidArgument(f"cannot read inventory manifest {where}: {exc}") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read inventory manifest {where}: {exc.strerror or exc}") from None
    inventory = parse_manifest(text, where)
    check_source(inventory, namespace)
    check_age(inventory, now, min_age)
    for file in inventory.files:
        try:
            size = _size_of(file.location)
        except LakegcError as exc:
            raise InvalidArgument(f"cannot read inventory data file {file.location}: {exc}") from None
        if size is None:
            raise InvalidArgument(f"inventory data file {file.location} (in {where}) does not exist")
        if file.size is not None and size != file.size:
            raise InvalidArgument(
                f"inventory data file {file.location} has {size} bytes, {where} says {file.size}: "
                "it is truncated or not this inventory's"
            )
    return inventory


def manifest_location(text: str) -> str:
    """A manifest given as a path (absolute or relative to here), `file://`, `local://` or `s3://`."""
    if text.startswith("local://"):
        text = "file://" + text.removeprefix("local://")
    elif "://" not in text:
        text = os.path.abspath(text)
    return normalize_location(text)


def parse_manifest(text: bytes | str, location: str) -> Inventory:
    """The manifest as a typed value; malformed ones and unknown formats refused in one line."""
    try:
        raw = _Manifest.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidArgument(
            f"inventory manifest {location} is malformed: {first_problem(exc, 'the document')}"
        ) from None
    formats = {f.value.lower(): f for f in Format}
    if raw.fileFormat.lower() not in formats:
        raise InvalidArgument(
            f"inventory manifest {location}: fileFormat {raw.fileFormat!r} is not supported (CSV or Parquet)"
        )
    fmt = formats[raw.fileFormat.lower()]
    fields = schema_fields(raw.fileSchema, fmt)
    names = {getattr(c, "csv" if fmt is Format.CSV else "parquet") for c in COLUMNS.values() if c.required}
    if missing := sorted(names - set(fields)):
        raise InvalidArgument(
            f"inventory manifest {location}: fileSchema lacks {', '.join(missing)} (lakegc reads "
            "each object's bucket, key, size and last modified date)"
        )
    stamp = str(raw.creationTimestamp)
    if not re.fullmatch(r"\d{1,15}", stamp):
        raise InvalidArgument(f"inventory manifest {location}: creationTimestamp {stamp!r} is not epoch milliseconds")
    created = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(stamp))
    files = tuple(DataFile(data_location(f.key, location, raw.destinationBucket), f.size) for f in raw.files)
    return Inventory(location, raw.sourceBucket, created, fmt, fields, files)


def schema_fields(schema: str, fmt: Format) -> tuple[str, ...]:
    """Field names of a fileSchema: `Bucket, Key, Size, ...` for CSV, a Parquet message type
    (`message s3.inventory { required binary bucket (UTF8); ... }`) for Parquet."""
    if fmt is Format.CSV:
        fields = tuple(f.strip() for f in schema.split(","))
        ok = all(fields) and len(set(fields)) == len(fields)
    else:
        body = re.fullmatch(r"\s*message\s+[\w.]+\s*\{(.*)\}\s*", schema, re.DOTALL)
        fields = tuple(re.findall(r"(?:required|optional|repeated)\s+\w+\s+(\w+)", body.group(1))) if body else ()
        ok = bool(fields)
    if not ok:
        raise InvalidArgument(f"inventory fileSchema {schema[:80]!r} is not a {fmt} schema")
    return fields


def data_location(key: str, manifest: str, destination: str) -> str:
    """Where a data file of the manifest is. `files[].key` is a key of destinationBucket (an ARN
    `arn:aws:s3:::BUCKET` as S3 writes it, or `s3://BUCKET`, or a local folder); with no
    destinationBucket, of the manifest's own bucket, or, for a local manifest, a path relative to
    the manifest's folder (or an absolute one)."""
    if arn := re.fullmatch(r"arn:aws[\w-]*:s3:::([^/]+)/?", destination):
        destination = f"s3://{arn.group(1)}"
    if destination.startswith("local://"):
        destination = "file://" + destination.removeprefix("local://")
    if destination.startswith("s3://") or (not destination and manifest.startswith("s3://")):
        bucket = split_s3(destination or manifest)[0]
        return _location(f"s3://{bucket}/{key}", manifest)
    if destination.startswith("file://"):
        folder = unquote(urlparse(destination).path)
    elif destination.startswith("/"):
        folder = destination
    elif destination:
        raise InvalidArgument(
            f"inventory manifest {manifest}: destinationBucket {destination!r} is neither "
            "arn:aws:s3:::BUCKET, s3://BUCKET nor a local folder"
        )
    else:
        folder = posixpath.dirname(unquote(urlparse(manifest).path))
    return _location(posixpath.normpath(posixpath.join(folder, key)), manifest)


def _location(text: str, manifest: str) -> str:
    try:
        return normalize_location(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"inventory manifest {manifest}: a data file's key is invalid: {exc}") from None


def check_source(inventory: Inventory, namespace: str) -> None:
    """An inventory of the namespace's bucket; for a folder, sourceBucket is empty or the folder."""
    source = inventory.source_bucket
    if namespace.startswith("s3://"):
        ok = source == split_s3(namespace)[0]
    else:
        try:
            ok = not source or manifest_location(source) == namespace
        except InvalidArgument:
            ok = False
    if not ok:
        raise InvalidArgument(
            f"inventory {inventory.manifest} is of {source or 'a folder namespace'!r}, not of "
            f"namespace {namespace}: another namespace's inventory is refused"
        )


def check_age(inventory: Inventory, now: datetime, min_age: timedelta) -> None:
    """Refuse an inventory older than min-age: objects it does not list may still be in their grace
    period. One from the future cannot be right either."""
    age = now - inventory.created
    if age > min_age:
        raise InvalidArgument(
            f"inventory {inventory.manifest} was taken {inventory.created.isoformat()}, "
            f"{span(age)} ago: older than --min-age {span(min_age)} (it could predate objects "
            "still in their grace period; use a newer inventory)"
        )
    if -age > FUTURE_SLACK:
        raise InvalidArgument(
            f"inventory {inventory.manifest}: creationTimestamp {inventory.created.isoformat()} is in the future"
        )


def span(delta: timedelta) -> str:
    """`2d 3h`, `5h 20m`, `45m`, `30s`: a duration as people read it."""
    seconds = int(delta.total_seconds())
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes and not days else ""]
    return " ".join(p for p in parts if p) or f"{seconds}s"


def _size_of(location: str) -> int | None:
    if location.startswith("s3://"):
        bucket, key = split_s3(location)
        info = S3Storage(f"s3://{bucket}").stat(key)
        return None if info is None else info.size
    path = unquote(urlparse(location).path)
    return os.path.getsize(path) if os.path.isfile(path) else None


def read_objects(source: BinaryIO, fmt: Format, fields: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """The rows of one data file, as `RAW` batches (CSV keys URL-decoded, as S3 encodes them)."""
    if fmt is Format.CSV:
        import pyarrow.csv as csv

        wanted = {name: c for name, c in COLUMNS.items() if c.csv in fields}
        reader = csv.open_csv(
            pa.CompressedInputStream(pa.PythonFile(source, mode="r"), "gzip"),
            read_options=csv.ReadOptions(column_names=list(fields), block_size=8 << 20),
            convert_options=csv.ConvertOptions(
                include_columns=[c.csv for c in wanted.values()],
                column_types={c.csv: c.arrow for c in wanted.values()},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        for batch in reader:
            columns = {name: batch.column(c.csv) for name, c in wanted.items()}
            columns["key"] = _url_decoded(columns["key"])
            yield as_raw(columns)
    else:
        import pyarrow.parquet as pq

        file = pq.ParquetFile(source if source.seekable() else pa.BufferReader(source.read()))  # S3: whole file
        wanted = {name: c for name, c in COLUMNS.items() if c.parquet in file.schema_arrow.names}
        if missing := [c.parquet for name, c in COLUMNS.items() if c.required and name not in wanted]:
            raise InvalidArgument(f"it has no column {', '.join(missing)}")
        for batch in file.iter_batches(batch_size=65_536, columns=[c.parquet for c in wanted.values()]):
            yield as_raw({name: batch.column(c.parquet) for name, c in wanted.items()})


def _url_decoded(keys: pa.Array) -> pa.Array:
    """S3 Inventory URL-encodes CSV keys, a space as `+`; lakegc's own keys never need it."""
    encoded = pc.match_substring_regex(keys, r"[%+]")
    if not pc.any(encoded).as_py():
        return keys
    return pa.array([unquote_plus(k) if e else k for k, e in zip(keys.to_pylist(), encoded.to_pylist())], pa.string())


def as_raw(columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """Columns read from a data file (by the names of COLUMNS) as a RAW batch."""
    mtime = columns["mtime"]
    if pa.types.is_integer(mtime.type):  # epoch milliseconds, as some writers leave them
        mtime = pc.cast(mtime, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    elif pa.types.is_timestamp(mtime.type) and mtime.type.tz is None:
        mtime = mtime.cast(pa.timestamp(mtime.type.unit, tz="UTC"))
    n = len(columns["key"])

    def flag(name: str, default: bool) -> pa.Array:
        return pc.fill_null(columns[name], default) if name in columns else pa.repeat(pa.scalar(default), n)

    current = pc.and_(flag("is_latest", True), pc.invert(flag("is_delete_marker", False)))
    return pa.RecordBatch.from_arrays(
        [
            columns["bucket"].cast(pa.string()),
            columns["key"].cast(pa.string()),
            columns["size"].cast(pa.int64()),
            mtime.cast(pa.timestamp("us", tz="UTC")),
            current,
        ],
        schema=RAW,
    )


def open_data_file(location: str, s3: S3Settings) -> BinaryIO:
    if location.startswith("s3://"):
        bucket, key = split_s3(location)
        return S3Storage(f"s3://{bucket}", s3).open_read(key)
    return open(unquote(urlparse(location).path), "rb")
