"""A table nobody told lakegc about is never collected (issue 33, finding 0).

A table of a catalog that is not configured for pyiceberg, a Delta table, a lakegc namespace or a
lakeFS namespace inside a collected location announces itself on storage by its marker. Every
collector that lists a location (iceberg, delta, catalog) leaves such a folder out whole and says
so; a marker at the location itself, or a Delta table inside a Delta table, refuses the run. Each
collector is attacked in the two layouts the review used: the collected location at the warehouse
root with the foreign table two levels down (`db2/foreign`), and at `p` with it one level down
(`p/foreign`).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult, one_error
from test_catalog_gc import create_catalog
from test_delta_gc import ROWS, backdate
from test_iceberg_gc import Lake, age_all, ids, make_lake, rows

from lakegc.connectors.foreign import DELTA, ICEBERG, LAKEFS, LAKEGC, Foreign, foreign_folders, marker_of
from lakegc.errors import UnsafeLocation

Cli = Callable[..., CliResult]

# -- the rule (pure) -----------------------------------------------------------------------------
MARKER_CASES = {
    "an Iceberg metadata file names its table's folder": ("db2/t/metadata/00001-a.metadata.json", ("db2/t/", ICEBERG)),
    "compressed Iceberg metadata": ("t/metadata/00001-a.gz.metadata.json", ("t/", ICEBERG)),
    "a Hadoop catalog's version hint": ("t/metadata/version-hint.text", ("t/", ICEBERG)),
    "the location's own metadata": ("metadata/v3.metadata.json", ("", ICEBERG)),
    "a manifest is no marker": ("t/metadata/snap-1-a.avro", None),
    "metadata.json deeper than metadata/ is no marker": ("t/metadata/old/v1.metadata.json", None),
    "a Delta log": ("a/b/_delta_log/00000000000000000000.json", ("a/b/", DELTA)),
    "a Delta log at the location": ("_delta_log/00000000000000000000.json", ("", DELTA)),
    "a lakegc namespace": ("ns/_lakegc/repository.json", ("ns/", LAKEGC)),
    "another file of _lakegc/ is no marker": ("ns/_lakegc/other.json", None),
    "a lakeFS namespace": ("lfs/_lakefs/dummy", ("lfs/", LAKEFS)),
    "outermost wins: a log inside a foreign table": ("x/_delta_log/y/_delta_log/0.json", ("x/", DELTA)),
    "a data file is no marker": ("p/foreign/data/00000-0-a.parquet", None),
    "odd folder names are folders like any": ("we ird/t%2F é/metadata/v1.metadata.json", ("we ird/t%2F é/", ICEBERG)),
    "a name that only ends like a marker": ("t/my_delta_log/x", None),
    # line terminators in a folder's name: Java's `.` stops at these without (?s), Python's at \n
    "a carriage return in a folder name": ("a/b\rc/_delta_log/0.json", ("a/b\rc/", DELTA)),
    "a line separator in a folder name": ("a/b\u2028c/metadata/v1.metadata.json", ("a/b\u2028c/", ICEBERG)),
    "a newline in a folder name": ("a/b\nc/_lakefs/dummy", ("a/b\nc/", LAKEFS)),
    "NEL in a folder name": ("a/b\u0085c/_lakegc/repository.json", ("a/b\u0085c/", LAKEGC)),
}


@pytest.mark.parametrize("name", MARKER_CASES)
def test_marker_of(name: str) -> None:
    key, expected = MARKER_CASES[name]
    assert marker_of(key) == expected


def test_the_spark_rule_is_the_python_rule(spark) -> None:  # noqa: ANN001
    from lakegc.connectors.foreign import find_markers
    from lakegc.engine.columns import LISTING, ddl

    keys = [key for key, _ in MARKER_CASES.values()]
    listing = spark.createDataFrame([(k, 1, None, "0", False) for k in keys], ddl(LISTING))
    expected = {Foreign("0", *found) for key in keys if (found := marker_of(key))}
    assert set(find_markers(listing)) == expected


def test_own_markers_are_metadata_folders_only() -> None:
    """An Iceberg run owns `metadata/` at each of its tables; with a metadata path elsewhere, only a
    folder literally named `metadata` makes its parent the run's (a custom `write.metadata.path`
    such as `shared/t_meta/` must not make `shared/` the run's: a foreign table there stays foreign)."""
    from types import SimpleNamespace

    from lakegc.connectors.iceberg.orphans import Root, own_markers
    from lakegc.connectors.iceberg.paths import parse_location

    root = Root("file:///w", parse_location("file:///w"), None, parse_location("file:///w"))  # type: ignore[arg-type]

    def table(location: str, metadata: str) -> SimpleNamespace:
        return SimpleNamespace(real=parse_location(location), table=SimpleNamespace(metadata_location=metadata))

    tables = [
        table("file:///w", "file:///w/metadata/v3.metadata.json"),
        table("file:///w/a", "file:///w/shared/t_meta/v1.metadata.json"),
        table("file:///w/b", "file:///w/elsewhere/metadata/v1.metadata.json"),
    ]
    own = own_markers([root], tables)  # type: ignore[arg-type]
    assert own == {Foreign("0", p, ICEBERG) for p in ("", "a/", "b/", "elsewhere/")}


