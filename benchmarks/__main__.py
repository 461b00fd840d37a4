"""`python -m benchmarks [--scale F] [--json] [--sweep] [--cluster]`: scenario S1 against the floor and delta-rs.

On one generated lake, one after another: the floor script, delta-rs vacuum, a clean lakegc run (the
first: no tree file verified before), the same again (its trees verified by the first, and trusted
while unchanged), a clean lakegc run listing the namespace from an S3 Inventory of it, then a lakegc
incremental run after a 1 % change. Each deletes the same stale objects (checked after every
contender; the stale files are written back in between) and runs as its own process, timed and
memory-sampled. Then the floor and a clean run on S1 a tenth the size, and on a tiny lake (the
README demo's size). Two floors that delete nothing are timed too: reading and verifying every tree
file of S1 in one process, and lakegc's Spark session with one Python task per core
(docs/performance.md). Then delta-rs's full VACUUM against `lakegc delta gc` on a Delta table the
size of S1, `lakegc lakefs gc` on a lakeFS-format namespace the size of S1 (`benchmarks.lakefs`), and
`lakegc warehouse gc` on a warehouse the size of S1: Delta and Iceberg tables, a lakegc repository and
stray files under one prefix (`benchmarks.warehouse`). Last, how long `lakegc --version`, `log`,
`fs ls` and `fs stat` take to answer on a small repository (`benchmarks.cli`).
`--cluster` also runs the clean run on a Spark standalone cluster (master and
two workers on this machine), which must delete the same objects. `--sweep` repeats the clean run at
several sizes and plots time and memory.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from benchmarks.cli import measure as measure_cli
from benchmarks.cli import summary as cli_summary
from benchmarks.contenders import Results, run_all, run_sweep
from benchmarks.delta import compare
from benchmarks.lakefs import measure as measure_lakefs
from benchmarks.lakefs import summary as lakefs_summary
from benchmarks.measure import keep_caches
from benchmarks.plot import plot_sweep
from benchmarks.warehouse import measure as measure_warehouse
from benchmarks.warehouse import summary as warehouse_summary

SWEEP_SCALES = (0.1, 0.25, 0.5, 1.0)
app = typer.Typer(add_completion=False)


@app.command()
def main(
    scale: float = typer.Option(1.0, "--scale", help="S1 at this fraction (1.0: 1M objects)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON only."),
    sweep: bool = typer.Option(
        False, "--sweep", help="Also time clean runs at 100K..1M objects (x scale) and plot them."
    ),
    workdir: Path = typer.Option(Path("/tmp/lakegc-bench"), "--dir", help="Where the lakes are built (emptied first)."),
    out: Path = typer.Option(Path("benchmarks/results"), "--out", help="Where the sweep's table and plot go."),
    warm: bool = typer.Option(
        False,
        "--warm",
        help="Keep the caches between contenders (quick checks; the figures then flatter every contender).",
    ),
    cluster: bool = typer.Option(
        False,
        "--cluster",
        help="Also run the clean run on a Spark standalone cluster (master + 2 workers on this machine).",
    ),
) -> None:
    console = Console(stderr=True)
    if warm:
        keep_caches()
    shutil.rmtree(workdir, ignore_errors=True)
    results = run_all(scale, workdir, console, cluster)
    figures = results.figures() | delta_figures(scale, workdir, console) | lakefs_figures(scale, workdir, console)
    figures |= warehouse_figures(scale, workdir, console) | measure_cli(workdir)
    figures["ratio_lakefs_clean"] = round(figures["lakefs_s"] / figures["lakegc_s"], 2)
    figures["ratio_warehouse_clean"] = round(figures["warehouse_s"] / figures["lakegc_s"], 2)
    if as_json:
        print(json.dumps(figures))
    else:
        Console(width=130).print(_table(results))
        console.print(
            f"Delta table of {figures['delta_files']:,} files: delta-rs {figures['delta_deltars_s']} s, "
            f"lakegc {figures['delta_lakegc_s']} s cold, {figures['delta_warm_s']} s through a warm engine "
            f"({figures['ratio_delta_warm_deltars']}x delta-rs)"
        )
        console.print(f"{lakefs_summary(figures)}: {figures['ratio_lakefs_clean']}x lakegc's own clean S1 run")
        console.print(f"{warehouse_summary(figures)}: {figures['ratio_warehouse_clean']}x lakegc's own clean S1 run")
        console.print(cli_summary(figures))
    if sweep:
        rows = run_sweep([s * scale for s in SWEEP_SCALES], workdir, console, results)
        out.mkdir(parents=True, exist_ok=True)
        (out / "s1.json").write_text(json.dumps(figures, indent=1))
        (out / "sweep.json").write_text(json.dumps(rows, indent=1))
        plot_sweep(rows, out / "sweep.png")
        if not as_json:
            Console(width=130).print(_sweep_table(rows))
        console.print(f"plot: {out / 'sweep.png'}")


def lakefs_figures(scale: float, workdir: Path, console: Console) -> dict:
    """`lakegc lakefs gc` on a lakeFS-format namespace the size of S1 times `scale`
    (`benchmarks.lakefs`), timed in the same invocation as lakegc's own S1 runs."""
    objects = max(2_000, int(1_000_000 * scale))
    return measure_lakefs(workdir, objects, objects // 20, console)


def warehouse_figures(scale: float, workdir: Path, console: Console) -> dict:
    """`lakegc warehouse gc` on a warehouse the size of S1 times `scale` (`benchmarks.warehouse`),
    timed in the same invocation as lakegc's own S1 runs."""
    objects = max(2_000, int(1_000_000 * scale))
    return measure_warehouse(workdir, objects, objects // 20, console)


def delta_figures(scale: float, workdir: Path, console: Console) -> dict:
    """The Delta comparison (`benchmarks.delta`) at S1's size times `scale`: delta-rs, lakegc cold
    and lakegc through a warm engine on one table."""
    files = max(2_000, int(1_000_000 * scale))
    measured = compare(workdir, files, files // 20, console)
    return {
        "delta_files": files,
        "delta_deltars_s": measured["delta_rs"]["seconds"],
        "delta_lakegc_s": measured["lakegc"]["seconds"],
        "delta_warm_s": measured["lakegc_warm"]["seconds"],
        "ratio_delta_deltars": measured["ratio"],
        "ratio_delta_warm_deltars": measured["ratio_warm"],
    }


def _table(r: Results) -> Table:
    cache = "cold caches" if r.cold else "caches kept (--warm, or not root)"
    table = Table(
        title=f"S1 at {r.objects:,} objects ({r.stale:,} stale), a lake a tenth its size and a tiny one, "
        f"on this machine, each run from {cache}",
        caption="\n".join(
            [
                f"fixed cost of any PySpark run here (lakegc's session, one Python task per core): "
                f"{r.spark_floor.seconds:.1f} s; reading and verifying every tree file of the "
                f"{r.objects:,}-object lake in one process: {r.trees_verify.seconds:.1f} s",
                f"Spark jobs: {r.clean.summary.get('spark_jobs')} in the clean run, "
                f"{r.incremental.summary.get('spark_jobs')} in the incremental one",
                *([f"lakegc clean --inventory: {r.inventory_note}"] if r.inventory_note else []),
            ]
        ),
    )
    for column in (
        "run",
        "objects",
        "wall s",
        "objects/s",
        "x floor",
        "x delta-rs",
        "peak RSS MB",
        "JVM RSS MB",
        "deleted",
    ):
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in r.rows():
        m = row.measured
        table.add_row(
            row.name,
            f"{row.objects:,}",
            f"{m.seconds:.1f}",
            f"{row.objects / m.seconds:,.0f}",
            f"{m.seconds / row.floor.seconds:.2f}",
            f"{m.seconds / row.deltars.seconds:.2f}" if row.deltars else "-",
            f"{m.rss_mb:,.0f}",
            f"{m.jvm_rss_mb:,.0f}" if m.jvm_rss_mb else "-",
            f"{row.deleted:,}",
        )
    return table


def _sweep_table(rows: list[dict]) -> Table:
    table = Table(title="Scaling sweep: clean lakegc run")
    for column in ("objects", "lakegc s", "floor s", "driver RSS MB", "JVM RSS MB"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row['objects']:,}",
            f"{row['lakegc_s']:.1f}",
            f"{row['floor_s']:.1f}",
            f"{row['driver_rss_mb']:,.0f}",
            f"{row['jvm_rss_mb']:,.0f}",
        )
    return table


if __name__ == "__main__":
    sys.exit(app())
