"""A stand-in for lakeFS's REST API: the few endpoints lakeFS's garbage collection reads, answering
what lakeFS answers (paths under /api/v1, JSON as lakeFS's Go server encodes the OpenAPI models,
status codes, lakeFS's error body `{"message": ...}`), over the in-memory `support.lakefs_model`.

    with running_standin(tmp_path / "blockstore") as lakefs:
        lakefs.model.create_repository("repo", "local://repo")
        lakefs.model.upload("repo", "main", "a.txt", b"x")
        lakefs.model.commit("repo", "main")
        lakefs.model.set_gc_rules("repo", 7, {"main": 10})
        ... lakefs.endpoint, lakefs.access_key_id, lakefs.secret_access_key

Tests break it with `fail(...)` and read what was asked with `calls`. The handlers follow lakeFS's
pkg/api/controller.go (GetRepository, GetGCRules, PrepareGarbageCollectionCommits[Async|Status],
PrepareGarbageCollectionUncommitted, GetMetaRange, GetRange) and pkg/api/auth_middleware.go.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from support.lakefs_model import PREFIX, Model, NotFound
from support.loopback import free_port

AUTH_FAILED = "error authenticating request"  # auth.ErrAuthenticatingRequest
LOCAL_PRESIGN = "local adapter presigned URL: operation not supported"  # block/local GetPreSignedURL
TASK_PREFIX, NANOID = "GCPC", string.ascii_letters + string.digits + "_-"  # catalog.NewTaskID


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Fault:
    target: str  # an endpoint name (see ENDPOINTS) or a regex searched in the path after /api/v1
    status: int
    times: int | None  # None: until cleared
    message: str


@dataclass
class Task:
    id: str
    repo: str
    updated: datetime
    polls_left: int  # status polls still answered "not completed"
    result: dict | None = None
    error: str | None = None


@dataclass
class StandIn:
    """lakeFS's API over `model`, once `start()`ed: `endpoint` is http://127.0.0.1:PORT (no /api/v1)."""

    model: Model
    access_key_id: str = "AKIAIOSFODNN7EXAMPLE"
    secret_access_key: str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    async_pending_polls: int = 0  # an async prepare answers "not completed" to this many polls first
    local_presign_quirk: bool = True  # see _prepare_commits
    calls: Counter = field(default_factory=Counter)  # endpoint name -> requests routed to it
    faults: list[Fault] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.port = 0
        self.lock = threading.RLock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- fault injection
    def fail(self, target: str, status: int = 500, times: int | None = None, message: str | None = None) -> None:
        """The next `times` requests (all, when None) to `target` (an endpoint name, or a regex
        searched in the path after /api/v1) answer `status` with lakeFS's error body."""
        self.faults.append(Fault(target, status, times, message or f"injected failure ({status})"))

    def clear_faults(self) -> None:
        self.faults.clear()

    def _fault(self, name: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.target == name or (fault.target not in ENDPOINTS and re.search(fault.target, path)):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                return fault
        return None

    # --- the server
    def start(self) -> StandIn:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
        app.include_router(_router(self), prefix="/api/v1")

        @app.exception_handler(ApiError)
        async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
            return error(exc.status, exc.message)

        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="lakefs-standin")
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the lakeFS stand-in did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(10)  # type: ignore[union-attr]
            self._server = None


@contextmanager
def running_standin(local_path: Path | None = None, **options: Any) -> Iterator[StandIn]:
    """A started stand-in over a fresh model (`local_path`: the local blockstore's root, for
    local:// namespaces); Model options (range_size, uncommitted_page_size) and StandIn options
    by name."""
    model_options = {k: options.pop(k) for k in ("range_size", "uncommitted_page_size") if k in options}
    standin = StandIn(Model(local_path, **model_options), **options).start()
    try:
        yield standin
    finally:
        standin.stop()


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


def go_time(when: datetime) -> str:
    """Go's time.Time in JSON (RFC 3339 with nanoseconds, trailing zeros dropped)."""
    text = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "Z"


ENDPOINTS = {
    "get_repository": ("GET", "/repositories/{repository}"),
    "get_gc_rules": ("GET", "/repositories/{repository}/settings/gc_rules"),
    "internal_get_gc_rules": ("GET", "/repositories/{repository}/gc/rules"),
    "prepare_commits": ("POST", "/repositories/{repository}/gc/prepare_commits"),
    "prepare_commits_async": ("POST", "/repositories/{repository}/gc/prepare_commits/async"),
    "prepare_commits_status": ("GET", "/repositories/{repository}/gc/prepare_commits/status"),
    "prepare_uncommitted": ("POST", "/repositories/{repository}/gc/prepare_uncommited"),  # sic
    "get_meta_range": ("GET", "/repositories/{repository}/metadata/meta_range/{meta_range}"),
    "get_range": ("GET", "/repositories/{repository}/metadata/range/{range}"),
}


def _router(s: StandIn) -> APIRouter:
    def guard(request: Request) -> None:
        """Count, authenticate (basic auth; a missing or wrong key is 401 either way), inject."""
        name = request.scope["route"].name
        path = request.url.path.removeprefix("/api/v1")
        with s.lock:
            s.calls[name] += 1
            fault = s._fault(name, path)
        header = request.headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        try:
            key, _, secret = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            key = secret = ""
        if scheme.lower() != "basic" or (key, secret) != (s.access_key_id, s.secret_access_key):
            raise ApiError(401, AUTH_FAILED)
        if fault is not None:
            raise ApiError(fault.status, fault.message)

    router = APIRouter(dependencies=[Depends(guard)])
    handlers = _Handlers(s)
    for name, (method, path) in ENDPOINTS.items():
        router.add_api_route(path, getattr(handlers, name), methods=[method], name=name)
    return router


