"""CLI contract for objects: fs upload/cat/stat/ls/rm/cp/link/get-address, tokens and shallow copies."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import heads, one_error

REPO = "lakegc://repo"
MAIN = f"{REPO}/main"
STAT_KEYS = {"path", "physical_address", "size", "checksum", "mtime"}


# -- helpers -------------------------------------------------------------------------------------
pytestmark = pytest.mark.usefixtures("short_lock_wait")


def local(uri: str) -> Path:
    assert uri.startswith("file:///"), uri
    return Path(unquote(urlparse(uri).path))


def ls(cli, ref_uri: str) -> list[dict]:
    return cli("fs", "ls", ref_uri, "--json").json()


def paths(cli, ref_uri: str) -> list[str]:
    return [e["path"] for e in ls(cli, ref_uri.rstrip("/") + "/")]


def stat(cli, uri: str) -> dict:
    return cli("fs", "stat", uri, "--json").json()


def cat(cli, uri: str) -> str:
    return cli("fs", "cat", uri).stdout


def commit(cli, branch_uri: str = MAIN, message: str = "c", *extra: str) -> dict:
    return cli("commit", branch_uri, "-m", message, "--json", *extra).json()


def staged(cli, branch_uri: str = MAIN) -> list[dict]:
    return cli("diff", branch_uri, "--json").json()


def data_files(ns: Path) -> list[Path]:
    return sorted(p for p in (ns / "data").rglob("*") if p.is_file()) if (ns / "data").exists() else []


def get_address(cli, uri: str, *extra: str) -> dict:
    return cli("fs", "get-address", uri, "--json", *extra).json()


def write_at(address: str, content: bytes) -> None:
    path = local(address)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


X_MD5 = hashlib.md5(b"x").hexdigest()


def link(cli, uri: str, address: str, size: int, checksum: str = "abc", token: str | None = None, ok: bool = True):
    args = ["fs", "link", uri, "--address", address, "--size", str(size), "--checksum", checksum]
    if token is not None:
        args += ["--token", token]
    return cli(*args, "--json", ok=ok)


# -- fs upload -----------------------------------------------------------------------------------
def test_upload_from_stdin_stages_object_under_namespace_data(env, cli, repo_uri):
    t0 = int(time.time())
    doc = cli("fs", "upload", f"{MAIN}/dir/a.txt", "--source", "-", "--json", input=b"hello").json()
    t1 = int(time.time())
    assert set(doc) == STAT_KEYS
    assert doc["path"] == "dir/a.txt"
    assert doc["size"] == 5
    assert isinstance(doc["checksum"], str) and doc["checksum"]
    assert isinstance(doc["mtime"], int) and t0 - 1 <= doc["mtime"] <= t1 + 1
    ns_uri = env.namespace().as_uri()
    assert doc["physical_address"].startswith(ns_uri + "/data/")
    assert local(doc["physical_address"]).read_bytes() == b"hello"
    assert [c["path"] for c in staged(cli)] == ["dir/a.txt"]


def test_upload_from_file_source(env, cli, repo_uri):
    src = env.root / "input.bin"
    src.write_bytes(b"\x00\x01binary\xff")
    doc = cli("fs", "upload", f"{MAIN}/b.bin", "--source", str(src), "--json").json()
    assert doc["size"] == 9
    assert local(doc["physical_address"]).read_bytes() == b"\x00\x01binary\xff"


def test_upload_empty_object(cli, repo_uri, put):
    doc = put(f"{MAIN}/empty", b"")
    assert doc["size"] == 0
    assert cat(cli, f"{MAIN}/empty") == ""


def test_upload_checksum_depends_on_content_only(cli, repo_uri, put):
    a = put(f"{MAIN}/a", b"same")
    b = put(f"{MAIN}/b", b"same")
    c = put(f"{MAIN}/c", b"different")
    assert a["checksum"] == b["checksum"] != c["checksum"]
    assert a["physical_address"] != b["physical_address"]


def test_upload_each_object_gets_its_own_physical_address(cli, repo_uri, put):
    addresses = {put(f"{MAIN}/p{i}", b"x")["physical_address"] for i in range(3)}
    assert len(addresses) == 3


def test_upload_human_output_mentions_the_path(cli, repo_uri):
    out = cli("fs", "upload", f"{MAIN}/a.txt", "--source", "-", input=b"x").stdout
    assert "a.txt" in out


def test_staged_overwrite_replaces_the_staged_entry(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"one")
    second = put(f"{MAIN}/a.txt", b"two!")
    entries = ls(cli, f"{MAIN}/")
    assert [e["path"] for e in entries] == ["a.txt"]
    assert entries[0] == second
    assert [c["path"] for c in staged(cli)] == ["a.txt"]
    c = commit(cli)
    assert cat(cli, f"{REPO}/{c['id']}/a.txt") == "two!"


def test_overwrite_of_committed_path_keeps_old_commit_content(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"old")
    c1 = commit(cli)
    put(f"{MAIN}/a.txt", b"new")
    assert cat(cli, f"{MAIN}/a.txt") == "new"
    assert cat(cli, f"{REPO}/{c1['id']}/a.txt") == "old"
    c2 = commit(cli)
    assert cat(cli, f"{REPO}/{c2['id']}/a.txt") == "new"
    assert cat(cli, f"{REPO}/{c1['id']}/a.txt") == "old"


@pytest.mark.parametrize(
    "uri, source, needles",
    [
        pytest.param(f"{REPO}/v1/a.txt", "-", (), id="to-a-tag"),
        pytest.param(f"{REPO}/COMMIT/a.txt", "-", (), id="to-a-commit-id"),
        pytest.param(f"{REPO}/ghost/a.txt", "-", ("not found",), id="to-unknown-branch"),
        pytest.param("lakegc://ghost/main/a.txt", "-", ("not found",), id="to-unknown-repository"),
        pytest.param(f"{MAIN}/../a.txt", "-", (), id="path-with-dotdot"),
        pytest.param(f"{MAIN}/x/../../a.txt", "-", (), id="path-climbing-out"),
        pytest.param(f"{MAIN}/./a.txt", "-", (), id="path-with-dot"),
        pytest.param(f"{MAIN}//a.txt", "-", (), id="absolute-path"),
        pytest.param(f"{MAIN}/a//b.txt", "-", (), id="empty-component"),
        pytest.param(f"{MAIN}/dir/", "-", (), id="trailing-slash"),
        pytest.param(MAIN, "-", (), id="no-path"),
        pytest.param(f"{MAIN}/", "-", (), id="empty-path"),
        pytest.param(f"{MAIN}/a.txt", "MISSING", (), id="missing-source-file"),
        pytest.param(f"{MAIN}/a.txt", "DIR", (), id="source-is-a-directory"),
    ],
)
def test_upload_refuses_bad_input_and_writes_nothing(env, cli, repo_uri, put, uri, source, needles):
    put(f"{MAIN}/base.txt", b"base")
    c = commit(cli)
    cli("tag", "create", f"{REPO}/v1", MAIN)
    before_files = data_files(env.namespace())
    before_heads = heads(cli)
    uri = uri.replace("COMMIT", c["id"])
    source = {"MISSING": str(env.root / "nope.bin"), "DIR": str(env.root)}.get(source, source)
    one_error(cli("fs", "upload", uri, "--source", source, "--json", input=b"data", ok=False), *needles, json_cmd=True)
    assert data_files(env.namespace()) == before_files
    assert heads(cli) == before_heads
    assert staged(cli) == []
    assert not (env.root / "a.txt").exists() and not (env.namespace() / "a.txt").exists()


def test_upload_without_source_is_a_usage_error(cli, repo_uri):
    assert cli("fs", "upload", f"{MAIN}/a.txt", ok=False).exit_code == 2


# -- fs cat --------------------------------------------------------------------------------------
def test_cat_reads_staged_committed_tagged_and_by_commit_prefix(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"committed")
    c = commit(cli)
    cli("tag", "create", f"{REPO}/v1", MAIN)
    put(f"{MAIN}/a.txt", b"staged")
    assert cat(cli, f"{MAIN}/a.txt") == "staged"
    assert cat(cli, f"{REPO}/v1/a.txt") == "committed"
    assert cat(cli, f"{REPO}/{c['id']}/a.txt") == "committed"
    assert cat(cli, f"{REPO}/{c['id'][:8]}/a.txt") == "committed"


def test_cat_binary_content_roundtrip_in_a_real_process(env, sh, cli, repo_uri):
    payload = bytes(range(256)) * 3
    up = sh("fs", "upload", f"{MAIN}/bin", "--source", "-", "--json", input=payload)
    assert up.exit_code == 0, up.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "lakegc", "fs", "cat", f"{MAIN}/bin"],
        capture_output=True,
        env={**os.environ, **env.environ()},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == payload


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{MAIN}/missing.txt", ("not found",), id="unknown-path"),
        pytest.param(f"{MAIN}/dir", ("not found",), id="folder-prefix-is-not-an-object"),
        pytest.param(f"{REPO}/ghost/a.txt", ("not found",), id="unknown-ref"),
        pytest.param(f"{REPO}/0123456789abcdef/a.txt", ("not found",), id="unknown-commit"),
        pytest.param("lakegc://ghost/main/a.txt", ("not found",), id="unknown-repository"),
        pytest.param(f"{REPO}/INITIAL/dir/b.txt", ("not found",), id="path-absent-in-older-commit"),
        pytest.param(f"{MAIN}/../a.txt", (), id="path-with-dotdot"),
        pytest.param(MAIN, (), id="no-path"),
    ],
)
def test_cat_refuses_unknown_or_bad_uris(cli, repo_uri, put, uri, needles):
    initial = heads(cli)["main"]
    put(f"{MAIN}/a.txt", b"a")
    put(f"{MAIN}/dir/b.txt", b"b")
    commit(cli)
    result = cli("fs", "cat", uri.replace("INITIAL", initial), ok=False)
    one_error(result, *needles)
    assert result.stdout == ""


def test_cat_of_object_deleted_from_storage_is_gone_410(cli, repo_uri, put):
    doc = put(f"{MAIN}/a.txt", b"a")
    c = commit(cli)
    local(doc["physical_address"]).unlink()
    for uri in (f"{MAIN}/a.txt", f"{REPO}/{c['id']}/a.txt"):
        result = cli("fs", "cat", uri, ok=False)
        one_error(result, "gone (410)")
        assert result.stdout == ""
    # the entry itself is still there: GC removes data, never entries
    assert stat(cli, f"{MAIN}/a.txt")["physical_address"] == doc["physical_address"]


def test_cat_of_staged_object_deleted_from_storage_is_gone_410(cli, repo_uri, put):
    doc = put(f"{MAIN}/a.txt", b"a")
    local(doc["physical_address"]).unlink()
    one_error(cli("fs", "cat", f"{MAIN}/a.txt", ok=False), "gone (410)")


def test_gone_410_in_a_real_process_is_one_line_exit_1(sh, cli, repo_uri, put):
    doc = put(f"{MAIN}/a.txt", b"a")
    commit(cli)
    local(doc["physical_address"]).unlink()
    result = sh("fs", "cat", f"{MAIN}/a.txt")
    assert result.exit_code == 1
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: ") and "gone (410)" in lines[0]
    assert result.stdout == ""


# -- fs stat -------------------------------------------------------------------------------------
def test_stat_json_matches_upload_and_is_stable_across_commit(cli, repo_uri, put):
    up = put(f"{MAIN}/x/y.csv", b"1,2,3")
    assert stat(cli, f"{MAIN}/x/y.csv") == up
    c = commit(cli)
    assert stat(cli, f"{REPO}/{c['id']}/x/y.csv") == up
    cli("tag", "create", f"{REPO}/v1", MAIN)
    assert stat(cli, f"{REPO}/v1/x/y.csv") == up


def test_stat_physical_address_is_full_file_uri(env, cli, repo_uri, put):
    up = put(f"{MAIN}/a", b"a")
    doc = stat(cli, f"{MAIN}/a")
    assert set(doc) == STAT_KEYS
    assert doc["physical_address"] == up["physical_address"]
    assert doc["physical_address"].startswith("file:///")
    assert local(doc["physical_address"]).is_relative_to(env.namespace() / "data")


def test_stat_table_output_shows_fields(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    out = cli("fs", "stat", f"{MAIN}/a.txt").stdout
    assert "physical_address" in out and "a.txt" in out


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{MAIN}/missing", ("not found",), id="unknown-path"),
        pytest.param(f"{REPO}/ghost/a.txt", ("not found",), id="unknown-ref"),
        pytest.param(f"{MAIN}/../a.txt", (), id="dotdot"),
        pytest.param(f"{MAIN}//a.txt", (), id="absolute-path"),
    ],
)
def test_stat_refuses_unknown_or_bad_uris_with_empty_stdout(cli, repo_uri, put, uri, needles):
    put(f"{MAIN}/a.txt", b"a")
    one_error(cli("fs", "stat", uri, "--json", ok=False), *needles, json_cmd=True)


# -- fs ls ---------------------------------------------------------------------------------------
@pytest.fixture
def tree(cli, repo_uri, put):
    """main: committed a.txt, dir/b.txt, dir/sub/c.txt, dir2/d.txt, dirt.txt; staged e.txt and rm dir2/d.txt."""
    for p in ("a.txt", "dir/b.txt", "dir/sub/c.txt", "dir2/d.txt", "dirt.txt"):
        put(f"{MAIN}/{p}", p.encode())
    c = commit(cli)
    put(f"{MAIN}/e.txt", b"e")
    cli("fs", "rm", f"{MAIN}/dir2/d.txt")
    return c


def test_ls_is_recursive_sorted_and_includes_staged_changes(cli, tree):
    assert paths(cli, MAIN) == ["a.txt", "dir/b.txt", "dir/sub/c.txt", "dirt.txt", "e.txt"]


def test_ls_without_trailing_slash_lists_everything(cli, tree):
    assert [e["path"] for e in ls(cli, MAIN)] == ["a.txt", "dir/b.txt", "dir/sub/c.txt", "dirt.txt", "e.txt"]


def test_ls_of_commit_or_tag_shows_committed_tree_only(cli, tree):
    expected = ["a.txt", "dir/b.txt", "dir/sub/c.txt", "dir2/d.txt", "dirt.txt"]
    assert paths(cli, f"{REPO}/{tree['id']}") == expected
    cli("tag", "create", f"{REPO}/v1", f"{REPO}/{tree['id']}")
    assert paths(cli, f"{REPO}/v1") == expected


LS_PREFIXES = {  # situation: (prefix, expected paths)
    "folder-prefix": ("dir/", ["dir/b.txt", "dir/sub/c.txt"]),
    "nested-folder-prefix": ("dir/sub/", ["dir/sub/c.txt"]),
    "string-prefix": ("dir", ["dir/b.txt", "dir/sub/c.txt", "dirt.txt"]),
    "prefix-emptied-by-staged-delete": ("dir2/", []),
    "prefix-of-staged-only-object": ("e", ["e.txt"]),
    "prefix-matching-nothing": ("zzz/", []),
    "exact-object-path": ("a.txt", ["a.txt"]),
}


def test_ls_filters_by_prefix(cli, tree):
    """One tree, every prefix situation (building the tree dominates the cost)."""
    got = {case: [e["path"] for e in ls(cli, f"{MAIN}/{prefix}")] for case, (prefix, _) in LS_PREFIXES.items()}
    assert got == {case: expected for case, (_, expected) in LS_PREFIXES.items()}


def test_ls_prefix_on_a_commit_ignores_staging(cli, tree):
    assert [e["path"] for e in ls(cli, f"{REPO}/{tree['id']}/dir2/")] == ["dir2/d.txt"]
    assert [e["path"] for e in ls(cli, f"{REPO}/{tree['id']}/e")] == []


def test_ls_json_entries_are_stat_objects(cli, tree):
    entries = ls(cli, f"{MAIN}/")
    assert all(set(e) == STAT_KEYS for e in entries)
    for e in entries:
        assert e == stat(cli, f"{MAIN}/{e['path']}")


def test_ls_of_empty_branch_is_empty_list(cli, repo_uri):
    assert ls(cli, f"{MAIN}/") == []


def test_ls_table_lists_paths(cli, tree):
    out = cli("fs", "ls", f"{MAIN}/").stdout
    for p in ("a.txt", "dir/sub/c.txt", "e.txt"):
        assert p in out
    assert "dir2/d.txt" not in out


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(REPO, (), id="no-ref"),
        pytest.param(f"{REPO}/ghost/", ("not found",), id="unknown-ref"),
        pytest.param("lakegc://ghost/main/", ("not found",), id="unknown-repository"),
        pytest.param(f"{MAIN}/../", (), id="dotdot-prefix"),
        pytest.param(f"{MAIN}//x", (), id="absolute-prefix"),
    ],
)
def test_ls_refuses_bad_uris_with_empty_stdout(cli, repo_uri, uri, needles):
    one_error(cli("fs", "ls", uri, "--json", ok=False), *needles, json_cmd=True)


# -- fs rm ---------------------------------------------------------------------------------------
def test_rm_stages_a_deletion_and_old_commit_still_serves_the_object(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    put(f"{MAIN}/b.txt", b"b")
    c1 = commit(cli)
    cli("fs", "rm", f"{MAIN}/a.txt")
    one_error(cli("fs", "stat", f"{MAIN}/a.txt", "--json", ok=False), "not found", json_cmd=True)
    one_error(cli("fs", "cat", f"{MAIN}/a.txt", ok=False), "not found")
    assert paths(cli, MAIN) == ["b.txt"]
    assert [(c["type"], c["path"]) for c in staged(cli)] == [("removed", "a.txt")]
    c2 = commit(cli)
    one_error(cli("fs", "cat", f"{REPO}/{c2['id']}/a.txt", ok=False), "not found")
    assert cat(cli, f"{REPO}/{c1['id']}/a.txt") == "a"


def test_rm_of_staged_only_object_unstages_it(cli, repo_uri, put):
    put(f"{MAIN}/new.txt", b"n")
    said = cli("fs", "rm", f"{MAIN}/new.txt").stdout
    assert "unstaged" in said and "deletion staged" not in said  # says what it did
    assert paths(cli, MAIN) == []
    assert staged(cli) == []


def test_rm_of_overwritten_committed_object_removes_it(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"old")
    commit(cli)
    assert "deletion staged" in cli("fs", "rm", f"{MAIN}/a.txt").stdout
    put(f"{MAIN}/a.txt", b"new")
    cli("fs", "rm", f"{MAIN}/a.txt")
    assert paths(cli, MAIN) == []
    assert [(c["type"], c["path"]) for c in staged(cli)] == [("removed", "a.txt")]


def test_upload_after_rm_brings_the_path_back(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"old")
    commit(cli)
    cli("fs", "rm", f"{MAIN}/a.txt")
    put(f"{MAIN}/a.txt", b"again")
    assert cat(cli, f"{MAIN}/a.txt") == "again"
    assert [(c["type"], c["path"]) for c in staged(cli)] == [("changed", "a.txt")]


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{MAIN}/missing.txt", ("not found",), id="unknown-path"),
        pytest.param(f"{MAIN}/gone.txt", ("not found",), id="already-removed"),
        pytest.param(f"{MAIN}/dir", ("not found",), id="folder-prefix"),
        pytest.param(f"{REPO}/v1/a.txt", (), id="on-a-tag"),
        pytest.param(f"{REPO}/ghost/a.txt", ("not found",), id="unknown-branch"),
        pytest.param(f"{MAIN}/../a.txt", (), id="dotdot"),
        pytest.param(MAIN, (), id="no-path"),
    ],
)
def test_rm_refuses_bad_input_without_touching_staging(cli, repo_uri, put, uri, needles):
    put(f"{MAIN}/a.txt", b"a")
    put(f"{MAIN}/dir/b.txt", b"b")
    put(f"{MAIN}/gone.txt", b"g")
    commit(cli)
    cli("tag", "create", f"{REPO}/v1", MAIN)
    cli("fs", "rm", f"{MAIN}/gone.txt")
    before = staged(cli), paths(cli, MAIN), heads(cli)
    one_error(cli("fs", "rm", uri, ok=False), *needles)
    assert (staged(cli), paths(cli, MAIN), heads(cli)) == before


# -- fs cp (shallow copy) ------------------------------------------------------------------------
def test_cp_of_committed_object_shares_physical_address(cli, repo_uri, put):
    src = put(f"{MAIN}/a.txt", b"data")
    commit(cli)
    doc = cli("fs", "cp", f"{MAIN}/a.txt", f"{MAIN}/copy/a.txt", "--json").json()
    assert set(doc) == STAT_KEYS
    assert doc["path"] == "copy/a.txt"
    assert doc["physical_address"] == src["physical_address"]
    assert (doc["size"], doc["checksum"]) == (src["size"], src["checksum"])
    assert stat(cli, f"{MAIN}/copy/a.txt")["physical_address"] == src["physical_address"]
    assert cat(cli, f"{MAIN}/copy/a.txt") == "data"


def test_cp_of_staged_object_shares_physical_address_and_survives_commit(cli, repo_uri, put):
    src = put(f"{MAIN}/a.txt", b"data")
    cli("fs", "cp", f"{MAIN}/a.txt", f"{MAIN}/b.txt")
    c = commit(cli)
    assert stat(cli, f"{REPO}/{c['id']}/b.txt")["physical_address"] == src["physical_address"]
    assert cat(cli, f"{REPO}/{c['id']}/b.txt") == "data"


def test_cp_from_commit_or_tag_to_another_branch(cli, repo_uri, put):
    src = put(f"{MAIN}/a.txt", b"v1")
    c = commit(cli)
    cli("tag", "create", f"{REPO}/v1", MAIN)
    put(f"{MAIN}/a.txt", b"v2")
    commit(cli)
    cli("branch", "create", f"{REPO}/feature", "--source", MAIN)
    cli("fs", "cp", f"{REPO}/{c['id']}/a.txt", f"{REPO}/feature/from-commit.txt")
    cli("fs", "cp", f"{REPO}/v1/a.txt", f"{REPO}/feature/from-tag.txt")
    assert cat(cli, f"{REPO}/feature/from-commit.txt") == "v1"
    assert cat(cli, f"{REPO}/feature/from-tag.txt") == "v1"
    assert stat(cli, f"{REPO}/feature/from-tag.txt")["physical_address"] == src["physical_address"]
    assert paths(cli, MAIN) == ["a.txt"]


def test_cp_is_independent_of_later_source_changes(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"first")
    commit(cli)
    cli("fs", "cp", f"{MAIN}/a.txt", f"{MAIN}/b.txt")
    put(f"{MAIN}/a.txt", b"second")
    cli("fs", "rm", f"{MAIN}/a.txt")
    assert cat(cli, f"{MAIN}/b.txt") == "first"


def test_cp_over_existing_path_replaces_it(cli, repo_uri, put):
    src = put(f"{MAIN}/a.txt", b"a")
    put(f"{MAIN}/b.txt", b"b")
    cli("fs", "cp", f"{MAIN}/a.txt", f"{MAIN}/b.txt")
    assert cat(cli, f"{MAIN}/b.txt") == "a"
    assert stat(cli, f"{MAIN}/b.txt")["physical_address"] == src["physical_address"]


@pytest.mark.parametrize(
    "src, dest, needles",
    [
        pytest.param(f"{MAIN}/missing", f"{MAIN}/b.txt", ("not found",), id="unknown-source-path"),
        pytest.param(f"{REPO}/ghost/a.txt", f"{MAIN}/b.txt", ("not found",), id="unknown-source-ref"),
        pytest.param(f"{MAIN}/a.txt", f"{REPO}/v1/b.txt", (), id="dest-is-a-tag"),
        pytest.param(f"{MAIN}/a.txt", f"{REPO}/ghost/b.txt", ("not found",), id="dest-unknown-branch"),
        pytest.param(f"{MAIN}/a.txt", "lakegc://other/main/b.txt", (), id="across-repositories"),
        pytest.param(f"{MAIN}/a.txt", f"{MAIN}/../b.txt", (), id="dest-path-dotdot"),
        pytest.param(f"{MAIN}/a.txt", f"{MAIN}/", (), id="dest-without-path"),
        pytest.param(f"{MAIN}/../a.txt", f"{MAIN}/b.txt", (), id="source-path-dotdot"),
    ],
)
def test_cp_refuses_bad_input_without_staging_anything(env, cli, repo_uri, put, src, dest, needles):
    cli("repo", "create", "lakegc://other", str(env.namespace("other")))
    put(f"{MAIN}/a.txt", b"a")
    commit(cli)
    cli("tag", "create", f"{REPO}/v1", MAIN)
    before = heads(cli), paths(cli, MAIN)
    one_error(cli("fs", "cp", src, dest, "--json", ok=False), *needles, json_cmd=True)
    assert (heads(cli), paths(cli, MAIN)) == before
    assert staged(cli) == []
    assert paths(cli, "lakegc://other/main") == []


# -- fs get-address ------------------------------------------------------------------------------
def test_get_address_returns_in_namespace_address_token_and_default_24h_expiry(env, cli, repo_uri):
    t0 = int(time.time())
    doc = get_address(cli, f"{MAIN}/direct.bin")
    t1 = int(time.time())
    assert set(doc) == {"physical_address", "token", "expires_at"}
    assert doc["physical_address"].startswith(env.namespace().as_uri() + "/data/")
    assert not local(doc["physical_address"]).exists()
    assert isinstance(doc["token"], str) and doc["token"]
    assert isinstance(doc["expires_at"], int)
    assert t0 + 86400 - 1 <= doc["expires_at"] <= t1 + 86400 + 1
    assert staged(cli) == []


def test_get_address_honours_ttl(cli, repo_uri):
    t0 = int(time.time())
    doc = get_address(cli, f"{MAIN}/direct.bin", "--ttl", "1h")
    assert t0 + 3600 - 1 <= doc["expires_at"] <= int(time.time()) + 3600 + 1


def test_get_address_hands_out_a_new_address_each_time(cli, repo_uri):
    a = get_address(cli, f"{MAIN}/x")
    b = get_address(cli, f"{MAIN}/x")
    assert a["physical_address"] != b["physical_address"]
    assert a["token"] != b["token"]


@pytest.mark.parametrize(
    "uri, extra, needles",
    [
        pytest.param(f"{REPO}/v1/x", [], (), id="on-a-tag"),
        pytest.param(f"{REPO}/ghost/x", [], ("not found",), id="unknown-branch"),
        pytest.param("lakegc://ghost/main/x", [], ("not found",), id="unknown-repository"),
        pytest.param(f"{MAIN}/../x", [], (), id="dotdot-path"),
        pytest.param(MAIN, [], (), id="no-path"),
        pytest.param(f"{MAIN}/x", ["--ttl", "soon"], ("duration",), id="bad-ttl"),
    ],
)
def test_get_address_refuses_bad_input(cli, repo_uri, uri, extra, needles):
    cli("tag", "create", f"{REPO}/v1", MAIN)
    one_error(cli("fs", "get-address", uri, "--json", *extra, ok=False), *needles, json_cmd=True)


# -- fs link with tokens -------------------------------------------------------------------------
def test_link_with_valid_token_stages_the_client_written_object(env, cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"written by client")
    checksum = hashlib.md5(b"written by client").hexdigest()
    linked = link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 17, checksum, doc["token"]).json()
    assert set(linked) == STAT_KEYS
    assert linked["path"] == "direct.bin"
    assert linked["physical_address"] == doc["physical_address"]
    assert (linked["size"], linked["checksum"]) == (17, checksum)
    assert stat(cli, f"{MAIN}/direct.bin") == linked
    assert cat(cli, f"{MAIN}/direct.bin") == "written by client"
    c = commit(cli)
    assert cat(cli, f"{REPO}/{c['id']}/direct.bin") == "written by client"
    assert stat(cli, f"{REPO}/{c['id']}/direct.bin")["physical_address"] == doc["physical_address"]


def _tamper_first(token: str) -> str:
    return ("B" if token[0] != "B" else "C") + token[1:]


def _tamper_last(token: str) -> str:
    return token[:-1] + ("0" if token[-1] != "0" else "1")


def _forge_path(token: str) -> str:
    """Re-encode the claims with another path, keeping the signature (implementation-specific format)."""
    body, _, mac = token.partition(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims[2] = "other.bin"
    forged = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{forged}.{mac}"


@pytest.mark.parametrize(
    "case, needles",
    [
        pytest.param("no-token", ("token",), id="in-namespace-address-without-token"),
        pytest.param("garbage", ("token",), id="garbage-token"),
        pytest.param("empty", ("token",), id="empty-token"),
        pytest.param("tamper-first", ("token",), id="tampered-token-start"),
        pytest.param("tamper-last", ("token",), id="tampered-token-signature"),
        pytest.param("other-path", ("token",), id="token-for-another-path"),
        pytest.param("other-branch", ("token",), id="token-for-another-branch"),
        pytest.param("other-address", ("token",), id="token-for-another-address"),
        pytest.param("other-repo", ("token",), id="token-from-another-repository"),
    ],
)
def test_link_refuses_missing_or_invalid_token_and_stages_nothing(env, cli, repo_uri, case, needles):
    cli("branch", "create", f"{REPO}/other", "--source", MAIN)
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"x")
    address, token, uri = doc["physical_address"], doc["token"], f"{MAIN}/direct.bin"
    if case == "no-token":
        token = None
    elif case == "garbage":
        token = "not-a-token"
    elif case == "empty":
        token = ""
    elif case == "tamper-first":
        token = _tamper_first(token)
    elif case == "tamper-last":
        token = _tamper_last(token)
    elif case == "other-path":
        uri = f"{MAIN}/elsewhere.bin"
    elif case == "other-branch":
        token = get_address(cli, f"{REPO}/other/direct.bin")["token"]
        address = doc["physical_address"]
    elif case == "other-address":
        other = get_address(cli, f"{MAIN}/direct.bin")
        write_at(other["physical_address"], b"y")
        address = other["physical_address"]
    elif case == "other-repo":
        cli("repo", "create", "lakegc://second", str(env.namespace("second")))
        token = get_address(cli, "lakegc://second/main/direct.bin")["token"]
    one_error(link(cli, uri, address, 1, "c", token, ok=False), *needles, json_cmd=True)
    assert staged(cli) == []
    assert paths(cli, MAIN) == []


def test_link_refuses_forged_claims_with_reused_signature(env, cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"x")
    one_error(
        link(cli, f"{MAIN}/other.bin", doc["physical_address"], 1, "c", _forge_path(doc["token"]), ok=False),
        "token",
        json_cmd=True,
    )
    assert staged(cli) == []


def test_link_refuses_expired_token(cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin", "--ttl", "1s")
    write_at(doc["physical_address"], b"x")
    time.sleep(max(0.0, doc["expires_at"] - time.time()) + 0.2)
    one_error(
        link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, "c", doc["token"], ok=False),
        "expired",
        json_cmd=True,
    )
    assert staged(cli) == []


def test_link_refuses_reusing_a_token(cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"x")
    link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, X_MD5, doc["token"])
    commit(cli)
    one_error(
        link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, "c", doc["token"], ok=False), "token", json_cmd=True
    )
    assert staged(cli) == []


def test_failed_link_does_not_consume_the_token(cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"x")
    one_error(link(cli, f"{MAIN}/wrong.bin", doc["physical_address"], 1, X_MD5, doc["token"], ok=False), "token")
    link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, X_MD5, doc["token"])
    assert paths(cli, MAIN) == ["direct.bin"]


@pytest.mark.parametrize(
    "size, checksum, needle",
    [
        (1, "0" * 32, "checksum"),
        (1, "c", "checksum"),
        (2, X_MD5, "1 bytes, not 2"),
        (1, X_MD5.upper(), None),
        (1, f'"{X_MD5}"', None),
    ],
    ids=["wrong-md5", "not-an-md5", "wrong-size", "upper-case", "quoted-etag-style"],
)
def test_a_link_whose_size_or_checksum_is_wrong_is_refused_and_leaves_the_token_usable(
    cli, repo_uri, size, checksum, needle
):
    """The object at the address must be the one described: a mismatch is one error line, nothing
    is staged, and the same token then links the object with its true size and checksum."""
    doc = get_address(cli, f"{MAIN}/direct.bin")
    write_at(doc["physical_address"], b"x")
    if needle is None:  # the same MD5, spelled as clients may send it
        link(cli, f"{MAIN}/direct.bin", doc["physical_address"], size, checksum, doc["token"])
        assert paths(cli, MAIN) == ["direct.bin"]
        return
    one_error(
        link(cli, f"{MAIN}/direct.bin", doc["physical_address"], size, checksum, doc["token"], ok=False),
        needle,
        "token stays valid",
        json_cmd=True,
    )
    assert staged(cli) == []
    link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, X_MD5, doc["token"])
    assert paths(cli, MAIN) == ["direct.bin"] and cat(cli, f"{MAIN}/direct.bin") == "x"


def test_linking_before_the_object_is_written_is_refused_and_leaves_the_token_usable(cli, repo_uri):
    doc = get_address(cli, f"{MAIN}/direct.bin")
    one_error(
        link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, X_MD5, doc["token"], ok=False),
        "no object at",
        "token stays valid",
        json_cmd=True,
    )
    write_at(doc["physical_address"], b"x")
    link(cli, f"{MAIN}/direct.bin", doc["physical_address"], 1, X_MD5, doc["token"])
    assert paths(cli, MAIN) == ["direct.bin"]


def test_link_refuses_uploaded_in_namespace_object_without_token(cli, repo_uri, put):
    up = put(f"{MAIN}/a.txt", b"a")
    commit(cli)
    one_error(link(cli, f"{MAIN}/adopted.txt", up["physical_address"], 1, "c", ok=False), json_cmd=True)
    assert paths(cli, MAIN) == ["a.txt"]


@pytest.mark.parametrize(
    "address_kind",
    [
        pytest.param("marker", id="repository-marker-under-_lakegc"),
        pytest.param("namespace-root", id="the-namespace-itself"),
        pytest.param("relative-key", id="relative-key-without-token"),
        pytest.param("escaping", id="address-with-dotdot"),
    ],
)
def test_link_refuses_in_namespace_or_escaping_addresses_without_token(env, cli, repo_uri, address_kind):
    ns = env.namespace()
    outside = env.root / "outside.bin"
    outside.write_bytes(b"o")
    address = {
        "marker": (ns / "_lakegc" / "repository.json").as_uri(),
        "namespace-root": ns.as_uri(),
        "relative-key": "data/0000000001/abc",
        "escaping": ns.as_uri() + "/../outside.bin",
    }[address_kind]
    one_error(link(cli, f"{MAIN}/x", address, 1, "c", ok=False), json_cmd=True)
    assert paths(cli, MAIN) == []


@pytest.mark.parametrize("form", ["file-uri", "absolute-path"])
def test_link_of_address_outside_namespace_needs_no_token_and_cat_reads_it(env, cli, repo_uri, form):
    outside = env.root / "elsewhere" / "ext.csv"
    outside.parent.mkdir()
    outside.write_bytes(b"external,data")
    address = outside.as_uri() if form == "file-uri" else str(outside)
    linked = link(cli, f"{MAIN}/ext.csv", address, 13, "ext-sum").json()
    assert linked["physical_address"] == outside.as_uri()
    assert cat(cli, f"{MAIN}/ext.csv") == "external,data"
    c = commit(cli)
    assert cat(cli, f"{REPO}/{c['id']}/ext.csv") == "external,data"
    assert stat(cli, f"{REPO}/{c['id']}/ext.csv")["physical_address"] == outside.as_uri()


def test_link_outside_address_in_a_sibling_folder_with_shared_name_prefix_needs_no_token(env, cli, repo_uri):
    sibling = Path(str(env.namespace()) + "-sibling") / "f.bin"
    sibling.parent.mkdir()
    sibling.write_bytes(b"s")
    link(cli, f"{MAIN}/f.bin", sibling.as_uri(), 1, "c")
    assert cat(cli, f"{MAIN}/f.bin") == "s"


def test_cat_of_deleted_outside_object_is_gone_410(env, cli, repo_uri):
    outside = env.root / "ext.bin"
    outside.write_bytes(b"e")
    link(cli, f"{MAIN}/ext.bin", outside.as_uri(), 1, "c")
    commit(cli)
    outside.unlink()
    one_error(cli("fs", "cat", f"{MAIN}/ext.bin", ok=False), "gone (410)")


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{REPO}/v1/x", (), id="on-a-tag"),
        pytest.param(f"{REPO}/ghost/x", ("not found",), id="unknown-branch"),
        pytest.param(f"{MAIN}/../x", (), id="dotdot-path"),
    ],
)
def test_link_outside_address_still_needs_a_valid_branch_and_path(env, cli, repo_uri, uri, needles):
    cli("tag", "create", f"{REPO}/v1", MAIN)
    outside = env.root / "ext.bin"
    outside.write_bytes(b"e")
    one_error(link(cli, uri, outside.as_uri(), 1, "c", ok=False), *needles, json_cmd=True)
    assert paths(cli, MAIN) == []


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--size", "-1", "--checksum", "c"], id="negative-size"),
        pytest.param(["--size", "abc", "--checksum", "c"], id="non-integer-size"),
        pytest.param(["--checksum", "c"], id="missing-size"),
        pytest.param(["--size", "1"], id="missing-checksum"),
    ],
)
def test_link_with_malformed_options_is_a_usage_error(env, cli, repo_uri, extra):
    outside = env.root / "ext.bin"
    outside.write_bytes(b"e")
    result = cli("fs", "link", f"{MAIN}/x", "--address", outside.as_uri(), *extra, ok=False)
    assert result.exit_code == 2
    assert paths(cli, MAIN) == []
