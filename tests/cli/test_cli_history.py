"""CLI contract for history: commit (--date, --allow-empty), merge (three-way, best common ancestor,
conflicts), log (order, --amount) and diff, through the real CLI."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest
from conftest import heads, one_error

REPO = "lakegc://repo"
MAIN = f"{REPO}/main"
FEATURE = f"{REPO}/feature"
LOG_KEYS = {"id", "parents", "message", "creation_date", "metarange_id"}
DIFF_KEYS = {"type", "path", "path_type", "size_bytes"}
JAN_2_2026 = int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp())  # 1767323045


# -- helpers -------------------------------------------------------------------------------------


def commit(cli, branch_uri: str = MAIN, message: str = "c", *extra: str) -> dict:
    return cli("commit", branch_uri, "-m", message, "--json", *extra).json()


def merge(cli, src: str, dest: str, *extra: str) -> dict:
    return cli("merge", src, dest, "--json", *extra).json()


def log(cli, ref_uri: str, *extra: str) -> list[dict]:
    return cli("log", ref_uri, "--json", *extra).json()


def paths(cli, ref_uri: str) -> list[str]:
    return [e["path"] for e in cli("fs", "ls", ref_uri + "/", "--json").json()]


def cat(cli, uri: str) -> str:
    return cli("fs", "cat", uri).stdout


def staged(cli, branch_uri: str = MAIN) -> list[dict]:
    return cli("diff", branch_uri, "--json").json()


def diff(cli, left: str, right: str) -> list[tuple[str, str, int | None]]:
    return [(c["type"], c["path"], c["size_bytes"]) for c in cli("diff", left, right, "--json").json()]


def branch(cli, name: str, source: str = MAIN) -> str:
    cli("branch", "create", f"{REPO}/{name}", "--source", source)
    return f"{REPO}/{name}"


def assert_children_before_parents(history: list[dict]) -> None:
    position = {c["id"]: i for i, c in enumerate(history)}
    assert len(position) == len(history), "a commit appears twice"
    for c in history:
        for p in c["parents"]:
            assert p in position, f"parent {p[:12]} of {c['id'][:12]} missing from log"
            assert position[p] > position[c["id"]], f"parent {p[:12]} listed before its child {c['id'][:12]}"


# -- commit --------------------------------------------------------------------------------------
def test_commit_prints_the_new_commit_id_and_moves_the_branch(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    out = cli("commit", MAIN, "-m", "add a").stdout
    commit_id = out.strip()
    assert re.fullmatch(r"[0-9a-f]{8,64}", commit_id), out
    assert heads(cli)["main"] == commit_id
    assert log(cli, MAIN)[0]["message"] == "add a"


def test_commit_json_names_parent_tree_message_and_date(cli, repo_uri, put):
    initial = log(cli, MAIN)[0]
    put(f"{MAIN}/a.txt", b"a")
    t0 = int(time.time())
    doc = commit(cli, MAIN, "first")
    t1 = int(time.time())
    assert set(doc) >= LOG_KEYS
    assert doc["parents"] == [initial["id"]]
    assert doc["message"] == "first"
    assert isinstance(doc["creation_date"], int) and t0 - 1 <= doc["creation_date"] <= t1 + 1
    assert isinstance(doc["metarange_id"], str) and doc["metarange_id"] != initial["metarange_id"]
    assert heads(cli)["main"] == doc["id"]
    logged = log(cli, MAIN)[0]
    assert {k: doc[k] for k in LOG_KEYS} == logged


@pytest.mark.parametrize(
    "date",
    [
        pytest.param("2026-01-02T03:04:05Z", id="iso-utc-z"),
        pytest.param("2026-01-02T05:04:05+02:00", id="iso-with-offset"),
        pytest.param("2026-01-02T03:04:05+00:00", id="iso-plus-zero"),
        pytest.param(str(JAN_2_2026), id="unix-seconds"),
    ],
)
def test_commit_date_sets_creation_date_to_that_instant(cli, repo_uri, put, date):
    put(f"{MAIN}/a.txt", b"a")
    doc = commit(cli, MAIN, "dated", "--date", date)
    assert doc["creation_date"] == JAN_2_2026
    assert log(cli, MAIN)[0]["creation_date"] == JAN_2_2026


def test_commit_can_be_backdated_before_its_parent(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    parent = commit(cli, MAIN, "now")
    put(f"{MAIN}/b.txt", b"b")
    child = commit(cli, MAIN, "long ago", "--date", "2001-09-09T01:46:40Z")
    assert child["creation_date"] == 1_000_000_000
    assert child["parents"] == [parent["id"]]
    assert [c["message"] for c in log(cli, MAIN)] == ["long ago", "now", "Repository created"]


def test_commit_with_nothing_staged_is_refused_and_changes_nothing(cli, repo_uri):
    before = heads(cli), log(cli, MAIN)
    one_error(cli("commit", MAIN, "-m", "empty", "--json", ok=False), "nothing", json_cmd=True)
    assert (heads(cli), log(cli, MAIN)) == before


def test_commit_after_previous_commit_has_nothing_left_to_commit(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    commit(cli)
    assert staged(cli) == []
    one_error(cli("commit", MAIN, "-m", "again", ok=False), "nothing")


def test_commit_allow_empty_makes_a_commit_with_the_same_tree(cli, repo_uri):
    head = log(cli, MAIN)[0]
    doc = commit(cli, MAIN, "marker", "--allow-empty")
    assert doc["parents"] == [head["id"]]
    assert doc["metarange_id"] == head["metarange_id"]
    assert doc["id"] != head["id"]
    assert heads(cli)["main"] == doc["id"]


def test_commit_allow_empty_with_staged_changes_commits_them(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    doc = commit(cli, MAIN, "x", "--allow-empty")
    assert paths(cli, f"{REPO}/{doc['id']}") == ["a.txt"]
    assert staged(cli) == []


def test_commit_applies_uploads_overwrites_and_deletions_and_clears_staging(cli, repo_uri, put):
    put(f"{MAIN}/keep.txt", b"keep")
    put(f"{MAIN}/change.txt", b"old")
    put(f"{MAIN}/drop.txt", b"drop")
    c1 = commit(cli)
    put(f"{MAIN}/change.txt", b"new")
    put(f"{MAIN}/add.txt", b"add")
    cli("fs", "rm", f"{MAIN}/drop.txt")
    c2 = commit(cli)
    assert paths(cli, f"{REPO}/{c2['id']}") == ["add.txt", "change.txt", "keep.txt"]
    assert cat(cli, f"{REPO}/{c2['id']}/change.txt") == "new"
    assert paths(cli, f"{REPO}/{c1['id']}") == ["change.txt", "drop.txt", "keep.txt"]
    assert staged(cli) == []


def test_commit_takes_only_its_own_branch_staging(cli, repo_uri, put):
    branch(cli, "feature")
    put(f"{MAIN}/m.txt", b"m")
    put(f"{FEATURE}/f.txt", b"f")
    c = commit(cli, FEATURE)
    assert paths(cli, f"{REPO}/{c['id']}") == ["f.txt"]
    assert paths(cli, MAIN) == ["m.txt"]
    assert [x["path"] for x in staged(cli, MAIN)] == ["m.txt"]


@pytest.mark.parametrize(
    "date",
    [
        pytest.param("yesterday", id="word"),
        pytest.param("2026-13-01T00:00:00Z", id="month-13"),
        pytest.param("2026-01-02 nonsense", id="trailing-garbage"),
        pytest.param("1.5", id="fractional-number"),
        pytest.param("", id="empty"),
    ],
)
def test_commit_with_invalid_date_is_refused_and_keeps_staging(cli, repo_uri, put, date):
    put(f"{MAIN}/a.txt", b"a")
    before = heads(cli)
    one_error(cli("commit", MAIN, "-m", "x", "--date", date, "--json", ok=False), json_cmd=True)
    assert heads(cli) == before
    assert [c["path"] for c in staged(cli)] == ["a.txt"]


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{REPO}/v1", (), id="on-a-tag"),
        pytest.param(f"{REPO}/COMMIT", (), id="on-a-commit-id"),
        pytest.param(f"{REPO}/ghost", ("not found",), id="unknown-branch"),
        pytest.param("lakegc://ghost/main", ("not found",), id="unknown-repository"),
        pytest.param(f"{MAIN}/a.txt", (), id="uri-with-path"),
        pytest.param(REPO, (), id="no-branch"),
    ],
)
def test_commit_refuses_non_branch_targets(cli, repo_uri, put, uri, needles):
    c = commit(cli, MAIN, "base", "--allow-empty")
    cli("tag", "create", f"{REPO}/v1", MAIN)
    put(f"{MAIN}/a.txt", b"a")
    before = heads(cli)
    one_error(
        cli("commit", uri.replace("COMMIT", c["id"]), "-m", "x", "--allow-empty", "--json", ok=False),
        *needles,
        json_cmd=True,
    )
    assert heads(cli) == before
    assert [x["path"] for x in staged(cli)] == ["a.txt"]


def test_commit_without_message_is_a_usage_error(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    assert cli("commit", MAIN, ok=False).exit_code == 2


# -- merge ---------------------------------------------------------------------------------------
@pytest.fixture
def forked(cli, repo_uri, put):
    """main and feature fork after a commit holding shared.txt and both.txt."""
    put(f"{MAIN}/shared.txt", b"shared")
    put(f"{MAIN}/both.txt", b"base")
    base = commit(cli, MAIN, "base")
    branch(cli, "feature")
    return base


def test_merge_three_way_brings_source_changes_with_parents_dest_then_source(cli, forked, put):
    put(f"{MAIN}/main-only.txt", b"m")
    m = commit(cli, MAIN, "main work")
    put(f"{FEATURE}/feature-only.txt", b"f")
    put(f"{FEATURE}/shared.txt", b"changed on feature")
    cli("fs", "rm", f"{FEATURE}/both.txt")
    f = commit(cli, FEATURE, "feature work")
    doc = merge(cli, FEATURE, MAIN)
    assert set(doc) >= LOG_KEYS
    assert doc["parents"] == [m["id"], f["id"]]
    assert heads(cli) == {"main": doc["id"], "feature": f["id"]}
    assert paths(cli, MAIN) == ["feature-only.txt", "main-only.txt", "shared.txt"]
    assert cat(cli, f"{MAIN}/shared.txt") == "changed on feature"
    assert paths(cli, FEATURE) == ["feature-only.txt", "shared.txt"]


def test_merge_prints_the_merge_commit_id(cli, forked, put):
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    out = cli("merge", FEATURE, MAIN).stdout.strip()
    assert heads(cli)["main"] == out


def test_merge_when_dest_did_not_move_is_still_a_merge_commit(cli, forked, put):
    put(f"{FEATURE}/f.txt", b"f")
    f = commit(cli, FEATURE)
    doc = merge(cli, FEATURE, MAIN)
    assert doc["parents"] == [forked["id"], f["id"]]
    assert doc["id"] != f["id"]
    assert doc["metarange_id"] == f["metarange_id"]


def test_merge_message_and_date_options(cli, forked, put):
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    doc = merge(cli, FEATURE, MAIN, "-m", "bring feature", "--date", "2026-01-02T03:04:05Z")
    assert doc["message"] == "bring feature"
    assert doc["creation_date"] == JAN_2_2026
    assert log(cli, MAIN)[0]["message"] == "bring feature"


def test_merge_default_message_is_not_empty(cli, forked, put):
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    assert merge(cli, FEATURE, MAIN)["message"].strip()


@pytest.mark.parametrize("source_kind", ["tag", "commit-id", "commit-prefix"])
def test_merge_source_may_be_a_tag_or_commit(cli, forked, put, source_kind):
    put(f"{FEATURE}/f1.txt", b"1")
    f1 = commit(cli, FEATURE)
    put(f"{FEATURE}/f2.txt", b"2")
    commit(cli, FEATURE)
    cli("tag", "create", f"{REPO}/t1", f"{REPO}/{f1['id']}")
    ref = {"tag": "t1", "commit-id": f1["id"], "commit-prefix": f1["id"][:9]}[source_kind]
    doc = merge(cli, f"{REPO}/{ref}", MAIN)
    assert doc["parents"] == [forked["id"], f1["id"]]
    assert paths(cli, MAIN) == ["both.txt", "f1.txt", "shared.txt"]


def test_merge_ignores_uncommitted_changes_of_the_source(cli, forked, put):
    put(f"{FEATURE}/committed.txt", b"c")
    commit(cli, FEATURE)
    put(f"{FEATURE}/staged.txt", b"s")
    merge(cli, FEATURE, MAIN)
    assert paths(cli, MAIN) == ["both.txt", "committed.txt", "shared.txt"]
    assert [c["path"] for c in staged(cli, FEATURE)] == ["staged.txt"]


@pytest.mark.parametrize(
    "side_effect",
    [
        pytest.param("both-modified", id="both-modified-differently"),
        pytest.param("modified-vs-deleted", id="modified-on-dest-deleted-on-source"),
        pytest.param("deleted-vs-modified", id="deleted-on-dest-modified-on-source"),
        pytest.param("both-added", id="both-added-differently"),
    ],
)
def test_merge_conflict_fails_and_leaves_dest_untouched(cli, forked, put, side_effect):
    path = "new.txt" if side_effect == "both-added" else "both.txt"
    if side_effect in ("both-modified", "both-added", "modified-vs-deleted"):
        put(f"{MAIN}/{path}", b"main version")
    else:
        cli("fs", "rm", f"{MAIN}/{path}")
    if side_effect in ("both-modified", "both-added", "deleted-vs-modified"):
        put(f"{FEATURE}/{path}", b"feature version!")
    else:
        cli("fs", "rm", f"{FEATURE}/{path}")
    put(f"{FEATURE}/clean.txt", b"no conflict here")
    commit(cli, MAIN)
    commit(cli, FEATURE)
    before = heads(cli), log(cli, MAIN), paths(cli, MAIN)
    one_error(cli("merge", FEATURE, MAIN, "--json", ok=False), "conflict", path, json_cmd=True)
    assert (heads(cli), log(cli, MAIN), paths(cli, MAIN)) == before
    assert staged(cli) == []


def test_merge_conflict_in_a_real_process_is_one_line_exit_1(sh, cli, forked, put):
    put(f"{MAIN}/both.txt", b"main")
    put(f"{FEATURE}/both.txt", b"feature")
    commit(cli, MAIN)
    commit(cli, FEATURE)
    before = heads(cli)
    result = sh("merge", FEATURE, MAIN, "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: ") and "conflict" in lines[0].lower()
    assert heads(cli) == before


def test_merge_same_deletion_on_both_sides_is_not_a_conflict(cli, forked, put):
    cli("fs", "rm", f"{MAIN}/both.txt")
    m = commit(cli, MAIN)
    cli("fs", "rm", f"{FEATURE}/both.txt")
    put(f"{FEATURE}/f.txt", b"f")
    f = commit(cli, FEATURE)
    doc = merge(cli, FEATURE, MAIN)
    assert doc["parents"] == [m["id"], f["id"]]
    assert paths(cli, MAIN) == ["f.txt", "shared.txt"]


def test_merge_same_change_already_merged_on_both_sides_is_not_a_conflict(cli, forked, put):
    """Both sides carry the very same entry (feature merged main's change) and then diverge elsewhere."""
    put(f"{MAIN}/both.txt", b"main change")
    commit(cli, MAIN)
    merge(cli, MAIN, FEATURE)
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    put(f"{MAIN}/m.txt", b"m")
    commit(cli, MAIN)
    merge(cli, FEATURE, MAIN)
    assert cat(cli, f"{MAIN}/both.txt") == "main change"
    assert paths(cli, MAIN) == ["both.txt", "f.txt", "m.txt", "shared.txt"]


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("upload-same-bytes", id="same-content-uploaded-on-both-sides"),
        pytest.param("link-same-object", id="same-outside-object-linked-on-both-sides"),
    ],
)
def test_merge_identical_change_made_independently_on_both_sides_is_not_a_conflict(env, cli, forked, put, how):
    """lakeFS compares entries by identity (size, checksum, metadata), not by when they were staged."""
    outside = env.root / "outside.bin"
    outside.write_bytes(b"identical")
    for side in (MAIN, FEATURE):
        if how == "upload-same-bytes":
            put(f"{side}/both.txt", b"identical")
        else:
            cli("fs", "link", f"{side}/both.txt", "--address", outside.as_uri(), "--size", "9", "--checksum", "sum")
    put(f"{FEATURE}/f.txt", b"f")
    m = commit(cli, MAIN)
    f = commit(cli, FEATURE)
    doc = merge(cli, FEATURE, MAIN)
    assert doc["parents"] == [m["id"], f["id"]]
    assert cat(cli, f"{MAIN}/both.txt") == "identical"
    assert "f.txt" in paths(cli, MAIN)