class _Handlers:
    def __init__(self, s: StandIn):
        self.s = s

    def _repo(self, repository: str):
        try:
            return self.s.model.repo(repository)
        except NotFound as e:
            raise ApiError(404, str(e)) from None

    def get_repository(self, repository: str) -> JSONResponse:
        with self.s.lock:
            r = self._repo(repository)
            body = {
                "creation_date": int(r.created.timestamp()),
                "default_branch": r.default_branch,
                "id": r.name,
                "storage_id": "",
                "storage_namespace": r.storage_namespace,
                "read_only": False,
            }
        return JSONResponse(body)

    def get_gc_rules(self, repository: str) -> JSONResponse:
        with self.s.lock:
            self._repo(repository)
            try:
                default, branches = self.s.model.gc_rules(repository)
            except NotFound as e:
                raise ApiError(404, str(e)) from None
        rules = [{"branch_id": b, "retention_days": d} for b, d in branches.items()]
        # Go appends to a nil slice: no branch rules encode as null, not []
        return JSONResponse({"default_retention_days": default, "branches": rules or None})

    def internal_get_gc_rules(self, repository: str) -> JSONResponse:
        return self.get_gc_rules(repository)  # InternalGetGarbageCollectionRules calls GetGCRules

    def _prepare(self, repository: str) -> dict:
        self._repo(repository)
        try:
            return self.s.model.prepare_commits(repository)
        except NotFound as e:
            raise ApiError(404, str(e)) from None

    def prepare_commits(self, repository: str) -> Response:
        with self.s.lock:
            run = self._prepare(repository)
            ns = self.s.model.repo(repository).ns
        body = {
            "run_id": run["run_id"],
            "gc_commits_location": run["gc_commits_location"],
            "gc_addresses_location": run["gc_addresses_location"],
        }
        if ns.scheme == "local" and self.s.local_presign_quirk:
            # lakeFS presigns the CSV's URL; the local adapter cannot, and the handler writes that
            # error (400) and then still writes its 201 answer: status 400, two JSON documents.
            first = json.dumps({"message": LOCAL_PRESIGN})
            text = first + "\n" + json.dumps({**body, "gc_commits_presigned_url": ""}) + "\n"
            return Response(text, status_code=400, media_type="application/json")
        return JSONResponse({**body, "gc_commits_presigned_url": ns.presign(run["key"])}, status_code=201)

    def prepare_commits_async(self, repository: str) -> JSONResponse:
        with self.s.lock:
            self._repo(repository)
            task = Task(TASK_PREFIX + "".join(secrets.choice(NANOID) for _ in range(20)), repository, _now(), 0)
            task.polls_left = self.s.async_pending_polls
            try:
                run = self.s.model.prepare_commits(repository)
                task.result = {k: run[k] for k in ("run_id", "gc_commits_location", "gc_addresses_location")}
                ns = self.s.model.repo(repository).ns
                if ns.scheme == "s3":  # the status presigns it; on local it fails, logged, left out
                    task.result["gc_commits_presigned_url"] = ns.presign(run["key"])
            except NotFound as e:
                task.error = str(e)  # graveler's "get gc rules: not found"
            task.updated = _now()
            self.s.tasks[task.id] = task
        return JSONResponse({"id": task.id}, status_code=202)

    def prepare_commits_status(self, repository: str, id: str | None = None) -> JSONResponse:
        with self.s.lock:
            self._repo(repository)
            if id is None:
                raise ApiError(400, 'parameter "id" in query has an error: value is required but missing')
            task = self.s.tasks.get(id)
            if task is None or task.repo != repository:
                raise ApiError(404, "not found")
            body: dict[str, Any] = {"task_id": task.id}
            if task.polls_left > 0:
                task.polls_left -= 1
                return JSONResponse({**body, "completed": False, "update_time": go_time(task.updated)})
            body.update(completed=True, update_time=go_time(task.updated))
            if task.error is not None:
                body["error"] = {"message": task.error}
            if task.result is not None:
                body["result"] = task.result
        return JSONResponse(body)

    async def prepare_uncommitted(self, repository: str, request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            token = (json.loads(raw) if raw else {}).get("continuation_token") or ""
            mark = json.loads(base64.b64decode(token, validate=True)) if token else None
        except ValueError:
            raise ApiError(400, "invalid continuation token") from None
        with self.s.lock:
            self._repo(repository)
            run_id, location, next_mark = self.s.model.prepare_uncommitted(repository, mark)
        body = {"run_id": run_id, "gc_uncommitted_location": location}
        if next_mark is not None:
            body["continuation_token"] = base64.b64encode(
                json.dumps(next_mark, separators=(",", ":")).encode()
            ).decode()
        return JSONResponse(body, status_code=201)

    def _location(self, repository: str, file_id: str) -> JSONResponse:
        with self.s.lock:
            self._repo(repository)
        location = f"{PREFIX}/{file_id}"  # TierFS.GetRemoteURI: relative to the namespace, never checked
        return JSONResponse({"location": location}, headers={"Location": location})

    def get_meta_range(self, repository: str, meta_range: str) -> JSONResponse:
        return self._location(repository, meta_range)

    def get_range(self, repository: str, range: str) -> JSONResponse:  # noqa: A002 (lakeFS's parameter)
        return self._location(repository, range)


def _now() -> datetime:
    return datetime.now(UTC)
