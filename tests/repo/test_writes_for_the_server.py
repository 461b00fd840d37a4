"""What `lakegc serve` asks of the repository API beyond the CLI's needs: resetting one path or a
prefix, conditional writes (If-None-Match / If-Match, decided in the staging transaction), links
of server-issued addresses without a token (only the address handed out, for its branch and path,
once, before it expires), and object streams."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from conftest import Env, forget_tree_changes

from lakegc.errors import (
    InvalidArgument,
    InvalidToken,
    MergeConflict,
    NothingToCommit,
    PathNotFound,
    PreconditionFailed,
)
from lakegc.repo.model import AddressKind, Entry, Precondition
from lakegc.repo.repository import Repository
from lakegc.timeutil import utcnow


@pytest.fixture
def repo(env: Env) -> Repository:
    lake = env.lake()
    lake.create_repository("repo", str(env.namespace()))
    return lake.repository("repo")


def staged_paths(repo: Repository) -> list[str]:
    return [c.path for c in repo.diff("main")]


# -- reset of one path or a prefix ----------------------------------------------------------------
def test_reset_drops_one_path_or_one_prefix_and_nothing_else(repo: Repository) -> None:
    for path in ("a/1", "a/2", "ab", "b/1"):
        repo.upload("main", path, path.encode())
    assert repo.reset_branch("main", path="a/1") == 1
    assert staged_paths(repo) == ["a/2", "ab", "b/1"]
    assert repo.reset_branch("main", path="a/1") == 0  # nothing staged there: no error, as lakeFS
    assert repo.reset_branch("main", prefix="a/") == 1  # "ab" is not under "a/"
    assert staged_paths(repo) == ["ab", "b/1"]
    assert repo.reset_branch("main", prefix="%") == 0  # a LIKE wildcard is a character here
    assert repo.reset_branch("main") == 2 and staged_paths(repo) == []


def test_a_prefix_is_case_sensitive_everywhere_staging_is_read_or_dropped(repo: Repository) -> None:
    """SQLite's LIKE ignores ASCII case: a reset of "a/" must not drop what is staged under "A/"
    (its objects would then be uncommitted garbage a GC deletes), a listing of "a/" must not show
    "A/", and a log of "a/" must not show the commit that only touched "A/"."""
    repo.upload("main", "A/keep", b"upper")
    repo.upload("main", "a/drop", b"lower")
    assert [e.path for e in repo.list("main", "a/")] == ["a/drop"]
    assert [e.path for e in repo.list("main", "A/")] == ["A/keep"]
    assert repo.reset_branch("main", prefix="a/") == 1
    assert staged_paths(repo) == ["A/keep"] and repo.read("main", "A/keep") == b"upper"
    only_upper = repo.commit("main", "upper only").id
    repo.upload("main", "a/later", b"lower")
    lower = repo.commit("main", "lower").id
    assert [c.id for c in repo.log("main", prefixes=["a/"])] == [lower]
    assert [c.id for c in repo.log("main", prefixes=["A/"])] == [only_upper]


def test_reset_of_a_staged_deletion_brings_the_committed_object_back(repo: Repository) -> None:
    repo.upload("main", "kept", b"v1")
    repo.commit("main", "one")
    repo.remove("main", "kept")
    with pytest.raises(PathNotFound):
        repo.stat("main", "kept")
    repo.reset_branch("main", path="kept")
    assert repo.read("main", "kept") == b"v1"


@pytest.mark.parametrize("bad", ["../x", "/abs", "a//b", ""])
def test_reset_of_an_invalid_path_is_refused(repo: Repository, bad: str) -> None:
    repo.upload("main", "x", b"x")
    with pytest.raises(InvalidArgument):
        repo.reset_branch("main", path=bad)
    assert staged_paths(repo) == ["x"]


# -- conditional writes ------------------------------------------------------------------------------
def _entry(checksum: str) -> Entry:
    return Entry("p", "data/k", AddressKind.RELATIVE, 1, checksum, utcnow(), None)


@pytest.mark.parametrize(
    ("when", "current", "holds"),
    [
        (Precondition(absent=True), None, True),
        (Precondition(absent=True), _entry("abc"), False),
        (Precondition(checksum="abc"), _entry("abc"), True),
        (Precondition(checksum='"abc"'), _entry("abc"), True),  # an ETag comes quoted
        (Precondition(checksum="abc"), _entry("abd"), False),
        (Precondition(checksum="abc"), None, False),
        (Precondition(), None, True),
    ],
)
def test_precondition_table(when: Precondition, current: Entry | None, holds: bool) -> None:
    assert when.holds(current) is holds


def test_if_none_match_refuses_a_path_that_exists_committed_or_staged(repo: Repository) -> None:
    repo.upload("main", "committed", b"v1")
    repo.commit("main", "one")
    repo.upload("main", "staged", b"s1")
    for path in ("committed", "staged"):
        before = repo.read("main", path)
        with pytest.raises(PreconditionFailed, match="exists"):
            repo.upload("main", path, b"new", when=Precondition(absent=True))
        assert repo.read("main", path) == before
    repo.remove("main", "committed")  # deleted (staged): absent again
    repo.upload("main", "committed", b"v2", when=Precondition(absent=True))
    assert repo.read("main", "committed") == b"v2"


def test_if_match_writes_only_over_the_version_the_writer_read(repo: Repository) -> None:
    first = repo.upload("main", "p", b"v1")
    second = repo.upload("main", "p", b"v2", when=Precondition(checksum=first.checksum))
    with pytest.raises(PreconditionFailed, match="changed"):
        repo.upload("main", "p", b"v3", when=Precondition(checksum=first.checksum))  # a lost update refused
    assert repo.read("main", "p") == b"v2" and second.checksum != first.checksum


# -- links of server-issued addresses ----------------------------------------------------------------
def _write(repo: Repository, key: str, data: bytes) -> str:
    repo.storage.write(key, data)
    return hashlib.md5(data).hexdigest()


def test_an_issued_address_links_once_for_its_branch_and_path(repo: Repository) -> None:
    claims = repo.get_physical_address("main", "big")
    address = repo.storage.full_uri(claims.address)
    checksum = _write(repo, claims.address, b"payload")
    with pytest.raises(InvalidToken, match="another"):
        repo.link("main", "elsewhere", address, 7, checksum, issued=True)
    with pytest.raises(InvalidArgument, match="does not match"):
        repo.link("main", "big", address, 7, "0" * 32, issued=True)  # a wrong checksum keeps it usable
    repo.link("main", "big", address, 7, checksum, issued=True)
    assert repo.read("main", "big") == b"payload"
    with pytest.raises(InvalidToken, match="not handed out|already"):
        repo.link("main", "again", address, 7, checksum, issued=True)


def test_an_in_namespace_address_never_issued_or_expired_is_refused(repo: Repository) -> None:
    stolen = repo.upload("main", "someone-elses", b"data")  # an object of another entry
    with pytest.raises(InvalidToken, match="not handed out"):
        repo.link("main", "mine", repo.storage.full_uri(stolen.address), 4, stolen.checksum, issued=True)
    with pytest.raises(InvalidToken, match="not handed out"):
        repo.link("main", "mine", "data/made-up-key", 0, "d41d8cd98f00b204e9800998ecf8427e", issued=True)
    late = repo.get_physical_address("main", "late", ttl=timedelta(seconds=-1))
    checksum = _write(repo, late.address, b"late")
    with pytest.raises(InvalidToken, match="expired"):
        repo.link("main", "late", late.address, 4, checksum, issued=True)
    repo.get_physical_address("main", "next")  # handing out another address forgets the expired one
    with pytest.raises(InvalidToken, match="not handed out"):
        repo.link("main", "late", late.address, 4, checksum, issued=True)
    with pytest.raises(InvalidToken, match="token"):  # without `issued` (the CLI): a token is required
        fresh = repo.get_physical_address("main", "cli")
        repo.link("main", "cli", fresh.address, 0, "d41d8cd98f00b204e9800998ecf8427e")
    assert staged_paths(repo) == ["someone-elses"]


def test_a_linked_address_obeys_if_none_match(repo: Repository) -> None:
    repo.upload("main", "taken", b"x")
    claims = repo.get_physical_address("main", "taken")
    checksum = _write(repo, claims.address, b"y")
    with pytest.raises(PreconditionFailed):
        repo.link("main", "taken", claims.address, 1, checksum, issued=True, when=Precondition(absent=True))
    assert repo.read("main", "taken") == b"x"
    repo.link("main", "taken", claims.address, 1, checksum, issued=True)  # the refusal kept it usable
    assert repo.read("main", "taken") == b"y"


def test_an_object_linked_from_outside_the_namespace_is_read_as_a_stream(repo: Repository, env: Env) -> None:
    outside = env.root / "outside.bin"
    outside.write_bytes(b"0123456789" * 1000)
    repo.link("main", "ext", str(outside), 10_000, hashlib.md5(outside.read_bytes()).hexdigest())
    entry, stream = repo.open("main", "ext")
    with stream:
        assert stream.read(10) == b"0123456789" and entry.size == 10_000


# -- cherry-pick, log filters, three-dot diffs (lakeFS's refs API) -----------------------------------
def _diverged(repo: Repository) -> dict[str, str]:
    """main: a=1 (c0); feature: +b (c1), a=2 (c2); main then: +m (c3). Returns the commit ids."""
    repo.upload("main", "a", b"1")
    c0 = repo.commit("main", "c0").id
    repo.create_branch("feature", "main")
    repo.upload("feature", "dir/b", b"b")
    c1 = repo.commit("feature", "c1", metadata={"k": "v"}).id
    repo.upload("feature", "a", b"2")
    c2 = repo.commit("feature", "c2").id
    repo.upload("main", "m", b"m")
    c3 = repo.commit("main", "c3").id
    return {"c0": c0, "c1": c1, "c2": c2, "c3": c3}


def test_cherry_pick_applies_one_commits_change_with_its_message(repo: Repository) -> None:
    ids = _diverged(repo)
    picked = repo.cherry_pick("main", ids["c1"])
    assert (picked.parents, picked.message, picked.metadata) == ((ids["c3"],), "c1", {"k": "v"})
    assert repo.read("main", "dir/b") == b"b" and repo.read("main", "a") == b"1"  # c2's change stays out
    with pytest.raises(NothingToCommit):
        repo.cherry_pick("main", ids["c1"])  # already there
    with pytest.raises(InvalidArgument, match="parent number 2"):
        repo.cherry_pick("main", ids["c2"], parent=2)


def test_cherry_pick_of_a_conflicting_change_is_refused_and_changes_nothing(repo: Repository) -> None:
    ids = _diverged(repo)
    repo.upload("main", "a", b"3")
    head = repo.commit("main", "a=3").id
    with pytest.raises(MergeConflict):
        repo.cherry_pick("main", ids["c2"])  # a: 1 -> 2 there, 1 -> 3 here
    assert repo.resolve("main")[0].id == head


@pytest.mark.parametrize("from_", ["recorded changes", "trees"])
def test_log_filters_first_parent_since_stop_at_and_paths(repo: Repository, env: Env, from_: str) -> None:
    ids = _diverged(repo)
    merged = repo.merge("feature", "main").id
    if from_ == "trees":
        forget_tree_changes(env)  # as in a repository with commits from before schema v5
    everything = [c.id for c in repo.log("main")]
    assert set(everything) >= set(ids.values()) and everything[0] == merged
    first = [c.id for c in repo.log("main", first_parent=True)]
    assert ids["c1"] not in first and ids["c2"] not in first and ids["c3"] in first
    assert [c.message for c in repo.log("main", stop_at=ids["c3"])] == [c.message for c in repo.log("main")][
        : everything.index(ids["c3"]) + 1
    ]
    touched_a = [c.id for c in repo.log("main", paths=["a"])]
    assert ids["c0"] in touched_a and ids["c2"] in touched_a and ids["c1"] not in touched_a and merged in touched_a
    assert [c.id for c in repo.log("main", prefixes=["dir/"])] == [merged, ids["c1"]]
    future = utcnow() + timedelta(days=1)
    assert repo.log("main", since=future) == []


def test_three_dot_diff_shows_only_what_the_right_side_changed(repo: Repository) -> None:
    _diverged(repo)
    two = {c.path for c in repo.diff("main", "feature")}
    three = {c.path for c in repo.diff("main", "feature", three_dot=True)}
    assert two == {"a", "dir/b", "m"}  # m: added on main since, so "removed" going to feature
    assert three == {"a", "dir/b"}
