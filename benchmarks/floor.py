"""The floor: the bare I/O any GC of this lake has to do, in one plain process with no framework.

It lists and stats the namespace's objects, reads every active range once (the address column),
and deletes the stale objects it is handed. It decides nothing: what is active and what is stale
come from the generator. lakegc cannot beat this; the question is by how much it trails it.

With `--trees` it instead reads and verifies every tree file (each metarange and range hashed
against its id, as lakegc trusts no tree file it has not verified), in one process: the CPU a
clean run spends on its trees whatever engine runs it, which no peer that trusts its log pays.

    python -m benchmarks.floor [--trees] ROOT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.generate import Lakefiles
from lakegc.repo.trees import METARANGES_PREFIX, RANGES_PREFIX, read_metarange, read_range
from lakegc.storage import open_storage


def floor(files: Lakefiles) -> dict:
    listed = nbytes = 0
    stack = [str(files.namespace / "data")]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    listed += 1
                    nbytes += entry.stat(follow_symlinks=False).st_size
    ranges = json.loads(files.manifest.read_text())["active_ranges"]
    entries = sum(pq.read_table(files.namespace / RANGES_PREFIX / rid, columns=["address"]).num_rows for rid in ranges)
    objects = pq.read_table(files.objects, columns=["address", "reason"])
    stale = objects.filter(pc.not_equal(objects.column("reason"), "")).column("address").to_pylist()
    for key in stale:
        os.unlink(files.namespace / key)
    return {"listed": listed, "bytes": nbytes, "ranges": len(ranges), "entries": entries, "deleted": len(stale)}


def verify_trees(files: Lakefiles) -> dict:
    storage = open_storage(str(files.namespace))
    metaranges = [p.name for p in (files.namespace / METARANGES_PREFIX).iterdir()]
    ranges = [p.name for p in (files.namespace / RANGES_PREFIX).iterdir()]
    for mid in metaranges:
        read_metarange(storage, mid)
    entries = sum(read_range(storage, rid).num_rows for rid in ranges)
    return {"metaranges": len(metaranges), "ranges": len(ranges), "entries": entries}


if __name__ == "__main__":
    trees = sys.argv[1] == "--trees"
    root = Lakefiles(Path(sys.argv[-1]))
    print(json.dumps(verify_trees(root) if trees else floor(root)))
