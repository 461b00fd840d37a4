"""`lakegc warehouse gc`: one live set across every named system, on a realistic warehouse
(tests/support/warehouse.py): two Iceberg catalogs, Delta tables, a lakegc repository, a dropped
table's folder, an unknown Delta table, prefix twins (`t`/`t2`, `sales`/`sales2`), a table
registered twice, stray files of failed writes. What a per-table run would keep is always kept,
and nothing outside the location is touched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import one_error
from support.browser import render_in_chromium
from support.warehouse import Warehouse, age, build_warehouse, put

from lakegc.warehouse import recheck


@pytest.fixture
def wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, spark) -> Warehouse:  # noqa: ANN001
    return build_warehouse(tmp_path, monkeypatch, cli)


def every_system(wh: Warehouse) -> list[str]:
    return [
        "--iceberg-catalog", "cata", "--iceberg-catalog", "catb",
        "--delta-under", str(wh.root / "delta"), "--repositories",
    ]  # fmt: skip


def gc(cli, wh: Warehouse, *more: str, ok: bool = True):  # noqa: ANN001, ANN201
    result = cli("warehouse", "gc", str(wh.root), *more, "--json", ok=ok)
    return result.json() if ok else result


def collectable(wh: Warehouse) -> list[str]:
    return sorted(wh.stray_old | wh.iceberg_orphans | wh.delta_vacuum)


def test_a_run_naming_every_system_deletes_exactly_the_unreferenced(wh: Warehouse, cli) -> None:  # noqa: ANN001
    live, before = wh.live(), wh.files()
    dry = gc(cli, wh, *every_system(wh), "--dry-run")
    assert dry["files"] == collectable(wh)
    assert dry["state"] == "marked" and wh.files() == before  # a dry run deletes nothing
    done = gc(cli, wh, *every_system(wh))
    assert done["files"] == collectable(wh)
    assert done["num_deleted"] == len(collectable(wh)) and done["state"] == "swept"
    assert done["bytes_deleted"] > 0 and done["run_id"]
    assert wh.files() == live
    unowned = {u["folder"] for u in done["details"]["unowned table folders"]}
    assert unowned == {"iceberg/dropped/", "unknown/delta_t/"}
    # the report: what each top-level folder frees, by category
    shown = {(f["folder"], f["category"]): f["files"] for f in done["details"]["folders"]}
    assert shown[("stray/", "outside every table")] == 2
    assert shown[("(root)", "outside every table")] == 1
    assert shown[("iceberg/", "inside a table but unreferenced")] == len(wh.iceberg_orphans)
    assert shown[("iceberg/", "unowned table")] == len(wh.unowned_dropped)
    # a second run finds nothing more
    assert gc(cli, wh, *every_system(wh), "--dry-run")["files"] == []


def test_unowned_delete_collects_the_dropped_table_and_the_unknown_one(wh: Warehouse, cli) -> None:  # noqa: ANN001
    live = wh.live() - wh.unowned_dropped - wh.unowned_delta
    done = gc(cli, wh, *every_system(wh), "--unowned", "delete")
    assert done["files"] == sorted(set(collectable(wh)) | wh.unowned_dropped | wh.unowned_delta)
    assert wh.files() == live


def test_a_repository_of_the_metastore_is_never_unowned(wh: Warehouse, cli) -> None:  # noqa: ANN001
    """Without --repositories, even with --unowned delete, a namespace the metastore knows is kept whole."""
    names = {p.relative_to(wh.root).as_posix() for p in wh.repo_namespace.rglob("*") if p.is_file()}
    put(wh.repo_namespace / "data" / "leftover.bin")  # the repository's own garbage: its own GC's business
    gc(cli, wh, "--iceberg-catalog", "cata", "--iceberg-catalog", "catb", "--unowned", "delete")
    assert names | {"repos/repo/data/leftover.bin"} <= wh.files()
    cli("fs", "cat", "lakegc://repo/main/a.txt")


def test_a_configured_catalog_not_named_keeps_its_tables_whole(wh: Warehouse, cli) -> None:  # noqa: ANN001
    """catb is configured for pyiceberg but not named: its table `events` (and `t_copy`) is known, so
    kept whole, orphans too; what it references counts wherever it lies."""
    done = gc(cli, wh, "--iceberg-catalog", "cata", "--delta-under", str(wh.root / "delta"), "--unowned", "delete")
    events = {f for f in wh.files() if f.startswith("iceberg/events/")}
    assert {"iceberg/events/data/orphan-3.parquet", "iceberg/events/data/_key=a/orphan-4.parquet"} <= events
    assert not any(f.startswith("iceberg/events/") for f in done["files"])
    assert "iceberg/t/data/orphan-1.parquet" in done["files"]  # cata is named: its orphans go


def test_a_table_of_a_catalog_nobody_configured_is_unowned_and_kept(
    wh: Warehouse,
    cli,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    for key in [k for k in os.environ if k.startswith("PYICEBERG_CATALOG__CATB__")]:
        monkeypatch.delenv(key)
    before = {f for f in wh.files() if f.startswith("iceberg/events/")}
    done = gc(cli, wh, "--iceberg-catalog", "cata", "--delta-under", str(wh.root / "delta"), "--repositories")
    assert "iceberg/events/" in {u["folder"] for u in done["details"]["unowned table folders"]}
    assert {f for f in wh.files() if f.startswith("iceberg/events/")} == before


@pytest.mark.parametrize("which", ["named", "configured"])
def test_a_catalog_that_cannot_be_read_fails_the_run_and_deletes_nothing(
    wh: Warehouse,
    cli,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    which: str,  # noqa: ANN001
) -> None:
    monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__URI", f"sqlite:///{tmp_path / 'nowhere' / 'broken.db'}")
    before = wh.files()
    named = ["--iceberg-catalog", "broken"] if which == "named" else []
    result = gc(cli, wh, *every_system(wh), *named, ok=False)
    assert result.exit_code == 1 and "broken" in one_error(result)
    assert wh.files() == before


def test_a_delta_log_that_cannot_be_read_fails_the_run(wh: Warehouse, cli) -> None:  # noqa: ANN001
    log = wh.root / "delta" / "sales2" / "_delta_log" / "00000000000000000000.json"
    log.write_text("{not json")
    before = wh.files()
    result = gc(cli, wh, *every_system(wh), ok=False)
    assert result.exit_code == 1 and "sales2" in one_error(result)
    assert wh.files() == before


def test_a_tampered_repository_tree_fails_the_run(wh: Warehouse, cli) -> None:  # noqa: ANN001
    ranges = sorted((wh.repo_namespace / "_lakegc" / "ranges").iterdir())
    data = ranges[0].read_bytes()
    ranges[0].write_bytes(data[:-9] + bytes([data[-9] ^ 1]) + data[-8:])
    before = wh.files()
    result = gc(cli, wh, *every_system(wh), ok=False)
    assert result.exit_code == 1
    assert wh.files() == before


def test_what_a_repository_links_under_the_warehouse_is_kept(wh: Warehouse, cli) -> None:  # noqa: ANN001
    """A repository may link a file outside its namespace (committed, or only staged): with
    --repositories it is live wherever it lies."""
    committed, staged = wh.root / "stray" / "part-0001.parquet", wh.root / "stray" / "deep" / "x.bin"
    for path, name in ((committed, "linked"), (staged, "staged")):
        size = str(path.stat().st_size)
        cli("fs", "link", f"lakegc://repo/main/{name}", "--address", path.as_uri(), "--size", size, "--checksum", "c")
        if name == "linked":
            cli("commit", "lakegc://repo/main", "-m", "link")
    done = gc(cli, wh, *every_system(wh))
    assert committed.exists() and staged.exists()
    assert done["files"] == sorted(set(collectable(wh)) - {"stray/part-0001.parquet", "stray/deep/x.bin"})


def test_nothing_outside_the_location_is_touched(wh: Warehouse, cli, tmp_path: Path) -> None:  # noqa: ANN001
    beside = put(tmp_path / "wh2" / "old.parquet")  # a prefix twin of the location itself
    outside = put(tmp_path / "elsewhere" / "old.bin")
    done = gc(cli, wh, *every_system(wh), "--delta-table", str(wh.root / "delta" / "sales"))
    assert beside.exists() and outside.exists()
    assert done["files"] == collectable(wh)  # a table named twice counts once


def test_the_young_are_kept_and_min_age_is_honoured(wh: Warehouse, cli) -> None:  # noqa: ANN001
    done = gc(cli, wh, *every_system(wh), "--min-age", "60d", "--dry-run")
    assert done["files"] == []
    assert "stray/young.parquet" not in gc(cli, wh, *every_system(wh), "--dry-run")["files"]  # 7d by default
    assert "stray/young.parquet" in gc(cli, wh, *every_system(wh), "--min-age", "1s", "--dry-run")["files"]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("/", "filesystem root"),
        ("home", "home folder"),
        ("metastore", "refusing to clean"),  # holds lakegc's home: its metastore and run folder
        ("namespace", "namespace"),
        ("table", "Delta table"),
    ],
)
def test_the_deletion_guard_refuses_what_it_must(
    wh: Warehouse,
    cli,
    tmp_path: Path,
    where: str,
    expected: str,  # noqa: ANN001
) -> None:
    location = {
        "/": "/",
        "home": str(Path.home()),
        "metastore": str(tmp_path),  # holds lakegc's metastore (tmp_path/home/lakegc.db)
        "namespace": str(wh.repo_namespace),
        "table": str(wh.root / "delta" / "sales"),
    }[where]
    before = wh.files()
    result = cli("warehouse", "gc", location, "--json", ok=False)
    assert result.exit_code == 1 and expected in one_error(result), result.stderr
    assert wh.files() == before


def test_a_location_reached_through_a_symlink_is_judged_as_it_really_is(
    wh: Warehouse,
    cli,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(wh.root)
    done = cli("warehouse", "gc", str(alias), *every_system(wh), "--json").json()
    assert done["files"] == collectable(wh)
    assert wh.files() == wh.live() | set()  # live() is computed now: nothing referenced went


def test_writers_during_the_run_keep_what_they_reach(
    wh: Warehouse,
    cli,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    """Between the mark and the deletes: an Iceberg table adopts an orphan (add_files), a folder of
    stray files becomes a Delta table, the repository stages a link to a stray file."""
    adopted = wh.root / "iceberg" / "t" / "data" / "orphan-1.parquet"
    converted = wh.root / "stray" / "deep"
    linked = wh.root / "tmp-upload-123"
    real = recheck.still_unreferenced

    def racing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        wh.cat_a.load_table("db.t").add_files([adopted.as_uri()])
        put(converted / "_delta_log" / "00000000000000000000.json", b"{}", days_old=None)
        size = str(linked.stat().st_size)
        cli("fs", "link", "lakegc://repo/main/late", "--address", linked.as_uri(), "--size", size, "--checksum", "c")
        return real(*args, **kwargs)

    monkeypatch.setattr(recheck, "still_unreferenced", racing)
    done = gc(cli, wh, *every_system(wh))
    kept = {"iceberg/t/data/orphan-1.parquet", "stray/deep/x.bin", "tmp-upload-123"}
    assert all((wh.root / k).exists() for k in kept)
    assert done["num_deleted"] == len(collectable(wh)) - len(kept)
    assert done["details"]["folders that became tables during the run"] == ["stray/deep/"]


def test_a_delta_log_rewritten_during_the_run_stops_it(
    wh: Warehouse,
    cli,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    real = recheck.still_unreferenced
    log = wh.root / "delta" / "sales" / "_delta_log" / "00000000000000000002.json"

    def racing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        log.write_text(log.read_text() + "\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(recheck, "still_unreferenced", racing)
    before = wh.files()
    result = gc(cli, wh, *every_system(wh), ok=False)
    assert result.exit_code == 1 and "Delta log changed" in one_error(result)
    assert wh.files() == before


def test_the_restore_window_moves_and_restore_puts_back(wh: Warehouse, cli) -> None:  # noqa: ANN001
    before = wh.files()
    done = gc(cli, wh, *every_system(wh), "--quarantine", "2d")
    run_id = done["run_id"]
    quarantine = f"_lakegc/quarantine/{run_id}/"
    assert wh.files() - before == {quarantine + f for f in collectable(wh)} | {f"_lakegc/quarantine/{run_id}.json"}
    assert gc(cli, wh, *every_system(wh), "--dry-run")["files"] == []  # its own folder is never listed
    restored = cli("warehouse", "restore", run_id, "--json").json()
    assert restored == {"restored": len(collectable(wh)), "kept": 0}
    assert before <= wh.files()


def test_a_budget_stops_early_and_the_next_run_finishes(wh: Warehouse, cli) -> None:  # noqa: ANN001
    first = gc(cli, wh, *every_system(wh), "--max-deletes", "2")
    assert first["num_deleted"] == 2 and "--max-deletes" in first["error"]
    second = gc(cli, wh, *every_system(wh))
    assert second["num_deleted"] == len(collectable(wh)) - 2
    assert wh.files() == wh.live()


def test_a_config_file_names_the_systems(wh: Warehouse, cli, tmp_path: Path) -> None:  # noqa: ANN001
    config = tmp_path / "warehouse.toml"
    config.write_text(
        'iceberg_catalogs = ["cata", "catb"]\n'
        f"delta_under = [{json.dumps(str(wh.root / 'delta'))}]\n"
        "repositories = true\n"
        'min_age = "7d"\n'
    )
    assert gc(cli, wh, "--config", str(config), "--dry-run")["files"] == collectable(wh)
    config.write_text("repository = true\n")
    result = gc(cli, wh, "--config", str(config), ok=False)
    assert result.exit_code == 1 and "unknown key 'repository'" in one_error(result)


@pytest.mark.parametrize(
    "args",
    [["--unowned", "maybe"], ["--min-age", "soon"], ["--quarantine", "-1d"], ["--max-deletes", "-1"]],
)
def test_bad_options_are_one_error_line(wh: Warehouse, cli, args: list[str]) -> None:  # noqa: ANN001
    before = wh.files()
    result = cli("warehouse", "gc", str(wh.root), *args, ok=False)
    assert result.exit_code in (1, 2) and "Traceback" not in result.stderr
    assert wh.files() == before


def test_the_report_shows_what_each_folder_frees(wh: Warehouse, cli, tmp_path: Path) -> None:  # noqa: ANN001
    result = cli("warehouse", "gc", str(wh.root), *every_system(wh), "--dry-run")
    assert "outside every table" in result.stdout and "iceberg/dropped/" in result.stdout
    run_id = cli("warehouse", "runs", "--json").json()[0]["run_id"]
    report = cli("warehouse", "show", run_id, "--html").stdout.strip().splitlines()[-1]
    dom = render_in_chromium(Path(report.split()[-1].removeprefix("file://")), tmp_path)
    assert "<h2>Folders</h2>" in dom and "<h2>Unowned table folders</h2>" in dom
    assert "inside a table but unreferenced" in dom and "iceberg/dropped/" in dom


def test_an_old_file_named_like_a_marker_deep_in_a_table_is_no_table(wh: Warehouse, cli) -> None:  # noqa: ANN001
    """Iceberg's metadata/ deeper than a table's folder names no table: judged as any file of it."""
    put(wh.root / "stray" / "a" / "metadata" / "old" / "v1.metadata.json")
    done = gc(cli, wh, *every_system(wh), "--dry-run")
    assert "stray/a/metadata/old/v1.metadata.json" in done["files"]
    age(wh.root / "stray" / "young.parquet", 0)
