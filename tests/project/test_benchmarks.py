"""The benchmarks at a tiny scale: the whole `python -m benchmarks` run (generator, floor, delta-rs,
lakegc clean and incremental, the lake a tenth the size, the tiny lake and the inventory run, each
checked to delete exactly the stale objects), its JSON, the scenario's proportions, the S3 Inventory
writer, the cost model's projection and the sweep plot. The real figures come from `./dev bench`
(README); timings are never asserted here."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.contenders import has_inventory_option
from benchmarks.generate import build
from benchmarks.inventory import FILE_SCHEMA, write_inventory
from benchmarks.measure import Measured
from benchmarks.plot import plot_sweep
from benchmarks.project import PHASES, TARGET, project, table
from benchmarks.scenario import Scenario
from lakegc.timeutil import utcnow

ROOT = Path(__file__).resolve().parents[2]
FIGURES = {
    "cli_version_s",
    "cli_log_s",
    "cli_fs_ls_s",
    "cli_stat_s",
    "objects",
    "lakegc_s",
    "floor_s",
    "ratio_floor",
    "deltars_s",
    "ratio_deltars",
    "incremental_s",
    "ratio_incremental",
    "driver_rss_mb",
    "jvm_rss_mb",
    "small_s",
    "small_floor_s",
    "ratio_small_floor",
    "tiny_s",
    "inventory_s",
    "ratio_inventory_deltars",
    "inventory_note",
    "cluster_s",
    "phases",
    "work",
    "small_phases",
    "small_work",
    "cores",
    "spark_floor_s",
    "trees_verify_s",
    "second_clean_s",
    "ratio_second_clean",
    "spark_jobs_clean",
    "spark_jobs_incremental",
    "incremental_quarter_s",
    "incremental_half_s",
    "incremental_scale_ratio",
    "clean_warm_s",
    "ratio_clean_warm_deltars",
    "incremental_warm_s",
    "ratio_incremental_warm",
    "tiny_warm_s",
    "delta_files",
    "delta_deltars_s",
    "delta_lakegc_s",
    "delta_warm_s",
    "ratio_delta_deltars",
    "ratio_delta_warm_deltars",
    "lakefs_objects",
    "lakefs_s",
    "lakefs_deleted",
    "ratio_lakefs_clean",
    "warehouse_objects",
    "warehouse_listed",
    "warehouse_s",
    "warehouse_deleted",
    "ratio_warehouse_clean",
}


def run_benchmark(tmp_path: Path, *args: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--scale", "0.002", "--json", "--warm", "--dir", str(tmp_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def test_s1_is_lakefs_design_target_at_one_twentieth():
    s1 = Scenario.s1()
    assert (s1.objects, s1.branches, s1.commits, s1.uncommitted, s1.stale) == (1_000_000, 100, 3_000, 250_000, 50_000)
    tenth = Scenario.s1(0.1)
    assert (tenth.objects, tenth.branches, tenth.commits, tenth.uncommitted, tenth.stale) == (
        100_000,
        10,
        300,
        25_000,
        5_000,
    )
    assert s1.committed + s1.uncommitted + s1.stale - s1.stale_expired == s1.objects


def test_tiny_lake_is_the_demo_size_and_below_every_s1():
    tiny = Scenario.tiny()
    assert (tiny.objects, tiny.branches, tiny.stale) == (20, 3, 4)
    assert Scenario.s1(1e-9).objects > tiny.objects


@pytest.mark.slow  # two minutes of subprocesses: the CI runs it in its second step (./dev test)
def test_benchmark_runs_end_to_end_at_tiny_scale(tmp_path):
    """Every contender ran and passed its deletion check (the run fails otherwise), and every figure is there."""
    figures, stderr = run_benchmark(tmp_path)
    assert set(figures) >= FIGURES
    assert figures["stale"] == 100 and abs(figures["objects"] - 2_000) <= 20  # compaction is whole commits
    assert figures["incremental_deleted"] == 4  # the 1 % change abandons a fifth of its 20 new objects
    assert (figures["small_objects"], figures["small_stale"]) == (200, 20)  # S1's minimums: 0.0002 is below them
    assert (figures["tiny_objects"], figures["tiny_stale"]) == (20, 4)
    assert all(
        figures[k] > 0
        for k in (
            "lakegc_s",
            "floor_s",
            "deltars_s",
            "incremental_s",
            "driver_rss_mb",
            "small_s",
            "small_floor_s",
            "tiny_s",
            "spark_floor_s",
            "trees_verify_s",
            "clean_warm_s",
            "incremental_warm_s",
            "tiny_warm_s",
            "delta_deltars_s",
            "delta_lakegc_s",
            "delta_warm_s",
        )
    )
    cli = ("cli_version_s", "cli_log_s", "cli_fs_ls_s", "cli_stat_s")
    assert all(figures[k] > figures["python_s"] > 0 for k in cli)  # each a real process of lakegc, timed
    assert all(figures[k[:-2] + "_range_s"][0] <= figures[k] <= figures[k[:-2] + "_range_s"][1] for k in cli)
    assert figures["ratio_incremental_warm"] == round(figures["incremental_warm_s"] / figures["lakegc_s"], 3)
    assert figures["ratio_clean_warm_deltars"] == round(figures["clean_warm_s"] / figures["deltars_s"], 2)
    assert figures["ratio_delta_warm_deltars"] == round(figures["delta_warm_s"] / figures["delta_deltars_s"], 2)
    assert figures["delta_files"] == 2_000
    assert (figures["lakefs_objects"], figures["lakefs_deleted"]) == (2_000, 100)  # exactly the leftovers
    assert figures["ratio_lakefs_clean"] == round(figures["lakefs_s"] / figures["lakegc_s"], 2)
    assert (figures["warehouse_objects"], figures["warehouse_deleted"]) == (2_000, 100)  # exactly the garbage
    assert figures["ratio_warehouse_clean"] == round(figures["warehouse_s"] / figures["lakegc_s"], 2)
    assert figures["ratio_floor"] == round(figures["lakegc_s"] / figures["floor_s"], 2)
    assert figures["ratio_second_clean"] == round(figures["second_clean_s"] / figures["lakegc_s"], 3)
    assert 0 < figures["spark_jobs_clean"] <= 6 and 0 < figures["spark_jobs_incremental"] <= 4
    assert figures["incremental_scale_ratio"] == round(figures["incremental_s"] / figures["incremental_quarter_s"], 3)
    assert figures["ratio_small_floor"] == round(figures["small_s"] / figures["small_floor_s"], 2)
    if has_inventory_option():
        assert figures["inventory_s"] > 0 and figures["inventory_note"] is None
        assert figures["ratio_inventory_deltars"] == round(figures["inventory_s"] / figures["deltars_s"], 2)
    else:
        assert figures["inventory_s"] is None and figures["ratio_inventory_deltars"] is None
        assert "--inventory" in figures["inventory_note"]
    assert figures["cluster_s"] is None  # only with --cluster
    assert {p.name for p in PHASES} <= set(figures["phases"]) and set(figures["phases"]) == set(figures["small_phases"])
    assert figures["work"]["candidates"] == 100 and figures["small_work"]["candidates"] == 20
    for name in (
        "lakegc clean",
        "lakegc clean, lake / 10",
        "lakegc clean, tiny lake",
        "phases",
        "warm engine at sc://127.0.0.1:",
        "lakegc clean, warm engine",
        "lakegc incremental, warm engine",
        "lakegc clean, tiny lake, warm engine",
    ):
        assert name in stderr
    assert "projected" in table(figures, 16)


@pytest.mark.slow  # two Spark-free and one Spark process: about half a minute
def test_delta_benchmark_deletes_exactly_the_stale_files_with_both_tools(tmp_path):
    """benchmarks.delta at a tiny scale: delta-rs and lakegc each delete the 100 stale files of a
    2,000-file checkpointed table and nothing else (the script checks, and fails otherwise)."""
    results = tmp_path / "delta.json"
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.delta", "--files", "2000", "--warm", "--json"]
        + ["--workdir", str(tmp_path), "--results", str(results)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout)
    assert figures == json.loads(results.read_text())
    assert figures["delta_rs"]["deleted"] == figures["lakegc"]["deleted"] == figures["lakegc_warm"]["deleted"] == 100
    assert figures["ratio"] == round(figures["lakegc"]["seconds"] / figures["delta_rs"]["seconds"], 2)
    assert figures["ratio_warm"] == round(figures["lakegc_warm"]["seconds"] / figures["delta_rs"]["seconds"], 2)


@pytest.mark.slow  # one Spark process: about half a minute
def test_warehouse_benchmark_deletes_exactly_the_planted_garbage(tmp_path):
    """benchmarks.warehouse at a tiny scale: `lakegc warehouse gc` on a warehouse of 2,000 objects
    (four Delta tables, two Iceberg tables, a repository linking files outside them, stray files)
    deletes exactly its 100 planted garbage files, outside and inside the tables (the script checks
    the run's list and the disk, and fails otherwise)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.warehouse", "--objects", "2000", "--warm", "--json"]
        + ["--workdir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    planted = (figures["warehouse_objects"], figures["warehouse_garbage"], figures["warehouse_deleted"])
    assert planted == (2_000, 100, 100)
    assert figures["warehouse_listed"] == 2_054  # the 2,000 and the tables' and the repository's metadata files
    assert figures["warehouse_s"] > 0 and figures["warehouse_rss_mb"] > 0
    assert "built the warehouse: 2,054 objects" in done.stderr


@pytest.mark.slow
def test_cluster_run_deletes_what_local_mode_does(tmp_path):
    """`--cluster`: the clean run again on a standalone cluster, checked against local mode."""
    figures, stderr = run_benchmark(tmp_path, "--cluster")
    assert figures["cluster_s"] > 0
    assert "lakegc clean on the cluster" in stderr


def test_inventory_lists_every_file_of_the_namespace_in_s3_inventory_parquet(tmp_path):
    built = build(Scenario.tiny(), tmp_path / "lake")
    namespace = tmp_path / "lake" / "ns"
    before = int(utcnow().timestamp() * 1000)
    manifest_path = write_inventory(namespace, tmp_path / "inventory", rows_per_file=7)
    manifest = json.loads(manifest_path.read_text())

    assert (manifest["sourceBucket"], manifest["fileFormat"], manifest["fileSchema"]) == ("", "Parquet", FILE_SCHEMA)
    assert before <= int(manifest["creationTimestamp"]) <= int(utcnow().timestamp() * 1000)
    assert len(manifest["files"]) > 1  # split like a large inventory
    tables = []
    for entry in manifest["files"]:
        content = (manifest_path.parent / entry["key"]).read_bytes()
        assert (entry["size"], entry["MD5checksum"]) == (len(content), hashlib.md5(content).hexdigest())
        tables.append(pq.read_table(manifest_path.parent / entry["key"]))
    rows = pa.concat_tables(tables)
    assert rows.schema.names == ["bucket", "key", "size", "last_modified_date"]
    assert rows.schema.field("last_modified_date").type == pa.timestamp("ms", tz="UTC")
    assert set(rows.column("bucket").to_pylist()) == {""}

    on_disk = {p.relative_to(namespace).as_posix(): p.stat() for p in namespace.rglob("*") if p.is_file()}
    listed = {r["key"]: r for r in rows.to_pylist()}
    assert listed.keys() == on_disk.keys() and rows.num_rows == len(on_disk)
    objects = pq.read_table(tmp_path / "lake" / "objects.parquet").column("address").to_pylist()
    assert len(objects) == built["objects"] and set(objects) <= listed.keys()
    assert any(k.startswith("_lakegc/") for k in listed)  # metadata too, as a real inventory has it
    for key, row in listed.items():
        assert row["size"] == on_disk[key].st_size
        assert int(row["last_modified_date"].timestamp() * 1000) == on_disk[key].st_mtime_ns // 1_000_000


def figures_with(phases: dict, small_phases: dict, work: dict, small_work: dict, lakegc_s: float) -> dict:
    return {
        "objects": work["listed"],
        "small_objects": small_work["listed"],
        "cores": 2,
        "lakegc_s": lakegc_s,
        "phases": phases,
        "small_phases": small_phases,
        "work": work,
        "small_work": small_work,
    }


def test_projection_charges_the_slope_spreads_executor_phases_and_keeps_driver_phases():
    work = {
        "listed": 1_000_000,
        "ranges": 1_000,
        "range_entries": 4_000_000,
        "staged": 250_000,
        "commits": 3_000,
        "candidates": 50_000,
    }
    small_work = {k: v // 10 for k, v in work.items()}
    # listing: 2 s fixed + 10 µs an object; snapshot: 1 µs a staged entry, on the driver
    phases = {
        "listing the namespace": 2 + 10.0,
        "snapshotting uncommitted references": 0.25,
        "choosing active commits": 0.0,
        "reading committed trees": 5.0,
        "writing candidates": 1.0,
        "re-checking and deleting candidates": 5.0,
    }
    small_phases = {**phases, "listing the namespace": 2 + 1.0, "snapshotting uncommitted references": 0.025}
    projected, rest = project(figures_with(phases, small_phases, work, small_work, lakegc_s=40.0), executors=16)
    by_name = {p.phase.name: p for p in projected}

    listing = by_name["listing the namespace"]
    assert listing.per_unit_s == pytest.approx(10e-6) and listing.fixed_s == pytest.approx(2.0)
    assert listing.compute_s == pytest.approx(2 + TARGET["listed"] * 10e-6 * 2 / 16)  # 2 cores measured, 16 executors
    assert listing.s3_s == pytest.approx(TARGET["listed"] / (10_000 * 16))
    snapshot = by_name["snapshotting uncommitted references"]
    assert snapshot.compute_s == pytest.approx(TARGET["staged"] * 1e-6)  # the driver's: not spread
    trees = by_name["reading committed trees"]  # no slope measured (same time at both sizes): the mean, pessimistic
    assert trees.per_unit_s == pytest.approx(5.0 / 5_000_000) and trees.fixed_s == 0.0
    assert rest == pytest.approx(40.0 - sum(phases.values()))
    assert "| **total** |" in table(figures_with(phases, small_phases, work, small_work, 40.0), 16)


def test_projection_needs_the_cost_model_figures(tmp_path):
    old = tmp_path / "s1.json"
    old.write_text(json.dumps({"lakegc_s": 62.1, "objects": 1_000_320}))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.project", str(old)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 1 and "run `python -m benchmarks --json` again" in done.stderr


def test_sweep_plot_is_a_png(tmp_path):
    rows = [
        {"objects": n, "lakegc_s": n / 2e4, "floor_s": n / 1e5, "driver_rss_mb": 150.0, "jvm_rss_mb": 900.0}
        for n in (100_000, 1_000_000)
    ]
    plot_sweep(rows, tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_address_joins_never_broadcast_through_the_driver(spark):
    """At 1M objects a broadcast join built an address table on the driver and ran out of memory:
    lakegc's session plans its address joins as shuffles, whatever the sizes."""
    listed = spark.createDataFrame([(f"data/s/{i}",) for i in range(100)], "address string")
    referenced = spark.createDataFrame([(f"data/s/{i}",) for i in range(0, 100, 2)], "address string")
    plan = listed.join(referenced, "address", "left_anti")._jdf.queryExecution().executedPlan().toString()
    assert "SortMergeJoin" in plan and "Broadcast" not in plan


@pytest.mark.slow  # a server process and both clients: the second CI step
def test_server_benchmark_runs_with_both_clients_and_checks_every_read(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.server", "--objects", "5", "--large-mb", "2", "--json",
         "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    clients = {r["client"] for r in rows}
    assert {"lakefs (raw body)", "lakefs-sdk (multipart)", "lakefs (reader)", "lakefs-sdk (get_object)"} <= clients
    assert all(r["seconds"] > 0 and r["server_rss_mb"] > 0 for r in rows)
    assert [r["objects"] for r in rows if r["operation"] == "upload"] == [5, 5]
    large = [r for r in rows if r["operation"].endswith("large")]
    assert [r["bytes_each"] for r in large] == [2 << 20, 2 << 20]


def test_a_contender_that_exits_0_without_its_json_is_named_with_what_it_said():
    """A benchmark's slow run once failed on a bare JSONDecodeError, its command unknown."""
    said = Measured(1.0, 1.0, 0.0, '{"num_deleted": 3}\n', False, command="lakegc gc run", stderr_tail="")
    assert said.json() == {"num_deleted": 3}
    quiet = Measured(1.0, 1.0, 0.0, "not json\n", False, command="lakegc gc run", stderr_tail="why it stopped")
    with pytest.raises(RuntimeError) as raised:
        quiet.json()
    assert str(raised.value) == (
        "lakegc gc run exited 0 but printed no JSON: stdout 'not json\\n'; stderr ended: why it stopped"
    )
