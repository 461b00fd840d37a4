"""The contenders, run one after another on the same lake, each checked to delete exactly the stale
objects and nothing else."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console

from benchmarks import peer
from benchmarks.generate import REPO, Lakefiles, apply_change, build, write_files
from benchmarks.measure import Measured, run
from benchmarks.scenario import Scenario


@dataclass
class Results:
    scale: float
    objects: int
    stale: int
    floor: Measured
    deltars: Measured
    clean: Measured
    incremental: Measured
    incremental_deleted: int
    cold: bool  # every contender started with dropped caches (else: with dirty pages written out)

    def rows(self) -> list[tuple[str, Measured, int]]:
        return [("floor (bare I/O)", self.floor, self.stale), ("delta-rs vacuum", self.deltars, self.stale),
                ("lakegc clean", self.clean, self.stale),
                ("lakegc incremental (1% change)", self.incremental, self.incremental_deleted)]

    def figures(self) -> dict:
        return {"scale": self.scale, "objects": self.objects, "stale": self.stale, "lakegc_s": self.clean.seconds, "floor_s": self.floor.seconds,
                "ratio_floor": round(self.clean.seconds / self.floor.seconds, 2), "deltars_s": self.deltars.seconds,
                "ratio_deltars": round(self.clean.seconds / self.deltars.seconds, 2),
                "incremental_s": self.incremental.seconds,
                "ratio_incremental": round(self.incremental.seconds / self.clean.seconds, 3),
                "driver_rss_mb": self.clean.rss_mb, "jvm_rss_mb": self.clean.jvm_rss_mb,
                "incremental_deleted": self.incremental_deleted, "cache": "cold" if self.cold else "synced"}


def run_all(scale: float, root: Path, console: Console) -> Results:
    files, objects, stale = _built(scale, root, console)
    console.log(f"writing the Delta log for delta-rs ({peer.setup(files):,} live files)")
    floor = _contender("floor", [sys.executable, "-m", "benchmarks.floor", str(files.root)], files, console)
    _check_and_restore(files, objects, stale)
    deltars = _contender("delta-rs vacuum", [sys.executable, "-m", "benchmarks.peer", "vacuum", str(files.root)], files, console)
    _check_and_restore(files, objects, stale)
    clean = _lakegc(files, ["--clean"], stale.num_rows, console)
    _check(files, objects, stale)
    change = apply_change(files)
    garbage = change.filter(pc.not_equal(change.column("reason"), ""))
    console.log(f"1% change: {change.num_rows:,} new objects, {garbage.num_rows:,} of them abandoned")
    incremental = _lakegc(files, [], garbage.num_rows, console, mode="incremental")
    _check(files, pa.concat_tables([objects, change]), pa.concat_tables([stale, garbage]))
    return Results(scale, objects.num_rows, stale.num_rows, floor, deltars, clean, incremental, garbage.num_rows,
                   all(m.cold for m in (floor, deltars, clean, incremental)))


def run_sweep(scales: list[float], workdir: Path, console: Console, measured: Results) -> list[dict]:
    """Clean runs at each scale; the size `measured` already ran at is taken from it, not rebuilt."""
    rows = []
    for scale in scales:
        if Scenario.s1(scale).objects == Scenario.s1(measured.scale).objects:
            rows.append(_sweep_row(measured.objects, measured.clean, measured.floor))
            continue
        files, objects, stale = _built(scale, workdir / f"sweep-{scale:g}", console)
        floor = _contender("floor", [sys.executable, "-m", "benchmarks.floor", str(files.root)], files, console)
        _check_and_restore(files, objects, stale)
        clean = _lakegc(files, ["--clean"], stale.num_rows, console)
        _check(files, objects, stale)
        rows.append(_sweep_row(objects.num_rows, clean, floor))
        shutil.rmtree(files.root)
    return sorted(rows, key=lambda r: r["objects"])


def _sweep_row(objects: int, clean: Measured, floor: Measured) -> dict:
    return {"objects": objects, "lakegc_s": clean.seconds, "floor_s": floor.seconds,
            "driver_rss_mb": clean.rss_mb, "jvm_rss_mb": clean.jvm_rss_mb}


def _built(scale: float, root: Path, console: Console) -> tuple[Lakefiles, pa.Table, pa.Table]:
    with console.status(f"building S1 at scale {scale:g}"):
        manifest = build(Scenario.s1(scale), root)
    console.log(f"built {manifest['objects']:,} objects, {manifest['commits']:,} commits, {manifest['branches']} branches, "
                f"{manifest['staged']:,} staged, {manifest['stale']:,} stale, {manifest['ranges']:,} ranges "
                f"in {manifest['build_s']} s")
    files = Lakefiles(root)
    objects = pq.read_table(files.objects)
    return files, objects, objects.filter(pc.not_equal(objects.column("reason"), ""))


def _contender(name: str, cmd: list[str], files: Lakefiles, console: Console) -> Measured:
    with console.status(f"running {name}"):
        measured = run(cmd, files.env())
    console.log(f"{name}: {measured.seconds} s, peak RSS {measured.rss_mb} MB")
    return measured


def _lakegc(files: Lakefiles, args: list[str], expected: int, console: Console, mode: str = "clean") -> Measured:
    cmd = [sys.executable, "-m", "lakegc", "gc", "run", f"lakegc://{REPO}", *args, "--json"]
    measured = _contender(f"lakegc {mode}", cmd, files, console)
    summary = json.loads(measured.stdout)
    if summary["state"] != "swept" or summary["mode"] != mode or summary["num_deleted"] != expected:
        raise RuntimeError(f"lakegc {mode} run: state {summary['state']}, mode {summary['mode']}, "
                           f"deleted {summary['num_deleted']} (expected {expected})")
    console.log(f"  phases: {summary['phases']}")
    return measured


def _check(files: Lakefiles, objects: pa.Table, stale: pa.Table) -> None:
    """Exactly the stale objects are gone."""
    gone = {key for key in objects.column("address").to_pylist() if not os.path.exists(files.namespace / key)}
    if gone != set(stale.column("address").to_pylist()):
        raise RuntimeError(f"{len(gone)} objects gone, expected the {stale.num_rows} stale ones")


def _check_and_restore(files: Lakefiles, objects: pa.Table, stale: pa.Table) -> None:
    _check(files, objects, stale)
    write_files(files.namespace, stale)
