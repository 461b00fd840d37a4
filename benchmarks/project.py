"""Project a measured clean run onto lakeFS's design target on a cluster (docs/performance.md).

    python -m benchmarks.project [FIGURES] [--executors 16]

FIGURES is the JSON `python -m benchmarks --json` prints (benchmarks/results/s1.json after a
`--sweep`; `-` reads stdin). Each phase of the clean run is a fixed cost plus a cost per unit of its
work: the per-unit cost is the slope between the main lake and the lake a tenth its size (what one
more unit costs, the start-up of each phase left out), the fixed part what is left at the main lake.
A phase that runs on the executors is spread over them (the run measured on `cores` cores; one
executor = one core); one that runs on the driver is not. Against that stands what S3 allows one
executor (one request in flight at a time), and a phase takes the longer of the two. The rest of
the run (process and Spark start-up, shutdown) stays as measured.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import typer

# lakeFS's design target for GC: 20M objects, 1K branches, 30K commits, 5M uncommitted, 1M stale.
TARGET = {"listed": 20_000_000, "staged": 5_000_000, "commits": 30_000, "candidates": 1_000_000}
TARGET_OBJECTS = TARGET["listed"]
# What one executor gets from S3 with one request in flight (assumptions, docs/performance.md):
LIST_KEYS_PER_S = 10_000  # ListObjectsV2: 1,000 keys a page, ~100 ms a page
RANGE_GETS_PER_S = 20  # GetObject of one range file (~100 KB): ~50 ms
DELETE_KEYS_PER_S = 1_000  # DeleteObjects: 1,000 keys a request, ~1 s a request (under 3,500/s per prefix)


@dataclass(frozen=True)
class Phase:
    name: str  # as the run's summary names it
    unit: str  # its work, as in the figures' `work`
    on_executors: bool

    def units(self, work: dict) -> float:
        if self.unit == "join":  # the trees phase reads the ranges and anti-joins the listing against them
            return work["range_entries"] + work["listed"]
        return work[self.unit]


PHASES = (
    Phase("listing the namespace", "listed", True),
    Phase("snapshotting uncommitted references", "staged", False),
    Phase("choosing active commits", "commits", False),
    Phase("reading committed trees", "join", True),
    Phase("writing candidates", "candidates", True),
    Phase("re-checking and deleting candidates", "candidates", True),
)
UNITS = {
    "listed": "objects listed",
    "staged": "staged entries",
    "commits": "commits",
    "join": "range entries + listed objects",
    "candidates": "candidates",
}


@dataclass(frozen=True)
class Projected:
    phase: Phase
    measured_units: float
    measured_s: float
    per_unit_s: float  # marginal seconds per unit, on the measured machine (all its cores)
    from_slope: bool  # False: no slope measured (noise, or the same work at both sizes), the mean charged
    fixed_s: float
    target_units: float
    compute_s: float
    s3_s: float | None

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.s3_s or 0.0)


def target_work(work: dict) -> dict:
    """The design target's work: its own counts, and range entries (and range files) per object as
    the measured lake has them (S1 grows its trees in proportion to its objects)."""
    per_object = TARGET_OBJECTS / work["listed"]
    return {**TARGET, "range_entries": work["range_entries"] * per_object, "ranges": work["ranges"] * per_object}


def project(figures: dict, executors: int) -> tuple[list[Projected], float]:
    """Each modelled phase at the target on `executors`, and the fixed rest of the run (seconds)."""
    phases, small_phases = figures["phases"], figures["small_phases"]
    target = target_work(figures["work"])
    speedup = executors / figures["cores"]
    projected = []
    for phase in PHASES:
        units, small_units = phase.units(figures["work"]), phase.units(figures["small_work"])
        seconds, small_seconds = phases.get(phase.name, 0.0), small_phases.get(phase.name, 0.0)
        slope = (seconds - small_seconds) / (units - small_units) if units > small_units else 0.0
        per_unit = slope if slope > 0 else seconds / units  # no slope seen: charge the mean (pessimistic)
        fixed = max(0.0, seconds - per_unit * units)
        work_s = phase.units(target) * per_unit
        projected.append(
            Projected(
                phase,
                units,
                seconds,
                per_unit,
                slope > 0,
                fixed,
                phase.units(target),
                fixed + (work_s / speedup if phase.on_executors else work_s),
                _s3_seconds(phase, target, executors),
            )
        )
    rest = figures["lakegc_s"] - sum(p.measured_s for p in projected)  # start-up, shutdown, phases not modelled
    return projected, rest


def _s3_seconds(phase: Phase, target: dict, executors: int) -> float | None:
    if phase.unit == "listed":
        return target["listed"] / (LIST_KEYS_PER_S * executors)
    if phase.unit == "join":
        return target["ranges"] / (RANGE_GETS_PER_S * executors)
    if phase.name.startswith("re-checking and deleting"):
        return target["candidates"] / (DELETE_KEYS_PER_S * executors)
    return None


def table(figures: dict, executors: int) -> str:
    projected, rest = project(figures, executors)
    lines = [
        f"Measured: S1 at {figures['objects']:,} objects and {figures['small_objects']:,} (lake / 10), "
        f"{figures['cores']} cores, clean run {figures['lakegc_s']} s. "
        f"Target: {TARGET_OBJECTS:,} objects, {TARGET['commits']:,} commits, {TARGET['staged']:,} staged, "
        f"{TARGET['candidates']:,} stale, on {executors} executors of one core.",
        "",
        f"| phase | runs on | work unit | measured units | measured s | µs per unit on {figures['cores']} cores "
        "| fixed s "
        "| target units | compute s | S3 requests s | projected s |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for p in projected:
        lines.append(
            f"| {p.phase.name} | {'executors' if p.phase.on_executors else 'driver'} | {UNITS[p.phase.unit]} "
            f"| {p.measured_units:,.0f} | {p.measured_s:.1f} "
            f"| {p.per_unit_s * 1e6:,.2f}{'' if p.from_slope else ' (mean)'} "
            f"| {p.fixed_s:.1f} "
            f"| {p.target_units:,.0f} | {p.compute_s:,.0f} | "
            f"{'-' if p.s3_s is None else f'{p.s3_s:,.0f}'} | {p.seconds:,.0f} |"
        )
    total = sum(p.seconds for p in projected) + rest
    lines += [
        f"| start-up, shutdown, other | driver | - | - | {rest:.1f} | - | {rest:.1f} | - | {rest:.0f} | - "
        f"| {rest:.0f} |",
        f"| **total** | | | | {figures['lakegc_s']:.1f} | | | | | | **{total:,.0f}** ({total / 60:,.1f} min) |",
    ]
    return "\n".join(lines)


def main(
    figures: str = typer.Argument("benchmarks/results/s1.json", help="The benchmark's JSON ('-': stdin)."),
    executors: int = typer.Option(16, "--executors", help="Executors of one core each."),
) -> None:
    doc = json.loads(sys.stdin.read() if figures == "-" else Path(figures).read_text())
    missing = {"phases", "work", "small_phases", "small_work", "cores"} - set(doc)
    if missing:
        sys.exit(
            f"error: {figures} has no {', '.join(sorted(missing))} (figures from before the cost model): "
            "run `python -m benchmarks --json` again"
        )
    print(table(doc, executors))


if __name__ == "__main__":
    typer.run(main)
