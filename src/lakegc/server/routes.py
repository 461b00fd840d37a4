"""The routes of `lakegc serve`, each a translation onto the repository API (see app.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, BinaryIO

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from lakegc.errors import InvalidArgument, LakegcError, NotFound, PathNotFound, RefNotFound
from lakegc.repo.model import Entry
from lakegc.repo.repository import Lake, Repository
from lakegc.retention.rules import parse_rules
from lakegc.server import models
from lakegc.server.models import (
    BranchCreation,
    CommitCreation,
    MergeRequest,
    ObjectCopyCreation,
    PathList,
    RepositoryCreation,
    ResetCreation,
    RevertCreation,
    TagCreation,
)
from lakegc.server.statuses import status_of
from lakegc.server.users import User


def register(api: APIRouter, lake: Lake, current_user: Callable[..., User]) -> None:
    register_gc_rules(api, lake)

    # -- setup -------------------------------------------------------------------
    @api.get("/config")
    def config() -> dict[str, Any]:
        return {"version_config": {"version": models.VERSION}, "storage_config": models.STORAGE_CONFIG}

    @api.get("/config/version")
    def version() -> dict[str, Any]:
        return {"version": models.VERSION}

    @api.get("/config/storage")
    def storage() -> dict[str, Any]:
        return models.STORAGE_CONFIG

    @api.get("/user")
    def user(who: User = Depends(current_user)) -> dict[str, Any]:
        return {"user": {"id": who.name, "creation_date": int(who.created_at.timestamp())}}

    # -- repositories -------------------------------------------------------------
    @api.get("/repositories")
    def list_repositories(prefix: str = "", after: str = "", amount: int | None = None) -> dict[str, Any]:
        repositories = lake.repositories()
        return models.listed(
            repositories, lambda r: r.name, models.repository, prefix=prefix, after=after, amount=amount
        )

    @api.post("/repositories", status_code=201)
    def create_repository(body: RepositoryCreation, bare: bool = False) -> dict[str, Any]:
        return models.repository(lake.create_repository(body.name, body.storage_namespace, body.default_branch))

    @api.get("/repositories/{repository}")
    def get_repository(repository: str) -> dict[str, Any]:
        return models.repository(lake.repository(repository).info)

    @api.delete("/repositories/{repository}", status_code=204)
    def delete_repository(repository: str, force: bool = False) -> Response:
        lake.delete_repository(repository)
        return Response(status_code=204)

    @api.get("/repositories/{repository}/metadata")
    def repository_metadata(repository: str) -> dict[str, str]:
        lake.repository(repository)
        return {}

    # -- branches -------------------------------------------------------------------
    @api.get("/repositories/{repository}/branches")
    def list_branches(repository: str, prefix: str = "", after: str = "", amount: int | None = None) -> dict[str, Any]:
        branches = lake.repository(repository).branches()
        return models.listed(branches, lambda b: b.name, models.branch, prefix=prefix, after=after, amount=amount)

    @api.post("/repositories/{repository}/branches", status_code=201)
    def create_branch(repository: str, body: BranchCreation) -> PlainTextResponse:
        branch = lake.repository(repository).create_branch(body.name, body.source)
        return PlainTextResponse(branch.head, status_code=201)

    @api.get("/repositories/{repository}/branches/{branch}")
    def get_branch(repository: str, branch: str) -> dict[str, Any]:
        repo = lake.repository(repository)
        found = next((b for b in repo.branches() if b.name == branch), None)
        if found is None:
            raise RefNotFound(f"branch {branch!r} not found in repository {repository!r}")
        return models.branch(found)

    @api.delete("/repositories/{repository}/branches/{branch}", status_code=204)
    def delete_branch(repository: str, branch: str, force: bool = False) -> Response:
        lake.repository(repository).delete_branch(branch)
        return Response(status_code=204)

    @api.put("/repositories/{repository}/branches/{branch}", status_code=204)
    def reset_branch(repository: str, branch: str, body: ResetCreation) -> Response:
        if body.type != "reset":
            raise InvalidArgument(f"reset of one {body.type!r} is not supported: reset the whole branch (type 'reset')")
        lake.repository(repository).reset_branch(branch)
        return Response(status_code=204)

    @api.post("/repositories/{repository}/branches/{branch}/revert", status_code=204)
    def revert_branch(repository: str, branch: str, body: RevertCreation) -> Response:
        lake.repository(repository).revert(branch, body.ref, parent=max(body.parent_number, 1))
        return Response(status_code=204)

    @api.get("/repositories/{repository}/branches/{branch}/diff")
    def diff_branch(
        repository: str, branch: str, prefix: str = "", after: str = "", amount: int | None = None
    ) -> dict[str, Any]:
        changes = lake.repository(repository).diff(branch)
        return models.listed(changes, lambda c: c.path, models.diff, prefix=prefix, after=after, amount=amount)

    @api.post("/repositories/{repository}/branches/{branch}/commits", status_code=201)
    def commit(repository: str, branch: str, body: CommitCreation) -> dict[str, Any]:
        date = None if body.date is None else datetime.fromtimestamp(body.date, UTC)
        made = lake.repository(repository).commit(
            branch, body.message, date=date, allow_empty=body.allow_empty, metadata=body.metadata
        )
        return models.commit(made)

    # -- tags -------------------------------------------------------------------------
    @api.get("/repositories/{repository}/tags")
    def list_tags(repository: str, prefix: str = "", after: str = "", amount: int | None = None) -> dict[str, Any]:
        tags = lake.repository(repository).tags()
        return models.listed(tags, lambda t: t.name, models.tag, prefix=prefix, after=after, amount=amount)

    @api.post("/repositories/{repository}/tags", status_code=201)
    def create_tag(repository: str, body: TagCreation) -> dict[str, Any]:
        tag = lake.repository(repository).create_tag(body.id, body.ref)
        return models.tag(tag)

    @api.get("/repositories/{repository}/tags/{tag}")
    def get_tag(repository: str, tag: str) -> dict[str, Any]:
        found = next((t for t in lake.repository(repository).tags() if t.name == tag), None)
        if found is None:
            raise RefNotFound(f"tag {tag!r} not found in repository {repository!r}")
        return models.tag(found)

    @api.delete("/repositories/{repository}/tags/{tag}", status_code=204)
    def delete_tag(repository: str, tag: str, force: bool = False) -> Response:
        lake.repository(repository).delete_tag(tag)
        return Response(status_code=204)

    # -- commits, log, merge, diff ------------------------------------------------------
    @api.get("/repositories/{repository}/commits/{ref}")
    def get_commit(repository: str, ref: str) -> dict[str, Any]:
        return models.commit(lake.repository(repository).resolve(ref)[0])

    @api.get("/repositories/{repository}/refs/{ref}/commits")
    def log(repository: str, ref: str, after: str = "", amount: int | None = None) -> dict[str, Any]:
        commits = lake.repository(repository).log(ref)
        ids = [c.id for c in commits]
        start = ids.index(after) + 1 if after in ids else 0
        return models.listed(commits[start:], lambda c: c.id, models.commit, amount=amount)

    @api.post("/repositories/{repository}/refs/{source}/merge/{destination}")
    def merge(repository: str, source: str, destination: str, body: MergeRequest | None = None) -> dict[str, Any]:
        body = body or MergeRequest()
        made = lake.repository(repository).merge(
            source, destination, message=body.message, allow_empty=body.allow_empty
        )
        return {"reference": made.id}

    @api.get("/repositories/{repository}/refs/{left}/diff/{right}")
    def diff_refs(
        repository: str, left: str, right: str, prefix: str = "", after: str = "", amount: int | None = None
    ) -> dict[str, Any]:
        changes = lake.repository(repository).diff(left, right)
        return models.listed(changes, lambda c: c.path, models.diff, prefix=prefix, after=after, amount=amount)

    # -- objects --------------------------------------------------------------------------
    def stats(repo: Repository, entry: Entry, with_metadata: bool = True) -> dict[str, Any]:
        return models.object_stats(entry, repo.physical_address(entry), with_metadata=with_metadata)

    @api.post("/repositories/{repository}/branches/{branch}/objects", status_code=201)
    async def upload(request: Request, repository: str, branch: str, path: str) -> JSONResponse:
        """Both of the clients' forms: multipart/form-data with a `content` part (lakefs-sdk) and the
        raw body, chunked and maybe empty (lakefs, lakefs-spec, pandas)."""
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            part = form.get("content")
            data = b"" if part is None else await part.read() if hasattr(part, "read") else str(part).encode()
        else:
            data = await request.body()
        metadata = {
            name.removeprefix(USER_META): value for name, value in request.headers.items() if name.startswith(USER_META)
        }
        create_only = request.headers.get("if-none-match", "").strip() == "*"
        repo = await run_in_threadpool(lake.repository, repository)
        if create_only and await run_in_threadpool(_exists, repo, branch, path):
            return JSONResponse({"message": f"path {path!r} already exists"}, status_code=412)
        entry = await run_in_threadpool(repo.upload, branch, path, data, metadata or None)
        return JSONResponse(stats(repo, entry), status_code=201)

    @api.get("/repositories/{repository}/refs/{ref}/objects")
    def get_object(request: Request, repository: str, ref: str, path: str, presign: bool = False) -> Response:
        repo = lake.repository(repository)
        entry, stream = repo.open(ref, path)
        with stream:
            try:
                wanted = models.byte_range(request.headers.get("range"), entry.size)
            except models.RangeNotSatisfiable:
                return JSONResponse(
                    {"message": f"range not satisfiable: the object has {entry.size} bytes"},
                    status_code=416,
                    headers={"Content-Range": f"bytes */{entry.size}"},
                )
            headers = {"ETag": f'"{entry.checksum}"', "Accept-Ranges": "bytes"}
            if wanted is None:
                return Response(stream.read(), media_type="application/octet-stream", headers=headers)
            start, end = wanted
            _skip(stream, start)
            headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
            body = stream.read(end - start + 1)
            return Response(body, status_code=206, media_type="application/octet-stream", headers=headers)

    @api.head("/repositories/{repository}/refs/{ref}/objects")
    def head_object(repository: str, ref: str, path: str) -> Response:
        try:
            entry = lake.repository(repository).stat(ref, path)
        except NotFound:
            return Response(status_code=404)
        return Response(
            headers={"Content-Length": str(entry.size), "ETag": f'"{entry.checksum}"', "Accept-Ranges": "bytes"}
        )

    @api.get("/repositories/{repository}/refs/{ref}/objects/stat")
    def stat_object(
        repository: str, ref: str, path: str, user_metadata: bool = True, presign: bool = False
    ) -> dict[str, Any]:
        repo = lake.repository(repository)
        return stats(repo, repo.stat(ref, path), user_metadata)

    @api.get("/repositories/{repository}/refs/{ref}/objects/ls")
    def list_objects(
        repository: str,
        ref: str,
        prefix: str = "",
        after: str = "",
        amount: int | None = None,
        delimiter: str = "",
        user_metadata: bool = True,
        presign: bool = False,
    ) -> dict[str, Any]:
        repo = lake.repository(repository)
        listed = models.grouped(repo.list(ref, prefix), prefix, delimiter)
        found, pagination = models.page(listed, lambda item: item[0], after=after, amount=amount)
        results = [models.common_prefix(p) if e is None else stats(repo, e, user_metadata) for p, e in found]
        return models.listing(results, pagination)

    @api.delete("/repositories/{repository}/branches/{branch}/objects", status_code=204)
    def delete_object(repository: str, branch: str, path: str, force: bool = False) -> Response:
        lake.repository(repository).remove(branch, path)
        return Response(status_code=204)

    @api.post("/repositories/{repository}/branches/{branch}/objects/delete")
    def delete_objects(repository: str, branch: str, body: PathList, force: bool = False) -> dict[str, Any]:
        if len(body.paths) > 1000:
            raise InvalidArgument(f"{len(body.paths)} paths: at most 1000 at a time")
        repo = lake.repository(repository)
        errors = []
        for path in body.paths:
            try:
                repo.remove(branch, path)
            except (PathNotFound, InvalidArgument):
                continue  # as lakeFS: a path that is not there (or cannot be: "dir/" from lakefs-spec) is no error
            except LakegcError as exc:
                errors.append({"path": path, "status_code": status_of(exc), "message": str(exc)})
        return {"errors": errors}

    @api.post("/repositories/{repository}/branches/{branch}/objects/copy", status_code=201)
    def copy_object(repository: str, branch: str, dest_path: str, body: ObjectCopyCreation) -> dict[str, Any]:
        repo = lake.repository(repository)
        entry = repo.copy(body.src_ref or branch, body.src_path, branch, dest_path)
        return stats(repo, entry)


USER_META = "x-lakefs-meta-"


def _exists(repo: Repository, branch: str, path: str) -> bool:
    try:
        repo.stat(branch, path)
    except NotFound:
        return False
    return True


def _skip(stream: BinaryIO, count: int) -> None:
    """Move `stream` `count` bytes on: a seek where it can, else a read (an S3 body)."""
    if stream.seekable():
        stream.seek(count)
        return
    while count:
        count -= len(stream.read(min(count, 1 << 20)) or b"") or count


def register_gc_rules(api: APIRouter, lake: Lake) -> None:
    """GC rules, on lakeFS's current path (settings/gc_rules) and its older one (gc/rules)."""

    def get(repository: str) -> dict[str, Any]:
        rules = lake.repository(repository).gc_rules()
        if rules is None:
            raise NotFound(f"repository {repository!r} has no GC rules")
        return rules.to_doc()

    def put(repository: str, body: dict[str, Any]) -> Response:
        lake.repository(repository).set_gc_rules(parse_rules(json.dumps(body)))
        return Response(status_code=204)

    def delete(repository: str) -> Response:
        lake.repository(repository).delete_gc_rules()
        return Response(status_code=204)

    for path, write in (
        ("/repositories/{repository}/settings/gc_rules", "PUT"),
        ("/repositories/{repository}/gc/rules", "POST"),
    ):
        api.add_api_route(path, get, methods=["GET"])
        api.add_api_route(path, put, methods=[write], status_code=204)
        api.add_api_route(path, delete, methods=["DELETE"], status_code=204)
