"""lakeFS's REST API, as lakegc uses it: the repository's namespace and the GC inputs lakeFS prepares.

The only edge to a lakeFS server (through the `lakefs-sdk` client). Every failure (an error status,
an endpoint that does not answer, an answer that is not what the API promises) becomes one
`LakeFSError` line naming the call, so a run fails before anything is deleted. The calls are the
ones lakeFS's own Spark GC client makes, in the same way: the committed inputs by the asynchronous
`prepare_commits` polled to completion (the blocking form when the server answers the asynchronous
one with 500, as older servers do), the uncommitted ones followed through every continuation token.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from lakegc.errors import InvalidArgument, LakegcError, first_line
from lakegc.redact import mask_secrets

ENDPOINT_VARIABLE = "LAKECTL_SERVER_ENDPOINT_URL"
KEY_VARIABLE = "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"
SECRET_VARIABLE = "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"
API_PATH = "/api/v1"
PREPARE_TIMEOUT_S = 1200.0  # as lakeFS's own client waits for prepare_commits
_TIMEOUT = {"_request_timeout": 120.0}  # seconds, on every call
_NOT_FOUND, _SERVER_ERROR = 404, 500

T = TypeVar("T")


class LakeFSError(LakegcError):
    """lakeFS answered an error (or nothing); nothing was deleted because of it."""


@dataclass(frozen=True)
class Connection:
    """Where lakeFS answers and who asks: given options first, else lakectl's variables."""

    endpoint: str  # with /api/v1
    access_key_id: str
    secret_access_key: str

    @classmethod
    def resolve(cls, endpoint: str | None, access_key_id: str | None, secret_access_key: str | None) -> Connection:
        endpoint = endpoint or os.environ.get(ENDPOINT_VARIABLE)
        key = access_key_id or os.environ.get(KEY_VARIABLE)
        secret = secret_access_key or os.environ.get(SECRET_VARIABLE)
        if not endpoint:
            raise InvalidArgument(f"no lakeFS endpoint: give --endpoint URL or set {ENDPOINT_VARIABLE}")
        if not key or not secret:
            raise InvalidArgument(
                f"no lakeFS credentials: give --access-key-id and --secret-access-key, or set {KEY_VARIABLE} "
                f"and {SECRET_VARIABLE}"
            )
        return cls(api_endpoint(endpoint), key, secret)


def api_endpoint(endpoint: str) -> str:
    """The API's base URL from an endpoint given with or without /api/v1 (lakectl takes both)."""
    base = endpoint.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InvalidArgument(f"invalid lakeFS endpoint {endpoint!r}: an http:// or https:// URL")
    return base if base.endswith(API_PATH) else base + API_PATH


@dataclass(frozen=True)
class Prepared:
    """What a prepare call wrote: lakeFS's run id and the location of its files (None: no such file,
    e.g. `prepare_commits` of a repository with no GC rules)."""

    run_id: str
    location: str | None


