"""`lakegc serve`: the repositories of one metastore over lakeFS's REST API, at /api/v1.

Every route calls the repository API the CLI calls (`lakegc.repo.repository`); this layer only
translates: lakeFS's paths, query parameters and JSON shapes in, lakegc's typed values and errors
out. Errors are `{"message": ...}` with lakeFS's status codes; nothing a client sends gives a 500.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from lakegc.errors import LakegcError
from lakegc.redact import mask_secrets
from lakegc.repo.repository import Lake
from lakegc.server import routes
from lakegc.server.statuses import status_of
from lakegc.server.users import Authenticator, User
from lakegc.storage import real_location

log = logging.getLogger("lakegc.serve")


class Unauthorized(Exception):
    pass


class BasicAuth:
    """ASGI middleware: every /api/v1 request but the health check carries a valid key pair, checked
    before anything reads its body; otherwise a 401 with a JSON body, and nothing runs."""

    def __init__(self, app: ASGIApp, auth: Authenticator):
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC or not scope["path"].startswith("/api/v1"):
            await self.app(scope, receive, send)
            return
        try:
            header = Headers(scope=scope).get("authorization", "")
            scope.setdefault("state", {})["user"] = await run_in_threadpool(self._user, header)
        except Unauthorized as exc:
            response = JSONResponse(
                {"message": str(exc)}, status_code=401, headers={"WWW-Authenticate": 'Basic realm="lakegc"'}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _user(self, header: str) -> User:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic" or not encoded:
            raise Unauthorized("missing or unsupported credentials: use basic auth with an access key pair")
        try:
            key_id, sep, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthorized("malformed basic auth header") from None
        found = self.auth.user(key_id, secret) if sep else None
        if found is None:
            raise Unauthorized("invalid access key id or secret")
        return found


PUBLIC = {"/api/v1/healthcheck"}


def create_app(lake: Lake, allowed_external_prefixes: Sequence[str] = ()) -> FastAPI:
    """The server's app. `allowed_external_prefixes`: locations outside every namespace that staging
    links may point at (resolved here, symlinks and all)."""
    external = [real_location(prefix) for prefix in allowed_external_prefixes]
    app = FastAPI(title="lakegc", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.lake, app.state.external = lake, external  # what the routes are handed (server.deps)
    app.add_middleware(BasicAuth, auth=Authenticator(lake.metastore))

    @app.exception_handler(LakegcError)
    def _ours(_request: Request, exc: LakegcError) -> JSONResponse:
        return JSONResponse({"message": mask_secrets(str(exc))}, status_code=status_of(exc))

    @app.exception_handler(RequestValidationError)
    def _bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return JSONResponse({"message": f"invalid request: {where}: {first.get('msg', 'bad input')}"}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"message": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(ClientDisconnect)
    def _gone(request: Request, _exc: ClientDisconnect) -> Response:
        """The client hung up mid-body: nothing was staged (the object is written first, staged
        last), the partial file is removed, and there is no one left to answer."""
        log.info("client disconnected during %s %s", request.method, request.url.path)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse({"message": f"internal error: {type(exc).__name__}"}, status_code=500)

    public = APIRouter(prefix="/api/v1")

    @public.get("/healthcheck", status_code=204)
    def healthcheck() -> Response:
        return Response(status_code=204)

    app.include_router(public)
    app.include_router(routes.api)
    return app
