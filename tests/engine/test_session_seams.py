"""What lakegc asks of a Spark session beyond DataFrames, each through one seam that a session
without a SparkContext (Spark Connect) can answer too: how many tasks run at once
(`engine.tasks.parallelism`, of which every task count is a multiple) and Ctrl-C cancelling the
running jobs (`SparkSession.interruptAll`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from lakegc.engine.tasks import classic_context, local_cores, parallelism


@pytest.mark.parametrize(
    ("master", "slots"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[3,2]", 3),  # with task retries
        (" local[4] ", 4),
        ("local[0]", 1),  # at least one slot
        ("local[*]", os.cpu_count() or 1),
        ("local[*,2]", os.cpu_count() or 1),
        ("spark://host:7077", None),  # a cluster's executors are the cluster's to know
        ("yarn", None),
        ("local-cluster[2,1,1024]", None),
        ("sc://localhost:15002", None),
        ("", None),
    ],
)
def test_a_local_master_names_its_task_slots(master: str, slots: int | None) -> None:
    assert local_cores(master) == slots


def test_a_classic_session_answers_with_its_default_parallelism(spark) -> None:
    assert parallelism(spark) == spark.sparkContext.defaultParallelism >= 1


def test_interrupting_the_session_cancels_its_running_job(spark) -> None:
    """What Ctrl-C does in a command (`spark._cancel_jobs_on_interrupt`): the job stops at once."""
    failure: list[BaseException] = []

    def _slow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Defined here, so it travels by value: workers cannot import a test module."""
        import time

        for batch in batches:
            time.sleep(60)
            yield batch

    def run() -> None:
        try:
            spark.range(0, 2, 1, 2).mapInArrow(_slow, "id long").collect()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            failure.append(exc)

    job = threading.Thread(target=run)
    started = time.monotonic()
    job.start()
    tracker = classic_context(spark).statusTracker()
    while not tracker.getActiveJobsIds() and time.monotonic() - started < 120:  # submitted: its tasks sleep
        time.sleep(0.1)
    time.sleep(1)
    spark.interruptAll()
    job.join(30)
    assert not job.is_alive()
    assert failure and "cancel" in str(failure[0]).lower()
