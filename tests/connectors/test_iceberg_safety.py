"""Iceberg GC never deletes another table's files (issue 16, finding 6; Nessie #12363): tables nested
in a collected location, of the same catalog or of any other catalog configured for pyiceberg, are
left out of its listing; a copy of a table registered in another catalog keeps what it references;
symlinks into another table's location are refused; a configured catalog that cannot be read fails
the run before anything changes. Pure decisions first (table-driven), then whole runs through the
CLI on Spark against pyiceberg SqlCatalogs on SQLite with real files, as in test_iceberg_gc.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import CliResult, one_error, snapshot
from test_iceberg_gc import Lake, age_all, history, ids, make_lake, on_disk, referenced, rows, snapshot_ids

from lakegc.connectors.iceberg.paths import (
    Location,
    key_prefix,
    listing_plan,
    nested_locations,
    parse_location,
    relation,
    symlink_conflict,
)
from lakegc.engine.collector import RunOptions

Cli = Callable[..., CliResult]


def loc(uri: str) -> Location:
    return parse_location(uri)


# ================================================================================================
# decisions (pure)
# ================================================================================================

NESTED_CASES = {
    "a table in a sub-folder": ("/w/a", ["/w/a/b"], ["/w/a/b"]),
    "string-prefix twins are not nested": ("/w/t", ["/w/t2", "/w/t-old", "/w/t.bak"], []),
    "a table sharing the location is not nested (its references protect it)": ("/w/a", ["/w/a"], []),
    "a parent holding the root is not nested in it": ("/w/a/b", ["/w/a", "/w"], []),
    "outermost only: a table inside a nested table goes with it": (
        "/w/a",
        ["/w/a/b/c", "/w/a/b", "/w/a/d", "/w/x"],
        ["/w/a/b", "/w/a/d"],
    ),
    "s3a and s3n are s3": ("s3://bk/w", ["s3a://bk/w/t", "s3n://bk/w/u"], ["s3://bk/w/t", "s3://bk/w/u"]),
    "another bucket or scheme is apart": ("s3://bk/w", ["s3://other/w/t", "gs://bk/w/t", "/w/t"], []),
    "the store root holds every table": ("/", ["/w/a"], ["/w/a"]),
}


@pytest.mark.parametrize("name", NESTED_CASES)
def test_nested_locations(name: str):
    root, others, expected = NESTED_CASES[name]
    assert nested_locations(loc(root), [loc(o) for o in others]) == [loc(e) for e in expected]


@pytest.mark.parametrize(
    "root, nested, prefix", [("/w/a", "/w/a/b/c", "b/c/"), ("/", "/w", "w/"), ("s3://bk/w", "s3a://bk/w/t", "t/")]
)
def test_key_prefix(root: str, nested: str, prefix: str):
    assert key_prefix(loc(root), loc(nested)) == prefix


PLAN_CASES = {
    "a parent with a nested table of another: listed without it": (["/w/p"], ["/w/p/c"], [("/w/p", ["/w/p/c"])]),
    "two targets nested, nothing between: one listing": (["/w/p/c", "/w/p"], [], [("/w/p", [])]),
    "a target inside a table left out is listed on its own": (
        ["/w/p", "/w/p/o/t"],
        ["/w/p/o"],
        [("/w/p", ["/w/p/o"]), ("/w/p/o/t", [])],
    ),
    "a target sharing a nested table's location is listed on its own": (
        ["/w/p", "/w/p/c"],
        ["/w/p/c"],
        [("/w/p", ["/w/p/c"]), ("/w/p/c", [])],
    ),
    "a child under a parent table: the parent is never listed": (["/w/p/c"], ["/w/p"], [("/w/p/c", [])]),
    "twins are two listings": (["/w/t", "/w/t2"], [], [("/w/t", []), ("/w/t2", [])]),
}


@pytest.mark.parametrize("name", PLAN_CASES)
def test_listing_plan(name: str):
    targets, others, expected = PLAN_CASES[name]
    assert listing_plan([loc(t) for t in targets], [loc(o) for o in others]) == [
        (loc(root), [loc(n) for n in nested]) for root, nested in expected
    ]


SYMLINK_CASES = {  # (written a, real a, written b, real b) -> refused
    "no symlink, apart": (("/w/a", "/w/a"), ("/w/b", "/w/b"), False),
    "no symlink, nested (left out, not refused)": (("/w/a", "/w/a"), ("/w/a/b", "/w/a/b"), False),
    "a symlink into another table's folder": (("/w/alias", "/w/p/inner"), ("/w/p", "/w/p"), True),
    "a symlink onto another table's location": (("/w/alias", "/w/p"), ("/w/p", "/w/p"), True),
    "another table reached through a symlink into ours": (("/w/p", "/w/p"), ("/x/link", "/w/p/b"), True),
    "a warehouse behind one symlink, consistently": (("/l/a", "/r/a"), ("/l/a/b", "/r/a/b"), False),
    "a symlink out of the root (never followed)": (("/w/p", "/w/p"), ("/w/p/out", "/w/q"), False),
}


@pytest.mark.parametrize("name", SYMLINK_CASES)
def test_symlink_conflict(name: str):
    (wa, ra), (wb, rb), refused = SYMLINK_CASES[name]
    assert symlink_conflict(loc(wa), loc(ra), loc(wb), loc(rb)) is refused
    assert symlink_conflict(loc(wb), loc(rb), loc(wa), loc(ra)) is refused


def test_relation():
    assert [
        relation(loc(a), loc(b))
        for a, b in [("/w/a", "/w/a"), ("/w/a/b", "/w/a"), ("/w/a", "/w/a/b"), ("/w/a2", "/w/a")]
    ] == ["same", "inside", "holds", "apart"]


def test_listing_folders_never_enter_a_left_out_folder(tmp_path: Path):
    """The listing tasks of a root cover every file once, except the left-out subtrees, which
    they never open (their folders may be swapped or huge)."""
    from lakegc.engine.listing import location_folders
    from lakegc.storage import LocalStorage

    files = ["f", "data/x", "data/a/b/c/deep", "data/a/b/c2/twin", "data/a/keep", "meta/m", "n/o/p/q/r", "n/o/p2/s"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(f)
    storage = LocalStorage(tmp_path)
    tasks = location_folders(storage, "0", leave_out=("data/a/b/c/", "n/o/p/"))
    listed = [
        k
        for t in tasks
        for b in storage.list_batches(t.prefix, recursive=t.recursive)
        for k in b.column("key").to_pylist()
    ]
    assert sorted(listed) == sorted(set(files) - {"data/a/b/c/deep", "n/o/p/q/r"})
    assert not any(t.prefix.startswith(("data/a/b/c/", "n/o/p/")) for t in tasks)


# ================================================================================================
# whole runs
# ================================================================================================


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, spark) -> Lake:
    return make_lake(tmp_path, monkeypatch, cli)


def other_catalog(lake: Lake, monkeypatch: pytest.MonkeyPatch, name: str = "other"):  # type: ignore[no-untyped-def]
    """A second SqlCatalog, configured for pyiceberg by environment, its warehouse the same folder."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{lake.warehouse.parent / f'{name}.db'}"
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__URI", uri)
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__WAREHOUSE", lake.warehouse.as_uri())
    catalog = SqlCatalog(name, uri=uri, warehouse=lake.warehouse.as_uri())
    catalog.create_namespace("o")
    return catalog


