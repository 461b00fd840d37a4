"""`lakegc repo`, `lakegc branch`, `lakegc tag`."""

from __future__ import annotations

import typer

from lakegc.cli import output
from lakegc.cli.group import new_app
from lakegc.cli.options import JSON, YES, confirm, same_repo, state
from lakegc.timeutil import parse_date
from lakegc.uri import parse_uri

repo_app = new_app("Create, list and delete repositories.")
branch_app = new_app("Create, list, delete, reset and revert branches.")
tag_app = new_app("Create, list and delete tags.")


@repo_app.command("create", epilog="Example: lakegc repo create lakegc://lake s3://bucket/lake")
def repo_create(
    ctx: typer.Context,
    uri: str,
    namespace: str,
    default_branch: str = typer.Option("main", "--default-branch"),
    as_json: bool = JSON,
) -> None:
    """Create a repository over an empty storage namespace, with an initial empty commit."""
    target = parse_uri(uri)
    if target.ref:
        output.fail(f"invalid URI {uri!r}: expected lakegc://REPO")
    info = state(ctx).creating_lake.create_repository(target.repo, namespace, default_branch)
    if as_json:
        output.emit_json(output.repo_doc(info))
    else:
        output.say(
            f"Repository {info.name!r} created at {info.storage_namespace} (default branch {info.default_branch!r})"
        )


@repo_app.command("list", epilog="Example: lakegc repo list --json")
def repo_list(ctx: typer.Context, as_json: bool = JSON) -> None:
    """List repositories."""
    repos = state(ctx).lake.repositories()
    if as_json:
        output.emit_json([output.repo_doc(r) for r in repos])
    else:
        output.table(
            "REPOSITORY",
            "NAMESPACE",
            "DEFAULT BRANCH",
            "CREATED",
            rows=[[r.name, r.storage_namespace, r.default_branch, output.when(r.created_at)] for r in repos],
        )


@repo_app.command("delete", epilog="Example: lakegc repo delete lakegc://lake --yes")
def repo_delete(ctx: typer.Context, uri: str, yes: bool = YES) -> None:
    """Delete a repository's metadata (its namespace and objects stay)."""
    target = parse_uri(uri)
    st = state(ctx)
    st.repo(target)
    confirm(yes, f"delete repository {target.repo!r}")
    st.lake.delete_repository(target.repo)
    output.say(f"Repository {target.repo!r} deleted")


@branch_app.command("create", epilog="Example: lakegc branch create lakegc://lake/dev --source lakegc://lake/main")
def branch_create(
    ctx: typer.Context,
    uri: str,
    source: str = typer.Option(..., "--source", help="lakegc://REPO/REF"),
    as_json: bool = JSON,
) -> None:
    """Create a branch at the commit SOURCE names."""
    target, src = parse_uri(uri, need_ref=True, allow_path=False), parse_uri(source, need_ref=True, allow_path=False)
    same_repo(target.repo, src.repo)
    branch = state(ctx).repo(target).create_branch(target.ref, src.ref)
    if as_json:
        output.emit_json(output.branch_doc(branch))
    else:
        output.say(f"Branch {branch.name!r} created at {branch.head}")


@branch_app.command("delete", epilog="Example: lakegc branch delete lakegc://lake/dev --yes")
def branch_delete(ctx: typer.Context, uri: str, yes: bool = YES) -> None:
    """Delete a branch and its staged changes."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    repo = state(ctx).repo(target)
    confirm(yes, f"delete branch {target.ref!r}")
    repo.delete_branch(target.ref)
    output.say(f"Branch {target.ref!r} deleted")


@branch_app.command("list", epilog="Example: lakegc branch list lakegc://lake --json")
def branch_list(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """List branches and their HEAD commits."""
    branches = state(ctx).repo(parse_uri(uri)).branches()
    if as_json:
        output.emit_json([output.branch_doc(b) for b in branches])
    else:
        output.table("BRANCH", "COMMIT", rows=[[b.name, b.head] for b in branches])


@branch_app.command("reset", epilog="Example: lakegc branch reset lakegc://lake/dev --yes")
def branch_reset(ctx: typer.Context, uri: str, yes: bool = YES) -> None:
    """Drop all staged (uncommitted) changes of a branch."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    repo = state(ctx).repo(target)
    confirm(yes, f"drop all uncommitted changes of branch {target.ref!r}")
    dropped = repo.reset_branch(target.ref)
    output.say(f"Branch {target.ref!r} reset: {dropped} staged change(s) dropped")


@branch_app.command("revert", epilog="Example: lakegc branch revert lakegc://lake/main 3f2a9c1e")
def branch_revert(
    ctx: typer.Context,
    uri: str,
    commit: str,
    parent_number: int = typer.Option(1, "--parent-number", help="For a merge: which parent to revert to."),
    date: str | None = typer.Option(None, "--date", help="Commit date (ISO 8601 or Unix seconds)."),
    as_json: bool = JSON,
) -> None:
    """Commit on the branch the inverse of COMMIT's changes."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    ref = commit
    if commit.startswith("lakegc://"):
        other = parse_uri(commit, need_ref=True, allow_path=False)
        same_repo(target.repo, other.repo)
        ref = other.ref
    result = (
        state(ctx)
        .repo(target)
        .revert(target.ref, ref, parent=parent_number, date=parse_date(date) if date is not None else None)
    )
    if as_json:
        output.emit_json(output.commit_doc(result))
    else:
        typer.echo(result.id)


@tag_app.command("create", epilog="Example: lakegc tag create lakegc://lake/v1 lakegc://lake/main")
def tag_create(ctx: typer.Context, uri: str, ref: str, as_json: bool = JSON) -> None:
    """Create tag lakegc://REPO/TAG at lakegc://REPO/REF."""
    target, src = parse_uri(uri, need_ref=True, allow_path=False), parse_uri(ref, need_ref=True, allow_path=False)
    same_repo(target.repo, src.repo)
    tag = state(ctx).repo(target).create_tag(target.ref, src.ref)
    if as_json:
        output.emit_json(output.tag_doc(tag))
    else:
        output.say(f"Tag {tag.name!r} created at {tag.commit_id}")


@tag_app.command("delete", epilog="Example: lakegc tag delete lakegc://lake/v1")
def tag_delete(ctx: typer.Context, uri: str, yes: bool = YES) -> None:
    """Delete a tag (the commit stays)."""
    target = parse_uri(uri, need_ref=True, allow_path=False)
    state(ctx).repo(target).delete_tag(target.ref)
    output.say(f"Tag {target.ref!r} deleted")


@tag_app.command("list", epilog="Example: lakegc tag list lakegc://lake --json")
def tag_list(ctx: typer.Context, uri: str, as_json: bool = JSON) -> None:
    """List tags."""
    tags = state(ctx).repo(parse_uri(uri)).tags()
    if as_json:
        output.emit_json([output.tag_doc(t) for t in tags])
    else:
        output.table("TAG", "COMMIT", rows=[[t.name, t.commit_id] for t in tags])