def test_merge_into_branch_with_uncommitted_changes_is_refused(cli, forked, put):
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    put(f"{MAIN}/dirty.txt", b"d")
    before = heads(cli)
    one_error(cli("merge", FEATURE, MAIN, "--json", ok=False), "uncommitted", json_cmd=True)
    assert heads(cli) == before
    assert [c["path"] for c in staged(cli)] == ["dirty.txt"]


def test_merge_with_nothing_to_merge_is_refused(cli, forked, put):
    put(f"{MAIN}/m.txt", b"m")
    commit(cli, MAIN)
    before = heads(cli), log(cli, MAIN)
    one_error(cli("merge", FEATURE, MAIN, "--json", ok=False), "nothing", json_cmd=True)
    assert (heads(cli), log(cli, MAIN)) == before


def test_merge_allow_empty_of_an_ancestor_makes_a_merge_commit_with_unchanged_tree(cli, forked, put):
    put(f"{MAIN}/m.txt", b"m")
    m = commit(cli, MAIN)
    doc = merge(cli, FEATURE, MAIN, "--allow-empty")
    assert doc["parents"] == [m["id"], forked["id"]]
    assert doc["metarange_id"] == m["metarange_id"]
    assert heads(cli)["main"] == doc["id"]
    assert paths(cli, MAIN) == ["both.txt", "m.txt", "shared.txt"]