def two_appends(lake: Lake, table, first: int):  # type: ignore[no-untyped-def]
    lake.at(9, lambda: table.append(rows(first)) or table)
    lake.at(8, lambda: table.append(rows(first + 1)) or table)
    return table


def tree(root: Path) -> dict[str, float]:
    """Every file under a folder, with its mtime: what must not change."""
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def test_gc_of_a_parent_deletes_nothing_under_a_nested_table_of_the_same_catalog(lake: Lake):
    """Parent ns.p at wh/p, child ns.c at wh/p/c: the child's files, its own orphans included, are
    the child's business. The child's own run collects them, and never touches the parent's."""
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    c = two_appends(lake, lake.table("ns.c", location=(lake.warehouse / "p/c").as_uri()), 10)
    parent_orphan = lake.put("p/data/orphan.parquet", 10)
    child_orphan = lake.put("p/c/data/old-unreferenced.parquet", 10)
    lake.put("p/c/metadata/00000-stale.metadata.json", 10)
    age_all(lake.warehouse)
    child_before = tree(lake.warehouse / "p/c")

    run = lake.gc("ns.p", older_than="30d").json()
    assert not parent_orphan.exists() and run["num_deleted"] == 1
    assert tree(lake.warehouse / "p/c") == child_before
    assert run["details"]["nested table locations left out"] == 1
    assert [name.split(":")[0] for name in run["details"]["nested tables left out"]] == ["ns.c"]
    assert ids(p) == [1, 2] and ids(c) == [10, 11]

    parent_before = {f: m for f, m in tree(lake.warehouse / "p").items() if "/p/c/" not in f}
    run = lake.gc("ns.c", older_than="30d").json()
    assert not child_orphan.exists() and run["num_deleted"] == 2
    assert run["details"]["nested table locations left out"] == 0
    assert {f: m for f, m in tree(lake.warehouse / "p").items() if "/p/c/" not in f} == parent_before
    assert ids(p) == [1, 2] and ids(c) == [10, 11]


