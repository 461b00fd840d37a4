"""What a Spark session can say about the work lakegc gives it: how many jobs it has started, how many
tasks it runs at once, and how many tasks a list of work items is cut into.

Apart from starting sessions (`engine.spark`) because every stage of the pipeline asks these, on a
classic session or a Spark Connect one alike, and the warm engine (`engine.warm`) needs a classic
session's context without depending on how sessions are chosen.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession


def jobs_started(spark: SparkSession) -> Callable[[], int | None]:
    """A count of the Spark jobs the session has started so far: its status tracker's newest job
    id plus one (ids are sequential; no listener needed). Counts None where there is no tracker
    (a Spark Connect session)."""
    context = classic_context(spark)
    if context is None:
        return lambda: None
    tracker = context.statusTracker()

    def count() -> int | None:
        return max(tracker.getJobIdsForGroup(None), default=-1) + 1

    return count


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session's executors run at once, which every task count lakegc picks is a
    multiple of. In one place because a Spark Connect session has no SparkContext to ask: there it
    is the engine's `spark.default.parallelism` if set, else the cores of a local master, else half
    its shuffle partitions (lakegc's own sessions set those to twice the cores)."""
    context = classic_context(spark)
    if context is not None:
        return context.defaultParallelism
    given = spark.conf.get("spark.default.parallelism", None)
    if given:
        return int(given)
    local = local_cores(spark.conf.get("spark.master", None) or "")
    return local or max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 2) // 2)


def classic_context(spark: SparkSession) -> SparkContext | None:
    """The SparkContext of a classic session, for the little only a classic engine has (its job
    counts, its log level, the JVM it started); None for a Spark Connect session. The pipeline
    itself never needs one: it is DataFrames and `mapInArrow` only, so it runs on either."""
    return getattr(spark, "_sc", None)


def local_cores(master: str) -> int | None:
    """The task slots of a local master URL (`local`, `local[4]`, `local[*]`, `local[4,2]` with
    retries); None for any other master, whose executors only the cluster knows."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master.strip())
    if found is None:
        return None
    slots = found.group(1)
    if slots is None:
        return 1
    return (os.cpu_count() or 1) if slots == "*" else max(1, int(slots))


def work_items(spark: SparkSession, count: int, tasks: int) -> DataFrame:
    """Rows 0..count-1 (column `id`) spread over at most `tasks` tasks, for work a task's function
    looks up by index in a list it carries (folders to list, files to read). Not `createDataFrame`
    of the list, whose rows go through a Python RDD, which forks a second Python worker daemon of
    its own, nor a `repartition`, a shuffle and so one more job and stage: on the demo lake each
    Spark job costs a tenth of a second or more, whatever it holds. A short list gets fewer tasks
    (`task_count`)."""
    return spark.range(0, count, 1, task_count(count, tasks, parallelism(spark)))


ITEMS_PER_TASK = 8  # below this many items a task, a list is spread over fewer tasks (never fewer than the cores)


def task_count(count: int, tasks: int, cores: int) -> int:
    """How many tasks `count` items get when `tasks` are asked for on `cores` task slots. Each task
    costs tens of milliseconds whatever it holds (measured through the warm engine: a stage of 8
    tasks of one folder each took 0.3 s on 2 cores, of 2 tasks 0.1 s), so a short list is spread
    over as many tasks as give each ITEMS_PER_TASK, but never fewer than one per core: an item may
    be a folder of a million objects, and the cores are there anyway."""
    fewer = -(-count // ITEMS_PER_TASK)
    return max(1, min(count, tasks, max(fewer, cores)))
