"""The repository's plain-SQL reads (`repo.reads`) answer the same through the metastore's own
sqlite3 connection (`Metastore.snapshot`, what metadata commands use) as through SQLAlchemy (a
`Tx`, inside every write), on both databases; and the sqlite3 path keeps the metastore's
discipline: one snapshot per read, never a database file made by a read, errors as one line."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult, Env, make_cli, one_error

from lakegc.errors import MetastoreError
from lakegc.metastore import Metastore
from lakegc.repo.reads import Reads
from lakegc.repo.repository import Lake, Repository
from lakegc.repo.store import Tx


@pytest.fixture(params=["sqlite", "postgresql"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    if request.param == "postgresql":
        return Lake(request.getfixturevalue("pg_url"))
    return Lake(f"sqlite:///{tmp_path / 'home' / 'lakegc.db'}")


@pytest.fixture
def cli_for(tmp_path: Path) -> Callable[[str], Callable[..., CliResult]]:
    """The CLI on a given metastore URL."""
    return lambda url: make_cli(Env(tmp_path / "home", url, tmp_path))


def busy_repository(lake: Lake, tmp_path: Path) -> Repository:
    """Branches, a tag, merges, staged entries and a staged deletion, odd paths and metadata."""
    lake.create_repository("busy", str(tmp_path / "ns"))
    repo = lake.repository("busy")
    for path in ("a/1", "A/2", "a_b/3", "a%/4", "é/5", "dir/x y"):
        repo.upload("main", path, path.encode())
    repo.commit("main", "first", metadata={"k": "v", "n": "1"})
    repo.create_branch("dev", "main")
    repo.upload("dev", "a/6", b"dev")
    repo.commit("dev", "on dev")
    repo.merge("dev", "main", message="merged")
    repo.create_tag("v1", "main")
    repo.upload("main", "a/7", b"staged")
    repo.remove("main", "A/2")
    return repo


def everything(reads: Reads) -> dict:
    """Every read, on everything the busy repository has."""
    head, _ = reads.resolve("main")
    parents, dates = reads.parents_and_dates()
    ids = sorted(parents)
    return {
        "resolve": [reads.resolve(ref) for ref in ("main", "dev", "v1", head[:8], head)],
        "heads": (reads.branch_head("main"), reads.branches(), reads.branch_heads(), reads.tags()),
        "commits": (reads.commit(head), reads.commits(ids), parents, dates),
        "staged": [reads.staged("main", p) for p in ("a/7", "A/2", "a/1")],
        "staged_rows": [reads.staged_rows("main", prefix, ordered=True) for prefix in (None, "", "a/", "A/", "a%")],
        "has_staging": (reads.has_staging("main"), reads.has_staging("dev")),
        "changes": (
            reads.commits_without_changes(),
            sorted(reads.changes_at(["a/1", "A/2", "a/6"])),
            sorted(reads.changes_under(["a/", "A/", "a_", "é/"])),
        ),
    }


def test_sqlite3_and_sqlalchemy_read_the_same(lake: Lake, tmp_path: Path) -> None:
    repo = busy_repository(lake, tmp_path)
    with repo.store.snapshot() as direct, repo.store.read() as tx:
        assert isinstance(tx, Tx) and type(direct) is Reads
        assert everything(direct) == everything(tx)
        found = everything(direct)
    assert [r.path for r in found["staged_rows"][2]] == ["a/7"]  # not "A/2", not "a_b/3"
    assert [r.path for r in found["staged_rows"][4]] == []  # "%" is a character, not a wildcard
    assert {r.path for r in found["changes"][2]} == {"a/1", "a/6", "a/7", "A/2", "a_b/3", "é/5"} - {"a/7"}
    assert {c.message: c.metadata for c in found["commits"][1].values()}["first"] == {"k": "v", "n": "1"}
    assert all(d.tzinfo is not None for d in found["commits"][3].values())
    with lake.store.snapshot() as direct_lake, lake.store.read() as lake_tx:
        assert direct_lake.repositories() == lake_tx.repositories() == lake.repositories()
        assert direct_lake.repository("busy") == lake_tx.repository("busy") == repo.info


def test_a_read_sees_one_snapshot_while_a_writer_holds_its_lock(env: Env, tmp_path: Path) -> None:
    """WAL: a reader neither waits for a writer's open transaction nor sees what it has not
    committed; a write committed after the snapshot began stays out of it."""
    lake = env.lake()
    lake.create_repository("snap", str(tmp_path / "ns"))
    repo = lake.repository("snap")
    before = repo.log("main")
    writer = sqlite3.connect(env.home / "lakegc.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE branches SET head = 'f' || substr(head, 2) WHERE repository = 'snap'")
    assert repo.log("main") == before  # no wait, and not the uncommitted head
    with repo.store.snapshot() as reads:
        seen = reads.branch_head("main")
        writer.execute("COMMIT")
        assert reads.branch_head("main") == seen  # one snapshot, to its end
    with repo.store.snapshot() as reads:
        assert reads.branch_head("main") == "f" + seen[1:]
    writer.close()


def test_a_read_never_makes_a_metastore_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "lakegc.db"
    with pytest.raises(MetastoreError, match="no metastore at"):
        Lake(Metastore(f"sqlite:///{missing}", create=False)).repositories()
    assert not missing.exists() and not missing.parent.exists()
    assert Lake(f"sqlite:///{missing}").repositories() == []  # a creating lake makes it, schema and all
    assert missing.exists()


def test_a_metastore_deleted_under_a_running_process_is_an_error_not_a_new_database(env: Env, tmp_path: Path) -> None:
    lake = env.lake()
    lake.create_repository("gone", str(tmp_path / "ns"))
    for name in ("lakegc.db", "lakegc.db-wal", "lakegc.db-shm"):
        (env.home / name).unlink(missing_ok=True)
    with pytest.raises(MetastoreError, match="unable to open database file"):
        lake.repository("gone")
    assert not (env.home / "lakegc.db").exists()


@pytest.mark.parametrize("name", ["with space é", "per%20cent"], ids=["plain", "escaped"])
def test_odd_metastore_paths_read_the_same_either_way(cli_for, tmp_path: Path, name: str) -> None:
    """A path the sqlite3 path opens itself (spaces, accents) and one only SQLAlchemy parses
    (a %-escape): the same repository either way."""
    cli = cli_for(f"sqlite:///{tmp_path / name / 'lakegc.db'}")
    cli("repo", "create", "lakegc://odd", str(tmp_path / "ns"))
    cli("fs", "upload", "lakegc://odd/main/x", "--source", "-", input=b"x")
    cli("commit", "lakegc://odd/main", "-m", "one")
    assert cli("log", "lakegc://odd/main", "--json").stdout.count('"id"') == 2
    assert "x" in cli("fs", "ls", "lakegc://odd/main/").stdout


@pytest.mark.parametrize("content", [b"this is not a database" * 100, b""], ids=["garbage", "empty"])
def test_a_metastore_that_is_not_a_database_is_one_error_line(cli_for, tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "bad.db"
    db.write_bytes(content)
    cli = cli_for(f"sqlite:///{db}")
    for args in (["log", "lakegc://ab/main"], ["fs", "ls", "lakegc://ab/main/"], ["branch", "list", "lakegc://ab"]):
        result = cli(*args, ok=False)
        if content:
            one_error(result, "metastore", "not a database")
        else:  # an empty file is a new, empty database: the repository is missing
            one_error(result, "repository 'ab' not found")


def test_a_relative_url_is_one_database_for_reads_writes_and_gc_after_a_chdir(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The sqlite3 reads fix the file when the metastore is opened; SQLAlchemy's engine, made at
    first use, must open that same file even if the process changed folder since. Otherwise GC
    would read another metastore's staging for this repository's namespace."""
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        monkeypatch.chdir(tmp_path / side)
        other = Lake("sqlite:///lakegc.db")
        other.create_repository("lake", str(tmp_path / f"ns_{side}"))
        other.repository("lake").upload("main", f"only_in_{side}", b"x")
    monkeypatch.chdir(tmp_path / "a")
    lake = Lake(Metastore("sqlite:///lakegc.db", create=False))
    repo = lake.repository("lake")
    monkeypatch.chdir(tmp_path / "b")
    with repo.store.snapshot() as direct, repo.store.read() as tx:
        assert [r.path for r in direct.staged_rows("main")] == [r.path for r in tx.staged_rows("main")] == ["only_in_a"]
    repo.upload("main", "written_after_chdir", b"y")
    assert {c.path for c in repo.diff("main")} == {"only_in_a", "written_after_chdir"}
    assert lake.metastore.file == str(tmp_path / "a" / "lakegc.db")


def test_a_metastore_path_beginning_with_two_slashes_opens(cli_for, tmp_path: Path) -> None:
    """sqlite:///// + /abs/path (a script joining sqlite://// and an absolute folder): the path
    begins with "//", which must not become a URI authority for the sqlite3 reads."""
    cli = cli_for(f"sqlite:////{tmp_path / 'lakegc.db'}")
    cli("repo", "create", "lakegc://slashes", str(tmp_path / "ns"))
    assert cli("log", "lakegc://slashes/main", "--json").stdout.count('"id"') == 1
    assert "slashes" in cli("repo", "list").stdout


def test_a_metastore_that_is_not_a_database_is_a_metastore_error_in_the_api(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MetastoreError, match="not a database"):
        Lake(f"sqlite:///{db}").repositories()
