"""The routes of `lakegc serve`, each a translation onto the repository API (see app.py)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Annotated, Any, BinaryIO

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from lakegc.errors import InvalidArgument, LakegcError, NotFound, PathNotFound
from lakegc.repo.model import Entry
from lakegc.repo.repository import Lake
from lakegc.retention.rules import parse_rules
from lakegc.server import entries, models, streams
from lakegc.server.models import (
    BranchCreation,
    CherryPickCreation,
    CommitCreation,
    MergeRequest,
    ObjectCopyCreation,
    PathList,
    RepositoryCreation,
    ResetCreation,
    RevertCreation,
    StagingMetadata,
    TagCreation,
)
from lakegc.server.statuses import status_of
from lakegc.server.users import User
from lakegc.storage import real_location, within
from lakegc.timeutil import as_utc


def register(api: APIRouter, lake: Lake, current_user: Callable[..., User], external: Sequence[str] = ()) -> None:
    """Every route but the health check on `api`. `external`: the real locations outside any
    namespace that staging links may point at (none by default: a link cannot make the server read
    a file or bucket of its own choosing for a client)."""
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
        return models.branch(models.named(lake.repository(repository).branches(), branch, "branch", repository))

    @api.delete("/repositories/{repository}/branches/{branch}", status_code=204)
    def delete_branch(repository: str, branch: str, force: bool = False) -> Response:
        lake.repository(repository).delete_branch(branch)
        return Response(status_code=204)

    @api.put("/repositories/{repository}/branches/{branch}", status_code=204)
    def reset_branch(repository: str, branch: str, body: ResetCreation) -> Response:
        """Drop staged changes: all of them (type `reset`), the one at `path` (`object`), or those
        under `path` (`common_prefix`)."""
        repo = lake.repository(repository)
        repo.reset_branch(branch, **reset_scope(body))
        return Response(status_code=204)

    @api.post("/repositories/{repository}/branches/{branch}/revert", status_code=204)
    def revert_branch(repository: str, branch: str, body: RevertCreation) -> Response:
        lake.repository(repository).revert(branch, body.ref, parent=max(body.parent_number, 1))
        return Response(status_code=204)

    @api.get("/repositories/{repository}/branches/{branch}/diff")
    def diff_branch(
        repository: str, branch: str, prefix: str = "", after: str = "", amount: int | None = None, delimiter: str = ""
    ) -> dict[str, Any]:
        changes = lake.repository(repository).diff(branch)
        return models.diff_page(changes, prefix=prefix, after=after, amount=amount, delimiter=delimiter)

    @api.post("/repositories/{repository}/branches/{branch}/cherry-pick", status_code=201)
    def cherry_pick(repository: str, branch: str, body: CherryPickCreation) -> dict[str, Any]:
        made = lake.repository(repository).cherry_pick(branch, body.ref, parent=body.parent_number or 1)
        return models.commit(made)

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
        return models.tag(models.named(lake.repository(repository).tags(), tag, "tag", repository))

    @api.delete("/repositories/{repository}/tags/{tag}", status_code=204)
    def delete_tag(repository: str, tag: str, force: bool = False) -> Response:
        lake.repository(repository).delete_tag(tag)
        return Response(status_code=204)

    # -- commits, log, merge, diff ------------------------------------------------------
    @api.get("/repositories/{repository}/commits/{ref}")
    def get_commit(repository: str, ref: str) -> dict[str, Any]:
        return models.commit(lake.repository(repository).resolve(ref)[0])

    @api.get("/repositories/{repository}/refs/{ref}/commits")
    def log(
        repository: str,
        ref: str,
        after: str = "",
        amount: int | None = None,
        objects: Annotated[list[str] | None, Query()] = None,
        prefixes: Annotated[list[str] | None, Query()] = None,
        limit: bool = False,
        first_parent: bool = False,
        since: datetime | None = None,
        stop_at: str | None = None,
    ) -> dict[str, Any]:
        """The log from `ref` in lakeFS's order, paged by commit id (`after` is the last id seen)."""
        commits = lake.repository(repository).log(
            ref,
            first_parent=first_parent,
            since=None if since is None else as_utc(since),
            stop_at=stop_at or None,
            paths=objects or (),
            prefixes=prefixes or (),
        )
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
        repository: str,
        left: str,
        right: str,
        prefix: str = "",
        after: str = "",
        amount: int | None = None,
        delimiter: str = "",
        diff_type: Annotated[str, Query(alias="type")] = "three_dot",
        include_right_stats: bool = False,
    ) -> dict[str, Any]:
        """lakeFS's default is `three_dot`: what `right` changed since its merge base with `left`."""
        if diff_type not in ("two_dot", "three_dot"):
            raise InvalidArgument(f"invalid diff type {diff_type!r}: two_dot or three_dot")
        changes = lake.repository(repository).diff(left, right, three_dot=diff_type == "three_dot")
        return models.diff_page(changes, prefix=prefix, after=after, amount=amount, delimiter=delimiter)

    # -- objects --------------------------------------------------------------------------
    @api.post("/repositories/{repository}/branches/{branch}/objects", status_code=201)
    async def upload(request: Request, repository: str, branch: str, path: str) -> JSONResponse:
        """Both of the clients' forms, streamed to storage: multipart/form-data with a `content`
        part (lakefs-sdk; Starlette spools it to disk past 1 MB) and the raw body, chunked and maybe
        empty (lakefs, lakefs-spec, pandas), read chunk by chunk as storage writes it."""
        metadata = entries.user_metadata(request.headers)
        when = entries.precondition(request.headers)
        repo = await run_in_threadpool(lake.repository, repository)
        async with AsyncExitStack() as open_form:
            content = await uploaded(request, open_form)
            entry = await run_in_threadpool(repo.upload, branch, path, content, metadata, when)
        return JSONResponse(entries.stats(repo, entry), status_code=201)

    @api.get("/repositories/{repository}/refs/{ref}/objects")
    def get_object(request: Request, repository: str, ref: str, path: str, presign: bool = False) -> Response:
        repo = lake.repository(repository)
        entry, stream = repo.open(ref, path)
        try:
            wanted = models.byte_range(request.headers.get("range"), entry.size)
        except models.RangeNotSatisfiable:
            stream.close()
            return JSONResponse(
                {"message": f"range not satisfiable: the object has {entry.size} bytes"},
                status_code=416,
                headers={"Content-Range": f"bytes */{entry.size}"},
            )
        except LakegcError:
            stream.close()
            raise
        headers = identity(entry)
        if wanted is None:
            return StreamingResponse(streams.content(stream), media_type="application/octet-stream", headers=headers)
        start, end = wanted
        headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        return StreamingResponse(
            streams.content(stream, start, end - start + 1),
            status_code=206,
            media_type="application/octet-stream",
            headers=headers,
        )

    @api.head("/repositories/{repository}/refs/{ref}/objects")
    def head_object(repository: str, ref: str, path: str) -> Response:
        """404 for no such path; otherwise the entry's headers, a collected object's too. lakeFS keeps
        a collected object's entry and answers for it as for any other: only reading its data says
        410 Gone (so lakefs-spec's `exists()` is True and `open()` fails with 410)."""
        repo = lake.repository(repository)
        try:
            entry = repo.stat(ref, path)
        except NotFound:
            return Response(status_code=404)
        return Response(headers={"Content-Length": str(entry.size), **identity(entry)})

    @api.get("/repositories/{repository}/refs/{ref}/objects/stat")
    def stat_object(
        repository: str, ref: str, path: str, user_metadata: bool = True, presign: bool = False
    ) -> dict[str, Any]:
        repo = lake.repository(repository)
        return entries.stats(repo, repo.stat(ref, path), user_metadata)

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
        listed = models.grouped(repo.list(ref, prefix, after), lambda e: e.path, prefix, delimiter)
        found, pagination = models.page(listed, lambda item: item[0], after=after, amount=amount)
        results = [models.common_prefix(p) if e is None else entries.stats(repo, e, user_metadata) for p, e in found]
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
        return entries.stats(repo, entry)

    # -- staging backing: write the object yourself, then link it ---------------------------
    @api.get("/repositories/{repository}/branches/{branch}/staging/backing")
    def get_physical_address(repository: str, branch: str, path: str, presign: bool = False) -> dict[str, Any]:
        """A fresh address in the namespace to write `path`'s object to, then link it (PUT below)
        before it expires; GC keeps it meanwhile. No presigned URLs (pre_sign_support is false)."""
        if presign:
            raise InvalidArgument("presigned URLs are not served by lakegc: write to physical_address yourself")
        repo = lake.repository(repository)
        claims = repo.get_physical_address(branch, path)
        return {"physical_address": models.lakefs_namespace(repo.storage.full_uri(claims.address))}

    @api.put("/repositories/{repository}/branches/{branch}/staging/backing")
    def link_physical_address(
        request: Request, repository: str, branch: str, path: str, body: StagingMetadata
    ) -> dict[str, Any]:
        """Link an object already written as `path`: an address GET handed out for this branch and
        path and not expired (once), or one outside the namespace under an allowed external prefix."""
        address = body.staging.physical_address
        if not address:
            raise InvalidArgument("staging.physical_address is required")
        if not body.checksum:
            raise InvalidArgument("checksum is required")
        repo = lake.repository(repository)
        outside = repo.outside_namespace(address)
        if outside is not None and not any(within(prefix, real_location(outside)) for prefix in external):
            raise InvalidArgument(
                f"address {address!r} is outside the repository's namespace and under no allowed external "
                "prefix (lakegc serve --allowed-external-prefix)"
            )
        entry = repo.link(
            branch,
            path,
            address,
            body.size_bytes,
            body.checksum,
            metadata=body.user_metadata,
            issued=True,
            when=entries.precondition(request.headers),
        )
        return entries.stats(repo, entry)


def reset_scope(body: ResetCreation) -> dict[str, str]:
    """`Repository.reset_branch`'s keywords for the reset `body` asks for; InvalidArgument for a
    type it does not know, or one that needs a path without it."""
    if body.type == "reset":
        return {}
    if body.type in ("object", "common_prefix") and body.path:
        return {"path" if body.type == "object" else "prefix": body.path}
    raise InvalidArgument(
        f"invalid reset: type {body.type!r} with path {body.path!r} (type is reset, or object or "
        "common_prefix with a path)"
    )


async def uploaded(request: Request, open_form: AsyncExitStack) -> BinaryIO:
    """The object an upload sends: the raw body, or a multipart form's `content` part (the form is
    open until `open_form` closes)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return streams.blocking(request.stream())
    form = await open_form.enter_async_context(request.form())
    part = form.get("content")
    if part is None or isinstance(part, str):
        return io.BytesIO((part or "").encode())
    await part.seek(0)
    return part.file


def identity(entry: Entry) -> dict[str, str]:
    """The headers GET and HEAD give every object: its checksum as the ETag, and that it serves ranges."""
    return {"ETag": f'"{entry.checksum}"', "Accept-Ranges": "bytes"}


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
