"""Attacks on `lakegc warehouse gc`, each a way a first version lost data (found by review), kept as
a test: references spelled otherwise than listed keys, locations inside tables, namespaces and
restore windows nobody named, named tables inside unowned folders, symlinks inside the warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import one_error
from deltalake import write_deltalake
from support.warehouse import age, age_tree, put


@pytest.fixture
def root(tmp_path: Path, spark) -> Path:  # noqa: ANN001
    found = tmp_path / "wh"
    found.mkdir()
    return found


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def delta_table(folder: Path, writes: int = 1) -> None:
    for i in range(writes):
        write_deltalake(str(folder), pa.table({"id": [i]}), mode="overwrite")
    age_tree(folder)


def gc(cli, root: Path, *args: str, ok: bool = True):  # noqa: ANN001, ANN201
    result = cli("warehouse", "gc", str(root), *args, "--json", ok=ok)
    return result.json() if ok else result


def test_a_delta_table_s_absolute_paths_under_the_warehouse_are_live(cli, root: Path) -> None:  # noqa: ANN001
    """A shallow clone's adds name its source's files by absolute path, in another folder."""
    raw = root / "raw" / "part-0.parquet"
    raw.parent.mkdir()
    pq.write_table(pa.table({"id": [1]}), raw)
    age(raw)
    table = root / "tbl"
    delta_table(table)
    log = table / "_delta_log" / "00000000000000000000.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            (table / action["add"]["path"]).unlink()
            action["add"].update(path=raw.as_uri(), size=raw.stat().st_size)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert gc(cli, root, "--delta-table", str(table))["files"] == []
    assert raw.exists()


def test_a_named_table_whose_folder_needs_escaping_is_judged_as_listed(cli, root: Path) -> None:  # noqa: ANN001
    table = root / "sales 2024=x" / "données"
    delta_table(table, writes=2)
    before = files(root)
    done = gc(cli, root, "--delta-under", str(root), "--unowned", "delete")
    assert done["details"]["unowned table folders"] == []
    assert done["files"] == []  # inside its 7-day retention: its VACUUM takes nothing
    assert files(root) == before


def test_a_repository_link_with_escaped_characters_is_live(cli, root: Path) -> None:  # noqa: ANN001
    linked = put(root / "raw" / "a b%c.bin")
    cli("repo", "create", "lakegc://repo", str(root / "repos" / "repo"))
    size = str(linked.stat().st_size)
    cli("fs", "link", "lakegc://repo/main/a", "--address", str(linked), "--size", size, "--checksum", "c")
    cli("commit", "lakegc://repo/main", "-m", "link")
    age_tree(root)
    assert gc(cli, root)["files"] == []  # named or not, what a repository links is live
    cli("fs", "cat", "lakegc://repo/main/a")


@pytest.mark.parametrize("inside", ["namespace", "delta"])
def test_a_location_inside_a_namespace_or_a_table_is_refused(cli, root: Path, inside: str) -> None:  # noqa: ANN001
    if inside == "namespace":
        cli("repo", "create", "lakegc://repo", str(root / "repo"))
        cli("fs", "upload", "lakegc://repo/main/a", "--source", "-", input=b"a")
        cli("commit", "lakegc://repo/main", "-m", "a")
        location = root / "repo" / "data"
    else:
        write_deltalake(str(root / "dt"), pa.table({"id": [1], "p": ["x"]}), partition_by=["p"])
        location = root / "dt" / "p=x"
    age_tree(root)
    before = files(root)
    result = gc(cli, location, ok=False)
    line = one_error(result)
    assert "refusing" in line or "lies inside" in line
    assert files(root) == before


def test_namespaces_nobody_named_are_never_collected(cli, root: Path) -> None:  # noqa: ANN001
    """With --unowned delete: a lakeFS namespace, a lakegc namespace of another metastore."""
    put(root / "lfs" / "_lakefs" / "0a" / "range")
    put(root / "lfs" / "data" / "g1" / "obj")
    put(root / "other" / "_lakegc" / "repository.json", b"{}")
    put(root / "other" / "data" / "s1" / "obj")
    before = files(root)
    done = gc(cli, root, "--unowned", "delete")
    assert done["files"] == [] and files(root) == before


def test_a_named_table_inside_an_unowned_folder_is_judged_by_its_own_gc(cli, root: Path) -> None:  # noqa: ANN001
    put(root / "old" / "metadata" / "v1.metadata.json", b"{}")  # a dropped Iceberg table's folder
    table = root / "old" / "sales"
    delta_table(table, writes=2)  # its removed file is inside the 7-day retention
    stale = put(root / "old" / "data" / "x.parquet")
    before = files(root)
    kept = gc(cli, root, "--delta-table", str(table))
    assert kept["files"] == [] and files(root) == before
    done = gc(cli, root, "--delta-table", str(table), "--unowned", "delete")
    assert sorted(done["files"]) == ["old/data/x.parquet", "old/metadata/v1.metadata.json"]
    assert not stale.exists() and {f for f in before if f.startswith("old/sales/")} <= files(root)


def test_another_runs_restore_window_is_never_collected(cli, root: Path) -> None:  # noqa: ANN001
    put(root / "sub" / "old.bin")
    inner = gc(cli, root / "sub", "--quarantine", "30d")
    assert inner["files"] == ["old.bin"]
    assert gc(cli, root, "--unowned", "delete")["files"] == []
    assert cli("warehouse", "restore", inner["run_id"], "--json").json()["restored"] == 1


def test_a_reference_through_a_symlink_inside_the_warehouse_is_live(cli, root: Path) -> None:  # noqa: ANN001
    real = put(root / "real" / "f.bin")
    (root / "alias").symlink_to(root / "real")
    cli("repo", "create", "lakegc://repo", str(root / "repos" / "repo"))
    size = str(real.stat().st_size)
    cli(
        "fs",
        "link",
        "lakegc://repo/main/f",
        "--address",
        str(root / "alias" / "f.bin"),
        "--size",
        size,
        "--checksum",
        "c",
    )
    cli("commit", "lakegc://repo/main", "-m", "f")
    age_tree(root)
    assert gc(cli, root, "--repositories")["files"] == []
    assert real.exists()


# -- found by the second review -----------------------------------------------------------------------------
@pytest.mark.parametrize("named", [["--delta-under", "ROOT"], ["--delta-table", "ROOT/n", "--unowned", "delete"]])
def test_a_table_written_into_a_named_delta_table_s_partition_takes_none_of_its_files(
    cli,
    root: Path,
    named: list[str],  # noqa: ANN001
) -> None:
    outer = root / "n"
    write_deltalake(str(outer), pa.table({"id": [1], "p": ["x"]}), partition_by=["p"])
    write_deltalake(str(outer / "p=x"), pa.table({"id": [2]}))  # a second table, by mistake, in a partition
    age_tree(root)
    from deltalake import DeltaTable

    own = {Path(u.removeprefix("file://")).relative_to(root).as_posix() for u in DeltaTable(str(outer)).file_uris()}
    gc(cli, root, *[a.replace("ROOT", str(root)) for a in named])
    assert own <= files(root)
    assert DeltaTable(str(outer)).to_pyarrow_table().num_rows == 1


def test_an_iceberg_catalog_s_database_in_the_warehouse_is_live(
    cli,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{root / 'pyiceberg_catalog.db'}"
    monkeypatch.setenv("PYICEBERG_CATALOG__GUIDE__URI", uri)
    monkeypatch.setenv("PYICEBERG_CATALOG__GUIDE__WAREHOUSE", root.as_uri())
    SqlCatalog("guide", uri=uri, warehouse=root.as_uri()).create_namespace("db")
    age_tree(root)
    assert gc(cli, root, "--iceberg-catalog", "guide")["files"] == []
    assert gc(cli, root)["files"] == []  # configured, not named: the same
    assert (root / "pyiceberg_catalog.db").exists()


def test_a_repository_created_during_the_run_keeps_what_it_links(
    cli,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    from lakegc.warehouse import recheck

    linked = put(root / "landing" / "big.csv")
    real = recheck.still_unreferenced

    def racing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        cli("repo", "create", "lakegc://late", str(root.parent / "late"))
        size = str(linked.stat().st_size)
        cli("fs", "link", "lakegc://late/main/big.csv", "--address", str(linked), "--size", size, "--checksum", "c")
        cli("commit", "lakegc://late/main", "-m", "link")
        return real(*args, **kwargs)

    monkeypatch.setattr(recheck, "still_unreferenced", racing)
    assert gc(cli, root)["num_deleted"] == 0
    cli("fs", "cat", "lakegc://late/main/big.csv")


def test_a_delta_commit_during_the_run_naming_a_file_elsewhere_keeps_it(
    cli,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    """A shallow clone replaced during the run: its new commit adds a stray file by absolute path."""
    from lakegc.warehouse import recheck

    table = root / "clone"
    delta_table(table)
    adopted = put(root / "raw" / "part-9.parquet")
    real = recheck.still_unreferenced

    def racing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        add = {"path": adopted.as_uri(), "size": 7, "partitionValues": {}, "modificationTime": 0, "dataChange": True}
        (table / "_delta_log" / "00000000000000000001.json").write_text(json.dumps({"add": add}) + "\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(recheck, "still_unreferenced", racing)
    assert gc(cli, root, "--delta-table", str(table))["num_deleted"] == 0
    assert adopted.exists()


def test_a_location_inside_a_restore_window_is_refused(cli, root: Path) -> None:  # noqa: ANN001
    put(root / "stray" / "old.bin")
    gc(cli, root, "--quarantine", "3d")
    before = files(root)
    result = gc(cli, root / "_lakegc", ok=False)
    assert "own metadata" in one_error(result)
    assert files(root) == before


def test_files_an_iox_catalog_names_during_the_run_are_kept(
    cli,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    import uuid

    import sqlalchemy as sa

    from lakegc.warehouse import recheck

    url = f"sqlite:///{tmp_path / 'iox.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("create table parquet_file (object_store_id text unique not null, to_delete bigint)"))
    uid = uuid.uuid4()
    put(root / "iox" / f"{uid}.parquet")
    real = recheck.still_unreferenced

    def racing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with engine.begin() as conn:
            conn.execute(sa.text("insert into parquet_file values (:id, null)"), {"id": str(uid)})
        return real(*args, **kwargs)

    monkeypatch.setattr(recheck, "still_unreferenced", racing)
    assert gc(cli, root, "--catalog", url)["num_deleted"] == 0
    engine.dispose()
