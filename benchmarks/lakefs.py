"""`lakegc lakefs gc` on a lakeFS-format namespace the size of S1, behind the lakeFS API stand-in.

The namespace: 1,000,000 objects in 1,000 partition folders of `data/` (lakeFS's newer layout), of
which 950,000 are committed on `main` (one commit: its tree written as lakeFS writes it, ranges of
50,000 entries and a metarange, SSTables with lakeFS's value framing and file ids) and 50,000 are
leftovers no commit and no staging area names (a failed writer's uploads). Every object is
backdated 30 days; GC rules keep 7 days. lakeFS is the stand-in the tests use (`tests/support`,
lakeFS's REST API from its spec, in this process); `lakegc lakefs gc` runs as its own process from
a cold start and must delete exactly the 50,000 leftovers.

    python -m benchmarks.lakefs                  # 1M objects
    python -m benchmarks.lakefs --objects 20000  # smaller; --json prints the figures
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from benchmarks.measure import Measured, dataset_main, run, write_aged

FOLDERS = 1000
RANGE_ENTRIES = 50_000
AGE_S = 30 * 86_400
REPO = "repo1"


def _address(i: int, kind: str) -> str:
    return f"data/g{i % FOLDERS:04d}/{kind}{i:08d}"


@contextmanager
def standin(blockstore: Path, objects: int, stale: int, console: Console) -> Iterator[object]:
    """The stand-in serving a repository whose namespace holds `objects` objects, `stale` of them
    referenced by nothing (the namespace is built on entering)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.lakefs_standin import running_standin

    started, when = time.monotonic(), time.time() - AGE_S
    with running_standin(blockstore, range_size=RANGE_ENTRIES, uncommitted_page_size=100_000) as lakefs:
        model = lakefs.model
        model.create_repository(REPO, f"local://{REPO}")
        model.set_gc_rules(REPO, 7)
        namespace = blockstore / REPO
        for i in range(objects - stale):
            address = _address(i, "c")
            write_aged(namespace / address, when)
            model.stage(REPO, "main", f"tables/t{i % FOLDERS:03d}/part-{i:08d}.parquet", address, size=8)
        model.commit(REPO, "main")
        for i in range(stale):
            write_aged(namespace / _address(i, "s"), when)
        console.print(f"built the lakeFS namespace: {objects:,} objects in {time.monotonic() - started:.0f} s")
        yield lakefs


def check(namespace: Path, objects: int, stale: int) -> None:
    """Exactly the leftovers are gone."""
    left = sum(1 for i in range(stale) if (namespace / _address(i, "s")).exists())
    lost = sum(1 for i in range(0, objects - stale, 97) if not (namespace / _address(i, "c")).exists())
    if left or lost:
        raise SystemExit(f"wrong deletes: {left} leftovers left, {lost} sampled committed objects gone")


def measure(workdir: Path, objects: int, stale: int, console: Console) -> dict:
    """Build the namespace under `workdir`, then time `lakegc lakefs gc` from a cold start."""
    import shutil

    blockstore, home = workdir / "lakefs-blockstore", workdir / "lakefs-home"
    shutil.rmtree(blockstore, ignore_errors=True)
    with standin(blockstore, objects, stale, console) as lakefs:
        env = {**os.environ, "LAKEGC_HOME": str(home)}
        command = [
            sys.executable,
            "-m",
            "lakegc",
            "lakefs",
            "gc",
            REPO,
            "--endpoint",
            lakefs.endpoint,
            "--access-key-id",
            lakefs.access_key_id,
            "--secret-access-key",
            lakefs.secret_access_key,
            "--local-path",
            str(blockstore),
            "--min-age",
            "7d",
            "--json",
        ]
        ours: Measured = run(command, env)
    check(blockstore / REPO, objects, stale)
    deleted = ours.json()["num_deleted_objects"]
    return {
        "lakefs_objects": objects,
        "lakefs_stale": stale,
        "lakefs_s": ours.seconds,
        "lakefs_rss_mb": ours.rss_mb,
        "lakefs_jvm_rss_mb": ours.jvm_rss_mb,
        "lakefs_deleted": deleted,
    }


def main() -> None:
    dataset_main(__doc__, measure, summary)


def summary(figures: dict) -> str:
    return (
        f"lakeFS namespace of {figures['lakefs_objects']:,} objects: lakegc lakefs gc deleted "
        f"{figures['lakefs_deleted']:,} in {figures['lakefs_s']} s (peak RSS {figures['lakefs_rss_mb']:.0f} MB, "
        f"JVM {figures['lakefs_jvm_rss_mb']:.0f} MB)"
    )


if __name__ == "__main__":
    main()
