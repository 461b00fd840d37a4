"""`python -m benchmarks.cli [--json] [--runs N]`: how long a `lakegc` command takes to answer.

People and scripts call the metadata commands in loops (a backfill that stats ten thousand paths,
a shell completion, a CI step reading a tag), so each figure is the median wall time of N fresh
processes (10 by default) of the installed console script, as a user runs it, on a small
repository in the default SQLite metastore, its output going to a pipe, with Python's bytecode
cached as it is on any machine after a command's first run (one untimed run first; the benchmark
clears PYTHONDONTWRITEBYTECODE for its processes):

    cli_version_s   lakegc --version
    cli_log_s       lakegc log lakegc://small/main
    cli_fs_ls_s     lakegc fs ls lakegc://small/main/           (reads a tree: Parquet, with Arrow)
    cli_stat_s      lakegc fs stat lakegc://small/main/PATH --json   (a committed path: reads a tree)

The import-time floor beside them: a bare `python -c pass`, and the interpreter importing typer,
Arrow and Arrow's Parquet reader, which no command that reads a tree can avoid.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "cli_version_s": ["--version"],
    "cli_log_s": ["log", "lakegc://small/main"],
    "cli_fs_ls_s": ["fs", "ls", "lakegc://small/main/"],
    "cli_stat_s": ["fs", "stat", "lakegc://small/main/events/day=03/part-0007.parquet", "--json"],
}
FLOORS = {
    "python_s": ["-c", "pass"],
    "import_typer_s": ["-c", "import typer"],
    "import_arrow_s": ["-c", "import typer, pyarrow, pyarrow.compute, pyarrow.parquet"],
}


def build(home: Path) -> dict[str, str]:
    """A small repository (five commits of 20 files, a branch, a tag, one staged file) in a fresh
    SQLite metastore at `home`; the environment that points commands at it."""
    from lakegc.repo.repository import Lake

    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    lake = Lake(f"sqlite:///{home / 'lakegc.db'}")
    lake.create_repository("small", str(home / "ns"))
    repo = lake.repository("small")
    for day in range(5):
        for part in range(20):
            repo.upload("main", f"events/day={day:02}/part-{part:04}.parquet", f"{day}-{part}".encode())
        repo.commit("main", f"day {day}")
    repo.create_branch("dev", "main")
    repo.create_tag("v1", "main")
    repo.upload("main", "events/staged.parquet", b"staged")
    env = {**os.environ, "LAKEGC_HOME": str(home), "LAKEGC_METASTORE": f"sqlite:///{home / 'lakegc.db'}"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as on any machine after the first run
    return env


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of `runs` fresh processes of `argv`, each checked to succeed, after one untimed
    run (which writes the bytecode of any module not yet compiled)."""
    seconds = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        seconds.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode().strip()}")
    return seconds[1:]


def measure(workdir: Path, runs: int = 10) -> dict:
    """The figures: each command's median, and its fastest and slowest run beside it."""
    env = build(workdir / "cli")
    script = str(Path(sys.executable).parent / "lakegc")
    figures: dict = {"runs": runs}
    for name, args in {**{k: [script, *v] for k, v in COMMANDS.items()}, **FLOORS}.items():
        argv = args if name in COMMANDS else [sys.executable, *args]
        seconds = timed(argv, env, runs)
        figures[name] = round(statistics.median(seconds), 3)
        figures[name.removesuffix("_s") + "_range_s"] = [round(min(seconds), 3), round(max(seconds), 3)]
    return figures


def summary(figures: dict) -> str:
    return (
        f"lakegc answers (median of {figures['runs']} fresh processes): --version {figures['cli_version_s']} s, "
        f"log {figures['cli_log_s']} s, fs ls {figures['cli_fs_ls_s']} s, fs stat {figures['cli_stat_s']} s "
        f"(python alone {figures['python_s']} s; importing typer and Arrow {figures['import_arrow_s']} s)"
    )


def main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("LAKEGC_BENCH_DIR", "/tmp/lakegc-bench")))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.workdir, args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"lakegc's start: median of {args.runs} fresh processes, small repository, SQLite")
    for column in ("command", "median s", "fastest s", "slowest s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, argv in {**COMMANDS, **FLOORS}.items():
        low, high = figures[name.removesuffix("_s") + "_range_s"]
        shown = "lakegc " + " ".join(argv) if name in COMMANDS else "python " + " ".join(argv)
        table.add_row(shown, f"{figures[name]:.3f}", f"{low:.3f}", f"{high:.3f}")
    Console().print(table)
    print(summary(figures))


if __name__ == "__main__":
    main()
