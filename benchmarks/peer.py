"""The peer: delta-rs `vacuum` over a Delta log that names the same live files.

`setup` writes a Delta table at the namespace root whose add actions are every live object (committed
and staged), then checkpoints it, so delta-rs starts from a Parquet checkpoint as a real table
would. A full vacuum with zero retention then lists the folder and deletes every file the log does
not name: the same stale objects lakegc collects. delta-rs skips `_`-prefixed paths, so lakegc's
`_lakegc/` and the `_delta_log/` itself are safe.

    python -m benchmarks.peer vacuum ROOT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, Field, Schema
from deltalake.transaction import AddAction, create_table_with_add_actions

from benchmarks.generate import Lakefiles


def setup(files: Lakefiles) -> int:
    """Write the Delta log; returns how many files it names."""
    objects = pq.read_table(files.objects)
    live = objects.filter(pc.equal(objects.column("reason"), ""))
    adds = [
        AddAction(key, size, {}, int(mtime * 1000), True, "")
        for key, size, mtime in zip(*(live.column(c).to_pylist() for c in ("address", "size", "mtime")))
    ]
    uri = str(files.namespace)
    create_table_with_add_actions(uri, Schema([Field("value", "string")]), adds, mode="error")
    DeltaTable(uri).create_checkpoint()
    return len(adds)


def vacuum(files: Lakefiles) -> dict:
    deleted = DeltaTable(str(files.namespace)).vacuum(
        retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True
    )
    return {"deleted": len(deleted)}


if __name__ == "__main__":
    print(json.dumps(vacuum(Lakefiles(Path(sys.argv[2])))))
