"""The deletion guard (docs/safety.md; issue 16 findings 1, 3 and 4): every location a
command deletes in is compared as it really is (symlinks resolved), and roots that hold or lie
inside what must never be deleted are refused before anything is listed.

Each test is an attack: a careless or hostile set-up that v0.5.0 turned into deleted data."""

from __future__ import annotations

import os
import sqlite3
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import CliResult, Env, age_objects, one_error, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakegc.engine.guard import Protected, home_folders, root_problem
from lakegc.repo.model import AddressKind, Entry
from lakegc.storage import LocalStorage, real_location
from lakegc.timeutil import utcnow

Cli = Callable[..., CliResult]
OLD = utcnow() - timedelta(days=30)


# -- the decision, as a table ---------------------------------------------------------------------
NS = Protected("the namespace of repository 'ra'", "file:///lake/ns")
DB = Protected("the lakegc metastore database", "file:///meta/lakegc.db")
HOME = Protected("lakegc's home folder", "file:///home/u/.lakegc", inside_ok=True)
BUCKET_NS = Protected("the namespace of repository 'b'", "s3://bucket/lake")
ROOT_CASES = [
    ("the filesystem root", "file:///", "filesystem root"),
    ("a home folder", "file:///home/u", "home folder"),
    ("a folder holding home folders", "file:///home", "home folder"),
    ("a namespace itself", "file:///lake/ns", "holds the namespace of repository 'ra'"),
    ("a folder holding a namespace", "file:///lake", "holds the namespace"),
    ("a folder inside a namespace", "file:///lake/ns/data", "lies inside the namespace"),
    ("a folder holding the metastore", "file:///meta", "holds the lakegc metastore database"),
    ("the metastore file itself", "file:///meta/lakegc.db", "holds the lakegc metastore database"),
    ("a folder holding lakegc's home", "file:///home/u/x/..", None),  # normalised away before: see real_location
    ("a string-prefix twin of a namespace", "file:///lake/ns2", None),
    ("a sibling of the metastore file", "file:///meta2", None),
    ("a folder inside lakegc's home", "file:///home/u/.lakegc/runs/x", None),
    ("a bucket prefix twin", "s3://bucket/lake2", None),
    ("a bucket prefix inside a namespace", "s3://bucket/lake/data", "lies inside the namespace of repository 'b'"),
    ("a whole bucket holding a namespace", "s3://bucket", "holds the namespace of repository 'b'"),
]


@pytest.mark.parametrize("name,root,problem", ROOT_CASES, ids=[c[0] for c in ROOT_CASES])
def test_root_problem(name, root, problem):
    homes = [] if root.endswith("..") else ["file:///home/u"]
    found = root_problem(root, "store", homes if "/home/u/.lakegc" not in root else [], [NS, DB, HOME, BUCKET_NS])
    if problem is None:
        assert found is None, found
    else:
        assert found is not None and problem in found, found