def test_merge_uses_best_common_ancestor_not_an_older_one(cli, forked, put):
    """feature merged main's v1 of both.txt, then changed it to v2. Against the best common ancestor
    (main's v1 commit) only feature changed it; against the fork point both did and it would conflict."""
    put(f"{MAIN}/both.txt", b"v1")
    m1 = commit(cli, MAIN, "v1")
    merge(cli, MAIN, FEATURE)
    put(f"{FEATURE}/both.txt", b"v2")
    f2 = commit(cli, FEATURE, "v2")
    doc = merge(cli, FEATURE, MAIN)
    assert doc["parents"] == [m1["id"], f2["id"]]
    assert cat(cli, f"{MAIN}/both.txt") == "v2"


def test_merge_criss_cross_history_merges_without_spurious_conflicts(cli, forked, put):
    """main and feature each merge the other's first commit (criss-cross): two best common
    ancestors. Either one gives the same clean result."""
    put(f"{MAIN}/a.txt", b"a")
    m1 = commit(cli, MAIN, "m1")
    put(f"{FEATURE}/b.txt", b"b")
    f1 = commit(cli, FEATURE, "f1")
    merge(cli, f"{REPO}/{f1['id']}", MAIN)
    merge(cli, f"{REPO}/{m1['id']}", FEATURE)
    put(f"{MAIN}/c.txt", b"c")
    m2 = commit(cli, MAIN, "m2")
    put(f"{FEATURE}/d.txt", b"d")
    put(f"{FEATURE}/shared.txt", b"feature edit")
    f2 = commit(cli, FEATURE, "f2")
    doc = merge(cli, FEATURE, MAIN)
    assert doc["parents"] == [m2["id"], f2["id"]]
    assert paths(cli, MAIN) == ["a.txt", "b.txt", "both.txt", "c.txt", "d.txt", "shared.txt"]
    assert cat(cli, f"{MAIN}/shared.txt") == "feature edit"
    back = merge(cli, MAIN, FEATURE)
    assert back["parents"] == [f2["id"], doc["id"]]
    assert paths(cli, FEATURE) == paths(cli, MAIN)
    assert_children_before_parents(log(cli, MAIN))