def test_own_markers_stay_nested_ones_go_outermost_first() -> None:
    own = {Foreign("0", "", ICEBERG), Foreign("0", "child/", ICEBERG)}
    found = [*own, Foreign("0", "x/", DELTA), Foreign("0", "x/y/", ICEBERG), Foreign("1", "x/y/", LAKEFS)]
    assert foreign_folders(found, own) == [Foreign("0", "x/", DELTA), Foreign("1", "x/y/", LAKEFS)]


@pytest.mark.parametrize(
    ("found", "refuse", "message"),
    [
        (Foreign("0", "", DELTA), frozenset(), "the location itself is a Delta table"),
        (Foreign("0", "", LAKEFS), frozenset(), "_lakefs/"),
        (Foreign("0", "sub/", DELTA), frozenset({DELTA}), "inside this one, at sub/"),
    ],
)
def test_markers_that_refuse_the_run(found: Foreign, refuse: frozenset[str], message: str) -> None:
    with pytest.raises(UnsafeLocation, match=message):
        foreign_folders([found], refuse=refuse)


# -- foreign tables on disk ----------------------------------------------------------------------
LAYOUTS = {
    "at the warehouse root, foreign at db2/foreign": ("", "db2/foreign"),
    "at p, foreign at p/foreign": ("p", "p/foreign"),
}


