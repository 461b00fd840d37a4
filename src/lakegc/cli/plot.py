"""PNG plots for people: the retention curve of `gc simulate`."""

from __future__ import annotations

from pathlib import Path

from lakegc.errors import InvalidArgument
from lakegc.repogc.simulate import RetentionCurve


def check_target(path: str) -> Path:
    """Refuse, before any work, a plot that could not be written."""
    target = Path(path)
    if target.is_dir():
        raise InvalidArgument(f"--plot {path!r} is a folder: give a file name such as curve.png")
    if not target.parent.is_dir():
        raise InvalidArgument(f"cannot write the plot to {path!r}: no folder {str(target.parent)!r}")
    return target


def plot_curve(curve: RetentionCurve, path: str) -> Path:
    """Bytes a run would free against the retention it keeps (days), one marker per point."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file, from a terminal, a pipe or a scheduler alike
    import matplotlib.pyplot as plt

    target = check_target(path)
    points = sorted(curve.points, key=lambda p: p.seconds)
    days = [p.seconds / 86_400 for p in points]
    unit, scale = _unit(max((p.bytes for p in points), default=0))
    freed = [p.bytes / scale for p in points]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    try:
        ax.plot(days, freed, marker="o", color="#0969da")
        for p, x, y in zip(points, days, freed):
            ax.annotate(f"{p.retention}\n{p.num_candidates:,} objects", (x, y), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=8)  # fmt: skip
        ax.set_xlabel("retention (days)")
        ax.set_ylabel(f"freed ({unit})")
        ax.set_title(f"{curve.repository}: what a GC run would free, by retention")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        fig.tight_layout()
        try:
            fig.savefig(target, format="png")
        except OSError as exc:
            raise InvalidArgument(f"cannot write the plot to {path!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return target


def _unit(largest: int) -> tuple[str, int]:
    """The binary unit that shows the largest value as a number people read (1.5 GiB, not 1.6e9)."""
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if largest >= 1024**power:
            return unit, 1024**power
    return "bytes", 1
