"""`lakegc warehouse gc`: one live set across every named system, on a realistic warehouse
(tests/support/warehouse.py): two Iceberg catalogs, Delta tables, a lakegc repository, a dropped
table's folder, an unknown Delta table, prefix twins, a table registered twice, stray files."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.warehouse import Warehouse, build_warehouse


@pytest.fixture
def wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, spark) -> Warehouse:  # noqa: ANN001
    return build_warehouse(tmp_path, monkeypatch, cli)


def every_system(wh: Warehouse) -> list[str]:
    return [
        "--iceberg-catalog", "cata", "--iceberg-catalog", "catb",
        "--delta-under", str(wh.root / "delta"), "--repositories",
    ]  # fmt: skip


def test_a_run_naming_every_system_deletes_exactly_the_unreferenced(wh: Warehouse, cli) -> None:  # noqa: ANN001
    live, before = wh.live(), wh.files()
    expected = sorted(wh.stray_old | wh.iceberg_orphans | wh.delta_vacuum)
    dry = cli("warehouse", "gc", str(wh.root), *every_system(wh), "--dry-run", "--json").json()
    assert dry["files"] == expected
    assert dry["state"] == "marked" and wh.files() == before  # a dry run deletes nothing
    done = cli("warehouse", "gc", str(wh.root), *every_system(wh), "--json").json()
    assert done["files"] == expected
    assert done["num_deleted"] == len(expected)
    assert wh.files() == live
    unowned = {u["folder"] for u in done["details"]["unowned table folders"]}
    assert unowned == {"iceberg/dropped/", "unknown/delta_t/"}
