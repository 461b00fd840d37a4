"""CLI contract for repositories, branches and tags (docs/cli.md: "Repositories", "Branches",
"Tags"), through the real CLI."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import heads, one_error

REPO = "lakegc://repo"
REPO_KEYS = {"id", "storage_namespace", "default_branch", "creation_date"}


# -- helpers -------------------------------------------------------------------------------------
pytestmark = pytest.mark.usefixtures("short_lock_wait")


@pytest.fixture(autouse=True)
def metastore(cli) -> None:
    """Every test here starts on an empty metastore that exists (one that does not is an error for
    every command but those that create it: test_cli_errors)."""
    cli("db", "init")


def tags(cli, repo: str = REPO) -> dict[str, str]:
    return {t["id"]: t["commit_id"] for t in cli("tag", "list", repo, "--json").json()}


def repos(cli) -> dict[str, dict]:
    return {r["id"]: r for r in cli("repo", "list", "--json").json()}


def paths(cli, ref_uri: str) -> list[str]:
    return [e["path"] for e in cli("fs", "ls", ref_uri + "/", "--json").json()]


def commit(cli, branch_uri: str, message: str = "c", *extra: str) -> dict:
    return cli("commit", branch_uri, "-m", message, "--json", *extra).json()


def log(cli, ref_uri: str) -> list[dict]:
    return cli("log", ref_uri, "--json").json()


def cat(cli, uri: str) -> str:
    return cli("fs", "cat", uri).stdout


# -- repo create ---------------------------------------------------------------------------------
def test_repo_create_makes_default_branch_main_with_one_initial_empty_commit(env, cli):
    cli("repo", "create", REPO, str(env.namespace()))
    branches = cli("branch", "list", REPO, "--json").json()
    assert [b["id"] for b in branches] == ["main"]
    history = log(cli, f"{REPO}/main")
    assert len(history) == 1
    initial = history[0]
    assert initial["id"] == branches[0]["commit_id"]
    assert initial["parents"] == []
    assert initial["message"] == "Repository created"
    assert cli("fs", "ls", f"{REPO}/main/", "--json").json() == []
    assert cli("diff", f"{REPO}/main", "--json").json() == []


def test_repo_create_honours_default_branch_option(env, cli):
    cli("repo", "create", REPO, str(env.namespace()), "--default-branch", "develop")
    assert list(heads(cli)) == ["develop"]
    assert repos(cli)["repo"]["default_branch"] == "develop"
    assert log(cli, f"{REPO}/develop")[0]["message"] == "Repository created"
    one_error(cli("log", f"{REPO}/main", "--json", ok=False), "not found", json_cmd=True)


def test_repo_create_accepts_file_uri_namespace(env, cli):
    ns = env.namespace("by-uri")
    cli("repo", "create", REPO, ns.as_uri())
    assert repos(cli)["repo"]["storage_namespace"] == ns.as_uri()
    stat = cli("fs", "upload", f"{REPO}/main/a.txt", "--source", "-", "--json", input=b"x").json()
    assert stat["physical_address"].startswith(ns.as_uri() + "/data/")


def test_repo_create_accepts_absolute_path_and_creates_missing_folder(env, cli):
    ns = env.namespace("deep") / "er" / "ns"
    cli("repo", "create", REPO, str(ns))
    assert ns.is_dir()
    assert repos(cli)["repo"]["storage_namespace"] == ns.as_uri()


def test_repo_create_accepts_existing_empty_folder(env, cli):
    ns = env.namespace("empty")
    ns.mkdir(parents=True)
    cli("repo", "create", REPO, str(ns))
    assert "repo" in repos(cli)


def test_repo_create_accepts_sibling_folder_sharing_a_name_prefix(env, cli):
    cli("repo", "create", "lakegc://one", str(env.namespace("ns")))
    cli("repo", "create", "lakegc://two", str(env.namespace("ns2")))
    assert set(repos(cli)) == {"one", "two"}


def test_repo_create_prints_human_readable_confirmation(env, cli):
    out = cli("repo", "create", REPO, str(env.namespace())).stdout
    assert "repo" in out


def _refused_namespaces():
    # (id, how to build the namespace argument from env + the owner's namespace, needles)
    return [
        pytest.param(lambda env, owner: str(owner), ("namespace", "owner"), id="same-folder-as-other-repo"),
        pytest.param(lambda env, owner: owner.as_uri(), ("namespace", "owner"), id="same-folder-as-file-uri"),
        pytest.param(lambda env, owner: str(owner) + "/", ("namespace", "owner"), id="same-folder-trailing-slash"),
        pytest.param(lambda env, owner: str(owner / "sub"), ("namespace", "owner"), id="nested-inside-other-repo"),
        pytest.param(lambda env, owner: str(owner / "data" / "x"), ("namespace",), id="nested-deep-inside-other-repo"),
        pytest.param(lambda env, owner: str(owner.parent), ("namespace",), id="parent-of-other-repo"),
    ]


@pytest.mark.parametrize("make_ns, needles", _refused_namespaces())
def test_repo_create_refuses_namespace_overlapping_another_repository(env, cli, make_ns, needles):
    owner = env.namespace("owned")
    cli("repo", "create", "lakegc://owner", str(owner))
    before = repos(cli)
    one_error(cli("repo", "create", REPO, make_ns(env, owner), ok=False), *needles)
    assert repos(cli) == before
    assert not (owner / "sub").exists()


def test_repo_create_refuses_non_empty_folder_and_leaves_it_untouched(env, cli):
    ns = env.namespace("busy")
    ns.mkdir()
    (ns / "foreign.csv").write_text("x")
    one_error(cli("repo", "create", REPO, str(ns), ok=False), "empty")
    assert sorted(p.name for p in ns.iterdir()) == ["foreign.csv"]
    assert repos(cli) == {}


def test_repo_create_refuses_path_that_is_a_file(env, cli):
    f = env.namespace("afile")
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("x")
    one_error(cli("repo", "create", REPO, str(f), ok=False), "namespace")
    assert repos(cli) == {}


@pytest.mark.parametrize(
    "namespace",
    [
        pytest.param("relative/ns", id="relative-path"),
        pytest.param("./ns", id="dot-relative-path"),
        pytest.param("file://somehost/tmp/ns", id="file-uri-with-host"),
        pytest.param("ftp://host/ns", id="unsupported-scheme"),
        pytest.param("", id="empty"),
    ],
)
def test_repo_create_refuses_malformed_namespace(env, cli, namespace):
    one_error(cli("repo", "create", REPO, namespace, ok=False))
    assert repos(cli) == {}


def test_repo_create_refuses_namespace_with_dotdot(env, cli):
    ns = f"{env.root}/a/../ns"
    one_error(cli("repo", "create", REPO, ns, ok=False))
    assert repos(cli) == {}
    assert not env.namespace("ns").exists()


def test_repo_create_refuses_a_namespace_it_cannot_create_or_write(env, cli):
    """/proc refuses new folders even to root, so this holds whoever runs the tests."""
    one_error(cli("repo", "create", REPO, "/proc/lakegc-test-namespace", ok=False), "namespace")
    assert repos(cli) == {}


def test_repo_create_refuses_existing_repository_name_without_touching_new_namespace(env, cli):
    cli("repo", "create", REPO, str(env.namespace("first")))
    before = repos(cli)
    second = env.namespace("second")
    one_error(cli("repo", "create", REPO, str(second), ok=False), "exists")
    assert repos(cli) == before
    assert not second.exists() or not any(second.iterdir())


@pytest.mark.parametrize(
    "uri",
    [
        pytest.param("lakegc://Repo", id="uppercase-name"),
        pytest.param("lakegc://r", id="one-char-name"),
        pytest.param("lakegc://re_po", id="underscore-in-name"),
        pytest.param("repo", id="no-scheme"),
        pytest.param("lakefs://repo", id="wrong-scheme"),
        pytest.param("lakegc://", id="empty-name"),
        pytest.param("lakegc://repo/main", id="uri-with-branch"),
    ],
)
def test_repo_create_refuses_malformed_repository_uri_without_claiming_namespace(env, cli, uri):
    ns = env.namespace()
    one_error(cli("repo", "create", uri, str(ns), ok=False))
    assert repos(cli) == {}
    assert not ns.exists() or not any(ns.iterdir())


@pytest.mark.parametrize(
    "branch",
    [
        pytest.param("bad..name", id="dotdot"),
        pytest.param("-dash", id="leading-dash"),
        pytest.param("a/b", id="slash"),
        pytest.param("", id="empty"),
    ],
)
def test_repo_create_refuses_invalid_default_branch_without_claiming_namespace(env, cli, branch):
    ns = env.namespace()
    one_error(cli("repo", "create", REPO, str(ns), "--default-branch", branch, ok=False))
    assert repos(cli) == {}
    assert not ns.exists() or not any(ns.iterdir())


def test_repo_create_without_namespace_is_a_usage_error(cli):
    assert cli("repo", "create", REPO, ok=False).exit_code == 2


# -- repo list -----------------------------------------------------------------------------------
def test_repo_list_json_is_empty_list_without_repositories(cli):
    assert cli("repo", "list", "--json").json() == []


def test_repo_list_json_shows_every_repository_with_its_fields(env, cli):
    t0 = int(time.time())
    cli("repo", "create", "lakegc://alpha", str(env.namespace("a")))
    cli("repo", "create", "lakegc://beta", str(env.namespace("b")), "--default-branch", "trunk")
    t1 = int(time.time())
    docs = cli("repo", "list", "--json").json()
    assert isinstance(docs, list)
    assert all(set(d) == REPO_KEYS for d in docs)
    by_id = {d["id"]: d for d in docs}
    assert set(by_id) == {"alpha", "beta"}
    assert by_id["alpha"]["storage_namespace"] == env.namespace("a").as_uri()
    assert by_id["alpha"]["default_branch"] == "main"
    assert by_id["beta"]["default_branch"] == "trunk"
    for d in docs:
        assert isinstance(d["creation_date"], int)
        assert t0 - 1 <= d["creation_date"] <= t1 + 1


def test_repo_list_table_names_repositories(env, cli):
    cli("repo", "create", "lakegc://alpha", str(env.namespace("a")))
    assert "alpha" in cli("repo", "list").stdout


# -- repo delete ---------------------------------------------------------------------------------
def test_repo_delete_with_yes_forgets_metadata_but_keeps_namespace_data(env, cli, put):
    cli("repo", "create", REPO, str(env.namespace()))
    stat = put(f"{REPO}/main/a.txt", b"keep me")
    commit(cli, f"{REPO}/main")
    cli("repo", "delete", REPO, "--yes")
    assert repos(cli) == {}
    data_file = Path(stat["physical_address"].removeprefix("file://"))
    assert data_file.read_bytes() == b"keep me"
    one_error(cli("branch", "list", REPO, "--json", ok=False), "not found", json_cmd=True)
    one_error(cli("fs", "cat", f"{REPO}/main/a.txt", ok=False), "not found")


def test_repo_delete_without_yes_and_without_tty_refuses(env, cli):
    cli("repo", "create", REPO, str(env.namespace()))
    one_error(cli("repo", "delete", REPO, ok=False), "--yes")
    assert "repo" in repos(cli)


def test_repo_delete_unknown_repository_is_not_found(cli):
    one_error(cli("repo", "delete", "lakegc://ghost", "--yes", ok=False), "not found")


def test_repo_delete_leaves_other_repositories_alone(env, cli, put):
    cli("repo", "create", "lakegc://one", str(env.namespace("one")))
    cli("repo", "create", "lakegc://two", str(env.namespace("two")))
    put("lakegc://two/main/a.txt", b"two")
    commit(cli, "lakegc://two/main")
    cli("tag", "create", "lakegc://two/v1", "lakegc://two/main")
    cli("repo", "delete", "lakegc://one", "--yes")
    assert set(repos(cli)) == {"two"}
    assert cat(cli, "lakegc://two/v1/a.txt") == "two"


def test_repo_name_reusable_after_delete_with_fresh_metadata(env, cli, put):
    cli("repo", "create", REPO, str(env.namespace("old")))
    put(f"{REPO}/main/a.txt", b"old")
    commit(cli, f"{REPO}/main")
    cli("branch", "create", f"{REPO}/feature", "--source", f"{REPO}/main")
    cli("tag", "create", f"{REPO}/v1", f"{REPO}/main")
    cli("repo", "delete", REPO, "--yes")
    cli("repo", "create", REPO, str(env.namespace("new")))
    assert list(heads(cli)) == ["main"]
    assert tags(cli) == {}
    assert len(log(cli, f"{REPO}/main")) == 1
    assert paths(cli, f"{REPO}/main") == []


# -- branch create -------------------------------------------------------------------------------
def test_branch_create_from_branch_points_at_source_head(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    c = commit(cli, f"{repo_uri}/main")
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    assert heads(cli) == {"main": c["id"], "feature": c["id"]}
    assert cat(cli, f"{repo_uri}/feature/a.txt") == "a"


def test_branch_create_does_not_carry_source_staged_changes(cli, repo_uri, put):
    put(f"{repo_uri}/main/committed.txt", b"c")
    commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/staged.txt", b"s")
    cli("fs", "rm", f"{repo_uri}/main/committed.txt")
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    assert paths(cli, f"{repo_uri}/feature") == ["committed.txt"]
    assert cli("diff", f"{repo_uri}/feature", "--json").json() == []
    # and the source keeps its own staging
    assert paths(cli, f"{repo_uri}/main") == ["staged.txt"]


@pytest.mark.parametrize("source_kind", ["tag", "commit-id", "commit-prefix-8", "commit-prefix-12"])
def test_branch_create_from_tag_or_commit_id_or_prefix(cli, repo_uri, put, source_kind):
    put(f"{repo_uri}/main/a.txt", b"v1")
    first = commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"v2")
    commit(cli, f"{repo_uri}/main")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/{first['id']}")
    ref = {
        "tag": "v1",
        "commit-id": first["id"],
        "commit-prefix-8": first["id"][:8],
        "commit-prefix-12": first["id"][:12],
    }[source_kind]
    cli("branch", "create", f"{repo_uri}/old", "--source", f"{repo_uri}/{ref}")
    assert heads(cli)["old"] == first["id"]
    assert cat(cli, f"{repo_uri}/old/a.txt") == "v1"


def test_branch_create_json_names_branch_and_commit(cli, repo_uri):
    head = heads(cli)["main"]
    doc = cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main", "--json").json()
    assert doc == {"id": "feature", "commit_id": head}


def test_new_branch_is_independent_of_its_source(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/f.txt", b"f")
    c = commit(cli, f"{repo_uri}/feature")
    assert paths(cli, f"{repo_uri}/main") == []
    assert heads(cli)["feature"] == c["id"]
    assert heads(cli)["main"] == c["parents"][0]


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param(
            ["branch", "create", f"{REPO}/main", "--source", f"{REPO}/main"], ("exists",), id="existing-branch-name"
        ),
        pytest.param(
            ["branch", "create", f"{REPO}/v1", "--source", f"{REPO}/main"], ("exists",), id="name-of-existing-tag"
        ),
        pytest.param(
            ["branch", "create", f"{REPO}/x", "--source", f"{REPO}/nope"], ("not found",), id="unknown-source-ref"
        ),
        pytest.param(
            ["branch", "create", f"{REPO}/x", "--source", f"{REPO}/deadbeefdeadbeef"],
            ("not found",),
            id="unknown-commit-id",
        ),
        pytest.param(
            ["branch", "create", f"{REPO}/x", "--source", "lakegc://other/main"], (), id="source-in-another-repository"
        ),
        pytest.param(["branch", "create", f"{REPO}/x", "--source", f"{REPO}/main/a.txt"], (), id="source-with-path"),
        pytest.param(["branch", "create", f"{REPO}/x", "--source", "main"], (), id="source-not-a-uri"),
        pytest.param(
            ["branch", "create", f"{REPO}/bad..name", "--source", f"{REPO}/main"], (), id="invalid-name-dotdot"
        ),
        pytest.param(
            ["branch", "create", f"{REPO}/-x", "--source", f"{REPO}/main"], (), id="invalid-name-leading-dash"
        ),
        pytest.param(["branch", "create", REPO, "--source", f"{REPO}/main"], (), id="no-branch-in-uri"),
        pytest.param(["branch", "create", f"{REPO}/x/y", "--source", f"{REPO}/main"], (), id="branch-uri-with-path"),
        pytest.param(
            ["branch", "create", "lakegc://ghost/x", "--source", "lakegc://ghost/main"],
            ("not found",),
            id="unknown-repository",
        ),
    ],
)
def test_branch_create_refuses_bad_input_without_side_effects(env, cli, repo_uri, args, needles):
    cli("repo", "create", "lakegc://other", str(env.namespace("other")))
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    before = heads(cli)
    one_error(cli(*args, ok=False), *needles)
    assert heads(cli) == before
    assert tags(cli) == {"v1": before["main"]}


def test_branch_create_without_source_is_a_usage_error(cli, repo_uri):
    assert cli("branch", "create", f"{repo_uri}/x", ok=False).exit_code == 2


# -- branch delete -------------------------------------------------------------------------------
def test_branch_delete_removes_branch_and_keeps_its_commits_readable_by_id(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/f.txt", b"f")
    c = commit(cli, f"{repo_uri}/feature")
    cli("branch", "delete", f"{repo_uri}/feature", "--yes")
    assert list(heads(cli)) == ["main"]
    assert cat(cli, f"{repo_uri}/{c['id']}/f.txt") == "f"
    one_error(cli("fs", "cat", f"{repo_uri}/feature/f.txt", ok=False), "not found")


def test_branch_delete_drops_its_staging_so_a_recreated_branch_starts_clean(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/staged.txt", b"s")
    cli("branch", "delete", f"{repo_uri}/feature", "--yes")
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    assert paths(cli, f"{repo_uri}/feature") == []
    assert cli("diff", f"{repo_uri}/feature", "--json").json() == []


def test_branch_delete_does_not_touch_other_branches_staging(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/f.txt", b"f")
    put(f"{repo_uri}/main/m.txt", b"m")
    cli("branch", "delete", f"{repo_uri}/feature", "--yes")
    assert paths(cli, f"{repo_uri}/main") == ["m.txt"]


def test_branch_delete_refuses_default_branch(cli, repo_uri):
    before = heads(cli)
    one_error(cli("branch", "delete", f"{repo_uri}/main", "--yes", ok=False), "default")
    assert heads(cli) == before


def test_branch_delete_refuses_custom_default_branch_but_allows_a_branch_named_main(env, cli):
    cli("repo", "create", REPO, str(env.namespace()), "--default-branch", "trunk")
    cli("branch", "create", f"{REPO}/main", "--source", f"{REPO}/trunk")
    one_error(cli("branch", "delete", f"{REPO}/trunk", "--yes", ok=False), "default")
    cli("branch", "delete", f"{REPO}/main", "--yes")
    assert list(heads(cli)) == ["trunk"]


def test_branch_delete_without_yes_refuses_and_keeps_branch_and_staging(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/f.txt", b"f")
    one_error(cli("branch", "delete", f"{repo_uri}/feature", ok=False), "--yes")
    assert "feature" in heads(cli)
    assert paths(cli, f"{repo_uri}/feature") == ["f.txt"]


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{REPO}/ghost", ("not found",), id="unknown-branch"),
        pytest.param(f"{REPO}/v1", ("not found",), id="a-tag-is-not-a-branch"),
        pytest.param("lakegc://ghost/x", ("not found",), id="unknown-repository"),
        pytest.param(REPO, (), id="no-branch-in-uri"),
    ],
)
def test_branch_delete_refuses_unknown_or_non_branch(cli, repo_uri, uri, needles):
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    before = heads(cli), tags(cli)
    one_error(cli("branch", "delete", uri, "--yes", ok=False), *needles)
    assert (heads(cli), tags(cli)) == before


# -- branch list ---------------------------------------------------------------------------------
def test_branch_list_json_lists_every_branch_with_its_head(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/b", "--source", f"{repo_uri}/main")
    cli("branch", "create", f"{repo_uri}/a", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/a/x.txt", b"x")
    ca = commit(cli, f"{repo_uri}/a")
    docs = cli("branch", "list", repo_uri, "--json").json()
    assert all(set(d) == {"id", "commit_id"} for d in docs)
    assert sorted(d["id"] for d in docs) == ["a", "b", "main"]
    by_id = {d["id"]: d["commit_id"] for d in docs}
    assert by_id["a"] == ca["id"]
    assert by_id["b"] == by_id["main"] == ca["parents"][0]


def test_branch_list_table_names_branches(cli, repo_uri):
    cli("branch", "create", f"{repo_uri}/feature-x", "--source", f"{repo_uri}/main")
    out = cli("branch", "list", repo_uri).stdout
    assert "feature-x" in out and "main" in out


def test_branch_list_of_unknown_repository_is_not_found(cli):
    one_error(cli("branch", "list", "lakegc://ghost", "--json", ok=False), "not found", json_cmd=True)


# -- branch reset --------------------------------------------------------------------------------
def test_branch_reset_drops_staged_uploads_overwrites_and_deletions(cli, repo_uri, put):
    put(f"{repo_uri}/main/keep.txt", b"keep")
    put(f"{repo_uri}/main/gone.txt", b"gone")
    c = commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/new.txt", b"new")
    put(f"{repo_uri}/main/keep.txt", b"overwritten")
    cli("fs", "rm", f"{repo_uri}/main/gone.txt")
    assert len(cli("diff", f"{repo_uri}/main", "--json").json()) == 3
    cli("branch", "reset", f"{repo_uri}/main", "--yes")
    assert cli("diff", f"{repo_uri}/main", "--json").json() == []
    assert paths(cli, f"{repo_uri}/main") == ["gone.txt", "keep.txt"]
    assert cat(cli, f"{repo_uri}/main/keep.txt") == "keep"
    assert heads(cli)["main"] == c["id"]


def test_branch_reset_then_commit_is_nothing_to_commit(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    cli("branch", "reset", f"{repo_uri}/main", "--yes")
    before = heads(cli)
    one_error(cli("commit", f"{repo_uri}/main", "-m", "x", ok=False))
    assert heads(cli) == before


def test_branch_reset_only_touches_its_own_branch(cli, repo_uri, put):
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/main/m.txt", b"m")
    put(f"{repo_uri}/feature/f.txt", b"f")
    cli("branch", "reset", f"{repo_uri}/feature", "--yes")
    assert paths(cli, f"{repo_uri}/feature") == []
    assert paths(cli, f"{repo_uri}/main") == ["m.txt"]


def test_branch_reset_of_clean_branch_succeeds(cli, repo_uri):
    before = heads(cli)
    cli("branch", "reset", f"{repo_uri}/main", "--yes")
    assert heads(cli) == before


def test_branch_reset_without_yes_refuses_and_keeps_staging(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    one_error(cli("branch", "reset", f"{repo_uri}/main", ok=False), "--yes")
    assert paths(cli, f"{repo_uri}/main") == ["a.txt"]


@pytest.mark.parametrize(
    "uri, needles",
    [
        pytest.param(f"{REPO}/ghost", ("not found",), id="unknown-branch"),
        pytest.param(f"{REPO}/v1", ("not found",), id="a-tag-is-not-a-branch"),
        pytest.param("lakegc://ghost/main", ("not found",), id="unknown-repository"),
        pytest.param(f"{REPO}/main/a.txt", (), id="uri-with-path"),
    ],
)
def test_branch_reset_refuses_unknown_or_non_branch(cli, repo_uri, put, uri, needles):
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"a")
    one_error(cli("branch", "reset", uri, "--yes", ok=False), *needles)
    assert paths(cli, f"{repo_uri}/main") == ["a.txt"]


# -- branch revert -------------------------------------------------------------------------------
def test_branch_revert_undoes_an_added_file(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    added = commit(cli, f"{repo_uri}/main")
    out = cli("branch", "revert", f"{repo_uri}/main", added["id"]).stdout.strip()
    assert heads(cli)["main"] == out
    assert paths(cli, f"{repo_uri}/main") == []
    assert log(cli, f"{repo_uri}/main")[0]["parents"] == [added["id"]]
    assert cat(cli, f"{repo_uri}/{added['id']}/a.txt") == "a"


def test_branch_revert_restores_changed_and_removed_files(cli, repo_uri, put):
    put(f"{repo_uri}/main/changed.txt", b"old")
    put(f"{repo_uri}/main/removed.txt", b"here")
    commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/changed.txt", b"new")
    cli("fs", "rm", f"{repo_uri}/main/removed.txt")
    target = commit(cli, f"{repo_uri}/main")
    cli("branch", "revert", f"{repo_uri}/main", target["id"])
    assert cat(cli, f"{repo_uri}/main/changed.txt") == "old"
    assert cat(cli, f"{repo_uri}/main/removed.txt") == "here"


def test_branch_revert_of_older_commit_keeps_later_unrelated_changes(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    older = commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/b.txt", b"b")
    commit(cli, f"{repo_uri}/main")
    cli("branch", "revert", f"{repo_uri}/main", older["id"][:10])
    assert paths(cli, f"{repo_uri}/main") == ["b.txt"]


def test_branch_revert_json_and_date(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    target = commit(cli, f"{repo_uri}/main")
    doc = cli("branch", "revert", f"{repo_uri}/main", target["id"], "--date", "2026-01-02T03:04:05Z", "--json").json()
    assert {"id", "parents", "message", "creation_date", "metarange_id"} <= set(doc)
    assert doc["parents"] == [target["id"]]
    assert doc["creation_date"] == 1767323045
    assert log(cli, f"{repo_uri}/main")[0]["creation_date"] == 1767323045


def test_branch_revert_accepts_a_tag_as_commit(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    commit(cli, f"{repo_uri}/main")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    cli("branch", "revert", f"{repo_uri}/main", "v1")
    assert paths(cli, f"{repo_uri}/main") == []


def test_branch_revert_of_merge_commit_against_first_parent_undoes_the_merge(cli, repo_uri, put):
    put(f"{repo_uri}/main/base.txt", b"base")
    commit(cli, f"{repo_uri}/main")
    cli("branch", "create", f"{repo_uri}/feature", "--source", f"{repo_uri}/main")
    put(f"{repo_uri}/feature/f.txt", b"f")
    commit(cli, f"{repo_uri}/feature")
    merged = cli("merge", f"{repo_uri}/feature", f"{repo_uri}/main", "--json").json()
    cli("branch", "revert", f"{repo_uri}/main", merged["id"], "--parent-number", "1")
    assert paths(cli, f"{repo_uri}/main") == ["base.txt"]


def test_branch_revert_conflicting_with_later_change_fails_and_keeps_head(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"1")
    commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"2")
    target = commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"3")
    commit(cli, f"{repo_uri}/main")
    before = heads(cli)
    one_error(cli("branch", "revert", f"{repo_uri}/main", target["id"], ok=False), "conflict", "a.txt")
    assert heads(cli) == before
    assert cat(cli, f"{repo_uri}/main/a.txt") == "3"


def test_branch_revert_on_branch_with_uncommitted_changes_is_refused(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    target = commit(cli, f"{repo_uri}/main")
    put(f"{repo_uri}/main/b.txt", b"b")
    before = heads(cli)
    one_error(cli("branch", "revert", f"{repo_uri}/main", target["id"], ok=False), "uncommitted")
    assert heads(cli) == before
    assert paths(cli, f"{repo_uri}/main") == ["a.txt", "b.txt"]


@pytest.mark.parametrize(
    "commit_ref, needles",
    [
        pytest.param("0123456789abcdef", ("not found",), id="unknown-commit"),
        pytest.param("nosuchref", ("not found",), id="unknown-ref-name"),
        pytest.param("INITIAL", (), id="initial-commit-has-no-parent"),
        pytest.param("bad..ref", (), id="malformed-ref"),
    ],
)
def test_branch_revert_refuses_bad_commit(cli, repo_uri, commit_ref, needles):
    initial = heads(cli)["main"]
    ref = initial if commit_ref == "INITIAL" else commit_ref
    one_error(cli("branch", "revert", f"{repo_uri}/main", ref, ok=False), *needles)
    assert heads(cli) == {"main": initial}


def test_branch_revert_on_unknown_branch_is_not_found(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    target = commit(cli, f"{repo_uri}/main")
    one_error(cli("branch", "revert", f"{repo_uri}/ghost", target["id"], ok=False), "not found")


def test_branch_revert_with_bad_date_changes_nothing(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    target = commit(cli, f"{repo_uri}/main")
    one_error(cli("branch", "revert", f"{repo_uri}/main", target["id"], "--date", "yesterday", ok=False), "date")
    assert heads(cli)["main"] == target["id"]


# -- tags ----------------------------------------------------------------------------------------
def test_tag_create_at_branch_pins_the_commit_while_branch_moves(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"v1")
    c1 = commit(cli, f"{repo_uri}/main")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"v2")
    commit(cli, f"{repo_uri}/main")
    assert tags(cli) == {"v1": c1["id"]}
    assert cat(cli, f"{repo_uri}/v1/a.txt") == "v1"
    assert log(cli, f"{repo_uri}/v1")[0]["id"] == c1["id"]


@pytest.mark.parametrize("ref_kind", ["commit-id", "commit-prefix", "other-tag"])
def test_tag_create_at_commit_id_prefix_or_other_tag(cli, repo_uri, put, ref_kind):
    put(f"{repo_uri}/main/a.txt", b"a")
    c = commit(cli, f"{repo_uri}/main")
    commit(cli, f"{repo_uri}/main", "later", "--allow-empty")
    cli("tag", "create", f"{repo_uri}/base", f"{repo_uri}/{c['id']}")
    ref = {"commit-id": c["id"], "commit-prefix": c["id"][:8], "other-tag": "base"}[ref_kind]
    cli("tag", "create", f"{repo_uri}/t", f"{repo_uri}/{ref}")
    assert tags(cli)["t"] == c["id"]


def test_tag_create_json_and_list_shape(cli, repo_uri):
    head = heads(cli)["main"]
    doc = cli("tag", "create", f"{repo_uri}/v1.0", f"{repo_uri}/main", "--json").json()
    assert doc == {"id": "v1.0", "commit_id": head}
    cli("tag", "create", f"{repo_uri}/v0_9", f"{repo_uri}/main")
    docs = cli("tag", "list", repo_uri, "--json").json()
    assert all(set(d) == {"id", "commit_id"} for d in docs)
    assert sorted((d["id"], d["commit_id"]) for d in docs) == [("v0_9", head), ("v1.0", head)]


def test_tag_list_empty_and_table(cli, repo_uri):
    assert cli("tag", "list", repo_uri, "--json").json() == []
    cli("tag", "create", f"{repo_uri}/release-1", f"{repo_uri}/main")
    assert "release-1" in cli("tag", "list", repo_uri).stdout


def test_tag_delete_removes_tag_but_not_the_commit(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    c = commit(cli, f"{repo_uri}/main")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    cli("tag", "delete", f"{repo_uri}/v1")
    assert tags(cli) == {}
    one_error(cli("fs", "cat", f"{repo_uri}/v1/a.txt", ok=False), "not found")
    assert cat(cli, f"{repo_uri}/{c['id']}/a.txt") == "a"


def test_tag_name_is_reusable_after_delete(cli, repo_uri, put):
    first = heads(cli)["main"]
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    put(f"{repo_uri}/main/a.txt", b"a")
    c = commit(cli, f"{repo_uri}/main")
    cli("tag", "delete", f"{repo_uri}/v1")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    assert tags(cli) == {"v1": c["id"]} and c["id"] != first


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param(["tag", "create", f"{REPO}/v1", f"{REPO}/main"], ("exists",), id="duplicate-tag"),
        pytest.param(["tag", "create", f"{REPO}/main", f"{REPO}/main"], ("exists",), id="name-of-existing-branch"),
        pytest.param(["tag", "create", f"{REPO}/t", f"{REPO}/nope"], ("not found",), id="unknown-ref"),
        pytest.param(
            ["tag", "create", f"{REPO}/t", f"{REPO}/abcdef0123456789"], ("not found",), id="unknown-commit-id"
        ),
        pytest.param(["tag", "create", f"{REPO}/t", "lakegc://other/main"], (), id="ref-in-another-repository"),
        pytest.param(["tag", "create", f"{REPO}/bad..t", f"{REPO}/main"], (), id="invalid-tag-name"),
        pytest.param(["tag", "create", f"{REPO}/t", "main"], (), id="ref-not-a-uri"),
        pytest.param(
            ["tag", "create", "lakegc://ghost/t", "lakegc://ghost/main"], ("not found",), id="unknown-repository"
        ),
        pytest.param(["tag", "delete", f"{REPO}/nope"], ("not found",), id="delete-unknown-tag"),
        pytest.param(["tag", "delete", f"{REPO}/main"], ("not found",), id="delete-a-branch-as-tag"),
        pytest.param(["tag", "list", "lakegc://ghost", "--json"], ("not found",), id="list-unknown-repository"),
    ],
)
def test_tag_commands_refuse_bad_input_without_side_effects(env, cli, repo_uri, args, needles):
    cli("repo", "create", "lakegc://other", str(env.namespace("other")))
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    before = heads(cli), tags(cli)
    one_error(cli(*args, ok=False), *needles, json_cmd="--json" in args)
    assert (heads(cli), tags(cli)) == before


def test_tag_is_read_only_for_writes(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"a")
    commit(cli, f"{repo_uri}/main")
    cli("tag", "create", f"{repo_uri}/v1", f"{repo_uri}/main")
    before = heads(cli), tags(cli)
    one_error(cli("fs", "upload", f"{repo_uri}/v1/b.txt", "--source", "-", input=b"b", ok=False))
    one_error(cli("fs", "rm", f"{repo_uri}/v1/a.txt", ok=False))
    one_error(cli("commit", f"{repo_uri}/v1", "-m", "x", "--allow-empty", ok=False))
    one_error(cli("branch", "reset", f"{repo_uri}/v1", "--yes", ok=False))
    assert (heads(cli), tags(cli)) == before
