"""The contenders, run one after another on the same lake, each checked to delete exactly the stale
objects and nothing else; then the floor and a clean lakegc run on a lake a tenth the size, and on
a tiny one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console

from benchmarks import peer
from benchmarks.cluster import RUN_CONF, WORKERS, run_env, standalone_cluster
from benchmarks.generate import REPO, Lakefiles, apply_change, build, write_files
from benchmarks.inventory import write_inventory
from benchmarks.measure import Measured, run
from benchmarks.scenario import Scenario

SMALL = 0.1  # the second lake's size, a fraction of the main one's (S1's minimums keep it above the tiny lake)
SMALL_LABEL, TINY_LABEL = "lake / 10", "tiny lake"
CHANGE = 0.01  # the change an incremental run follows: 1 % of the main lake's objects, the same count on every size
SCALED = {"quarter": 0.25, "half": 0.5}  # the other sizes an incremental run is timed on, with that same change
# What a run on the standalone cluster must agree with local mode on, besides the objects it deletes.
SAME_AS_LOCAL = (
    "num_listed",
    "num_candidates",
    "candidates_by_reason",
    "num_deleted",
    "bytes_deleted",
    "active_commits",
    "expired_commits",
)


@dataclass(frozen=True)
class Collected:
    """One lakegc run, checked: its measurement and the summary it printed."""

    measured: Measured
    summary: dict


@dataclass
class Built:
    """One generated lake and what it holds: every object, and the stale ones among them."""

    files: Lakefiles
    manifest: dict
    objects: pa.Table
    stale: pa.Table

    def work(self, clean: Collected) -> dict:
        """What a clean run on this lake has to get through, per phase of the cost model
        (benchmarks/project.py)."""
        return {
            "listed": clean.summary["num_listed"],
            "ranges": self.manifest["ranges"],
            "range_entries": self.manifest["range_entries"],
            "staged": self.manifest["staged"],
            "commits": self.manifest["commits"],
            "candidates": clean.summary["num_candidates"],
        }


@dataclass(frozen=True)
class SideLake:
    """A lake only the floor and a clean lakegc run are timed on."""

    objects: int
    stale: int
    floor: Measured
    clean: Collected
    work: dict
    warm: Collected | None = None  # the clean run again through a warm engine (the tiny lake)


@dataclass(frozen=True)
class Row:
    name: str
    objects: int  # in the lake it ran on
    measured: Measured
    deleted: int
    floor: Measured  # the floor on the same lake
    deltars: Measured | None  # delta-rs on the same lake (only the main one)


@dataclass(frozen=True)
class Warm:
    """Runs through a warm engine on the main lake: a clean one (the stale objects and the cold
    incremental run's garbage written back), then an incremental one after another 1 % change."""

    clean: Collected
    incremental: Collected
    incremental_deleted: int


@dataclass
class Results:
    scale: float
    objects: int
    stale: int
    floor: Measured
    deltars: Measured
    clean: Collected
    second_clean: Collected  # a clean run again, the stale objects written back: its trees verified before
    incremental: Collected
    scaled_incremental: dict[str, tuple[int, Collected]]  # S1/4 and S1/2: (objects, the run with the main change)
    incremental_deleted: int
    work: dict
    inventory: Measured | None  # None: this lakegc has no `gc run --inventory`
    inventory_note: str | None
    cluster: Measured | None  # the clean run on a standalone cluster, with --cluster
    small: SideLake
    tiny: SideLake
    spark_floor: Measured  # lakegc's Spark session and one Python task per core, nothing else
    trees_verify: Measured  # reading and verifying every tree file of the main lake, one process
    explain: Measured | None = None  # `gc explain` of one live object of the main lake
    simulate: Measured | None = None  # `gc simulate` of four retentions on the main lake
    warm: Warm | None = None  # the same runs through a warm engine (`lakegc engine start`)

    @property
    def cold(self) -> bool:
        """Every contender started with dropped caches (else: with dirty pages written out)."""
        return all(row.measured.cold for row in self.rows())

    def rows(self) -> list[Row]:
        def main(name: str, measured: Measured | None, deleted: int = self.stale) -> list[Row]:
            return [Row(name, self.objects, measured, deleted, self.floor, self.deltars)] if measured else []

        def side(name: str, lake: SideLake) -> list[Row]:
            runs = [(f"lakegc clean, {name}", lake.clean), (f"lakegc clean, {name}, warm engine", lake.warm)]
            return [
                Row(f"floor (bare I/O), {name}", lake.objects, lake.floor, lake.stale, lake.floor, None),
                *(Row(label, lake.objects, run.measured, lake.stale, lake.floor, None) for label, run in runs if run),
            ]

        warm = self.warm

        return [
            *main("floor (bare I/O)", self.floor),
            *main("delta-rs vacuum", self.deltars),
            *main("lakegc clean", self.clean.measured),
            *main("lakegc clean, second (trees verified before)", self.second_clean.measured),
            *main("lakegc clean --inventory", self.inventory),
            *main(f"lakegc clean, standalone cluster ({WORKERS} workers)", self.cluster),
            *main("lakegc incremental (1% change)", self.incremental.measured, self.incremental_deleted),
            *(
                Row(
                    f"lakegc incremental, same change, S1 x {SCALED[name]}",
                    objects,
                    run.measured,
                    run.summary["num_deleted"],
                    self.floor,
                    None,
                )
                for name, (objects, run) in self.scaled_incremental.items()
            ),
            *main(
                "lakegc clean, warm engine",
                warm.clean.measured if warm else None,
                self.stale + self.incremental_deleted,
            ),
            *main(
                "lakegc incremental (1% change), warm engine",
                warm.incremental.measured if warm else None,
                warm.incremental_deleted if warm else 0,
            ),
            *main("lakegc gc explain (one object)", self.explain, 0),
            *main("lakegc gc simulate (4 retentions)", self.simulate, 0),
            *side(SMALL_LABEL, self.small),
            *side(TINY_LABEL, self.tiny),
        ]

    def figures(self) -> dict:
        clean, small = self.clean.measured.seconds, self.small.clean.measured.seconds
        small_floor = self.small.floor.seconds
        inventory = self.inventory.seconds if self.inventory else None
        return {
            "scale": self.scale,
            "objects": self.objects,
            "stale": self.stale,
            "lakegc_s": clean,
            "floor_s": self.floor.seconds,
            "ratio_floor": round(clean / self.floor.seconds, 2),
            "deltars_s": self.deltars.seconds,
            "ratio_deltars": round(clean / self.deltars.seconds, 2),
            "second_clean_s": self.second_clean.measured.seconds,
            "ratio_second_clean": round(self.second_clean.measured.seconds / clean, 3),
            "spark_jobs_clean": self.clean.summary.get("spark_jobs"),
            "spark_jobs_incremental": self.incremental.summary.get("spark_jobs"),
            "incremental_s": self.incremental.measured.seconds,
            "ratio_incremental": round(self.incremental.measured.seconds / clean, 3),
            **{f"incremental_{name}_s": run.measured.seconds for name, (_, run) in self.scaled_incremental.items()},
            "incremental_scale_ratio": round(
                self.incremental.measured.seconds / self.scaled_incremental["quarter"][1].measured.seconds, 3
            ),
            "driver_rss_mb": self.clean.measured.rss_mb,
            "jvm_rss_mb": self.clean.measured.jvm_rss_mb,
            "incremental_deleted": self.incremental_deleted,
            "cache": "cold" if self.cold else "synced",
            "small_objects": self.small.objects,
            "small_stale": self.small.stale,
            "small_s": small,
            "small_floor_s": small_floor,
            "ratio_small_floor": round(small / small_floor, 2),
            "tiny_objects": self.tiny.objects,
            "tiny_stale": self.tiny.stale,
            "tiny_s": self.tiny.clean.measured.seconds,
            "tiny_floor_s": self.tiny.floor.seconds,
            "inventory_s": inventory,
            "ratio_inventory_deltars": round(inventory / self.deltars.seconds, 2) if inventory else None,
            "inventory_note": self.inventory_note,
            "cluster_s": self.cluster.seconds if self.cluster else None,
            "spark_floor_s": self.spark_floor.seconds,
            "trees_verify_s": self.trees_verify.seconds,
            "explain_s": self.explain.seconds if self.explain else None,
            "simulate_s": self.simulate.seconds if self.simulate else None,
            **self._warm_figures(clean),
            "cores": os.cpu_count(),
            "phases": self.clean.summary["phases"],
            "work": self.work,
            "small_phases": self.small.clean.summary["phases"],
            "small_work": self.small.work,
        }

    def _warm_figures(self, clean: float) -> dict:
        """The warm engine's figures beside the cold ones they answer: the incremental run against
        the cold clean run, the clean run against delta-rs, the tiny lake's run in seconds."""
        warm, tiny = self.warm, self.tiny.warm
        if warm is None:
            return {}
        return {
            "clean_warm_s": warm.clean.measured.seconds,
            "ratio_clean_warm_deltars": round(warm.clean.measured.seconds / self.deltars.seconds, 2),
            "incremental_warm_s": warm.incremental.measured.seconds,
            "ratio_incremental_warm": round(warm.incremental.measured.seconds / clean, 3),
            "tiny_warm_s": tiny.measured.seconds if tiny else None,
        }


def run_all(scale: float, workdir: Path, console: Console, cluster: bool = False) -> Results:
    lake = _built(Scenario.s1(scale), workdir / "s1", console)
    console.log(f"writing the Delta log for delta-rs ({peer.setup(lake.files):,} live files)")
    floor = _floor(lake, console)
    _check_and_restore(lake)
    deltars = _contender(
        "delta-rs vacuum",
        [sys.executable, "-m", "benchmarks.peer", "vacuum", str(lake.files.root)],
        lake.files.env(),
        console,
    )
    _check_and_restore(lake)
    clean = _lakegc(lake.files, ["--clean"], lake.stale.num_rows, console)  # the first run: nothing verified before
    _check_and_restore(lake)
    second_clean = _lakegc(
        lake.files, ["--clean"], lake.stale.num_rows, console, name="lakegc clean, second (trees verified before)"
    )
    _check_and_restore(lake)
    inventory, inventory_note = _inventory_run(lake, console)  # after the clean runs: its trees verified before too
    on_cluster = _cluster_run(lake, clean, workdir / "cluster", console) if cluster else None
    trees_verify = _contender(
        "reading and verifying every tree file (one process)",
        [sys.executable, "-m", "benchmarks.floor", "--trees", str(lake.files.root)],
        lake.files.env(),
        console,
    )
    change = apply_change(lake.files, CHANGE)
    garbage = change.filter(pc.not_equal(change.column("reason"), ""))
    console.log(f"1% change: {change.num_rows:,} new objects, {garbage.num_rows:,} of them abandoned")
    incremental = _lakegc(lake.files, [], garbage.num_rows, console, mode="incremental")
    _check(lake.files, pa.concat_tables([lake.objects, change]), pa.concat_tables([lake.stale, garbage]))
    warm = _warm_runs(lake, change, garbage, console)
    scaled_incremental = {
        name: _incremental_on(Scenario.s1(size * scale), workdir / name, change.num_rows, console)
        for name, size in SCALED.items()
    }
    explain, simulate = _why(lake, console)
    small = _side_lake(Scenario.s1(SMALL * scale), workdir / "small", SMALL_LABEL, console)
    tiny = _side_lake(Scenario.tiny(), workdir / "tiny", TINY_LABEL, console, warm=True)
    spark_floor = _contender(
        "PySpark floor (lakegc's session, one Python task per core)",
        [sys.executable, "-m", "benchmarks.sparkfloor"],
        dict(os.environ),
        console,
    )
    return Results(
        scale,
        lake.objects.num_rows,
        lake.stale.num_rows,
        floor,
        deltars,
        clean,
        second_clean,
        incremental,
        scaled_incremental,
        garbage.num_rows,
        lake.work(clean),
        inventory,
        inventory_note,
        on_cluster,
        small,
        tiny,
        spark_floor,
        trees_verify,
        explain,
        simulate,
        warm,
    )


@contextmanager
def warm_engine(env: dict[str, str], console: Console, warm_up: list[str] | None = None) -> Iterator[None]:
    """`lakegc engine start` with the lake's LAKEGC_HOME (the runs then find it), one untimed dry
    run (`warm_up`, else the repository's) to load it as an engine that serves hourly runs is (its
    Python workers started, its code compiled), and `lakegc engine stop` at the end."""
    lakegc = [sys.executable, "-m", "lakegc"]
    with console.status("starting a warm engine"):
        started = subprocess.run([*lakegc, "engine", "start"], env=env, capture_output=True, text=True)
    if started.returncode:
        raise RuntimeError(f"lakegc engine start failed: {started.stderr.strip()[-500:]}")
    console.log(f"warm engine at {started.stdout.strip()}")
    try:
        dry_run = warm_up or [*lakegc, "gc", "run", f"lakegc://{REPO}", "--dry-run", "--json"]
        _contender("warm-up dry run (untimed)", dry_run, env, console)
        yield
    finally:
        subprocess.run([*lakegc, "engine", "stop"], env=env, capture_output=True, check=False)


def _warm_runs(lake: Built, change: pa.Table, garbage: pa.Table, console: Console) -> Warm:
    """Through a warm engine: a clean run with what the cold runs deleted written back, then an
    incremental one after another 1 % change; each checked to delete exactly its garbage."""
    objects, stale = pa.concat_tables([lake.objects, change]), pa.concat_tables([lake.stale, garbage])
    write_files(lake.files.namespace, stale)
    with warm_engine(lake.files.env(), console):
        clean = _lakegc(lake.files, ["--clean"], stale.num_rows, console, name="lakegc clean, warm engine")
        _check(lake.files, objects, stale)
        second = apply_change(lake.files, CHANGE)
        more = second.filter(pc.not_equal(second.column("reason"), ""))
        incremental = _lakegc(
            lake.files, [], more.num_rows, console, mode="incremental", name="lakegc incremental, warm engine"
        )
    _check(lake.files, pa.concat_tables([objects, second]), pa.concat_tables([stale, more]))
    return Warm(clean, incremental, more.num_rows)


def _why(lake: Built, console: Console) -> tuple[Measured, Measured]:
    """`gc explain` of one object the runs kept (a lookup: no listing, no Spark) and `gc simulate`
    of four retentions (one pass), on the main lake as the runs left it."""
    stale = set(lake.stale.column("address").to_pylist())
    kept = next(key for key in lake.objects.column("address").to_pylist() if key not in stale)
    base = [sys.executable, "-m", "lakegc", "gc"]
    explain = _contender(
        "lakegc gc explain (one object)",
        [*base, "explain", f"lakegc://{REPO}", "--address", kept, "--json"],
        lake.files.env(),
        console,
    )
    if explain.json()["verdict"] != "keep":
        raise RuntimeError(f"gc explain of {kept}, an object the runs kept, said {explain.stdout[:200]}")
    simulate = _contender(
        "lakegc gc simulate (1d,7d,30d,90d)",
        [*base, "simulate", f"lakegc://{REPO}", "--retention", "1d,7d,30d,90d", "--json"],
        lake.files.env(),
        console,
    )
    return explain, simulate


def run_sweep(scales: list[float], workdir: Path, console: Console, measured: Results) -> list[dict]:
    """Clean runs at each scale; the sizes `measured` already ran at (the main lake and the one a
    tenth its size) are taken from it, not rebuilt."""
    known = {
        Scenario.s1(measured.scale).objects: _sweep_row(measured.objects, measured.clean, measured.floor),
        Scenario.s1(SMALL * measured.scale).objects: _sweep_row(
            measured.small.objects, measured.small.clean, measured.small.floor
        ),
    }
    rows = []
    for scale in scales:
        if Scenario.s1(scale).objects not in known:
            side = _side_lake(Scenario.s1(scale), workdir / f"sweep-{scale:g}", f"scale {scale:g}", console)
            known[Scenario.s1(scale).objects] = _sweep_row(side.objects, side.clean, side.floor)
        rows.append(known[Scenario.s1(scale).objects])
    return sorted(rows, key=lambda r: r["objects"])


def _sweep_row(objects: int, clean: Collected, floor: Measured) -> dict:
    return {
        "objects": objects,
        "lakegc_s": clean.measured.seconds,
        "floor_s": floor.seconds,
        "driver_rss_mb": clean.measured.rss_mb,
        "jvm_rss_mb": clean.measured.jvm_rss_mb,
    }


def _incremental_on(scenario: Scenario, root: Path, count: int, console: Console) -> tuple[int, Collected]:
    """On a lake of another size: a clean run, then `count` new objects (the main lake's change),
    then the incremental run, timed and checked to delete exactly the change's abandoned objects."""
    lake = _built(scenario, root, console)
    _lakegc(lake.files, ["--clean"], lake.stale.num_rows, console, name=f"lakegc clean, {scenario.objects:,} objects")
    change = apply_change(lake.files, count=count)
    garbage = change.filter(pc.not_equal(change.column("reason"), ""))
    incremental = _lakegc(
        lake.files,
        [],
        garbage.num_rows,
        console,
        mode="incremental",
        name=f"lakegc incremental, {scenario.objects:,} objects",
    )
    _check(lake.files, pa.concat_tables([lake.objects, change]), pa.concat_tables([lake.stale, garbage]))
    shutil.rmtree(root)
    return lake.objects.num_rows, incremental


def _side_lake(scenario: Scenario, root: Path, label: str, console: Console, warm: bool = False) -> SideLake:
    """Build a lake, time the floor and a clean lakegc run on it (with `warm`, the clean run again
    through a warm engine), check each, remove it."""
    lake = _built(scenario, root, console)
    floor = _floor(lake, console, f"floor, {label}")
    _check_and_restore(lake)
    clean = _lakegc(lake.files, ["--clean"], lake.stale.num_rows, console, name=f"lakegc clean, {label}")
    warm_run = None
    if warm:
        _check_and_restore(lake)
        with warm_engine(lake.files.env(), console):
            name = f"lakegc clean, {label}, warm engine"
            warm_run = _lakegc(lake.files, ["--clean"], lake.stale.num_rows, console, name=name)
    _check(lake.files, lake.objects, lake.stale)
    shutil.rmtree(root)
    return SideLake(lake.objects.num_rows, lake.stale.num_rows, floor, clean, lake.work(clean), warm_run)


def _built(scenario: Scenario, root: Path, console: Console) -> Built:
    with console.status(f"building a lake of {scenario.objects:,} objects"):
        manifest = build(scenario, root)
    console.log(
        f"built {manifest['objects']:,} objects, {manifest['commits']:,} commits, {manifest['branches']} branches, "
        f"{manifest['staged']:,} staged, {manifest['stale']:,} stale, {manifest['ranges']:,} ranges "
        f"({manifest['range_entries']:,} entries) in {manifest['build_s']} s"
    )
    files = Lakefiles(root)
    objects = pq.read_table(files.objects)
    return Built(files, manifest, objects, objects.filter(pc.not_equal(objects.column("reason"), "")))


def _floor(lake: Built, console: Console, name: str = "floor") -> Measured:
    return _contender(name, [sys.executable, "-m", "benchmarks.floor", str(lake.files.root)], lake.files.env(), console)


def _inventory_run(lake: Built, console: Console) -> tuple[Measured | None, str | None]:
    """A clean run listing the namespace from an S3 Inventory of it, written just before; (None, why)
    when this lakegc's `gc run` has no --inventory option."""
    manifest = write_inventory(lake.files.namespace, lake.files.inventory)
    console.log(f"wrote an S3 Inventory of the namespace: {manifest}")
    if not has_inventory_option():
        note = "not run: this lakegc's `gc run` has no --inventory option"
        console.log(f"lakegc clean --inventory: {note}")
        return None, note
    collected = _lakegc(
        lake.files,
        ["--clean", "--inventory", str(manifest)],
        lake.stale.num_rows,
        console,
        name="lakegc clean --inventory",
    )
    _check(lake.files, lake.objects, lake.stale)  # the stale objects stay gone: the incremental run builds on this
    return collected.measured, None


def has_inventory_option() -> bool:
    helped = subprocess.run(
        [sys.executable, "-m", "lakegc", "gc", "run", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
        check=True,
    )
    return "--inventory" in helped.stdout


def _cluster_run(lake: Built, local: Collected, root: Path, console: Console) -> Measured:
    """The clean run again, on a standalone cluster, with the stale objects written back: it must
    delete the same objects and count the same as the local run."""
    write_files(lake.files.namespace, lake.stale)
    console.log(f"starting a Spark standalone cluster (master + {WORKERS} workers) in {root}")
    with standalone_cluster(root) as url:
        collected = _lakegc(
            lake.files,
            ["--clean", "--master", url, *RUN_CONF],
            lake.stale.num_rows,
            console,
            name=f"lakegc clean on the cluster at {url}",
            env=run_env(lake.files.env()),
        )
    _check(lake.files, lake.objects, lake.stale)
    differ = {
        key: (collected.summary[key], local.summary[key])
        for key in SAME_AS_LOCAL
        if collected.summary[key] != local.summary[key]
    }
    if differ:
        raise RuntimeError(f"the cluster run differs from local mode (cluster, local): {differ}")
    return collected.measured


def _contender(name: str, cmd: list[str], env: dict[str, str], console: Console) -> Measured:
    with console.status(f"running {name}"):
        measured = run(cmd, env)
    console.log(f"{name}: {measured.seconds} s, peak RSS {measured.rss_mb} MB")
    return measured


def _lakegc(
    files: Lakefiles,
    args: list[str],
    expected: int,
    console: Console,
    mode: str = "clean",
    name: str | None = None,
    env: dict[str, str] | None = None,
) -> Collected:
    cmd = [sys.executable, "-m", "lakegc", "gc", "run", f"lakegc://{REPO}", *args, "--json"]
    measured = _contender(name or f"lakegc {mode}", cmd, env or files.env(), console)
    summary = measured.json()
    if summary["state"] != "swept" or summary["mode"] != mode or summary["num_deleted"] != expected:
        raise RuntimeError(
            f"{name or f'lakegc {mode}'} run: state {summary['state']}, mode {summary['mode']}, "
            f"deleted {summary['num_deleted']} (expected {expected})"
        )
    console.log(f"  phases: {summary['phases']}")
    return Collected(measured, summary)


def _check(files: Lakefiles, objects: pa.Table, stale: pa.Table) -> None:
    """Exactly the stale objects are gone."""
    gone = {key for key in objects.column("address").to_pylist() if not os.path.exists(files.namespace / key)}
    if gone != set(stale.column("address").to_pylist()):
        raise RuntimeError(f"{len(gone)} objects gone, expected the {stale.num_rows} stale ones")


def _check_and_restore(lake: Built) -> None:
    _check(lake.files, lake.objects, lake.stale)
    write_files(lake.files.namespace, lake.stale)
