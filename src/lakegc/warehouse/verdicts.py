"""The owners' rule (`owners.judge`) run on the executors over the warehouse listing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa

from lakegc.engine.columns import LISTING, ddl
from lakegc.warehouse.owners import Folder, judge

JUDGED = pa.schema(
    [*LISTING, ("category", pa.string()), ("table", pa.string()), ("delta", pa.bool_()), ("top", pa.string())]
)
JUDGED_DDL = ddl(JUDGED)


def verdicts(by_prefix: Mapping[str, Folder]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A task adding each listed key's verdict (category, innermost table, Delta, top-level folder)."""
    folders = dict(by_prefix)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            found = [judge(key, folders) for key in batch.column("address").to_pylist()]
            yield pa.RecordBatch.from_arrays(
                [
                    *batch.columns,
                    pa.array([v.category for v in found], pa.string()),
                    pa.array([v.table for v in found], pa.string()),
                    pa.array([v.delta for v in found], pa.bool_()),
                    pa.array([v.top for v in found], pa.string()),
                ],
                schema=JUDGED,
            )

    return run
