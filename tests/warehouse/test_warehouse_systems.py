"""The warehouse rule, pure (`warehouse.owners`, `warehouse.live.Locator`), and the systems the
realistic warehouse does not hold: a lakeFS repository (the API stand-in over a local blockstore
inside the warehouse) and an IOx-style catalog."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import one_error
from support.lakefs_standin import running_standin
from support.warehouse import age_tree, put

from lakegc.warehouse.live import Locator, locator
from lakegc.warehouse.owners import INSIDE, KEPT, OUTSIDE, UNOWNED, Owner, folders, judge

# -- the rule ----------------------------------------------------------------------------------------
OWNERS = [
    Owner("iceberg", "t", "ice/t/", partition_fields=frozenset({"_p"})),
    Owner("delta", "d", "delta/d/"),
    Owner("repository", "r", "repos/r/"),
    Owner("iceberg", "off", "ice/off/", whole=True),
    Owner("delta", "both", "mixed/"),
    Owner("delta", "in a dropped folder", "dropped/named/"),
]
MARKERS = [
    ("ice/t/", "Iceberg table"),
    ("delta/d/", "Delta table"),
    ("repos/r/", "lakegc namespace"),
    ("dropped/", "Iceberg table"),
    ("ice/t/nested/", "Delta table"),  # a table nobody named inside a named one
    ("dropped/inner/", "Delta table"),
    ("mixed/", "Delta table"),
    ("mixed/", "Iceberg table"),  # a named Delta table's folder also holds Iceberg metadata nobody named
    ("dropped/named/", "Delta table"),
    ("lfs/", "lakeFS namespace"),  # nobody named it
]
CASES = {
    "a stray file at the root": ("x.bin", OUTSIDE, None),
    "a stray file in a folder": ("stray/deep/x.bin", OUTSIDE, None),
    "a prefix twin is no part of the table": ("ice/t2/data/a.parquet", OUTSIDE, None),
    "a file of a named Iceberg table": ("ice/t/data/a.parquet", INSIDE, "ice/t/"),
    "Iceberg's hidden files stay": ("ice/t/_tmp/a", KEPT, None),
    "its partition folder is not hidden": ("ice/t/data/_p=1/a.parquet", INSIDE, "ice/t/"),
    "a Delta table's file": ("delta/d/part-0.parquet", INSIDE, "delta/d/"),
    "a namespace is kept whole": ("repos/r/data/abc", KEPT, None),
    "gc.enabled=false keeps the table whole": ("ice/off/data/a.parquet", KEPT, None),
    "an unowned folder": ("dropped/metadata/v1.metadata.json", UNOWNED, None),
    "inside an unowned folder's nested table": ("dropped/inner/x", UNOWNED, None),
    "an unowned table inside a named one": ("ice/t/nested/part-0.parquet", UNOWNED, None),
    "a named folder with a marker nobody accounts for is kept": ("mixed/data/x", KEPT, None),
    "a named table in an unowned folder is unowned, judged by itself": (
        "dropped/named/p.parquet",
        UNOWNED,
        "dropped/named/",
    ),
    "a namespace nobody named is kept whole": ("lfs/data/g1/x", KEPT, None),
    "another run's restore window is kept": ("stray/_lakegc/quarantine/r1/x", KEPT, None),
}


@pytest.mark.parametrize("name", CASES)
def test_judge(name: str) -> None:
    key, category, table = CASES[name]
    verdict = judge(key, folders(MARKERS, OWNERS))
    assert (verdict.category, verdict.table) == (category, table)
    assert verdict.top == (key.split("/")[0] + "/" if "/" in key else "")


def test_a_delta_table_is_judged_with_its_vacuum() -> None:
    assert judge("delta/d/part-0.parquet", folders(MARKERS, OWNERS)).delta is True
    assert judge("ice/t/data/a.parquet", folders(MARKERS, OWNERS)).delta is False


LOCATOR = locator("file:///wh", "file:///real/wh", {"s3a://b/ice/t": "ice/t/", "/alias/t2": "ice/t2/"})


@pytest.mark.parametrize(
    ("uri", "key"),
    [
        ("file:///wh/a/b.parquet", "a/b.parquet"),
        ("/wh/a/b.parquet", "a/b.parquet"),  # a bare path
        ("file:///real/wh/a/b.parquet", "a/b.parquet"),  # the location as it really is
        ("file:///wh/./a//b.parquet", "a/b.parquet"),
        ("s3://b/ice/t/data/x.parquet", "ice/t/data/x.parquet"),  # s3a written, s3 referenced
        ("file:///alias/t2/data/x", "ice/t2/data/x"),  # a table named through a symlinked path
        ("file:///wh2/a.parquet", None),  # a prefix twin of the location
        ("file:///elsewhere/a", None),
        ("not a location", None),
    ],
)
def test_locator(uri: str, key: str | None) -> None:
    assert LOCATOR.key(uri) == key


@pytest.mark.parametrize(
    ("uri", "keys"),
    [
        ("s3a://b/ice/t/data//x.parquet", {"ice/t/data//x.parquet", "ice/t/data/x.parquet"}),  # S3 keeps `//`
        ("file:///wh/a%20b.bin", {"a%20b.bin", "a b.bin"}),  # a repository writes escapes
        ("file:/wh/x", {"x"}),
        ("file://localhost/wh/x", {"x"}),
        ("file:///elsewhere/x", set()),
    ],
)
def test_locator_keys_every_spelling(uri: str, keys: set[str]) -> None:
    assert LOCATOR.keys(uri) == keys


@pytest.mark.parametrize("spelled", ["file:/wh/n", "file:///wh/n", "file://localhost/wh/n", "/wh/n/"])
def test_a_named_folder_is_found_however_its_location_is_spelled(spelled: str) -> None:
    from lakegc.warehouse.systems import Root

    assert Root("file:///wh").prefix_of(spelled) == "n/"


def test_locator_reads_lakefs_local_addresses() -> None:
    found = Locator({"file:///blocks/wh/": ""}, "/blocks")
    assert found.key("local://wh/x/y") == "x/y"


# -- a lakeFS repository inside the warehouse ------------------------------------------------------------
def test_a_lakefs_namespace_is_kept_whole_and_what_it_imports_is_live(
    tmp_path: Path,
    cli,
    monkeypatch: pytest.MonkeyPatch,
    spark,  # noqa: ANN001
) -> None:
    root = tmp_path / "wh"
    with running_standin(root) as standin:
        model = standin.model
        model.create_repository("lfs", "local://lfs")
        model.upload("lfs", "main", "a")
        imported = put(root / "stray" / "imported.bin", b"imported")
        model.stage("lfs", "main", "b", f"local://{imported}", size=8, full=True)
        model.commit("lfs", "main")
        garbage = model.upload("lfs", "main", "c")
        model.delete("lfs", "main", "c")  # never committed: lakeFS's own GC's to take, not ours
        put(root / "stray" / "other.bin")
        age_tree(root)
        monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", standin.endpoint)
        monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", standin.access_key_id)
        monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", standin.secret_access_key)
        args = ["warehouse", "gc", str(root), "--lakefs-repo", "lfs", "--lakefs-local-path", str(root), "--json"]
        done = cli(*args).json()
        assert done["files"] == ["stray/other.bin"]
        assert imported.exists() and (root / "lfs" / garbage).exists()
        # without naming it, the namespace is unowned (its `_lakefs/`): kept, and reported
        put(root / "stray" / "other.bin")
        again = cli("warehouse", "gc", str(root), "--json", "--dry-run").json()
        assert "lfs/" in {u["folder"] for u in again["details"]["unowned table folders"]}
        assert "stray/imported.bin" in again["files"]  # nobody named lakeFS: its import is not known


def test_a_lakefs_repository_that_cannot_be_asked_fails_the_run(tmp_path: Path, cli, spark) -> None:  # noqa: ANN001
    root = tmp_path / "wh"
    stray = put(root / "stray" / "x.bin")
    with running_standin(root) as standin:
        standin.model.create_repository("lfs", "local://lfs")
        args = ["--lakefs-endpoint", standin.endpoint, "--lakefs-repo", "nope", "--lakefs-local-path", str(root)]
        result = cli("warehouse", "gc", str(root), *args, ok=False)
    assert result.exit_code == 1 and one_error(result)
    assert stray.exists()


# -- an IOx-style catalog ----------------------------------------------------------------------------------
def test_files_an_iox_catalog_names_are_live(tmp_path: Path, cli, spark) -> None:  # noqa: ANN001
    url = f"sqlite:///{tmp_path / 'iox.db'}"
    named, soft_deleted, unnamed = (uuid.uuid4() for _ in range(3))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("create table parquet_file (object_store_id text unique not null, to_delete bigint)"))
        for uid, to_delete in ((named, None), (soft_deleted, 1)):
            conn.execute(sa.text("insert into parquet_file values (:id, :d)"), {"id": str(uid), "d": to_delete})
    engine.dispose()
    root = tmp_path / "wh"
    for uid in (named, soft_deleted, unnamed):
        put(root / "iox" / "1" / "1" / f"{uid}.parquet")
    done = cli("warehouse", "gc", str(root), "--catalog", url, "--json").json()
    assert done["files"] == [f"iox/1/1/{unnamed}.parquet"]
    result = cli("warehouse", "gc", str(root), "--catalog", f"sqlite:///{tmp_path / 'none.db'}", ok=False)
    assert result.exit_code == 1 and "no such database" in one_error(result)


# -- a warehouse on an S3-API server ----------------------------------------------------------------------
def test_a_warehouse_on_s3(bucket, cli, spark) -> None:  # noqa: ANN001
    """Strays go; a table nobody named, a repository's namespace and a prefix twin of the location
    stay; the location may be spelled `s3a://`."""
    cli("repo", "create", "lakegc://rr", f"s3://{bucket.name}/wh/repos/rr")
    cli("fs", "upload", "lakegc://rr/main/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakegc://rr/main", "-m", "a")
    keys = ["wh/stray/a.bin", "wh/unknown/_delta_log/00000000000000000000.json", "wh/unknown/part-0.parquet"]
    keys += ["wh2/old.bin", "wh/tmp-1"]
    for key in keys:
        bucket.put(key)
    for key in sorted(bucket.keys("")):
        bucket.faults.backdate[key] = "2020-01-01T00:00:00.000Z"
    repo_keys = bucket.keys("wh/repos/")
    done = cli("warehouse", "gc", f"s3a://{bucket.name}/wh", "--json").json()
    assert done["files"] == ["stray/a.bin", "tmp-1"]
    assert bucket.keys() == (set(keys) | repo_keys) - {"wh/stray/a.bin", "wh/tmp-1"}
    assert {u["folder"] for u in done["details"]["unowned table folders"]} == {"unknown/"}