def tree(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def foreign_iceberg(tmp_path: Path, location: Path) -> object:
    """A table of a catalog no pyiceberg configuration names: lakegc cannot know it but by its files."""
    from pyiceberg.catalog.sql import SqlCatalog
    from test_iceberg_gc import SCHEMA

    catalog = SqlCatalog("acc2", uri=f"sqlite:///{tmp_path / 'unknown-catalog.db'}", warehouse=location.parent.as_uri())
    catalog.create_namespace("db2")
    table = catalog.create_table("db2.foreign", schema=SCHEMA, location=location.as_uri())
    table.append(rows(7))
    table.append(rows(8))
    return table


def other_markers(root: Path) -> dict[str, Path]:
    """A Delta table, a lakegc namespace and a lakeFS namespace, each in a sub-folder."""
    from deltalake import write_deltalake

    write_deltalake(root / "delta_t", ROWS)
    put(root / "ns/_lakegc/repository.json", b"{}")
    put(root / "ns/data/a1/object", b"someone's data")
    put(root / "lfs/_lakefs/dummy", b"")
    put(root / "lfs/data/gabc/object", b"lakeFS data")
    return {"delta": root / "delta_t", "lakegc": root / "ns", "lakefs": root / "lfs"}


def put(path: Path, body: bytes = b"junk", days_old: float = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    when = time.time() - days_old * 86_400
    os.utime(path, (when, when))
    return path


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, spark) -> Lake:  # noqa: ANN001
    return make_lake(tmp_path, monkeypatch, cli)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_iceberg_gc_leaves_a_table_of_an_unknown_catalog_whole(lake: Lake, tmp_path: Path, layout: str) -> None:
    """The review's attack: before the rule, every file of the foreign table was deleted."""
    parent_at, foreign_at = LAYOUTS[layout]
    parent = lake.table("ns.parent", location=(lake.warehouse / parent_at).as_uri())
    lake.at(9, lambda: parent.append(rows(1)) or parent)
    lake.at(8, lambda: parent.append(rows(2)) or parent)
    foreign = foreign_iceberg(tmp_path, lake.warehouse / foreign_at)
    others = other_markers(lake.warehouse / parent_at / "more")
    orphan = lake.put(f"{parent_at}/data/orphan.parquet".lstrip("/"), 10)
    age_all(lake.warehouse)
    foreign_before = tree(lake.warehouse / foreign_at)
    others_before = {name: tree(path) for name, path in others.items()}

    result = lake.gc("ns.parent", older_than="0s", retain_last="1", orphan_min_age="1d")
    run = result.json()
    assert tree(lake.warehouse / foreign_at) == foreign_before
    assert sorted(foreign.refresh().scan().to_arrow().column("id").to_pylist()) == [7, 8]
    assert {name: tree(path) for name, path in others.items()} == others_before
    assert not orphan.exists() and ids(parent) == [1, 2]
    assert run["details"]["foreign table folders left out"] == 4
    shown = run["details"]["foreign tables left out"]
    assert any(s.endswith(f"{foreign_at}/ ({ICEBERG})") for s in shown)
    assert any(s.endswith(f"more/delta_t/ ({DELTA})") for s in shown)
    assert "leaving out tables nobody named" in result.stderr


def test_iceberg_gc_refuses_a_location_that_is_also_a_delta_table(lake: Lake) -> None:
    from deltalake import write_deltalake

    parent = lake.table("ns.parent", location=(lake.warehouse / "p").as_uri())
    lake.at(9, lambda: parent.append(rows(1)) or parent)
    write_deltalake(lake.warehouse / "p", ROWS, mode="append")
    age_all(lake.warehouse)
    before = tree(lake.warehouse)
    one_error(lake.gc("ns.parent", older_than="0s", orphan_min_age="1d", ok=False), "itself is a Delta table")
    assert tree(lake.warehouse) == before


@pytest.mark.parametrize("layout", LAYOUTS)
def test_delta_gc_leaves_a_foreign_iceberg_table_whole(cli: Cli, tmp_path: Path, spark, layout: str) -> None:  # noqa: ANN001
    from deltalake import write_deltalake

    parent_at, foreign_at = LAYOUTS[layout]
    wh = tmp_path / "wh"
    write_deltalake(wh / parent_at, ROWS)
    foreign = foreign_iceberg(tmp_path, wh / foreign_at)
    others = {k: v for k, v in other_markers(wh / parent_at / "more").items() if k != "delta"}
    import shutil

    shutil.rmtree(wh / parent_at / "more/delta_t")  # a Delta table inside is refused: below
    stray = put(wh / parent_at / "stray.parquet")
    backdate(wh)
    foreign_before, others_before = tree(wh / foreign_at), {k: tree(p) for k, p in others.items()}

    result = cli("delta", "gc", str(wh / parent_at), "--retention", "0s", "--force", "--json")
    run = result.json()
    assert tree(wh / foreign_at) == foreign_before
    assert sorted(foreign.refresh().scan().to_arrow().column("id").to_pylist()) == [7, 8]
    assert {k: tree(p) for k, p in others.items()} == others_before
    assert not stray.exists() and run["files"] == ["stray.parquet"]
    assert run["details"]["foreign table folders left out"] == 3
    assert "leaving out tables nobody named" in result.stderr


@pytest.mark.parametrize("layout", LAYOUTS)
def test_delta_gc_refuses_a_delta_table_inside_in_either_layout(cli: Cli, tmp_path: Path, layout: str) -> None:
    from deltalake import write_deltalake

    parent_at, foreign_at = LAYOUTS[layout]
    wh = tmp_path / "wh"
    write_deltalake(wh / parent_at, ROWS)
    write_deltalake(wh / foreign_at, ROWS)
    backdate(wh)
    before = tree(wh)
    rel = foreign_at.removeprefix(parent_at).lstrip("/")
    one_error(
        cli("delta", "gc", str(wh / parent_at), "--retention", "0s", "--force", ok=False), "inside this one", f"{rel}/"
    )
    assert tree(wh) == before


@pytest.mark.parametrize("layout", LAYOUTS)
def test_catalog_gc_leaves_foreign_tables_whole(cli: Cli, tmp_path: Path, spark, layout: str) -> None:  # noqa: ANN001
    parent_at, foreign_at = LAYOUTS[layout]
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    create_catalog(url)
    wh = tmp_path / "wh"
    foreign = foreign_iceberg(tmp_path, wh / foreign_at)
    others = other_markers(wh / parent_at / "more")
    orphan = put(wh / parent_at / "1/2" / f"{uuid.uuid4()}.parquet", days_old=30)
    for p in wh.rglob("*"):
        if p.is_file():
            when = time.time() - 30 * 86_400
            os.utime(p, (when, when))
    before = {k: tree(p) for k, p in {"foreign": wh / foreign_at, **others}.items()}

    result = cli("catalog", "gc", "--catalog", url, "--store", str(wh / parent_at), "--json")
    run = result.json()
    assert {k: tree(p) for k, p in {"foreign": wh / foreign_at, **others}.items()} == before
    assert sorted(foreign.refresh().scan().to_arrow().column("id").to_pylist()) == [7, 8]
    assert not orphan.exists() and run["num_deleted"] == 1
    assert run["details"]["foreign table folders left out"] == 4
    assert "leaving out tables nobody named" in result.stderr


def test_prefixes_answer_as_the_plain_rule_on_random_folders() -> None:
    """The binary search of `Prefixes` against "starts with any of them", on random nested folder
    sets (a warehouse root holding many tables makes the linear rule too slow, not wrong)."""
    import random

    from lakegc.connectors.foreign import Prefixes

    rng = random.Random(33)
    names = ["a", "b", "ab", "a.b", "a-", "z", "é"]
    for _ in range(300):
        folders = {
            "/".join(rng.choice(names) for _ in range(rng.randint(1, 3))) + "/" for _ in range(rng.randint(0, 6))
        }
        prefixes = Prefixes.of(folders)
        for _ in range(30):
            key = "/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))
            assert prefixes.hold(key) == any(key.startswith(f) for f in folders), (sorted(folders), key)


@pytest.mark.parametrize("tables", [3, 200])
def test_outside_foreign_leaves_out_the_same_keys_with_few_or_many_folders(spark, tables: int) -> None:  # noqa: ANN001
    """A few foreign folders are a JVM filter, many a binary search per key: the same answer."""
    from lakegc.connectors.foreign import outside_foreign
    from lakegc.engine.columns import LISTING, ddl

    foreign = [Foreign("0", f"db/t{i}/", ICEBERG) for i in range(tables)] + [Foreign("1", "x/", DELTA)]
    keys = [(f"db/t{i}/data/f.parquet", "0") for i in range(0, 2 * tables, 3)]
    keys += [("db/t1x/f", "0"), ("x/f", "0"), ("x/f", "1"), ("db/f", "1")]
    listing = spark.createDataFrame([(k, 1, None, s, False) for k, s in keys], ddl(LISTING))
    kept = {(r["address"], r["slice"]) for r in outside_foreign(listing, foreign).collect()}
    assert kept == {(k, s) for k, s in keys if not any(f.slice == s and k.startswith(f.prefix) for f in foreign)}


def test_catalog_gc_on_s3_leaves_marked_folders_whole(cli: Cli, tmp_path: Path, bucket, spark) -> None:  # noqa: ANN001
    """The same rule on an S3 store: keys are all there is, and the markers are keys."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    create_catalog(url)
    orphan = f"iox/1/2/{uuid.uuid4()}.parquet"
    foreign = [
        "iox/db2/foreign/metadata/00001-a.metadata.json",
        "iox/db2/foreign/data/00000-0-a.parquet",
        "iox/t/_delta_log/00000000000000000000.json",
        "iox/t/part-0.parquet",
        "iox/lfs/_lakefs/dummy",
        "iox/lfs/data/gabc/obj",
    ]
    for key in [orphan, *foreign]:
        bucket.put(key)
        bucket.faults.backdate[key] = "2020-01-01T00:00:00.000Z"
    run = cli("catalog", "gc", "--catalog", url, "--store", f"s3://{bucket.name}/iox", "--json").json()
    assert bucket.keys("iox/") == set(foreign)
    assert run["num_deleted"] == 1 and run["details"]["foreign table folders left out"] == 3