@pytest.mark.parametrize(
    "src, dest, extra, needles",
    [
        pytest.param(f"{REPO}/ghost", MAIN, [], ("not found",), id="unknown-source"),
        pytest.param(FEATURE, f"{REPO}/ghost", [], ("not found",), id="unknown-dest-branch"),
        pytest.param(FEATURE, f"{REPO}/v1", [], (), id="dest-is-a-tag"),
        pytest.param(FEATURE, f"{REPO}/COMMIT", [], (), id="dest-is-a-commit-id"),
        pytest.param(FEATURE, "lakegc://other/main", [], (), id="across-repositories"),
        pytest.param(f"{FEATURE}/f.txt", MAIN, [], (), id="source-with-path"),
        pytest.param(FEATURE, f"{MAIN}/x", [], (), id="dest-with-path"),
        pytest.param(FEATURE, MAIN, ["--date", "someday"], ("date",), id="invalid-date"),
        pytest.param("lakegc://ghost/feature", "lakegc://ghost/main", [], ("not found",), id="unknown-repository"),
    ],
)
def test_merge_refuses_bad_input_and_moves_nothing(env, cli, forked, put, src, dest, extra, needles):
    cli("repo", "create", "lakegc://other", str(env.namespace("other")))
    cli("tag", "create", f"{REPO}/v1", MAIN)
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE)
    before = heads(cli), heads(cli, "lakegc://other")
    one_error(
        cli("merge", src, dest.replace("COMMIT", forked["id"]), "--json", *extra, ok=False), *needles, json_cmd=True
    )
    assert (heads(cli), heads(cli, "lakegc://other")) == before


