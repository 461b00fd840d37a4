"""The warehouse builder's own bookkeeping (tests/support/warehouse.py): what it says a run deletes
and keeps is consistent with what it wrote, with what the catalogs reference and with what
delta-rs's VACUUM lists. Not `lakegc warehouse gc` itself."""

from __future__ import annotations

import json
import os
import time
from itertools import combinations
from pathlib import Path
from urllib.parse import urlparse

from deltalake import DeltaTable
from support.warehouse import Warehouse, build_warehouse, iceberg_references

WEEK = 7 * 86_400


def test_the_warehouse_accounts_for_every_file(tmp_path: Path, monkeypatch, cli):
    wh = build_warehouse(tmp_path, monkeypatch, cli)

    sets = {
        "stray_old": wh.stray_old,
        "stray_young": wh.stray_young,
        "iceberg_orphans": wh.iceberg_orphans,
        "iceberg_hidden": wh.iceberg_hidden,
        "delta_vacuum": wh.delta_vacuum,
        "delta_in_retention": wh.delta_in_retention,
        "unowned_dropped": wh.unowned_dropped,
        "unowned_delta": wh.unowned_delta,
    }
    for (a, one), (b, other) in combinations(sets.items(), 2):
        assert not one & other, f"{a} and {b} share {one & other}"
    files = wh.files()
    for name, paths in sets.items():
        assert paths, f"{name} is empty"
        assert paths <= files, f"{name} lists files that are not there: {paths - files}"
    assert wh.live() == files - wh.stray_old - wh.iceberg_orphans - wh.delta_vacuum
    assert not (wh.stray_old | wh.iceberg_orphans | wh.delta_vacuum) & wh.live()
    _ages_are_what_min_age_needs(wh)
    _iceberg_bookkeeping(wh)
    _delta_bookkeeping(wh)
    _repository_and_unowned(wh)
    for name in wh.catalogs:  # the catalogs' databases live outside the warehouse
        database = Path(os.environ[f"PYICEBERG_CATALOG__{name.upper()}__URI"].removeprefix("sqlite:///"))
        assert database.is_file() and not database.is_relative_to(wh.root)
        assert os.environ[f"PYICEBERG_CATALOG__{name.upper()}__WAREHOUSE"] == wh.root.as_uri()


def _ages_are_what_min_age_needs(wh: Warehouse) -> None:
    now = time.time()
    mtime = {f: (wh.root / f).stat().st_mtime for f in wh.files()}
    assert all(now - mtime[f] > 3 * WEEK for f in wh.stray_old | wh.iceberg_orphans | wh.delta_vacuum)
    assert all(now - mtime[f] < WEEK for f in wh.stray_young)
    assert all(now - mtime[f] > 3 * WEEK for f in wh.unowned_dropped | wh.unowned_delta | wh.delta_in_retention)


def _iceberg_bookkeeping(wh: Warehouse) -> None:
    catalogs = {"cata": wh.cat_a, "catb": wh.cat_b}
    listed = {(c, f"db.{name}") for c, cat in catalogs.items() for _, name in cat.list_tables("db")}
    assert listed == set(wh.iceberg_tables)  # the dropped table is listed by none
    assert wh.cat_a.load_table("db.t").metadata_location == wh.cat_b.load_table("db.t_copy").metadata_location
    live = wh.live()
    referenced_by_folder: dict[str, set[str]] = {}
    for (catalog, name), folder in wh.iceberg_tables.items():
        table = catalogs[catalog].load_table(name)
        refs = iceberg_references(table, wh.root)
        assert refs and all(r.startswith(f"{folder}/") for r in refs)
        assert refs <= live, f"{catalog}.{name}: referenced but not live: {refs - live}"
        referenced_by_folder.setdefault(folder, set()).update(refs)
        assert len(table.metadata.snapshots) == {"db.t": 3, "db.t_copy": 3, "db.t2": 1, "db.events": 2}[name]
    assert any("/_key=a/" in r for r in referenced_by_folder["iceberg/events"])
    for folder, refs in referenced_by_folder.items():  # nothing in a named table's folder unaccounted for
        inside = {f for f in wh.files() if f.startswith(f"{folder}/")}
        extra = {f for f in wh.iceberg_orphans | wh.iceberg_hidden if f.startswith(f"{folder}/")}
        assert inside == refs | extra
    assert {f.split("/")[1] for f in wh.iceberg_orphans} == {"t", "t2", "events"}


def _delta_bookkeeping(wh: Warehouse) -> None:
    live = wh.live()
    for folder in wh.delta_tables:
        table = DeltaTable(str(wh.root / folder))
        current = {
            Path(urlparse(uri).path if "://" in uri else uri).relative_to(wh.root).as_posix()
            for uri in table.file_uris()
        }
        assert current and current <= live
        assert not any(f.startswith(f"{folder}/_delta_log/") for f in wh.delta_vacuum)
    # sales: the file removed 30 days ago (added at version 0) and the stray go; the one removed at
    # version 2, now, stays inside the 1-day retention; sales2 has nothing to vacuum
    log = wh.root / "delta" / "sales" / "_delta_log"
    first = {json.loads(line)["add"]["path"] for line in (log / f"{0:020}.json").open() if '"add"' in line}
    assert wh.delta_vacuum == {"delta/sales/part-stray.parquet", *(f"delta/sales/{p}" for p in first)}
    assert len(wh.delta_in_retention) == 1 and wh.delta_in_retention <= live


def _repository_and_unowned(wh: Warehouse) -> None:
    namespace = wh.repo_namespace.relative_to(wh.root).as_posix()
    assert (wh.repo_namespace / "_lakegc" / "repository.json").is_file()
    repo_files = {f for f in wh.files() if f.startswith(f"{namespace}/")}
    assert len(repo_files) > 2 and repo_files <= wh.live()
    assert list((wh.root / "iceberg" / "dropped" / "metadata").glob("*.metadata.json"))
    assert wh.unowned_dropped == {f for f in wh.files() if f.startswith("iceberg/dropped/")}
    assert any(f.startswith("unknown/delta_t/_delta_log/") for f in wh.unowned_delta)
    assert (wh.unowned_dropped | wh.unowned_delta | wh.stray_young | wh.iceberg_hidden) <= wh.live()
