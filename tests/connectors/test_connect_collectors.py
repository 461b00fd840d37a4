"""The foreign collectors on Spark Connect as on a classic session (issue 35): each collector's main
scenario is collected once by a command with a Spark session of its own (`--master local[2]`) and
once on a warm engine (one for the whole module, found under its LAKEGC_HOME or named with
`--remote`), each on its own twin of the same table or store. Both delete exactly the same files
(and, for the IOx catalog, the same rows), leave every other file as it was, and report the same
counts; a dry run on the engine lists exactly what the classic run deleted and changes nothing.

Delta tables and IOx stores are twinned in space (a copy: a Delta log names files relative to the
table, a catalog names objects by id). An Iceberg table's metadata names its files by absolute path,
so its twin is in time: the warehouse and the catalog database are kept as built and put back
before the engine's runs.

Every lakegc command is a process of its own: a Connect session made in the test process would turn
the other tests' sessions into Connect ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, snapshot
from deltalake import DeltaTable, write_deltalake
from support.loopback import free_port
from test_catalog_gc import NOW as CATALOG_NOW
from test_catalog_gc import World, build, create_catalog
from test_catalog_gc import candidates_of as catalog_candidates
from test_delta_gc import ROWS, oracle, stray
from test_iceberg_gc import age_all, candidates_of, deleted_of, history, ids, make_lake, snapshot_ids

USING = "using the warm engine at sc://127.0.0.1:"
# what a run's JSON says it found and did: the same on either session
COUNTS = ("state", "dry_run", "num_candidates", "candidates_by_reason", "num_deleted", "bytes_deleted", "num_failed")


@dataclass
class Engine:
    home: Path
    address: str


def lakegc(home: Path, *args: str, timeout: float = 600) -> CliResult:
    """`lakegc ARGS` as its own process, with `home` as its LAKEGC_HOME (and metastore)."""
    env = {**os.environ, "LAKEGC_HOME": str(home), "LAKEGC_METASTORE": f"sqlite:///{home / 'lakegc.db'}"}
    env.pop("LAKEGC_REMOTE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "lakegc", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """One warm engine for the module's runs, under a home of its own."""
    home = tmp_path_factory.mktemp("connect-engine") / "home"
    home.mkdir()
    try:
        started = lakegc(home, "engine", "start", "--port", str(free_port()))
        assert started.exit_code == 0, started.stderr
        yield Engine(home, started.stdout.strip())
    finally:
        lakegc(home, "engine", "stop")


def classic(home: Path, *args: str) -> dict[str, Any]:
    """A run with a session of its own."""
    home.mkdir(exist_ok=True)
    result = lakegc(home, *args, "--master", "local[2]", "--json")
    assert result.exit_code == 0, result.stderr
    assert USING not in result.stderr
    return result.json()


def on_engine(engine: Engine, *args: str, remote: bool) -> dict[str, Any]:
    """A run on the warm engine: named with --remote, or found under the engine's home (and said)."""
    named = ["--remote", engine.address] if remote else []
    result = lakegc(engine.home, *args, *named, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith(USING) is not remote, result.stderr
    assert "the warm engine was not used" not in result.stderr  # no session of its own instead
    return result.json()


def counts(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in COUNTS}


def changed(before: dict[str, tuple], after: dict[str, tuple]) -> tuple[set[str], set[str]]:
    """(the files gone, the files new) from `before` to `after`; every file left must be as it was."""
    assert {k: after[k] for k in before.keys() & after.keys()} == {k: before[k] for k in before.keys() & after.keys()}
    return before.keys() - after.keys(), after.keys() - before.keys()


# -- Delta ---------------------------------------------------------------------------------------
def _zero_retention(table: Path) -> tuple[list[str], int | None, bool]:
    """Partitioned overwrites around a checkpoint, stray files old and new, and paths delta-rs
    never lists (`_`- and `.`-prefixed): every removed file and stray goes at a zero retention."""
    for i in range(3):
        write_deltalake(table, ROWS, partition_by=["deleted"], mode="overwrite")
        if i == 1:
            DeltaTable(str(table)).create_checkpoint()
    for key in ("orphan.parquet", "deleted=false/stray.parquet", "_SUCCESS", ".hidden/x", "_foo/x"):
        stray(table, key)
    stray(table, "young.parquet", 60)
    return ["--retention", "0s", "--force"], 0, True  # the flags, and delta-rs's retention_hours and force


def _table_retention(table: Path) -> tuple[list[str], int | None, bool]:
    """The table's own retention (2 days) decides: a three-day-old stray goes, a day-old one and
    the files removed just now stay."""
    write_deltalake(table, ROWS, configuration={"delta.deletedFileRetentionDuration": "interval 2 days"})
    write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "three-days-old.parquet", 3 * 86_400)
    stray(table, "one-day-old.parquet", 86_400)
    return [], None, False


