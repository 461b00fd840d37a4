"""Objects: uploaded (streamed to storage), read (whole or one byte range, streamed back), stated,
listed, copied and deleted, one at a time or a thousand at once."""

from __future__ import annotations

import io
from contextlib import AsyncExitStack
from typing import Any, BinaryIO

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from lakegc.errors import InvalidArgument, LakegcError, NotFound, PathNotFound
from lakegc.repo.model import Entry
from lakegc.server import entries, models, streams
from lakegc.server.deps import ServedLake
from lakegc.server.models import ObjectCopyCreation, PathList
from lakegc.server.statuses import status_of

router = APIRouter()


@router.post("/repositories/{repository}/branches/{branch}/objects", status_code=201)
async def upload(request: Request, lake: ServedLake, repository: str, branch: str, path: str) -> JSONResponse:
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


@router.get("/repositories/{repository}/refs/{ref}/objects")
def get_object(
    request: Request, lake: ServedLake, repository: str, ref: str, path: str, presign: bool = False
) -> Response:
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


@router.head("/repositories/{repository}/refs/{ref}/objects")
def head_object(lake: ServedLake, repository: str, ref: str, path: str) -> Response:
    """404 for no such path; otherwise the entry's headers, a collected object's too. lakeFS keeps
    a collected object's entry and answers for it as for any other: only reading its data says
    410 Gone (so lakefs-spec's `exists()` is True and `open()` fails with 410)."""
    repo = lake.repository(repository)
    try:
        entry = repo.stat(ref, path)
    except NotFound:
        return Response(status_code=404)
    return Response(headers={"Content-Length": str(entry.size), **identity(entry)})


def identity(entry: Entry) -> dict[str, str]:
    """The headers GET and HEAD give every object: its checksum as the ETag, and that it serves ranges."""
    return {"ETag": f'"{entry.checksum}"', "Accept-Ranges": "bytes"}


@router.get("/repositories/{repository}/refs/{ref}/objects/stat")
def stat_object(
    lake: ServedLake, repository: str, ref: str, path: str, user_metadata: bool = True, presign: bool = False
) -> dict[str, Any]:
    repo = lake.repository(repository)
    return entries.stats(repo, repo.stat(ref, path), user_metadata)


@router.get("/repositories/{repository}/refs/{ref}/objects/ls")
def list_objects(
    lake: ServedLake,
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


@router.delete("/repositories/{repository}/branches/{branch}/objects", status_code=204)
def delete_object(lake: ServedLake, repository: str, branch: str, path: str, force: bool = False) -> Response:
    lake.repository(repository).remove(branch, path)
    return Response(status_code=204)


@router.post("/repositories/{repository}/branches/{branch}/objects/delete")
def delete_objects(
    lake: ServedLake, repository: str, branch: str, body: PathList, force: bool = False
) -> dict[str, Any]:
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


@router.post("/repositories/{repository}/branches/{branch}/objects/copy", status_code=201)
def copy_object(
    lake: ServedLake, repository: str, branch: str, dest_path: str, body: ObjectCopyCreation
) -> dict[str, Any]:
    repo = lake.repository(repository)
    entry = repo.copy(body.src_ref or branch, body.src_path, branch, dest_path)
    return entries.stats(repo, entry)