def test_real_location_resolves_symlinks_and_normalises_s3(tmp_path: Path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert real_location(str(tmp_path / "alias" / "x")) == (tmp_path.resolve() / "real" / "x").as_uri()
    assert real_location("s3a://bucket/lake/") == "s3://bucket/lake"
    assert "file:///root" in home_folders() or Path.home().as_uri() in home_folders()


# -- repository namespaces -------------------------------------------------------------------------
def test_a_namespace_that_is_a_symlink_to_another_namespace_is_refused(env: Env, cli: Cli):
    cli("repo", "create", "lakegc://ra", str(env.namespace("a")))
    env.namespace("alias").symlink_to(env.namespace("a"))
    one_error(cli("repo", "create", "lakegc://rb", str(env.namespace("alias")), ok=False), "overlaps repository 'ra'")


def test_a_namespace_reached_through_a_symlink_inside_another_namespace_is_refused(env: Env, cli: Cli):
    cli("repo", "create", "lakegc://ra", str(env.namespace("a")))
    (env.namespace("a") / "data" / "inner").mkdir(parents=True)
    env.namespace("door").symlink_to(env.namespace("a") / "data")
    one_error(
        cli("repo", "create", "lakegc://rb", str(env.namespace("door") / "inner"), ok=False), "overlaps repository 'ra'"
    )


def test_a_folder_holding_only_a_symlinked_data_folder_is_not_empty(env: Env, cli: Cli):
    cli("repo", "create", "lakegc://ra", str(env.namespace("a")))
    env.namespace("b").mkdir()
    (env.namespace("b") / "data").symlink_to(env.namespace("a") / "data")
    one_error(cli("repo", "create", "lakegc://rb", str(env.namespace("b")), ok=False), "not empty")


def test_namespaces_sharing_a_string_prefix_do_not_overlap(env: Env, cli: Cli):
    cli("repo", "create", "lakegc://ra", str(env.namespace("ns")))
    cli("repo", "create", "lakegc://rb", str(env.namespace("ns2")))
    assert {r["id"] for r in cli("repo", "list", "--json").json()} == {"ra", "rb"}


@pytest.mark.parametrize("where", ["/", "home"])
def test_a_namespace_at_the_filesystem_root_or_a_home_folder_is_refused(env: Env, cli: Cli, where: str):
    location = "/" if where == "/" else str(Path.home())
    line = one_error(
        cli("repo", "create", "lakegc://ra", location, ok=False), "refusing to use", "no repository was created"
    )
    assert "clean" not in line and "listed" not in line  # it neither cleans nor lists (issue 33, finding 4)


# -- GC through symlinks ---------------------------------------------------------------------------
def _two_repos(env: Env, cli: Cli) -> tuple[Path, Path]:
    """Repositories a and b, each with one committed and one overwritten (garbage) object, all old."""
    a, b = env.namespace("a"), env.namespace("b")
    for name, ns in (("a", a), ("b", b)):
        cli("repo", "create", f"lakegc://r{name}", str(ns))
        for content in (b"first", b"second"):
            cli("fs", "upload", f"lakegc://r{name}/main/obj", "--source", "-", input=content)
        cli("commit", f"lakegc://r{name}/main", "-m", "c")
        age_objects(ns, OLD)
    return a, b


def test_gc_refuses_a_data_folder_swapped_for_a_symlink_into_another_namespace(env: Env, cli: Cli, spark):
    a, b = _two_repos(env, cli)
    before = snapshot(a)
    os.rename(b / "data", b / "data.own")
    (b / "data").symlink_to(a / "data")
    one_error(cli("gc", "run", "lakegc://rb", "--json", ok=False), "symlink", json_cmd=True)
    assert snapshot(a) == before
    assert cli("gc", "runs", "lakegc://rb", "--json").json()[0]["state"] == "failed"


def test_gc_never_lists_a_slice_folder_that_is_a_symlink(env: Env, cli: Cli, spark):
    a, b = _two_repos(env, cli)
    before = snapshot(a)
    slice_of_a = next((a / "data").iterdir())
    (b / "data" / "zz-stolen").symlink_to(slice_of_a)
    run = cli("gc", "run", "lakegc://rb", "--min-age", "1h", "--json").json()
    assert run["num_deleted"] == 1  # b's own overwritten object, nothing of a's
    assert snapshot(a) == before


def test_gc_refuses_a_namespace_whose_folder_now_points_at_another_namespace(env: Env, cli: Cli, spark):
    a, b = _two_repos(env, cli)
    before = snapshot(a)
    os.rename(b, env.namespace("b.own"))
    b.symlink_to(a)
    one_error(cli("gc", "run", "lakegc://rb", ok=False), "repository 'ra'")
    assert snapshot(a) == before


def test_gc_refuses_a_namespace_holding_the_metastore(tmp_path: Path, spark):
    """A metastore file put into a namespace (after its creation) would be a root-level object
    nothing references: the run is refused before listing."""
    from conftest import make_cli

    ns = tmp_path / "ns"
    env = Env(tmp_path / "home", f"sqlite:///{ns / 'lakegc.db'}", tmp_path)
    cli = make_cli(env)
    ns.mkdir()
    first = make_cli(Env(env.home, f"sqlite:///{tmp_path / 'first.db'}", tmp_path))
    first("repo", "create", "lakegc://rr", str(ns))  # created while the namespace was empty
    source, target = sqlite3.connect(tmp_path / "first.db"), sqlite3.connect(ns / "lakegc.db")
    source.backup(target)  # then the metastore moved into it
    source.close()
    target.close()
    os.utime(ns / "lakegc.db", (OLD.timestamp(), OLD.timestamp()))
    one_error(cli("gc", "run", "lakegc://rr", ok=False), "holds the lakegc metastore database")
    assert (ns / "lakegc.db").exists()


def test_local_deletes_never_follow_a_folder_swapped_for_a_symlink(tmp_path: Path):
    """The per-object half of the guard: a folder replaced by a symlink after listing (the race)
    makes its keys fail; the file where the link points survives."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "obj").write_bytes(b"live")
    ns = tmp_path / "ns"
    (ns / "data").mkdir(parents=True)
    (ns / "data" / "s1").symlink_to(victim)
    outcomes = LocalStorage(ns).delete_many(["data/s1/obj", "data/missing/obj"])
    assert [(o.ok, o.key) for o in outcomes] == [(False, "data/s1/obj"), (True, "data/missing/obj")]
    assert "symlink" in outcomes[0].error
    assert (victim / "obj").read_bytes() == b"live"


def test_a_hardlinked_stray_file_is_deleted_by_name_and_its_twin_survives(env: Env, cli: Cli, spark):
    """A hand-made hard link of a's live object inside b is b's garbage; deleting it unlinks b's
    name only, and a still reads its object."""
    a, b = _two_repos(env, cli)
    live = cli("fs", "stat", "lakegc://ra/main/obj", "--json").json()["physical_address"].removeprefix("file://")
    stray = next((b / "data").iterdir()) / "hardlinked-stray"
    os.link(live, stray)
    cli("gc", "run", "lakegc://rb", "--min-age", "1h")
    assert not stray.exists()
    assert cli("fs", "cat", "lakegc://ra/main/obj").stdout == "second"


def test_odd_hand_written_names_are_deleted_literally_and_nothing_live_goes(env: Env, cli: Cli, spark):
    """Files written by hand into data/ with names that could confuse a path or a terminal:
    percent-encoded dots and slashes, Unicode twins (NFC and NFD), a 255-byte name, control
    characters. Each is garbage and is deleted as itself; every live object stays."""
    a, _ = _two_repos(env, cli)
    folder = next((a / "data").iterdir())
    names = [
        "%2e%2e%2fescape",
        "..%2f..%2fx",
        "a%2Fb",
        unicodedata.normalize("NFC", "café"),
        unicodedata.normalize("NFD", "café"),
        "x" * 255,
        "bell\x07and\x1b[31mred",
        " spaced ",
    ]
    for name in names:
        (folder / name).write_bytes(b"stray")
        os.utime(folder / name, (OLD.timestamp(), OLD.timestamp()))
    outside = snapshot(env.namespace("b"))
    run = cli("gc", "run", "lakegc://ra", "--min-age", "1h", "--json").json()
    assert run["num_deleted"] == len(names) + 1  # and the overwritten upload
    assert not any((folder / n).exists() for n in names)
    assert cli("fs", "cat", "lakegc://ra/main/obj").stdout == "second"
    assert snapshot(env.namespace("b")) == outside


# -- fs link through an alias of the namespace (finding 4) ---------------------------------------
def test_linking_an_in_namespace_object_through_a_symlinked_alias_needs_its_token(env: Env, cli: Cli):
    cli("repo", "create", "lakegc://ra", str(env.namespace("a")))
    entry = cli("fs", "upload", "lakegc://ra/main/obj", "--source", "-", "--json", input=b"x").json()
    address = Path(entry["physical_address"].removeprefix("file://"))
    env.namespace("alias").symlink_to(env.namespace("a"))
    aliased = env.namespace("alias") / address.relative_to(env.namespace("a"))
    link_file = env.root / "link-to-object"
    link_file.symlink_to(address)
    for target in (aliased.as_uri(), str(aliased), link_file.as_uri()):
        one_error(
            cli("fs", "link", "lakegc://ra/main/copy", "--address", target, "--size", "1", "--checksum", "c", ok=False),
            "token",
        )


def test_gc_counts_an_external_address_that_reaches_the_namespace_through_a_symlink(env: Env, cli: Cli, spark):
    """An entry staged before the link check knew symlinks (an alias address, kept as external)
    still protects the object it really names."""
    a, _ = _two_repos(env, cli)
    repo = env.lake().repository("ra")
    draft = repo.upload("main", "draft", b"draft")
    env.namespace("alias").symlink_to(a)
    alias_address = (env.namespace("alias") / draft.address).as_uri()
    repo.remove("main", "draft")  # the upload's own staging goes ...
    with repo.store.write() as tx:  # ... and only the alias entry (as old code staged it) is left
        tx.stage("main", Entry("aliased", alias_address, AddressKind.FULL, 5, "c", utcnow()))
    age_objects(a, OLD)
    cli("gc", "run", "lakegc://ra", "--min-age", "1h")
    assert (a / draft.address).read_bytes() == b"draft"


# -- catalog gc --store (finding 1) ----------------------------------------------------------------
@pytest.fixture
def iox(env: Env, cli: Cli, tmp_path: Path) -> dict[str, str]:
    """A catalog database, a lakegc metastore with a repository, all in one parent folder."""
    import sqlalchemy as sa

    cli("repo", "create", "lakegc://rr", str(env.namespace("lake")))
    catalog = tmp_path / "iox" / "catalog.db"
    catalog.parent.mkdir()
    engine = sa.create_engine(f"sqlite:///{catalog}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE parquet_file (object_store_id TEXT UNIQUE NOT NULL, to_delete BIGINT)")
    engine.dispose()
    (tmp_path / "iox" / "objects").mkdir()
    (tmp_path / "alias").symlink_to(env.namespace("lake"))
    return {"catalog": f"sqlite:///{catalog}", "runs": str(tmp_path / "runs")}


@pytest.mark.parametrize(
    "store,needle",
    [
        ("iox", "holds the catalog database"),
        ("home", "holds lakegc's home folder"),
        ("home/lakegc.db", "holds the lakegc metastore database"),
        ("lake", "holds the namespace of repository 'rr'"),
        ("lake/data", "lies inside the namespace of repository 'rr'"),
        (".", "holds the run folder"),
        ("alias", "holds the namespace of repository 'rr'"),
        ("runs", "holds the run folder"),
        ("/", "filesystem root"),
    ],
)
def test_catalog_gc_refuses_a_store_over_what_it_must_not_delete(
    env: Env, cli: Cli, iox, tmp_path: Path, store: str, needle: str
):
    location = store if store == "/" else str(tmp_path / store)
    Path(iox["runs"]).mkdir(exist_ok=True)
    before = _files(tmp_path)
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (OLD.timestamp(), OLD.timestamp()))
    aged = _files(tmp_path)
    one_error(
        cli(
            "catalog",
            "gc",
            "--catalog",
            iox["catalog"],
            "--store",
            location,
            "--runs",
            iox["runs"],
            "--objectstore-cutoff",
            "3h",
            "--parquetfile-cutoff",
            "3h",
            ok=False,
        ),
        needle,
    )
    assert _files(tmp_path) == before == aged
    assert [r.name for r in env.lake().repositories()] == ["rr"]  # the metastore, whole


def _files(root: Path) -> set[str]:
    """Every file under `root`, less SQLite's -wal and -shm: SQLite itself removes them when the
    last connection to a database closes (after writing them back into it), which happens
    whenever an earlier command's connection is collected; the database they belong to stays."""
    return {key for key in snapshot(root) if not key.endswith(("-wal", "-shm"))}


def test_catalog_gc_refuses_a_home_folder_as_store(env: Env, cli: Cli, iox, tmp_path: Path, monkeypatch):
    home = tmp_path / "someone"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    one_error(
        cli("catalog", "gc", "--catalog", iox["catalog"], "--store", str(home), "--runs", iox["runs"], ok=False),
        "home folder",
    )


def test_catalog_gc_still_cleans_a_store_beside_them(env: Env, cli: Cli, iox, tmp_path: Path, spark):
    store = tmp_path / "iox" / "objects"
    (store / "stray.txt").write_bytes(b"x")
    os.utime(store / "stray.txt", (OLD.timestamp(), OLD.timestamp()))
    run = cli(
        "catalog", "gc", "--catalog", iox["catalog"], "--store", str(store), "--runs", iox["runs"], "--json"
    ).json()
    assert run["num_deleted"] == 1 and not (store / "stray.txt").exists()


# -- the property: whatever the namespace holds, a run deletes only recorded candidates under it ---
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    layout=st.lists(
        st.tuples(
            st.sampled_from(["stray", "symlinked-folder", "symlinked-file", "live", "garbage"]),
            st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=12),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_deleted_path_was_a_candidate_under_the_namespace(tmp_path_factory, spark, layout):
    import pyarrow.parquet as pq
    from conftest import make_cli

    from lakegc.repogc.outputs import output_keys

    root = tmp_path_factory.mktemp("prop")
    env = Env(root / "home", f"sqlite:///{root / 'home' / 'lakegc.db'}", root)
    cli = make_cli(env)
    ns, victim = env.namespace("ns"), root / "victim"
    victim.mkdir()
    (victim / "precious").write_bytes(b"precious")
    cli("repo", "create", "lakegc://rp", str(ns))
    repo = env.lake().repository("rp")
    live = {}
    for i, (kind, name) in enumerate(layout):
        name = name if name not in (".", "..") else f"dot{i}"
        if kind in ("live", "garbage"):
            live[f"p{i}"] = repo.upload("main", f"p{i}", kind.encode()).address
            if kind == "garbage":
                repo.upload("main", f"p{i}", b"overwritten")
            continue
        folder = ns / "data" / f"s{i}"
        folder.parent.mkdir(parents=True, exist_ok=True)
        if kind == "symlinked-folder":
            folder.symlink_to(victim)
            continue
        folder.mkdir(exist_ok=True)
        if kind == "symlinked-file":
            (folder / f"{i}-link").symlink_to(victim / "precious")
        else:
            try:
                (folder / name).write_bytes(b"stray")
            except OSError:  # a name the filesystem refuses (too long in bytes): not a lake file
                continue
    repo.commit("main", "c", allow_empty=True)
    age_objects(ns, OLD)
    before = {p for p in ns.rglob("*") if p.is_file() and not p.is_symlink()}
    run = cli("gc", "run", "lakegc://rp", "--min-age", "1h", "--json").json()
    after = {p for p in ns.rglob("*") if p.is_file() and not p.is_symlink()}
    candidates = {
        r["address"]
        for key in output_keys(repo.storage, run["run_id"], "candidates")
        for r in pq.read_table(ns / key).to_pylist()
    }
    real_ns = ns.resolve()
    for gone in before - after:
        assert gone.relative_to(ns).as_posix() in candidates
        assert gone.resolve().is_relative_to(real_ns)
    assert (victim / "precious").read_bytes() == b"precious"
    for path, address in live.items():
        if repo.stat("main", path).address == address:
            assert (ns / address).exists()


def test_catalog_gc_refuses_a_store_holding_a_configured_iceberg_tables_location(
    env: Env, cli: Cli, iox, tmp_path: Path, monkeypatch
):
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    store = tmp_path / "iox" / "objects"
    uri, warehouse = f"sqlite:///{tmp_path / 'ice.db'}", (store / "wh").as_uri()
    monkeypatch.setenv("PYICEBERG_CATALOG__ICE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__ICE__URI", uri)
    monkeypatch.setenv("PYICEBERG_CATALOG__ICE__WAREHOUSE", warehouse)
    catalog = SqlCatalog("ice", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.create_table("db.events", pa.schema([("id", pa.int64())])).append(pa.table({"id": [1]}))
    before = snapshot(store)
    one_error(
        cli("catalog", "gc", "--catalog", iox["catalog"], "--store", str(store), "--runs", iox["runs"], ok=False),
        "holds table db.events of iceberg catalog 'ice'",
    )
    assert snapshot(store) == before
    monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__URI", f"sqlite:///{tmp_path / 'missing' / 'x.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__TYPE", "sql")
    one_error(
        cli(
            "catalog",
            "gc",
            "--catalog",
            iox["catalog"],
            "--store",
            str(tmp_path / "iox" / "other"),
            "--runs",
            iox["runs"],
            ok=False,
        ),
        "broken",
    )