class LakeFS:
    """One repository of a lakeFS server."""

    def __init__(self, connection: Connection, repository: str):
        import lakefs_sdk

        configuration = lakefs_sdk.Configuration(
            host=connection.endpoint, username=connection.access_key_id, password=connection.secret_access_key
        )
        configuration.retries = 2  # an endpoint that does not answer fails in seconds
        self.client = lakefs_sdk.ApiClient(configuration)
        self.endpoint, self.repository = connection.endpoint, repository
        self.internal = lakefs_sdk.InternalApi(self.client)

    def storage_namespace(self) -> str:
        import lakefs_sdk

        call = f"GET /repositories/{self.repository}"
        with self._asking(call):
            repo = lakefs_sdk.RepositoriesApi(self.client).get_repository(self.repository, **_TIMEOUT)
        return _answered(call, repo.storage_namespace, "a storage namespace")

    def has_gc_rules(self) -> bool:
        """Whether GC rules are set (lakeFS answers 404 when not). Read raw: lakeFS encodes rules
        with no branch rule as `"branches": null`, which the client's model refuses."""
        import lakefs_sdk

        call = f"GET /repositories/{self.repository}/settings/gc_rules"
        try:
            with self._asking(call, statuses=True):
                lakefs_sdk.RepositoriesApi(self.client).get_gc_rules_with_http_info(
                    self.repository, _preload_content=False, **_TIMEOUT
                )
        except _Status as status:
            if status.code == _NOT_FOUND:
                return False
            raise status.error from None
        return True

    def prepare_commits(self, timeout_s: float = PREPARE_TIMEOUT_S) -> Prepared:
        """`commits.csv` of the active commits; location None when the repository has no GC rules
        (then every commit is live). The asynchronous prepare first, as lakeFS's client; the
        blocking one when the server answers it 500 (lakeFS's client's fallback) or 404 (a server
        without it). No rules is only ever what lakeFS says: the blocking prepare's 404, or a failed
        task of a repository whose rules answer 404."""
        try:
            prepared = self._prepare_commits_async(timeout_s)
        except _Status as status:
            if status.code not in (_NOT_FOUND, _SERVER_ERROR):
                raise status.error from None
            prepared = self._prepare_commits_blocking()
        if prepared is None:
            return Prepared("", None)
        call = "prepare_commits"
        return Prepared(prepared.run_id or "", _answered(call, prepared.gc_commits_location, "a commits location"))

    def _prepare_commits_blocking(self) -> Any:
        call = f"POST /repositories/{self.repository}/gc/prepare_commits"
        try:
            with self._asking(call, statuses=True):
                return self.internal.prepare_garbage_collection_commits(self.repository, **_TIMEOUT)
        except _Status as blocking:
            if blocking.code == _NOT_FOUND:
                return None
            raise blocking.error from None

    def _prepare_commits_async(self, timeout_s: float) -> Any:
        """The async prepare's result, polled to completion; None: the repository has no rules."""
        call = f"POST /repositories/{self.repository}/gc/prepare_commits/async"
        with self._asking(call, statuses=True):
            task = self.internal.prepare_garbage_collection_commits_async(self.repository, **_TIMEOUT)
        task_id = _answered(call, task.id, "a task id")
        deadline, pause = time.monotonic() + timeout_s, 0.05
        status_call = f"GET /repositories/{self.repository}/gc/prepare_commits/status?id={task_id}"
        while True:
            with self._asking(status_call):
                status = self.internal.prepare_garbage_collection_commits_status(self.repository, task_id, **_TIMEOUT)
            if status.completed:
                if status.error is None:
                    return _answered(status_call, status.result, "a result")
                if not self.has_gc_rules():  # lakeFS fails the task of a repository without rules
                    return None
                raise LakeFSError(f"lakeFS {status_call}: the task failed: {_message(status.error)}")
            if time.monotonic() > deadline:
                raise LakeFSError(f"lakeFS {status_call}: not completed after {timeout_s:.0f}s")
            time.sleep(pause)
            pause = min(pause * 2, 15.0)

    def prepare_uncommitted(self) -> Prepared:
        """The uncommitted objects' Parquet files, every page written. A page that wrote nothing
        answers no location (lakeFS sets it only when it wrote a file), so the folder is the one the
        pages that wrote name: all the same, as is the run id, or the run fails."""
        import lakefs_sdk

        call = f"POST /repositories/{self.repository}/gc/prepare_uncommited"
        token: str | None = None
        run_ids, locations = set(), set()
        for _ in range(1_000_000):
            request = lakefs_sdk.PrepareGCUncommittedRequest(continuation_token=token)
            with self._asking(call):
                answer = self.internal.prepare_garbage_collection_uncommitted(self.repository, request, **_TIMEOUT)
            run_ids.add(_answered(call, answer.run_id, "a run id"))
            locations.update([answer.gc_uncommitted_location] if answer.gc_uncommitted_location else [])
            token = answer.continuation_token
            if not token:
                return Prepared(*_one_run(call, run_ids, locations))
        raise LakeFSError(f"lakeFS {call}: continuation tokens never ended")

    def metarange_location(self, metarange_id: str) -> str:
        import lakefs_sdk

        call = f"GET /repositories/{self.repository}/metadata/meta_range/{metarange_id}"
        with self._asking(call):
            uri = lakefs_sdk.MetadataApi(self.client).get_meta_range(self.repository, metarange_id, **_TIMEOUT)
        return _answered(call, uri.location, "a location")

    def close(self) -> None:
        self.client.close()

    @contextmanager
    def _asking(self, call: str, statuses: bool = False) -> Iterator[None]:
        """One API call: an error status becomes a LakeFSError naming it (with `statuses`, a `_Status`
        the caller decides on); an endpoint that does not answer, one naming the endpoint."""
        from lakefs_sdk.exceptions import ApiException, OpenApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            error = LakeFSError(f"lakeFS {call} answered {exc.status}: {_message(exc)}")
            if statuses:
                raise _Status(exc.status or 0, error) from None
            raise error from None
        except (HTTPError, OSError) as exc:
            raise LakeFSError(
                f"lakeFS at {mask_secrets(self.endpoint)} did not answer {call}: {first_line(exc)}"
            ) from None
        except (OpenApiException, ValueError) as exc:  # an answer the API does not promise
            raise LakeFSError(f"lakeFS {call}: an answer lakegc cannot read: {first_line(exc)}") from None


class _Status(Exception):
    """An error status the caller decides on (prepare_commits: 404 is "no GC rules", 500 falls back)."""

    def __init__(self, code: int, error: LakeFSError):
        super().__init__(str(error))
        self.code, self.error = code, error


def _one_run(call: str, run_ids: set[str], locations: set[str]) -> tuple[str, str | None]:
    """The run id and folder every page of one prepare run named."""
    if len(run_ids) > 1 or len({location.rstrip("/") for location in locations}) > 1:
        raise LakeFSError(f"lakeFS {call}: its pages named different runs or folders ({sorted(run_ids)[:2]})")
    return run_ids.pop(), (sorted(locations)[0] if locations else None)


def _answered(call: str, value: T | None, what: str) -> T:
    if value is None or value == "":
        raise LakeFSError(f"lakeFS {call} answered without {what}")
    return value


def _message(error: Any) -> str:
    """lakeFS's own message from an error body (`{"message": ...}`), else the status's reason."""
    import json

    body = getattr(error, "body", None)
    if isinstance(body, (bytes, str)) and body:
        try:
            message = json.loads(body).get("message")
        except (ValueError, AttributeError):
            message = None
        if message:
            return first_line(str(message))
    message = getattr(error, "message", None) or getattr(error, "reason", None) or str(error)
    return first_line(str(message))
