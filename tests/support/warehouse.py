"""A realistic warehouse folder for `lakegc warehouse gc`: Iceberg tables of two catalogs, Delta tables,
a lakegc repository, tables no system names, and stray files of failed writes, side by side under
one root, with the builder's own account of what a run must delete and what it must keep.

Layout under `root = tmp_path / "wh"` (every file aged 30 days unless said otherwise):

    iceberg/t          cat_a `db.t`: 3 appends; also registered in cat_b as `db.t_copy` (one table, two names)
    iceberg/t2         cat_a `db.t2`: 1 append; a prefix twin of `t` (the string `iceberg/t` starts it)
    iceberg/events     cat_b `db.events`: identity-partitioned on `_key` (folders `data/_key=a/`, a `_` segment
                       that is a partition folder, not hidden), 2 appends
    iceberg/dropped    cat_a `db.dropped`: 1 append, then dropped without purge: metadata/*.metadata.json
                       remains and no catalog lists it (unowned)
    delta/sales        Delta, `delta.deletedFileRetentionDuration` = 1 day, 3 overwrites: versions 0 and 1
                       rewritten as made 31 and 30 days ago (the file removed at version 1 is past the
                       retention), version 2 made now (the file it removed is inside it); plus a stray
                       `part-stray.parquet` no commit names
    delta/sales2       Delta, default retention (7 days), 1 write; a prefix twin of `sales`
    unknown/delta_t    Delta, 2 writes, never named on the command line (unowned)
    repos/repo         the namespace of the lakegc repository `lakegc://repo`: 2 uploads, 1 commit
    stray/...          failed writes outside every table; `stray/young.parquet` is new (mtime now)
    tmp-upload-123     another one, at the root

In each of the named Iceberg tables' folders there is also `data/orphan-<n>.parquet`, which no snapshot
names (`events` has a second one inside its partition folder `data/_key=a/`), and `_tmp/hidden.bin`,
which Iceberg's own GC leaves alone (a `_` segment that is no partition folder).

The catalogs' SQLite databases live outside root (`tmp_path/cat_a.db`, `tmp_path/cat_b.db`), and so do
lakegc's metastore (`tmp_path/home`) and the uploads' sources.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import CliResult
from deltalake import DeltaTable, write_deltalake

Cli = Callable[..., CliResult]
DAY = 86_400
OLD_DAYS = 30
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("_key", pa.string())])
CATALOGS = ("cata", "catb")
DELTA_RETENTION_HOURS = {"delta/sales": 24, "delta/sales2": 7 * 24}  # the named Delta tables, root-relative


@dataclass
class Warehouse:
    """What `build_warehouse` made. Paths in the sets are relative to `root`, POSIX-spelled.

    - `catalogs`: the catalog names (`--iceberg-catalog` each); `cata`, `catb`: the pyiceberg catalogs.
    - `iceberg_tables`: (catalog, identifier) -> the table's folder, for every table a catalog lists.
    - `delta_tables`: the named Delta tables' folders (what `--delta-under delta` finds), with
      `delta_retention_hours` each one's own retention.
    - `repo_namespace`: the lakegc repository's namespace (absolute), kept whole by `--repositories`.
    - `stray_old`: old files outside every table: a run deletes them.
    - `stray_young`: files outside every table younger than `--min-age 7d`: kept.
    - `iceberg_orphans`: old files in named Iceberg tables' folders no snapshot references: a run
      naming both catalogs deletes them.
    - `iceberg_hidden`: files under a hidden segment in named Iceberg tables' folders: kept.
    - `delta_vacuum`: what delta-rs's full VACUUM dry run lists for each named Delta table at its
      own retention, at build time: a run naming the tables deletes exactly these.
    - `delta_in_retention`: files removed from a named Delta table whose tombstone is still inside the
      table's retention (their mtime is old): kept.
    - `unowned_dropped`, `unowned_delta`: every file of the dropped Iceberg table's folder and of
      the unknown Delta table: kept whole under `--unowned keep`, deleted under `--unowned delete`.
    """

    root: Path
    catalogs: tuple[str, ...]
    cat_a: Any
    cat_b: Any
    iceberg_tables: dict[tuple[str, str], str]
    delta_tables: tuple[str, ...]
    delta_retention_hours: dict[str, int]
    repo_namespace: Path
    stray_old: frozenset[str]
    stray_young: frozenset[str]
    iceberg_orphans: frozenset[str]
    iceberg_hidden: frozenset[str]
    delta_vacuum: frozenset[str]
    delta_in_retention: frozenset[str]
    unowned_dropped: frozenset[str]
    unowned_delta: frozenset[str]

    def files(self) -> set[str]:
        """Every file under root now, relative."""
        return relative_files(self.root, self.root)

    def live(self) -> set[str]:
        """What must survive a run naming both catalogs, the Delta tables (`--delta-under root/delta`)
        and `--repositories`, with `--unowned keep`. Computed from the files now: take it before the run."""
        return self.files() - self.stray_old - self.iceberg_orphans - self.delta_vacuum


def build_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli) -> Warehouse:
    """Build the warehouse described in the module's docstring; sets the catalogs' PYICEBERG_*
    variables through `monkeypatch`."""
    root = tmp_path / "wh"
    root.mkdir()
    iceberg = _build_iceberg(tmp_path, root, monkeypatch)
    delta_vacuum, in_retention = _build_delta(root)
    _write_delta(root / "unknown" / "delta_t", writes=2)
    age_tree(root / "unknown" / "delta_t")
    namespace = _build_repository(tmp_path, root, cli)
    stray_old, stray_young = _build_strays(root)
    return Warehouse(
        root=root,
        catalogs=CATALOGS,
        cat_a=iceberg["cata"],
        cat_b=iceberg["catb"],
        iceberg_tables=iceberg["tables"],
        delta_tables=tuple(DELTA_RETENTION_HOURS),
        delta_retention_hours=dict(DELTA_RETENTION_HOURS),
        repo_namespace=namespace,
        stray_old=frozenset(stray_old),
        stray_young=frozenset(stray_young),
        iceberg_orphans=frozenset(iceberg["orphans"]),
        iceberg_hidden=frozenset(iceberg["hidden"]),
        delta_vacuum=frozenset(delta_vacuum),
        delta_in_retention=frozenset(in_retention),
        unowned_dropped=frozenset(relative_files(root / "iceberg" / "dropped", root)),
        unowned_delta=frozenset(relative_files(root / "unknown" / "delta_t", root)),
    )


# -- files and ages ------------------------------------------------------------------------------
def relative_files(folder: Path, root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file()}


def age(path: Path, days_old: float = OLD_DAYS) -> None:
    when = time.time() - days_old * DAY
    os.utime(path, (when, when))


def age_tree(folder: Path, days_old: float = OLD_DAYS, skip: Callable[[Path], bool] = lambda _: False) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and not skip(path):
            age(path, days_old)


def put(path: Path, body: bytes = b"junk", days_old: float | None = OLD_DAYS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    if days_old is not None:
        age(path, days_old)
    return path


def rows(*ids: int, key: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "_key": [key] * len(ids)}, schema=SCHEMA)


def put_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    age(path)


# -- Iceberg ---------------------------------------------------------------------------------------
class _OldClock:
    """Stands in for the `time` module pyiceberg stamps snapshots with: 30 days ago."""

    @staticmethod
    def time() -> float:
        return time.time() - OLD_DAYS * DAY


def sql_catalog(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / f'{name}.db'}"
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__URI", uri)
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__WAREHOUSE", root.as_uri())
    catalog = SqlCatalog(name, uri=uri, warehouse=root.as_uri())
    catalog.create_namespace("db")
    return catalog


def _iceberg_table(
    catalog: Any, name: str, folder: Path, appends: Iterable[pa.Table], partitioned: bool = False
) -> Any:
    table = catalog.create_table(name, schema=SCHEMA, location=folder.as_uri())
    if partitioned:
        with table.update_spec() as spec:
            spec.add_identity("_key")
    for data in appends:
        table.append(data)
    return table


def _build_iceberg(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import pyiceberg.table.snapshots

    base = root / "iceberg"
    cat_a, cat_b = (sql_catalog(tmp_path, root, monkeypatch, name) for name in CATALOGS)
    with monkeypatch.context() as clock:  # snapshots stamped 30 days ago, like their files
        clock.setattr(pyiceberg.table.snapshots, "time", _OldClock)
        t = _iceberg_table(cat_a, "db.t", base / "t", [rows(1, 2), rows(3), rows(4, 5)])
        _iceberg_table(cat_a, "db.t2", base / "t2", [rows(6)])
        _iceberg_table(cat_b, "db.events", base / "events", [rows(1, key="a"), rows(2, 3, key="b")], partitioned=True)
        _iceberg_table(cat_a, "db.dropped", base / "dropped", [rows(7)])
    cat_a.drop_table("db.dropped")  # no purge: its files stay, no catalog lists it
    cat_b.register_table(("db", "t_copy"), t.metadata_location)
    orphans, hidden = set(), set()
    for n, name in enumerate(("t", "t2", "events"), 1):
        put_parquet(base / name / "data" / f"orphan-{n}.parquet", rows(100 + n))
        orphans.add(f"iceberg/{name}/data/orphan-{n}.parquet")
        put(base / name / "_tmp" / "hidden.bin")
        hidden.add(f"iceberg/{name}/_tmp/hidden.bin")
    put_parquet(base / "events" / "data" / "_key=a" / "orphan-4.parquet", rows(104, key="a"))
    orphans.add("iceberg/events/data/_key=a/orphan-4.parquet")
    age_tree(base)
    tables = {
        ("cata", "db.t"): "iceberg/t",
        ("cata", "db.t2"): "iceberg/t2",
        ("catb", "db.events"): "iceberg/events",
        ("catb", "db.t_copy"): "iceberg/t",
    }
    return {"cata": cat_a, "catb": cat_b, "tables": tables, "orphans": orphans, "hidden": hidden}


def iceberg_references(table: Any, root: Path) -> set[str]:
    """A plain reading of an Iceberg table's metadata: every file any of its snapshots needs
    (metadata files of its log, manifest lists, manifests, data files), relative to `root`."""
    uris = {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
    for snapshot in table.metadata.snapshots:
        uris.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            uris.add(manifest.manifest_path)
            uris.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return {Path(urlparse(u).path).relative_to(root).as_posix() for u in uris}


# -- Delta -----------------------------------------------------------------------------------------
def _write_delta(folder: Path, writes: int, configuration: dict[str, str] | None = None) -> None:
    for i in range(writes):
        data = pa.table({"id": pa.array([i, i + 10], pa.int64()), "v": [f"w{i}", f"x{i}"]})
        write_deltalake(str(folder), data, mode="overwrite", configuration=configuration if i == 0 else None)


def _shift_commit(log_file: Path, days: float) -> None:
    """Rewrite one commit as made `days` earlier: its actions' times and the file's mtime."""
    shift_ms = int(days * DAY * 1000)
    fields = {"commitInfo": "timestamp", "add": "modificationTime", "remove": "deletionTimestamp"}
    fields["metaData"] = "createdTime"
    actions = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    for action in actions:
        for kind, field in fields.items():
            if kind in action and action[kind].get(field) is not None:
                action[kind][field] -= shift_ms
    log_file.write_text("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions))
    when = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a) / 1000
    os.utime(log_file, (when, when))


def _removed(log_file: Path) -> set[str]:
    return {json.loads(line)["remove"]["path"] for line in log_file.read_text().splitlines() if '"remove"' in line}


def _build_delta(root: Path) -> tuple[set[str], set[str]]:
    """The named Delta tables; returns delta-rs's full VACUUM list of each (root-relative) and the
    files removed inside `sales`'s retention."""
    sales, sales2 = root / "delta" / "sales", root / "delta" / "sales2"
    _write_delta(sales, writes=3, configuration={"delta.deletedFileRetentionDuration": "interval 1 days"})
    log = sales / "_delta_log"
    _shift_commit(log / f"{0:020}.json", OLD_DAYS + 1)
    _shift_commit(log / f"{1:020}.json", OLD_DAYS)
    _write_delta(sales2, writes=1)
    for table in (sales, sales2):
        age_tree(table, skip=lambda p: "_delta_log" in p.parts)
    put_parquet(sales / "part-stray.parquet", rows(99))  # never committed
    vacuum = set()
    for relative, hours in DELTA_RETENTION_HOURS.items():
        listed = DeltaTable(str(root / relative)).vacuum(
            retention_hours=hours, dry_run=True, enforce_retention_duration=False, full=True
        )
        vacuum |= {f"{relative}/{key}" for key in listed}
    in_retention = {f"delta/sales/{key}" for key in _removed(log / f"{2:020}.json")}
    return vacuum, in_retention


# -- the repository and the strays ------------------------------------------------------------------
def _build_repository(tmp_path: Path, root: Path, cli: Cli) -> Path:
    namespace = root / "repos" / "repo"
    cli("repo", "create", "lakegc://repo", str(namespace))
    for name in ("a.txt", "b.txt"):
        source = put(tmp_path / "uploads" / name, f"content of {name}\n".encode(), days_old=None)
        cli("fs", "upload", f"lakegc://repo/main/{name}", "--source", str(source))
    cli("commit", "lakegc://repo/main", "-m", "one")
    age_tree(namespace)
    return namespace


def _build_strays(root: Path) -> tuple[set[str], set[str]]:
    old = {"stray/part-0001.parquet", "stray/deep/x.bin", "tmp-upload-123"}
    for relative in old:
        put(root / relative, b"half-written")
    young = {"stray/young.parquet"}
    for relative in young:
        put(root / relative, b"being written", days_old=None)
    return old, young
