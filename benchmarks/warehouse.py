"""`lakegc warehouse gc` on a warehouse the size of S1: Delta and Iceberg tables, a lakegc repository
and stray files side by side under one prefix.

The warehouse (`wh/`): 1,000,000 objects, of which 950,000 are kept and 50,000 are garbage.
- `delta/d0` .. `delta/d3`: four Delta tables partitioned on `p` (100 folders each), 76 % of the
  kept files between them, committed as a real log of a few large commits: a first commit of add
  actions, a second of more adds, a third removing some of the first's files (removed 30 days ago),
  a checkpoint, and a small append after it;
- `iceberg/i0`, `iceberg/i1`: two Iceberg tables of the pyiceberg SQL catalog `bench` (SQLite, its
  database outside `wh/`), 19 % of the kept files, each in four fast appends;
- `repos/bench`: the namespace of the lakegc repository `bench` (a few uploads, committed), which
  also links the files of `landing/` (outside every table, kept because the repository names them:
  most committed, the last tenth only staged);
- garbage: half of it stray files outside every table (`stray/job-NNN/`, a few at the root, a
  failed job's output), half inside the tables: files no Delta commit ever named, the files the
  third commit removed, and Iceberg data files no snapshot names.
Data files are 8 bytes, written directly (the tables' metadata names them; nothing reads them).
Every object is backdated 30 days; the run keeps 7 days. `lakegc warehouse gc wh/ --iceberg-catalog
bench --delta-under wh/delta --repositories` runs as its own process from a cold start, with its
own home and metastore, and must delete exactly the garbage.

    python -m benchmarks.warehouse                  # 1M objects
    python -m benchmarks.warehouse --objects 20000  # smaller; --json prints the figures
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from benchmarks.measure import Measured, dataset_main, run, write_aged

AGE_S = 30 * 86_400
DELTA_TABLES = 4
ICEBERG_TABLES = 2
APPENDS = 4  # per Iceberg table
FOLDERS = 100  # partition (Delta) or data (Iceberg) folders per table, stray job folders
UPLOADS = 5
CATALOG = "bench"
REPO = "bench"


@dataclass(frozen=True)
class Counts:
    """How `objects` objects (`garbage` of them garbage) are shared out (metadata files come on top)."""

    objects: int
    garbage: int

    @property
    def outside(self) -> int:  # garbage outside every table
        return self.garbage // 2

    @property
    def orphans(self) -> int:  # Iceberg data files no snapshot names
        return (self.garbage - self.outside) // 4

    @property
    def removed(self) -> int:  # Delta files removed 30 days ago
        return (self.garbage - self.outside - self.orphans) // 2

    @property
    def untracked(self) -> int:  # Delta files no commit named
        return self.garbage - self.outside - self.orphans - self.removed

    @property
    def landing(self) -> int:  # files the repository links
        return max(10, self.objects // 1000)

    @property
    def table_files(self) -> int:  # kept data files of all the tables
        return self.objects - self.garbage - self.landing - UPLOADS

    @property
    def iceberg(self) -> int:
        return self.table_files // 5

    @property
    def delta(self) -> int:
        return self.table_files - self.iceberg


def split(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


@dataclass
class Built:
    """What the builder planted, keys relative to `wh/`: all the garbage, and every 97th kept file."""

    garbage: set[str] = field(default_factory=set)
    kept_sample: list[str] = field(default_factory=list)
    seen: int = 0

    def kept(self, key: str) -> None:
        if self.seen % 97 == 0:
            self.kept_sample.append(key)
        self.seen += 1


def build(workdir: Path, counts: Counts, console: Console) -> tuple[Built, dict[str, str]]:
    """Build the warehouse under `workdir` (emptied first); returns what was planted and the
    environment the run needs (its home, metastore and catalog)."""
    for name in ("warehouse", "warehouse-home", "warehouse-catalog.db"):
        path = workdir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    wh, home = workdir / "warehouse" / "wh", workdir / "warehouse-home"
    wh.mkdir(parents=True)
    env = {
        "LAKEGC_HOME": str(home),
        "LAKEGC_METASTORE": f"sqlite:///{home / 'lakegc.db'}",
        f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI": f"sqlite:///{workdir / 'warehouse-catalog.db'}",
        f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE": wh.as_uri(),
    }
    started, when, built = time.monotonic(), time.time() - AGE_S, Built()
    _build_delta(wh, counts, when, built)
    _build_iceberg(wh, env, counts, when, built)
    _build_repository(wh, env, counts, when, built)
    for i in range(counts.outside):  # a failed job's output; the first few at the root
        key = f"tmp-upload-{i:04d}" if i < 10 else f"stray/job-{i % FOLDERS:03d}/part-{i:07d}.parquet"
        write_aged(wh / key, when)
        built.garbage.add(key)
    for folder in [*wh.glob("delta/*/_delta_log"), *wh.glob("iceberg/*/metadata"), wh / "repos"]:
        _age_tree(folder, when)  # what the libraries wrote (logs, manifests, the repository's own)
    console.print(f"built the warehouse: {_count(wh):,} objects in {time.monotonic() - started:.0f} s")
    return built, env


def _build_delta(wh: Path, counts: Counts, when: float, built: Built) -> None:
    from deltalake import DeltaTable, Field, Schema
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

    schema = Schema([Field("p", "string"), Field("value", "string")])
    live, removed, untracked = (split(n, DELTA_TABLES) for n in (counts.delta, counts.removed, counts.untracked))
    for t in range(DELTA_TABLES):
        table, prefix = wh / "delta" / f"d{t}", f"delta/d{t}/"
        adds = []
        for i in range(live[t] + removed[t]):
            key = f"p={i % FOLDERS:03d}/part-{i:07d}.parquet"
            write_aged(table / key, when)
            adds.append(AddAction(key, 8, {"p": key[2:5]}, int(when * 1000), True, ""))
            if i < removed[t]:
                built.garbage.add(prefix + key)
            else:
                built.kept(prefix + key)
        for i in range(untracked[t]):
            key = f"p={i % FOLDERS:03d}/stray-{i:07d}.parquet"
            write_aged(table / key, when)
            built.garbage.add(prefix + key)
        tail = max(1, live[t] // 100)  # the append after the checkpoint
        first = removed[t] + (live[t] - tail) // 2
        gone = [RemoveAction(a.path, True, int(when * 1000), 8, a.partition_values) for a in adds[: removed[t]]]
        create_table_with_add_actions(str(table), schema, adds[:first], mode="error", partition_by=["p"])
        for actions in (adds[first:-tail], gone, None, adds[-tail:]):  # each on the table as it is now
            if actions is None:
                DeltaTable(str(table)).create_checkpoint()
            else:
                DeltaTable(str(table)).create_write_transaction(actions, "append", schema, partition_by=["p"])


def _build_iceberg(wh: Path, env: dict[str, str], counts: Counts, when: float, built: Built) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField

    upper = CATALOG.upper()
    catalog = SqlCatalog(
        CATALOG, uri=env[f"PYICEBERG_CATALOG__{upper}__URI"], warehouse=env[f"PYICEBERG_CATALOG__{upper}__WAREHOUSE"]
    )
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    live, orphans = split(counts.iceberg, ICEBERG_TABLES), split(counts.orphans, ICEBERG_TABLES)
    for t in range(ICEBERG_TABLES):
        folder, prefix = wh / "iceberg" / f"i{t}", f"iceberg/i{t}/"
        table = catalog.create_table(f"db.i{t}", schema=schema, location=folder.as_uri())
        start = 0
        for size in split(live[t], APPENDS):
            files = []
            for i in range(start, start + size):
                key = f"data/g{i % FOLDERS:03d}/part-{i:07d}.parquet"
                write_aged(folder / key, when)
                built.kept(prefix + key)
                files.append(
                    DataFile.from_args(
                        content=DataFileContent.DATA,
                        file_path=(folder / key).as_uri(),
                        file_format=FileFormat.PARQUET,
                        partition=Record(),
                        record_count=1,
                        file_size_in_bytes=8,
                    )
                )
            start += size
            with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
                for data_file in files:
                    append.append_data_file(data_file)
        for i in range(orphans[t]):
            key = f"data/g{i % FOLDERS:03d}/orphan-{i:07d}.parquet"
            write_aged(folder / key, when)
            built.garbage.add(prefix + key)


def _build_repository(wh: Path, env: dict[str, str], counts: Counts, when: float, built: Built) -> None:
    """The repository `bench` over `wh/repos/bench`: a few uploads, and links to `landing/`'s files
    (committed, the last tenth only staged)."""
    from lakegc.repo.repository import Lake

    lake = Lake(env["LAKEGC_METASTORE"])
    lake.create_repository(REPO, str(wh / "repos" / REPO))
    repo = lake.repository(REPO)
    for i in range(UPLOADS):
        repo.upload("main", f"docs/readme-{i}.txt", f"upload {i}\n".encode())
    staged_from = counts.landing - counts.landing // 10
    for i in range(counts.landing):
        key = f"landing/batch-{i % 50:02d}/file-{i:07d}.json"
        write_aged(wh / key, when)
        built.kept(key)
        repo.link("main", key, (wh / key).as_uri(), 8, "0" * 32)
        if i + 1 == staged_from:
            repo.commit("main", "uploads and the landing files")


def _age_tree(folder: Path, when: float) -> None:
    for root, _, names in os.walk(folder):
        for name in names:
            os.utime(os.path.join(root, name), (when, when))


def _count(wh: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(wh))


def check(wh: Path, built: Built, deleted: list[str], before: int) -> None:
    """Exactly the garbage is gone: the run's list is the garbage, none of it is left, the sampled
    kept files are all there, and the warehouse lost exactly that many files."""
    wrong = set(deleted) ^ built.garbage
    left = sum(1 for key in built.garbage if (wh / key).exists())
    lost = sum(1 for key in built.kept_sample if not (wh / key).exists())
    after = _count(wh)
    if wrong or left or lost or after != before - len(built.garbage):
        raise SystemExit(
            f"wrong deletes: {len(set(deleted) - built.garbage)} not planted deleted "
            f"(e.g. {sorted(set(deleted) - built.garbage)[:3]}), {len(built.garbage - set(deleted))} planted "
            f"not in the run's list, {left} left on disk, {lost} sampled kept files gone, "
            f"{before - after:,} files fewer (planted {len(built.garbage):,})"
        )


def measure(workdir: Path, objects: int, garbage: int, console: Console) -> dict:
    """Build the warehouse under `workdir`, then time `lakegc warehouse gc` from a cold start."""
    built, env = build(workdir, Counts(objects, garbage), console)
    wh = workdir / "warehouse" / "wh"
    before = _count(wh)
    theirs = {k: v for k, v in os.environ.items() if not k.startswith("PYICEBERG_CATALOG__")}
    command = [
        sys.executable,
        "-m",
        "lakegc",
        "warehouse",
        "gc",
        str(wh),
        "--iceberg-catalog",
        CATALOG,
        "--delta-under",
        str(wh / "delta"),
        "--repositories",
        "--json",
    ]
    ours: Measured = run(command, {**theirs, **env})
    done = ours.json()
    check(wh, built, done["files"], before)
    return {
        "warehouse_objects": objects,
        "warehouse_garbage": len(built.garbage),
        "warehouse_listed": done["num_listed"],
        "warehouse_s": ours.seconds,
        "warehouse_rss_mb": ours.rss_mb,
        "warehouse_jvm_rss_mb": ours.jvm_rss_mb,
        "warehouse_deleted": done["num_deleted"],
        "warehouse_phases": done["phases"],
    }


def main() -> None:
    dataset_main(__doc__, measure, summary)


def summary(figures: dict) -> str:
    return (
        f"warehouse of {figures['warehouse_listed']:,} objects (4 Delta tables, 2 Iceberg tables, a repository, "
        f"stray files): lakegc warehouse gc deleted {figures['warehouse_deleted']:,} in {figures['warehouse_s']} s "
        f"(peak RSS {figures['warehouse_rss_mb']:.0f} MB, JVM {figures['warehouse_jvm_rss_mb']:.0f} MB)"
    )


if __name__ == "__main__":
    main()