@pytest.mark.parametrize("scenario", [_zero_retention, _table_retention], ids=["zero-retention", "table-retention"])
def test_delta_gc_on_the_engine_deletes_what_a_classic_run_does(engine: Engine, tmp_path: Path, scenario) -> None:  # noqa: ANN001
    own, twin = tmp_path / "own" / "t", tmp_path / "twin" / "t"
    flags, retention_hours, force = scenario(own)
    shutil.copytree(own, twin)
    expected = oracle(own, retention_hours, force)
    assert expected  # something to delete, or the comparison proves little
    before = snapshot(own)
    assert snapshot(twin) == before

    by_own = classic(tmp_path / "home", "delta", "gc", str(own), *flags)
    dry = on_engine(engine, "delta", "gc", str(twin), *flags, "--dry-run", remote=True)
    assert snapshot(twin) == before  # the dry run deleted nothing
    by_engine = on_engine(engine, "delta", "gc", str(twin), *flags, remote=False)

    assert by_own["files"] == dry["files"] == by_engine["files"] == expected  # delta-rs's own list
    gone, new = changed(before, snapshot(own))
    assert gone == set(expected) and not new
    assert snapshot(twin) == snapshot(own)  # the same files left, as they were
    assert counts(by_engine) == counts(by_own) and by_own["state"] == "swept"
    assert (dry["state"], dry["num_candidates"], dry["num_deleted"]) == ("marked", by_own["num_candidates"], 0)
    assert DeltaTable(str(twin)).to_pyarrow_table() == DeltaTable(str(own)).to_pyarrow_table()