def test_merge_without_dest_is_a_usage_error(cli, forked):
    assert cli("merge", FEATURE, ok=False).exit_code == 2


# -- log -----------------------------------------------------------------------------------------
def test_log_lists_newest_first_down_to_the_initial_commit(cli, repo_uri, put):
    for i in range(3):
        put(f"{MAIN}/f{i}.txt", str(i).encode())
        commit(cli, MAIN, f"commit {i}")
    history = log(cli, MAIN)
    assert [c["message"] for c in history] == ["commit 2", "commit 1", "commit 0", "Repository created"]
    assert all(set(c) == LOG_KEYS for c in history)
    assert all(isinstance(c["creation_date"], int) for c in history)
    for child, parent in zip(history, history[1:]):
        assert child["parents"] == [parent["id"]]
    assert history[-1]["parents"] == []
    assert history[0]["id"] == heads(cli)["main"]


@pytest.mark.parametrize("amount, expected", [("1", 1), ("2", 2), ("3", 3), ("50", 4)])
def test_log_amount_limits_to_the_newest_n(cli, repo_uri, amount, expected):
    for i in range(3):
        commit(cli, MAIN, f"c{i}", "--allow-empty")
    full = log(cli, MAIN)
    assert log(cli, MAIN, "--amount", amount) == full[:expected]


