"""`lakegc lakefs gc --quarantine DURATION`: the restore window of a lakeFS run. Collected objects
move under `_lakegc/quarantine/<run_id>/` (gone to lakeFS, never listed by its GC nor by the next
lakegc run), `lakegc lakefs restore` moves them back, and once the window passes a later sweep
purges them; a restore then is one clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import make_cli, one_error
from test_lakefs_gc import REPO, UNIFIED_GC_KEPT, Lake, open_lake, unified_gc_scenario


@pytest.fixture
def lake(tmp_path: Path, spark) -> Iterator[Lake]:
    yield from open_lake(tmp_path)


def restore(lake: Lake, *args: str, ok: bool = True):
    return make_cli(lake.env)("lakefs", "restore", *args, "--runs", str(lake.runs), ok=ok)


def test_a_restore_window_moves_and_restore_puts_back(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    gone = {k: a for k, a in created.items() if not UNIFIED_GC_KEPT[k]}
    result = lake.gc("--min-age", "0s", "--quarantine", "7d", "--json").json()
    assert result["addresses"] == sorted(gone.values())
    quarantine = lake.blockstore / REPO / "_lakegc" / "quarantine" / result["run_id"]
    assert not any(lake.exists(a) for a in gone.values())
    assert all((quarantine / a).is_file() for a in gone.values())
    assert result["details"]["restore window until"]
    again = lake.gc("--min-age", "0s", "--json").json()  # the quarantine is never a candidate
    assert again["addresses"] == [] and all((quarantine / a).is_file() for a in gone.values())
    one = gone["file_2"]
    assert restore(lake, result["run_id"], "--path", one, "--json").json() == {"restored": 1, "kept": 0}
    assert lake.exists(one) and not lake.exists(gone["file_4"])
    lake.model.repo(REPO).ns.put(gone["file_4"], b"new")  # something is at that address again
    assert restore(lake, result["run_id"], "--json").json() == {"restored": 4, "kept": 1}
    assert lake.model.repo(REPO).ns.get(gone["file_4"]) == b"new", "never replaced"
    assert all(lake.exists(a) for a in gone.values())


def test_a_passed_window_is_purged_by_the_next_sweep(lake):
    created = unified_gc_scenario(lake.model, datetime.now(UTC))
    first = lake.gc("--min-age", "0s", "--quarantine", "1h", "--json").json()
    marker = lake.blockstore / REPO / "_lakegc" / "quarantine" / f"{first['run_id']}.json"
    marker.write_text(json.dumps({"run_id": first["run_id"], "until": "2020-01-01T00:00:00+00:00"}))
    second = lake.gc("--min-age", "0s", "--json").json()
    assert second["details"]["objects purged from passed restore windows"] == 6
    folder = lake.blockstore / REPO / "_lakegc" / "quarantine" / first["run_id"]
    assert not [p for p in folder.rglob("*") if p.is_file()]
    assert not marker.exists()
    one_error(restore(lake, first["run_id"], ok=False), "purged")
    assert all(lake.exists(created[k]) for k, kept in UNIFIED_GC_KEPT.items() if kept)


def test_an_unreadable_window_is_kept_and_a_bad_flag_refused(lake):
    unified_gc_scenario(lake.model, datetime.now(UTC))
    first = lake.gc("--min-age", "0s", "--quarantine", "1h", "--json").json()
    marker = lake.blockstore / REPO / "_lakegc" / "quarantine" / f"{first['run_id']}.json"
    marker.write_text("not json")
    lake.gc("--min-age", "0s")
    assert (lake.blockstore / REPO / "_lakegc" / "quarantine" / first["run_id"]).is_dir(), "window unknown: kept"
    one_error(lake.gc("--quarantine", "-1d", ok=False))