def test_a_target_inside_a_nested_table_is_collected_on_its_own(lake: Lake):
    """ns.p and ns.t are collected; ns.o, not collected, lies between them (p/o holds p/o/t). ns.o's
    subtree is left out of ns.p's listing, ns.t is listed on its own, each orphan deleted once."""
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    o = two_appends(lake, lake.table("ns.o", location=(lake.warehouse / "p/o").as_uri()), 10)
    t = two_appends(lake, lake.table("ns.t", location=(lake.warehouse / "p/o/t").as_uri()), 20)
    p_orphan, t_orphan = lake.put("p/data/orphan.parquet", 10), lake.put("p/o/t/data/orphan.parquet", 10)
    o_orphan = lake.put("p/o/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    run = lake.gc("ns.p", "ns.t", older_than="30d").json()
    assert not p_orphan.exists() and not t_orphan.exists() and o_orphan.exists()
    assert (run["num_candidates"], run["num_deleted"]) == (2, 2)
    assert ids(p) == [1, 2] and ids(o) == [10, 11] and ids(t) == [20, 21]


def test_string_prefix_twins_are_not_nested(lake: Lake):
    """ns.w at wh/w holds table ns.t at wh/w/t; wh/w/t2 is only a folder of ns.w's (no table):
    its orphan goes, the nested table's stays."""
    w = two_appends(lake, lake.table("ns.w", location=(lake.warehouse / "w").as_uri()), 1)
    lake.table("ns.t", location=(lake.warehouse / "w/t").as_uri())
    twin_orphan = lake.put("w/t2/data/orphan.parquet", 10)
    dash_orphan = lake.put("w/t-old/orphan.parquet", 10)
    nested_file = lake.put("w/t/data/not-ours.parquet", 10)
    age_all(lake.warehouse)
    run = lake.gc("ns.w", older_than="30d").json()
    assert not twin_orphan.exists() and not dash_orphan.exists() and nested_file.exists()
    assert run["num_deleted"] == 2 and run["details"]["nested table locations left out"] == 1
    assert ids(w) == [1, 2]


def test_a_table_of_another_configured_catalog_protects_its_location_and_its_references(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
):
    """o.sub (catalog `other`) sits in a sub-folder of ns.p; o.far, elsewhere, adopted a file that
    lies under ns.p's location (add_files). Nothing in catalog `lake` knows either."""
    import pyarrow.parquet as pq

    other = other_catalog(lake, monkeypatch)
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    sub = two_appends(
        lake, other.create_table("o.sub", schema=p.schema(), location=(lake.warehouse / "p/sub").as_uri()), 20
    )
    adopted = lake.warehouse / "p/data/adopted.parquet"
    pq.write_table(rows(99), adopted)
    far = other.create_table("o.far", schema=p.schema(), location=(lake.warehouse / "far").as_uri())
    lake.at(9, lambda: far.add_files([adopted.as_uri()]) or far)
    sub_stray = lake.put("p/sub/data/sub-orphan.parquet", 10)
    parent_orphan = lake.put("p/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    sub_before, sub_needed = tree(lake.warehouse / "p/sub"), referenced(sub)

    run = lake.gc("ns.p", older_than="30d").json()
    assert not parent_orphan.exists() and run["num_deleted"] == 1
    assert adopted.exists() and ids(far) == [99]
    assert tree(lake.warehouse / "p/sub") == sub_before and sub_stray.exists()
    assert on_disk(lake, sub_needed) == sub_needed and ids(sub) == [20, 21]
    assert run["details"]["other catalogs read"] == ["other"]
    assert run["details"]["nested table locations left out"] == 1
    assert run["details"]["tables protecting their files"] == 2


def test_a_copy_registered_in_another_catalog_keeps_the_snapshots_we_expire(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
):
    """register_table of ns.t's metadata file in catalog `other`: a second pointer that still
    reads every snapshot after ns.t expires its own."""
    other = other_catalog(lake, monkeypatch)
    t, s = history(lake)
    copy = other.register_table("o.copy", t.metadata_location)
    age_all(lake.warehouse)
    needed = referenced(copy)
    run = lake.gc("ns.t", older_than="5d").json()
    assert run["details"]["snapshots expired"] == 4 and snapshot_ids(t) == {s["S5"]}
    assert on_disk(lake, needed) == needed
    assert sorted(copy.scan(snapshot_id=s["S2"]).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert run["details"]["tables changed during the run"] == "o.copy (catalog other)"


def test_the_same_catalog_under_two_names_is_one_catalog(lake: Lake, monkeypatch: pytest.MonkeyPatch):
    """`alias` names the very database `lake` does: its tables are the same tables, not copies
    that would pin the snapshots being expired."""
    monkeypatch.setenv("PYICEBERG_CATALOG__ALIAS__URI", os.environ["PYICEBERG_CATALOG__LAKE__URI"])
    monkeypatch.setenv("PYICEBERG_CATALOG__ALIAS__WAREHOUSE", lake.warehouse.as_uri())
    t, s = history(lake)
    lake.table("ns.neighbour")
    age_all(lake.warehouse)
    expired_files = referenced(t)
    run = lake.gc("ns.t", older_than="5d").json()
    needed = referenced(t)
    assert on_disk(lake, needed) == needed and ids(t) == [1, 2, 4, 5]
    assert on_disk(lake, expired_files - needed) == set() and run["num_deleted"] > 0
    assert run["details"]["other catalogs read"] == ["alias"]
    assert run["details"]["tables protecting their files"] == 1  # ns.neighbour, once
    assert "tables changed during the run" not in run["details"]


def test_a_symlinked_location_into_another_tables_folder_is_refused(lake: Lake):
    """ns.alias's location wh/alias is a symlink to wh/p/inner, inside ns.p's location: ns.p's
    listing would find ns.alias's files under paths its metadata never names. Both runs are refused."""
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    (lake.warehouse / "p/inner").mkdir()
    (lake.warehouse / "alias").symlink_to(lake.warehouse / "p/inner", target_is_directory=True)
    alias = two_appends(lake, lake.table("ns.alias", location=(lake.warehouse / "alias").as_uri()), 30)
    lake.put("p/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    before, snapshots = tree(lake.warehouse), (snapshot_ids(p), snapshot_ids(alias))
    one_error(lake.gc("ns.p", ok=False, older_than="0s"), "symlink", "ns.alias", "nothing was collected")
    one_error(lake.gc("ns.alias", ok=False, older_than="0s"), "symlink", "ns.p", "nothing was collected")
    assert tree(lake.warehouse) == before and (snapshot_ids(p), snapshot_ids(alias)) == snapshots
    assert ids(p) == [1, 2] and ids(alias) == [30, 31]


def test_listing_never_follows_a_symlink_out_of_the_root(lake: Lake):
    """Symlinks inside ns.p's folder (to ns.q's folder, to one of ns.q's files) are not followed,
    so ns.q loses nothing. A guard: the listing skipped symlinks before this change too."""
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    q = two_appends(lake, lake.table("ns.q", location=(lake.warehouse / "q").as_uri()), 40)
    q_stray = lake.put("q/data/q-orphan.parquet", 10)
    (lake.warehouse / "p/data/escape").symlink_to(lake.warehouse / "q", target_is_directory=True)
    (lake.warehouse / "p/data/link.parquet").symlink_to(q_stray)
    age_all(lake.warehouse)
    q_before = tree(lake.warehouse / "q")
    run = lake.gc("ns.p", older_than="30d").json()
    assert tree(lake.warehouse / "q") == q_before and run["num_candidates"] == 0
    assert (lake.warehouse / "p/data/escape").is_symlink() and (lake.warehouse / "p/data/link.parquet").is_symlink()
    assert ids(p) == [1, 2] and ids(q) == [40, 41]


@pytest.mark.parametrize("broken", ["catalog", "table"])
def test_another_catalog_that_cannot_be_read_fails_the_run_with_nothing_changed(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, broken: str
):
    t, _ = history(lake)
    orphan = lake.put("ns/t/data/orphan.parquet", 10)
    if broken == "catalog":
        monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__URI", "sqlite:////nonexistent/dir/x.db")
    else:
        other = other_catalog(lake, monkeypatch, "broken")
        lost = other.create_table("o.lost", schema=t.schema(), location=(lake.warehouse / "lost").as_uri())
        Path(lost.metadata_location.removeprefix("file://")).unlink()
    age_all(lake.warehouse)
    before = lake.files(), snapshot_ids(t)
    one_error(lake.gc("ns.t", ok=False, older_than="5d"), "broken", "nothing was collected")
    assert (lake.files(), snapshot_ids(t)) == before and orphan.exists()


def test_a_table_nested_while_the_run_marks_keeps_its_files(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """A file listed as ns.p's orphan becomes another catalog's table's file before the deletes
    (a table created at wh/p/late): the sweep re-reads every catalog and leaves it."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    other = other_catalog(lake, monkeypatch)
    p = two_appends(lake, lake.table("ns.p", location=(lake.warehouse / "p").as_uri()), 1)
    late = lake.put("p/late/data/late.parquet", 10)
    orphan = lake.put("p/data/orphan.parquet", 10)
    age_all(lake.warehouse)

    def phase(name: str, detail: str = "") -> None:
        if name == "re-reading the catalog":
            other.create_table("o.late", schema=p.schema(), location=(lake.warehouse / "p/late").as_uri())

    run = run_iceberg_gc(
        "lake",
        ["ns.p"],
        IcebergGcOptions(older_than=timedelta(days=30)),
        RunOptions(runs_location=str(tmp_path / "runs")),
        phase,
    )
    assert run.num_candidates == 2 and run.num_deleted == 1
    assert late.exists() and not orphan.exists() and ids(p) == [1, 2]
    assert run.details["nested table locations left out"] == 1


# -- the shared deletion guard: a table location may hold nothing lakegc protects ------------------
def test_a_table_location_holding_a_repository_namespace_or_the_metastore_is_refused(lake: Lake, tmp_path: Path):
    """A table created at a folder that also holds a lakegc repository's namespace (or the lakegc
    metastore, or the catalog's own database) would see them as orphans: refused before anything
    is expired or listed."""
    cli = lake.cli
    wide = lake.warehouse / "wide"
    cli("repo", "create", "lakegc://inside", str(wide / "lake-ns"))
    table = lake.table("ns.wide", location=wide.as_uri())
    lake.at(20, lambda: table.append(rows(1)) or table)
    age_all(tmp_path)
    before = snapshot(lake.warehouse)
    one_error(
        cli(
            "iceberg",
            "gc",
            "--catalog",
            "lake",
            "ns.wide",
            "--older-than",
            "1d",
            "--runs",
            str(tmp_path / "runs"),
            ok=False,
        ),
        "holds the namespace of repository 'inside'",
    )
    assert snapshot(lake.warehouse) == before
    assert len(snapshot_ids(lake.catalog.load_table("ns.wide"))) == 1

    db_table = lake.table("ns.holds_db", location=tmp_path.as_uri())  # the catalog database lies in it
    lake.at(20, lambda: db_table.append(rows(2)) or db_table)
    one_error(
        cli("iceberg", "gc", "--catalog", "lake", "ns.holds_db", "--runs", str(tmp_path / "runs"), ok=False),
        "refusing to clean table location",
    )
    assert (tmp_path / "iceberg.db").is_file()