def test_log_shows_a_backdated_child_before_its_newer_parent(cli, repo_uri):
    commit(cli, MAIN, "today", "--allow-empty")
    commit(cli, MAIN, "2020", "--allow-empty", "--date", "2020-01-01T00:00:00Z")
    commit(cli, MAIN, "2010", "--allow-empty", "--date", "2010-01-01T00:00:00Z")
    history = log(cli, MAIN)
    assert [c["message"] for c in history] == ["2010", "2020", "today", "Repository created"]
    assert_children_before_parents(history)


def test_log_orders_commits_with_equal_dates_child_first(cli, repo_uri):
    for i in range(4):
        commit(cli, MAIN, f"same {i}", "--allow-empty", "--date", "1500000000")
    history = log(cli, MAIN)
    assert [c["message"] for c in history[:4]] == ["same 3", "same 2", "same 1", "same 0"]
    assert_children_before_parents(history)


def test_log_of_merge_history_lists_every_ancestor_once_children_first(cli, repo_uri, put):
    branch(cli, "feature")
    commit(cli, FEATURE, "feature future", "--allow-empty", "--date", "2099-01-01T00:00:00Z")
    put(f"{FEATURE}/f.txt", b"f")
    commit(cli, FEATURE, "feature old", "--date", "2001-01-01T00:00:00Z")
    put(f"{MAIN}/m.txt", b"m")
    commit(cli, MAIN, "main work")
    doc = merge(cli, FEATURE, MAIN, "--date", "2000-01-01T00:00:00Z")
    history = log(cli, MAIN)
    assert history[0]["id"] == doc["id"]
    assert sorted(c["message"] for c in history) == sorted(
        ["Repository created", "feature future", "feature old", "main work", doc["message"]]
    )
    assert_children_before_parents(history)


