"""The benchmarks at a tiny scale: the whole `python -m benchmarks` run (generator, floor, delta-rs,
lakegc clean and incremental, each checked to delete exactly the stale objects), its JSON, the
scenario's proportions and the sweep plot. The real figures come from `./dev bench` (README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.plot import plot_sweep
from benchmarks.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {"objects", "lakegc_s", "floor_s", "ratio_floor", "deltars_s", "ratio_deltars", "incremental_s",
           "ratio_incremental", "driver_rss_mb"}


def test_s1_is_lakefs_design_target_at_one_twentieth():
    s1 = Scenario.s1()
    assert (s1.objects, s1.branches, s1.commits, s1.uncommitted, s1.stale) == (1_000_000, 100, 3_000, 250_000, 50_000)
    tenth = Scenario.s1(0.1)
    assert (tenth.objects, tenth.branches, tenth.commits, tenth.uncommitted, tenth.stale) == (100_000, 10, 300, 25_000, 5_000)
    assert s1.committed + s1.uncommitted + s1.stale - s1.stale_expired == s1.objects


def test_benchmark_runs_end_to_end_at_tiny_scale(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--scale", "0.002", "--json", "--warm", "--dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert FIGURES <= set(figures)
    assert figures["stale"] == 100 and abs(figures["objects"] - 2_000) <= 20  # compaction is whole commits
    assert figures["incremental_deleted"] == 4  # the 1 % change abandons a fifth of its 20 new objects
    assert all(figures[k] > 0 for k in ("lakegc_s", "floor_s", "deltars_s", "incremental_s", "driver_rss_mb"))
    assert figures["ratio_floor"] == round(figures["lakegc_s"] / figures["floor_s"], 2)
    assert "lakegc clean" in done.stderr and "phases" in done.stderr


def test_sweep_plot_is_a_png(tmp_path):
    rows = [{"objects": n, "lakegc_s": n / 2e4, "floor_s": n / 1e5, "driver_rss_mb": 150.0, "jvm_rss_mb": 900.0}
            for n in (100_000, 1_000_000)]
    plot_sweep(rows, tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_address_joins_never_broadcast_through_the_driver(spark):
    """At 1M objects a broadcast join built an address table on the driver and ran out of memory:
    lakegc's session plans its address joins as shuffles, whatever the sizes."""
    listed = spark.createDataFrame([(f"data/s/{i}",) for i in range(100)], "address string")
    referenced = spark.createDataFrame([(f"data/s/{i}",) for i in range(0, 100, 2)], "address string")
    plan = listed.join(referenced, "address", "left_anti")._jdf.queryExecution().executedPlan().toString()
    assert "SortMergeJoin" in plan and "Broadcast" not in plan
