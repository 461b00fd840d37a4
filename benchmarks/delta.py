"""`lakegc delta gc` against delta-rs's own full VACUUM, on one Delta table the size of S1.

The table: 1,000,000 files in 1,000 partition folders (`p=000/` ...), of which 950,000 are live
(the log names them: one commit of add actions, then a checkpoint, as a real table that has been
checkpointed starts) and 50,000 are files the log never named (a failed job's leftovers), every
file backdated 30 days. Both tools then vacuum it with the table's default 7-day retention, each
as its own process from a cold start (`measure.run`): delta-rs `vacuum(full=True)` first, then
the 50,000 stale files are written back and `lakegc delta gc` runs. Each must delete exactly
the 50,000 stale files and nothing else.

    python -m benchmarks.delta                 # 1M files (building the table takes a few minutes)
    python -m benchmarks.delta --files 100000  # smaller; --json prints the figures as JSON
    python -m benchmarks.delta --files 2000 --warm --workdir /tmp/x --results /tmp/x/delta.json  # the smoke test

The table is kept in the work folder and reused while its size matches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.measure import Measured, keep_caches, run, write_aged

FOLDERS = 1000
AGE_S = 30 * 86_400
RESULTS = Path(__file__).parent / "results" / "delta.json"


def build(table: Path, files: int, stale: int, console: Console) -> None:
    """Write the table (skipped when a table of this size is already there)."""
    marker = table / "_delta_log" / f"lakegc-bench-{files}-{stale}"
    if marker.exists():
        return
    from deltalake import DeltaTable, Field, Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    if table.exists():
        import shutil

        shutil.rmtree(table)
    started = time.monotonic()
    when = time.time() - AGE_S
    adds = []
    for i in range(files - stale):
        key = _key(i, "live")
        write_aged(table / key, when)
        adds.append(AddAction(key, 8, {"p": key[2:5]}, int(when * 1000), True, ""))
    for i in range(stale):
        write_aged(table / _key(i, "stale"), when)
    create_table_with_add_actions(
        str(table), Schema([Field("p", "string"), Field("value", "string")]), adds, mode="error", partition_by=["p"]
    )
    DeltaTable(str(table)).create_checkpoint()
    marker.write_text("")
    console.print(f"built the table: {files:,} files in {time.monotonic() - started:.0f} s")


def restore_stale(table: Path, stale: int) -> None:
    when = time.time() - AGE_S
    for i in range(stale):
        write_aged(table / _key(i, "stale"), when)


def _key(i: int, kind: str) -> str:
    return f"p={i % FOLDERS:03d}/{kind}-{i:07d}.parquet"


def check(table: Path, files: int, stale: int) -> None:
    """Exactly the stale files are gone."""
    left = sum(1 for i in range(stale) if (table / _key(i, "stale")).exists())
    lost = sum(1 for i in range(0, files - stale, 97) if not (table / _key(i, "live")).exists())
    if left or lost:
        raise SystemExit(f"wrong deletes: {left} stale files left, {lost} sampled live files gone")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--stale", type=int, default=None, help="default: 5 % of --files")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("LAKEGC_BENCH_DIR", "/tmp/lakegc-bench")))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the figures are written")
    parser.add_argument("--warm", action="store_true", help="keep the caches (quick runs, the smoke test)")
    args = parser.parse_args()
    if args.warm:
        keep_caches()
    stale = args.stale if args.stale is not None else args.files // 20
    console = Console(stderr=True)
    figures = compare(args.workdir, args.files, stale, console)
    args.results.write_text(json.dumps(figures, indent=2) + "\n")
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    out = Table(title=f"Delta VACUUM (full, 7-day retention), {args.files:,} files, {stale:,} stale")
    for column in ("run", "wall s", "× delta-rs", "peak RSS MB", "JVM peak RSS MB", "deleted", "cold"):
        out.add_column(column, justify="left" if column == "run" else "right")
    peer = figures["delta_rs"]
    for name, key in (
        ("delta-rs vacuum(full=True)", "delta_rs"),
        ("lakegc delta gc", "lakegc"),
        ("lakegc delta gc, warm engine", "lakegc_warm"),
    ):
        m = figures[key]
        out.add_row(
            name,
            f"{m['seconds']:.1f}",
            f"{m['seconds'] / peer['seconds']:.2f}",
            f"{m['rss_mb']:.0f}",
            f"{m['jvm_rss_mb']:.0f}" if m["jvm_rss_mb"] else "–",
            f"{m['deleted']:,}",
            "yes" if m["cold"] else "no",
        )
    Console().print(out)


def compare(workdir: Path, files: int, stale: int, console: Console) -> dict:
    """Build (or reuse) the table under `workdir`, then time delta-rs's full vacuum, `lakegc delta
    gc` from a cold start, and `lakegc delta gc` through a warm engine (started, warmed by one
    untimed dry run, stopped), the stale files written back before each; each checked."""
    from benchmarks.contenders import warm_engine

    table, home = workdir / "delta-table", workdir / "delta-home"
    build(table, files, stale, console)
    restore_stale(table, stale)  # a table built by an earlier invocation lost them to its runs
    env = {**os.environ, "LAKEGC_HOME": str(home)}
    peer = run(
        [
            sys.executable,
            "-c",
            "import sys, json; from deltalake import DeltaTable; "
            "print(json.dumps({'deleted': len(DeltaTable(sys.argv[1]).vacuum(dry_run=False, full=True))}))",
            str(table),
        ],
        env,
    )
    check(table, files, stale)
    restore_stale(table, stale)
    command = [sys.executable, "-m", "lakegc", "delta", "gc", str(table), "--json"]
    ours = run(command, env)
    check(table, files, stale)
    restore_stale(table, stale)
    with warm_engine(env, console, warm_up=[*command, "--dry-run"]):
        warm = run(command, env)
    check(table, files, stale)
    figures = {
        "date": time.strftime("%Y-%m-%d"),
        "files": files,
        "stale": stale,
        "delta_rs": _figures(peer, peer.json()["deleted"]),
        "lakegc": _figures(ours, ours.json()["num_deleted"]),
        "lakegc_warm": _figures(warm, warm.json()["num_deleted"]),
    }
    figures["ratio"] = round(ours.seconds / peer.seconds, 2)
    figures["ratio_warm"] = round(warm.seconds / peer.seconds, 2)
    return figures


def _figures(m: Measured, deleted: int) -> dict:
    return {"seconds": m.seconds, "rss_mb": m.rss_mb, "jvm_rss_mb": m.jvm_rss_mb, "deleted": deleted, "cold": m.cold}


if __name__ == "__main__":
    main()
