"""The Spark session GC runs in: local mode by default, any master by URL, quiet unless asked."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_CONF_DIR = Path(__file__).with_name("sparkconf")
_LOCAL_HEAP = "4g"  # log4j2.properties: Spark's own logs quiet


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> "SparkSession":
    """Get (or reuse) the session. Workers must run this interpreter, which has lakegc installed."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None and not conf:
        return active
    # The driver JVM starts before any conf applies (client mode); Spark puts SPARK_CONF_DIR on its
    # classpath, where log4j2 finds our quiet configuration.
    os.environ.setdefault("SPARK_CONF_DIR", str(_CONF_DIR))
    defaults = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.session.timeZone": "UTC", "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 2))),
                "spark.sql.adaptive.enabled": "true",
                # Address sets never go through the driver: a broadcast join would collect one there.
                "spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.adaptive.autoBroadcastJoinThreshold": "-1",
                "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_CONF_DIR / 'log4j2.properties'}"}
    if (master or (conf or {}).get("spark.master") or "local").startswith("local"):
        # Local mode: one JVM is driver and executors. At 1M objects Spark's default 1g heap spent
        # a third of the run collecting garbage (benchmarks/).
        defaults["spark.driver.memory"] = _LOCAL_HEAP
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its --conf and spark-defaults.conf win
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the JVM spark-submit started, whose conf SparkConf() reads
        given = SparkConf()
        defaults = {key: value for key, value in defaults.items() if not given.contains(key)}
    builder = SparkSession.builder.appName("lakegc")  # also under spark-submit, which names it after the script
    for key, value in defaults.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in (conf or {}) and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]")  # not under spark-submit, which brings its own master
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
