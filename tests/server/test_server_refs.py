"""`lakegc serve`: branches, commits, tags, log, merge and diffs through the real lakefs-sdk."""

from __future__ import annotations

import lakefs_sdk
import pytest
from support.lakegc_server import status_of

# Each test starts a server process and drives several clients (one runs GC on Spark): the slow CI
# step, which keeps the first within its 12 minutes.
pytestmark = pytest.mark.slow


def test_branches_commits_tags_merge_and_diff(server, sdk) -> None:
    branches, commits = lakefs_sdk.BranchesApi(sdk), lakefs_sdk.CommitsApi(sdk)
    tags, refs = lakefs_sdk.TagsApi(sdk), lakefs_sdk.RefsApi(sdk)
    repo = server.env.lake().repository("repo")  # content goes in through the same repository API

    assert [b.id for b in branches.list_branches("repo").results] == ["main"]
    branches.create_branch("repo", lakefs_sdk.BranchCreation(name="feature", source="main"))
    assert (
        status_of(lambda: branches.create_branch("repo", lakefs_sdk.BranchCreation(name="feature", source="main")))
        == 409
    )
    assert status_of(lambda: branches.create_branch("repo", lakefs_sdk.BranchCreation(name="x", source="nope"))) == 404

    repo.upload("feature", "data/a.csv", b"a,b\n1,2\n")
    [staged] = branches.diff_branch("repo", "feature").results
    assert (staged.type, staged.path, staged.path_type, staged.size_bytes) == ("added", "data/a.csv", "object", 8)
    made = commits.commit("repo", "feature", lakefs_sdk.CommitCreation(message="add a", metadata={"k": "v"}))
    assert (made.message, made.metadata, made.parents) == (
        "add a",
        {"k": "v"},
        [branches.get_branch("repo", "main").commit_id],
    )
    assert isinstance(made.creation_date, int)
    assert branches.get_branch("repo", "feature").commit_id == made.id
    assert commits.get_commit("repo", "feature").id == made.id  # any ref, as the clients call it
    assert status_of(lambda: commits.commit("repo", "feature", lakefs_sdk.CommitCreation(message="empty"))) == 400

    [changed] = refs.diff_refs("repo", "main", "feature").results
    assert (changed.type, changed.path) == ("added", "data/a.csv")
    merged = refs.merge_into_branch("repo", "feature", "main")
    assert commits.get_commit("repo", "main").id == merged.reference
    assert [c.id for c in refs.log_commits("repo", "main").results][:2] == [merged.reference, made.id]
    page = refs.log_commits("repo", "main", amount=1)
    assert page.pagination.has_more and page.pagination.next_offset == merged.reference
    assert refs.log_commits("repo", "main", after=page.pagination.next_offset, amount=1).results[0].id == made.id

    tag = tags.create_tag("repo", lakefs_sdk.TagCreation(id="v1", ref="main"))
    assert (tag.id, tag.commit_id) == ("v1", merged.reference)
    assert status_of(lambda: tags.create_tag("repo", lakefs_sdk.TagCreation(id="v1", ref="main"))) == 409
    assert tags.get_tag("repo", "v1").commit_id == merged.reference
    assert [t.id for t in tags.list_tags("repo").results] == ["v1"]
    tags.delete_tag("repo", "v1")
    assert status_of(lambda: tags.get_tag("repo", "v1")) == 404

    branches.revert_branch("repo", "main", lakefs_sdk.RevertCreation(ref="main", parent_number=1))
    assert repo.diff(merged.reference, "main")[0].type == "removed"
    repo.upload("feature", "tmp", b"x")
    branches.reset_branch("repo", "feature", lakefs_sdk.ResetCreation(type="reset"))
    assert branches.diff_branch("repo", "feature").results == []
    branches.delete_branch("repo", "feature")
    assert status_of(lambda: branches.get_branch("repo", "feature")) == 404
    assert status_of(lambda: commits.get_commit("repo", "no-such-ref")) == 404


def test_gc_rules_on_both_paths(server, sdk) -> None:
    repos, internal = lakefs_sdk.RepositoriesApi(sdk), lakefs_sdk.InternalApi(sdk)
    assert status_of(lambda: repos.get_gc_rules("repo")) == 404
    rules = lakefs_sdk.GarbageCollectionRules(
        default_retention_days=7, branches=[lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=30)]
    )
    repos.set_gc_rules("repo", rules)
    assert repos.get_gc_rules("repo") == rules
    assert internal.internal_get_garbage_collection_rules("repo") == rules
    assert server.env.lake().repository("repo").gc_rules().default_retention_days == 7  # what a run reads
    older = lakefs_sdk.GarbageCollectionRules(default_retention_days=3, branches=[])
    internal.internal_set_garbage_collection_rules("repo", older)
    assert repos.get_gc_rules("repo").default_retention_days == 3
    bad = server.request(
        "PUT", "/repositories/repo/settings/gc_rules", body=b'{"default_retention_days": -1, "branches": []}',
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert bad.status == 400 and "default_retention_days" in bad.json()["message"]
    repos.delete_gc_rules("repo")
    assert status_of(lambda: repos.get_gc_rules("repo")) == 404


def test_cherry_pick_log_filters_and_diffs_through_the_lakefs_package(server, sdk) -> None:
    import lakefs

    client = lakefs.Client(host=server.url, username=server.key, password=server.secret)
    repo = lakefs.Repository("repo", client=client)
    main = repo.branch("main")
    main.object("a").upload(data=b"1")
    main.commit(message="c0")
    feature = repo.branch("feature").create(source_reference="main")
    feature.object("dir/x/b").upload(data=b"b")
    c1 = feature.commit(message="c1", metadata={"k": "v"})
    feature.object("a").upload(data=b"2")
    feature.commit(message="c2")
    main.object("m").upload(data=b"m")
    main.commit(message="c3")

    # lakeFS's default diff is three-dot: what feature did since it left main
    assert sorted(c.path for c in main.diff(feature)) == ["a", "dir/x/b"]
    assert sorted(c.path for c in main.diff(feature, type="two_dot")) == ["a", "dir/x/b", "m"]
    grouped = list(main.diff(feature, delimiter="/"))
    assert [(c.path, c.path_type, c.type) for c in grouped] == [
        ("a", "object", "changed"),
        ("dir/", "common_prefix", "prefix_changed"),
    ]

    picked = main.cherry_pick(c1)
    assert (picked.message, picked.metadata) == ("c1", {"k": "v"})
    assert main.object("dir/x/b").reader().read() == b"b" and main.object("a").reader().read() == b"1"
    assert [c.message for c in main.log(objects=["dir/x/b"])] == ["c1"]
    assert [c.message for c in main.log(prefixes=["dir/"], max_amount=5)] == ["c1"]
    assert [c.message for c in feature.log(first_parent=True)] == ["c2", "c1", "c0", "Repository created"]
    assert [c.message for c in feature.log(stop_at=c1.id)] == ["c2", "c1"]
    assert (
        status_of(
            lambda: lakefs_sdk.BranchesApi(sdk).cherry_pick("repo", "main", lakefs_sdk.CherryPickCreation(ref=c1.id))
        )
        == 400
    )