@pytest.mark.parametrize("ref_kind", ["tag", "commit-id", "commit-prefix"])
def test_log_from_tag_or_commit_starts_there(cli, repo_uri, ref_kind):
    c1 = commit(cli, MAIN, "one", "--allow-empty")
    commit(cli, MAIN, "two", "--allow-empty")
    cli("tag", "create", f"{REPO}/v1", f"{REPO}/{c1['id']}")
    ref = {"tag": "v1", "commit-id": c1["id"], "commit-prefix": c1["id"][:8]}[ref_kind]
    assert [c["message"] for c in log(cli, f"{REPO}/{ref}")] == ["one", "Repository created"]


def test_log_ignores_uncommitted_changes(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    assert [c["message"] for c in log(cli, MAIN)] == ["Repository created"]


def test_log_table_shows_messages(cli, repo_uri):
    commit(cli, MAIN, "a memorable message", "--allow-empty")
    assert "a memorable message" in cli("log", MAIN).stdout


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param([f"{REPO}/ghost"], ("not found",), id="unknown-ref"),
        pytest.param([f"{REPO}/0123456789abcdef"], ("not found",), id="unknown-commit"),
        pytest.param(["lakegc://ghost/main"], ("not found",), id="unknown-repository"),
        pytest.param([f"{MAIN}/a.txt"], (), id="uri-with-path"),
        pytest.param([REPO], (), id="no-ref"),
    ],
)
def test_log_refuses_bad_refs_with_empty_stdout(cli, repo_uri, args, needles):
    one_error(cli("log", *args, "--json", ok=False), *needles, json_cmd=True)


@pytest.mark.parametrize("amount", ["abc", "0", "-1"])
def test_log_bad_amount_is_refused_without_traceback(cli, repo_uri, amount):
    result = cli("log", MAIN, "--json", "--amount", amount, ok=False)
    assert result.exit_code in (1, 2)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


# -- diff ----------------------------------------------------------------------------------------
@pytest.fixture
def two_commits(cli, repo_uri, put):
    put(f"{MAIN}/same.txt", b"same")
    put(f"{MAIN}/changed.txt", b"old")
    put(f"{MAIN}/removed.txt", b"removed!")
    c1 = commit(cli, MAIN, "one")
    put(f"{MAIN}/changed.txt", b"new content")
    put(f"{MAIN}/dir/added.txt", b"added")
    cli("fs", "rm", f"{MAIN}/removed.txt")
    c2 = commit(cli, MAIN, "two")
    return c1, c2


def test_diff_between_commits_lists_added_removed_changed(cli, two_commits):
    c1, c2 = two_commits
    docs = cli("diff", f"{REPO}/{c1['id']}", f"{REPO}/{c2['id']}", "--json").json()
    assert all(set(d) == DIFF_KEYS for d in docs)
    assert all(d["path_type"] == "object" for d in docs)
    assert sorted((d["type"], d["path"], d["size_bytes"]) for d in docs) == [
        ("added", "dir/added.txt", 5),
        ("changed", "changed.txt", 11),
        ("removed", "removed.txt", 8),
    ]


