"""The scaling sweep as a picture: wall time and peak memory against lake size."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_sweep(rows: list[dict], path: Path) -> None:
    objects = [r["objects"] / 1e6 for r in rows]
    fig, (time_ax, mem_ax) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    time_ax.plot(objects, [r["lakegc_s"] for r in rows], "o-", label="lakegc clean run")
    time_ax.plot(objects, [r["floor_s"] for r in rows], "s--", label="floor (bare I/O)")
    time_ax.set(xlabel="objects in the namespace (millions)", ylabel="wall seconds", title="Time", ylim=(0, None))
    mem_ax.plot(objects, [r["driver_rss_mb"] for r in rows], "o-", label="Python driver")
    mem_ax.plot(objects, [r["jvm_rss_mb"] for r in rows], "^-", label="Spark JVM (driver + local executors)")
    mem_ax.set(xlabel="objects in the namespace (millions)", ylabel="peak RSS (MB)", title="Memory", ylim=(0, None))
    for ax in (time_ax, mem_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)
