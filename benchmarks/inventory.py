"""An S3 Inventory of a built lake's namespace, for `lakegc gc run --inventory MANIFEST`
(docs/cli.md, `gc run --inventory`).

It is what S3 Inventory delivers for a bucket, with a local folder as destination: data files in
Parquet with S3's columns (`bucket`, `key`, `size`, `last_modified_date` in milliseconds, UTC), and
a `manifest.json` naming them (`creationTimestamp` in epoch milliseconds, written as the string S3
writes, `fileFormat`, `fileSchema`, `files[]` with `key`, `size` and `MD5checksum`). For a folder
namespace the bucket is empty and keys are relative to the namespace root. `files[].key` is
relative to the manifest's folder (on S3 it is relative to the destination bucket).

Like a real inventory of the namespace's bucket or prefix, it lists every file there, lakegc's own
`_lakegc/` metadata and delta-rs's `_delta_log/` included: GC must leave out what it would not list.

    python -m benchmarks.inventory NAMESPACE DEST
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.timeutil import utcnow

MANIFEST = "manifest.json"
ROWS_PER_FILE = 250_000  # S3 splits a large inventory over several data files too
SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        ("size", pa.int64()),
        ("last_modified_date", pa.timestamp("ms", tz="UTC")),
    ]
)
FILE_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); }"
)


def write_inventory(
    namespace: Path, dest: Path, rows_per_file: int = ROWS_PER_FILE, created: datetime | None = None
) -> Path:
    """Inventory every file under `namespace` into `dest` (which must not exist); returns the manifest."""
    (dest / "data").mkdir(parents=True)
    files = []
    for n, batch in enumerate(_batches(namespace, rows_per_file)):
        key = f"data/part-{n:05d}.parquet"
        pq.write_table(pa.Table.from_batches([batch]), dest / key)
        content = (dest / key).read_bytes()
        files.append({"key": key, "size": len(content), "MD5checksum": hashlib.md5(content).hexdigest()})
    manifest = {
        "sourceBucket": "",
        "destinationBucket": "",
        "version": "2016-11-30",
        "creationTimestamp": str(int((created or utcnow()).timestamp() * 1000)),
        "fileFormat": "Parquet",
        "fileSchema": FILE_SCHEMA,
        "files": files,
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return dest / MANIFEST


def _batches(namespace: Path, rows: int) -> Iterator[pa.RecordBatch]:
    keys: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    yielded = False
    for key, stat in _files(namespace):
        keys.append(key)
        sizes.append(stat.st_size)
        mtimes.append(stat.st_mtime_ns // 1_000_000)
        if len(keys) == rows:
            yield _batch(keys, sizes, mtimes)
            keys, sizes, mtimes, yielded = [], [], [], True
    if keys or not yielded:  # an empty namespace still gets one (empty) data file
        yield _batch(keys, sizes, mtimes)


def _batch(keys: list[str], sizes: list[int], mtimes: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([""] * len(keys), pa.string()),
            pa.array(keys, pa.string()),
            pa.array(sizes, pa.int64()),
            pa.array(mtimes, pa.int64()).cast(SCHEMA[3].type),
        ],
        schema=SCHEMA,
    )


def _files(namespace: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every file under `namespace` (namespace-relative key, its stat), folders walked without
    following symlinks."""
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(namespace / prefix if prefix else namespace) as entries:
            for entry in entries:
                key = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(f"{key}/")
                else:
                    yield key, entry.stat(follow_symlinks=False)


if __name__ == "__main__":
    print(write_inventory(Path(sys.argv[1]), Path(sys.argv[2])))