def test_diff_reversed_swaps_added_and_removed(cli, two_commits):
    c1, c2 = two_commits
    assert sorted(diff(cli, f"{REPO}/{c2['id']}", f"{REPO}/{c1['id']}")) == [
        ("added", "removed.txt", 8),
        ("changed", "changed.txt", 3),
        ("removed", "dir/added.txt", 5),
    ]


def test_diff_accepts_branches_tags_and_prefixes(cli, two_commits):
    c1, c2 = two_commits
    cli("tag", "create", f"{REPO}/v1", f"{REPO}/{c1['id']}")
    expected = sorted(diff(cli, f"{REPO}/{c1['id']}", f"{REPO}/{c2['id']}"))
    assert sorted(diff(cli, f"{REPO}/v1", MAIN)) == expected
    assert sorted(diff(cli, f"{REPO}/{c1['id'][:8]}", f"{REPO}/{c2['id'][:10]}")) == expected


def test_diff_of_a_ref_with_itself_is_empty(cli, two_commits):
    _, c2 = two_commits
    assert diff(cli, MAIN, f"{REPO}/{c2['id']}") == []


def test_diff_between_refs_ignores_uncommitted_changes(cli, two_commits, put):
    _, c2 = two_commits
    put(f"{MAIN}/staged.txt", b"s")
    assert diff(cli, f"{REPO}/{c2['id']}", MAIN) == []


def test_diff_with_one_branch_shows_its_uncommitted_changes(cli, two_commits, put):
    assert staged(cli) == []
    put(f"{MAIN}/new.txt", b"new!")
    put(f"{MAIN}/same.txt", b"overwritten")
    cli("fs", "rm", f"{MAIN}/changed.txt")
    docs = staged(cli)
    assert all(set(d) == DIFF_KEYS for d in docs)
    assert sorted((d["type"], d["path"], d["size_bytes"]) for d in docs) == [
        ("added", "new.txt", 4),
        ("changed", "same.txt", 11),
        ("removed", "changed.txt", 11),
    ]
    commit(cli)
    assert staged(cli) == []


def test_diff_with_one_branch_does_not_show_other_branches_staging(cli, two_commits, put):
    branch(cli, "feature")
    put(f"{FEATURE}/f.txt", b"f")
    assert staged(cli, MAIN) == []
    assert [d["path"] for d in staged(cli, FEATURE)] == ["f.txt"]


def test_diff_table_shows_paths(cli, two_commits):
    c1, c2 = two_commits
    out = cli("diff", f"{REPO}/{c1['id']}", f"{REPO}/{c2['id']}").stdout
    for p in ("dir/added.txt", "changed.txt", "removed.txt"):
        assert p in out
    assert "same.txt" not in out


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param([MAIN, f"{REPO}/ghost"], ("not found",), id="unknown-right-ref"),
        pytest.param([f"{REPO}/ghost", MAIN], ("not found",), id="unknown-left-ref"),
        pytest.param([f"{REPO}/ghost"], ("not found",), id="unknown-single-branch"),
        pytest.param([f"{REPO}/v1"], (), id="single-uri-is-a-tag-not-a-branch"),
        pytest.param([MAIN, "lakegc://other/main"], (), id="across-repositories"),
        pytest.param([f"{MAIN}/a.txt", MAIN], (), id="uri-with-path"),
        pytest.param(["lakegc://ghost/main", "lakegc://ghost/x"], ("not found",), id="unknown-repository"),
        pytest.param([REPO], (), id="no-ref"),
    ],
)
def test_diff_refuses_bad_refs_with_empty_stdout(env, cli, repo_uri, args, needles):
    cli("repo", "create", "lakegc://other", str(env.namespace("other")))
    cli("tag", "create", f"{REPO}/v1", MAIN)
    one_error(cli("diff", *args, "--json", ok=False), *needles, json_cmd=True)
