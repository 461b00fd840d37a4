"""The daemon Spark forks lakegc's Python workers from (`spark.python.daemon.module`).

PySpark's own daemon forks a bare interpreter: each worker then imports PySpark's worker, pyarrow,
pandas (pyarrow imports it the first time it builds an array from Python values) and lakegc, and
after every task the daemon's loop runs a full garbage collection over all of that (about 40 ms a
task). Here they are imported once, before the first fork, and frozen out of the collector's sight
(`gc.freeze`): a worker starts with them in place, and the collection after each task looks only at
what the task made. On the demo lake this took the Python workers from ~6.7 s to ~3.3 s of CPU.

PySpark's daemon imports nothing before forking because some libraries start threads on import.
Of these only two do, numpy (OpenBLAS's pool) and pyarrow (jemalloc's background thread), and both
are built to survive fork.
"""

import gc

import pandas  # noqa: F401
import pyarrow.compute  # noqa: F401
import pyarrow.parquet  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark import daemon

import lakegc.repogc.job  # noqa: F401  the GC pipeline, whose functions the tasks run

if __name__ == "__main__":
    gc.collect()
    gc.freeze()
    daemon.manager()