# -- Iceberg -------------------------------------------------------------------------------------
def test_iceberg_gc_on_the_engine_expires_and_deletes_what_a_classic_run_does(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots expired past a tag's, the files only they named, orphans old enough (data and a
    stale metadata file); hidden files, a young orphan and what the retained snapshots name stay."""
    root = tmp_path / "lake"
    root.mkdir()
    lake = make_lake(root, monkeypatch, None)  # type: ignore[arg-type]
    table, snaps = history(lake)
    lake.at(9, lambda: table.manage_snapshots().create_tag(snaps["S2"], "v2").commit() or table)
    for key in ("ns/t/data/orphan-old.parquet", "ns/t/metadata/99999-stale.metadata.json", "ns/t/data/_SUCCESS"):
        lake.put(key, 10)
    age_all(lake.warehouse)
    lake.put("ns/t/data/orphan-young.parquet", 1)
    lake.catalog.engine.dispose()  # type: ignore[attr-defined]
    pristine = tmp_path / "pristine"
    shutil.copytree(root, pristine)
    before = snapshot(lake.warehouse)
    args = ("iceberg", "gc", "--catalog", "lake", "ns.t", "--older-than", "5d")

    by_own = classic(tmp_path / "home", *args)
    own_changes = changed(before, snapshot(lake.warehouse))
    own_state = snapshot_ids(table), ids(table)
    lake.catalog.engine.dispose()  # type: ignore[attr-defined]

    shutil.rmtree(root)
    shutil.copytree(pristine, root)  # the twin: the lake as it was built, at the same paths
    assert snapshot(lake.warehouse) == before
    dry = on_engine(engine, *args, "--dry-run", remote=False)
    assert snapshot(lake.warehouse) == before  # nothing expired, nothing deleted
    by_engine = on_engine(engine, *args, remote=True)
    engine_changes = changed(before, snapshot(lake.warehouse))

    gone = {str(lake.warehouse / key) for key in own_changes[0]}
    assert gone and set(deleted_of(by_own)) == gone  # deleted what it said it did
    assert "orphan-old.parquet" in {Path(p).name for p in gone} and "expired" in by_own["candidates_by_reason"]
    assert engine_changes[0] == own_changes[0]  # the same files deleted
    assert len(engine_changes[1]) == len(own_changes[1])  # the expiry's new metadata file(s), named anew
    assert deleted_of(by_engine) == deleted_of(by_own) and candidates_of(by_engine) == candidates_of(by_own)
    assert candidates_of(dry) == candidates_of(by_own)
    assert counts(by_engine) == counts(by_own) and by_own["state"] == "swept"
    assert by_engine["details"]["snapshots expired"] == by_own["details"]["snapshots expired"] == 3
    assert dry["details"]["snapshots to expire"] == 3 and dry["state"] == "marked"
    assert (snapshot_ids(table), ids(table)) == own_state  # the same snapshots kept, the same rows
    assert snaps["S2"] in own_state[0] and snaps["S5"] in own_state[0]


# -- IOx-style catalog ---------------------------------------------------------------------------
def folder_world(root: Path) -> World:
    """The SQLite catalog and the local folder store under `root` (as test_catalog_gc's `world`)."""
    store = root / "store"

    def put(key: str, age: timedelta) -> None:
        path = store / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"parquet bytes")
        when = (CATALOG_NOW - age).timestamp()
        os.utime(path, (when, when))

    def keys() -> set[str]:
        return {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}

    return World(f"sqlite:///{root / 'catalog.db'}", str(store), put, keys, root / "runs")


def test_catalog_gc_on_the_engine_deletes_the_objects_and_rows_a_classic_run_does(
    engine: Engine, tmp_path: Path
) -> None:
    """Every catalog row state against every object age, and the file-name classes, in one store:
    the same objects and rows go on either session."""
    own = folder_world(tmp_path / "own")
    Path(own.store).mkdir(parents=True)
    create_catalog(own.url)
    objects, rows, reasons = build(own)
    shutil.copytree(tmp_path / "own", tmp_path / "twin")
    twin = folder_world(tmp_path / "twin")
    before, rows_before = snapshot(Path(own.store)), own.rows()
    assert snapshot(Path(twin.store)) == before and twin.rows() == rows_before

    def args(world: World) -> tuple[str, ...]:
        return ("catalog", "gc", "--catalog", world.url, "--store", world.store)

    by_own = classic(tmp_path / "home", *args(own))
    dry = on_engine(engine, *args(twin), "--dry-run", remote=True)
    assert snapshot(Path(twin.store)) == before and twin.rows() == rows_before  # nothing deleted, no row
    by_engine = on_engine(engine, *args(twin), remote=False)

    gone, new = changed(before, snapshot(Path(own.store)))
    assert gone == {k for k, deleted in objects.items() if deleted} and not new
    assert snapshot(Path(twin.store)) == snapshot(Path(own.store))  # the same objects left, as they were
    assert set(own.rows()) == {r for r, deleted in rows.items() if not deleted}
    assert twin.rows() == own.rows()  # the same rows hard-deleted
    assert catalog_candidates(by_own) == catalog_candidates(by_engine) == catalog_candidates(dry) == reasons
    assert counts(by_engine) == counts(by_own) and by_own["state"] == "swept"
    assert by_engine["num_listed"] == by_own["num_listed"] == dry["num_listed"] == len(objects)
    assert by_engine["details"]["catalog rows deleted"] == by_own["details"]["catalog rows deleted"] > 0
    assert (dry["state"], dry["num_candidates"], dry["num_deleted"]) == ("marked", len(reasons), 0)
