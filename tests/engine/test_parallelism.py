"""Every task count lakegc picks is a multiple of one number, `engine.spark.parallelism`, which a
session without a SparkContext (Spark Connect) must answer from its settings alone."""

from __future__ import annotations

import os

import pytest

from lakegc.engine.spark import local_cores, parallelism


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
