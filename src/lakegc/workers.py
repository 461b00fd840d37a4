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

A worker whose JVM hangs up on it exits quietly (`serve`). When one task of a stage fails, Spark
cancels the others and closes their sockets, sometimes while a freshly forked worker is still
reading its handshake; PySpark's daemon then prints that worker's ConnectionResetError traceback
to the stderr it shares with the driver, and a one-line `error:` came with fifteen lines of noise.
The failure that matters is the JVM's, and it reaches the driver on its own.
"""

import gc
import socket

import pandas  # noqa: F401
import pyarrow.compute  # noqa: F401
import pyarrow.parquet  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark import daemon

import lakegc.repogc.job  # noqa: F401  the GC pipeline, whose functions the tasks run

_serve_task = daemon.worker


def serve(sock: socket.socket, authenticated: bool) -> int:
    """PySpark's worker loop for one task, but a hang-up of the JVM's side (the task was cancelled,
    or the JVM is gone) ends the worker with code 1 and nothing printed. An error of the task itself
    never gets here: PySpark's worker sends it to the JVM, which fails the task with it."""
    try:
        return _serve_task(sock, authenticated)
    except (ConnectionError, EOFError):
        return 1


if __name__ == "__main__":
    daemon.worker = serve  # what the daemon's manager calls in each forked worker
    gc.collect()
    gc.freeze()
    daemon.manager()
