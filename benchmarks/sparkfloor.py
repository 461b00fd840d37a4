"""The floor of any PySpark run on this machine: start lakegc's Spark session (its settings, its
class-data archive, its worker daemon) and run one Python task per core, nothing else.

A lakegc run on a tiny lake cannot take less than this plus its own work: the numbers beside its
targets say how much of them is fixed before any GC starts.

    python -m benchmarks.sparkfloor
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pyarrow as pa

_started = time.monotonic()


def _unchanged(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return batches


def main() -> None:
    from lakegc.engine.classic import command_scope
    from lakegc.engine.spark import spark_session

    with command_scope():
        spark = spark_session()
        session_s = time.monotonic() - _started
        cores = spark.sparkContext.defaultParallelism
        spark.range(0, cores, 1, cores).mapInArrow(_unchanged, "id long").collect()
        print(
            json.dumps(
                {"session_s": round(session_s, 2), "first_task_s": round(time.monotonic() - _started - session_s, 2)}
            ),
            flush=True,
        )
    os._exit(0)  # as the CLI leaves: no interpreter teardown


if __name__ == "__main__":
    main()
