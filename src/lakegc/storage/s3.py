"""A namespace under an S3 prefix (AWS or any S3-API server), through boto3.

Why boto3: `DeleteObjects` answers per key, and GC must know exactly which keys failed (they are
retried, then recorded, never counted as deleted); botocore's adaptive retry mode backs off on
503 SlowDown, throttling and dropped connections, and paces a client's requests to what the store
takes while it throttles; its transfer manager does multipart uploads. Keys a `DeleteObjects`
answer reports as throttled are paced by the sweep itself (`engine.delete`).
Listing and deleting run 1,000 keys a request in every client, so the client's own speed matters
little next to the requests themselves, which GC spreads over the Spark executors.

A `S3Storage` pickles with its settings and without its client: Spark executors build their own
client (one per process) from the settings the driver read, so they need no AWS variables of their own.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from lakegc.errors import LakegcError, NamespaceError, ObjectNotFound, first_line
from lakegc.storage.base import DeleteOutcome, ObjectInfo, check_key, listing_batch
from lakegc.storage.deadline import LateRequest, refuse_late

if TYPE_CHECKING:
    import pyarrow as pa
    from mypy_boto3_s3 import S3Client

DELETE_BATCH = 1_000  # the most DeleteObjects takes
MULTIPART_THRESHOLD = 16 << 20
_MISSING = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where and as whom to reach S3, read once on the driver from the usual AWS variables. Keys
    left unset fall back to boto3's own chain (profiles, instance roles) wherever the client runs."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    max_attempts: int = 6

    @classmethod
    def from_env(cls) -> S3Settings:
        env = os.environ
        return cls(
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            access_key_id=env.get("AWS_ACCESS_KEY_ID"),
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
            session_token=env.get("AWS_SESSION_TOKEN"),
            max_attempts=int(env.get("AWS_MAX_ATTEMPTS") or 6),
        )

    def __repr__(self) -> str:  # keep secrets out of logs and tracebacks
        return f"S3Settings(endpoint_url={self.endpoint_url!r}, region={self.region!r})"


_clients: dict[S3Settings, Any] = {}
_clients_lock = threading.Lock()


def s3_client(settings: S3Settings) -> S3Client:
    """One client per settings and process (clients are thread-safe and slow to build)."""
    with _clients_lock:
        client = _clients.get(settings)
        if client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                region_name=settings.region,
                connect_timeout=5,
                read_timeout=60,
                retries={"mode": "adaptive", "max_attempts": settings.max_attempts},
                max_pool_connections=32,
                s3={"addressing_style": "path"} if settings.endpoint_url else None,
            )
            client = _clients[settings] = boto3.session.Session().client(
                "s3",
                endpoint_url=settings.endpoint_url,
                config=config,
                aws_access_key_id=settings.access_key_id,
                aws_secret_access_key=settings.secret_access_key,
                aws_session_token=settings.session_token,
            )
            client.meta.events.register("before-send.s3", refuse_late)  # no request after a round's deadline
        return client


def split_s3(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> ("bucket", "a/b")."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def describe(exc: Exception) -> str:
    """One line for an S3 or connection failure."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"{err.get('Code', '?')}: {err.get('Message') or status}"
    return first_line(exc, 1000)


def _code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


class S3Storage:
    def __init__(self, uri: str, settings: S3Settings | None = None):
        self.uri = uri
        self.bucket, prefix = split_s3(uri)
        self.prefix = f"{prefix}/" if prefix else ""
        self.settings = settings or S3Settings.from_env()
        self._client: S3Client | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"], state["settings"])  # type: ignore[misc]

    @property
    def client(self) -> S3Client:
        if self._client is None:
            self._client = s3_client(self.settings)
        return self._client

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _info(self, listed: dict[str, Any]) -> ObjectInfo:
        """An entry of a listing page as an object of this namespace."""
        return ObjectInfo(listed["Key"][len(self.prefix) :], listed["Size"], listed["LastModified"].astimezone(UTC))

    def _fail(self, what: str, exc: Exception) -> NamespaceError:
        return NamespaceError(f"namespace {self.uri}: {what} failed: {describe(exc)}")

    def prepare(self) -> None:
        """The bucket must exist and answer (buckets are infrastructure: lakegc never creates one)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _code(exc) in _MISSING | {"NoSuchBucket"}:
                raise NamespaceError(f"namespace {self.uri}: bucket {self.bucket!r} does not exist") from None
            raise self._fail("opening the bucket", exc) from None
        except BotoCoreError as exc:
            raise self._fail("opening the bucket", exc) from None

    def full_uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def list(self, prefix: str = "", *, recursive: bool = True) -> Iterator[ObjectInfo]:
        """Objects under `prefix` (a folder prefix, '' for the root), in key order, page by page."""
        for page in self._pages(prefix, recursive):
            for obj in self._addressable(page):
                yield self._info(obj)

    def list_batches(self, prefix: str = "", *, recursive: bool = True) -> Iterator[pa.RecordBatch]:
        for page in self._pages(prefix, recursive):
            if found := self._addressable(page):
                yield listing_batch([self._info(obj) for obj in found])

    def _addressable(self, page: dict[str, Any]) -> list[dict[str, Any]]:
        """The page's objects whose keys name one object unambiguously. A hand-written key with an
        empty, `.` or `..` segment (`data/s//x`, `data/s/../x`) is left out: a store or a proxy
        that normalises paths would read or delete another object for it, so GC never touches it."""
        start = len(self.prefix)
        return [obj for obj in page.get("Contents", ()) if _valid_key(obj["Key"][start:])]

    def is_empty(self) -> bool:
        return next(iter(self.list()), None) is None

    def list_dirs(self, prefix: str = "") -> list[str]:
        start = len(self.prefix) + len(prefix)
        names = (
            p["Prefix"][start:].rstrip("/")
            for page in self._pages(prefix, False)
            for p in page.get("CommonPrefixes", ())
        )
        return sorted(name for name in names if _valid_key(name))  # `data//` is no folder of ours

    def _pages(self, prefix: str, recursive: bool) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        full = self.prefix + (check_key(prefix.rstrip("/")) + "/" if prefix else "")
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full}
        if not recursive:
            args["Delimiter"] = "/"
        try:
            yield from self.client.get_paginator("list_objects_v2").paginate(**args)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(f"listing {full or '/'}", exc) from None

    def read(self, key: str) -> bytes:
        with self.open_read(key) as body:
            return body.read()

    def open_read(self, key: str) -> BinaryIO:
        return self._get(key)["Body"]

    def read_range(self, key: str, start: int, length: int) -> bytes:
        """`length` bytes from `start` (one ranged GET): readers of big Parquet files (a Delta
        checkpoint of millions of adds) fetch the footer and the columns they need, not the file."""
        if length <= 0:
            return b""
        with self._get(key, Range=f"bytes={start}-{start + length - 1}")["Body"] as body:
            return body.read()

    def _get(self, key: str, **args: str) -> dict:
        """A GET's answer; a missing object is ObjectNotFound, any other failure one error line."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key), **args)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                raise ObjectNotFound(f"{self.full_uri(key)} does not exist") from None
            raise self._fail(f"reading {key}", exc) from None
        except BotoCoreError as exc:
            raise self._fail(f"reading {key}", exc) from None

    def write(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        """Small objects in one PUT with Content-MD5 (the server checks it); large ones in parts.
        Either way the MD5 of what was sent is returned as the checksum."""
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        full = self._key(key)
        source = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
        head = _read_up_to(source, MULTIPART_THRESHOLD)
        try:
            if len(head) < MULTIPART_THRESHOLD:
                digest = hashlib.md5(head, usedforsecurity=False)
                self.client.put_object(
                    Bucket=self.bucket, Key=full, Body=head, ContentMD5=base64.b64encode(digest.digest()).decode()
                )
            else:
                hashing = _Hashing(head, source)
                self.client.upload_fileobj(
                    hashing,
                    self.bucket,
                    full,
                    Config=TransferConfig(
                        multipart_threshold=MULTIPART_THRESHOLD,
                        multipart_chunksize=MULTIPART_THRESHOLD,
                        use_threads=False,
                    ),
                )
                digest = hashing.digest
            info = self.client.head_object(Bucket=self.bucket, Key=full)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(f"writing {key}", exc) from None
        return ObjectInfo(key, info["ContentLength"], info["LastModified"].astimezone(UTC), digest.hexdigest())

    def delete_many(self, keys: Iterable[str]) -> list[DeleteOutcome]:
        """Batched DeleteObjects. A key S3 reports as failed, or a batch that failed whole after the
        client's retries, comes back not ok (missing keys count as deleted, as S3 says)."""
        outcomes: list[DeleteOutcome] = []
        batch: list[str] = []
        for key in keys:
            try:
                batch.append(self._key(key))
            except LakegcError as exc:  # an invalid key fails alone, and is recorded
                outcomes.append(DeleteOutcome(key, False, str(exc)))
                continue
            if len(batch) == DELETE_BATCH:
                outcomes += self._delete_batch(batch)
                batch = []
        if batch:
            outcomes += self._delete_batch(batch)
        return outcomes

    def _delete_batch(self, full_keys: list[str]) -> list[DeleteOutcome]:
        from botocore.exceptions import BotoCoreError, ClientError

        start = len(self.prefix)
        try:
            answer = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in full_keys], "Quiet": True}
            )
        except (BotoCoreError, ClientError, LateRequest) as exc:
            return [DeleteOutcome(k[start:], False, describe(exc)) for k in full_keys]
        failed = {e["Key"]: f"{e.get('Code', '?')}: {e.get('Message', '')}".strip() for e in answer.get("Errors", ())}
        return [DeleteOutcome(k[start:], k not in failed, failed.get(k)) for k in full_keys]

    def move_many(self, moves: Iterable[tuple[str, str]]) -> list[DeleteOutcome]:
        """Move each object to a destination key of this namespace: a server-side copy marked with
        the source's ETag, then the sources deleted in batches. An object at the destination is
        never replaced, unless it is this move's own earlier copy (the marker says so), so a move
        a crash cut between copy and delete completes on a retry. A source already gone is ok.
        Outcomes are per source key, not in the order given."""
        outcomes: list[DeleteOutcome] = []
        copied: list[str] = []
        for key, destination in moves:
            try:
                outcome = self._copy_for_move(key, destination)
            except (LakegcError, LateRequest) as exc:  # an invalid key, the store failing, the round's end: recorded
                outcome = DeleteOutcome(key, False, str(exc))
            if outcome is None:
                copied.append(key)
            else:
                outcomes.append(outcome)
        return outcomes + self.delete_many(copied)

    def _copy_for_move(self, key: str, destination: str) -> DeleteOutcome | None:
        """Copy `key` to `destination` (None: copied, or copied before; the source is to go)."""
        from botocore.exceptions import BotoCoreError, ClientError

        source, target = self._key(key), self._key(destination)
        here = self._head(key)
        if here is None:
            return DeleteOutcome(key, True)  # moved before (or never there)
        marker = {MOVED_FROM_ETAG: here["ETag"].strip('"')}
        there = self._head(destination)
        if there is not None:
            if there.get("Metadata", {}).get(MOVED_FROM_ETAG) == marker[MOVED_FROM_ETAG]:
                return None
            return DeleteOutcome(key, False, f"refused: {destination} already holds another object")
        try:
            self.client.copy(
                {"Bucket": self.bucket, "Key": source},
                self.bucket,
                target,
                ExtraArgs={"Metadata": marker, "MetadataDirective": "REPLACE"},
            )
        except (BotoCoreError, ClientError) as exc:
            return DeleteOutcome(key, False, describe(exc))
        return None

    def _head(self, key: str) -> dict | None:
        """The object's HEAD answer, or None when there is none."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise self._fail(f"looking up {key}", exc) from None
        except BotoCoreError as exc:
            raise self._fail(f"looking up {key}", exc) from None

    def exists(self, key: str) -> bool:
        return self.stat(key) is not None

    def stat(self, key: str) -> ObjectInfo | None:
        info = self._head(key)
        return None if info is None else ObjectInfo(key, info["ContentLength"], info["LastModified"].astimezone(UTC))

    def facts(self, folder: str) -> dict[str, str]:
        """ETag, size and LastModified (`object_facts`) of each object directly in `folder`, as
        the listing gives them: a PUT over an object gives it a new LastModified."""
        start = len(self.prefix)
        return {
            obj["Key"][start:]: object_facts(obj["ETag"], obj["Size"], obj["LastModified"])
            for page in self._pages(folder.rstrip("/"), False)
            for obj in self._addressable(page)
        }

    def read_with_facts(self, key: str) -> tuple[bytes, str | None]:
        """One GET: its answer names the version it carries."""
        answer = self._get(key)
        with answer["Body"] as body:
            data = body.read()
        return data, object_facts(answer["ETag"], answer["ContentLength"], answer["LastModified"])


def object_facts(etag: str, size: int, modified: datetime) -> str:
    """An object's facts, the same from a listing and from a GET (whole seconds: a GET's
    Last-Modified header has no fraction)."""
    tag = etag.strip('"')
    return f"{tag}:{size}:{int(modified.timestamp())}"


MOVED_FROM_ETAG = "lakegc-moved-from-etag"  # on a moved object: the ETag of the object it was copied from


def _read_up_to(source: BinaryIO, size: int) -> bytes:
    """`size` bytes, or all there is: a pipe may hand over less than asked before its end."""
    parts, have = [], 0
    while have < size and (chunk := source.read(size - have)):
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


class _Hashing(io.RawIOBase):
    """A reader that hashes what passes through it (`head` first, then the rest of `source`)."""

    def __init__(self, head: bytes, source: BinaryIO):
        self._parts = [io.BytesIO(head), source]
        self._md5 = hashlib.md5(usedforsecurity=False)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        out = b""
        while self._parts and (size < 0 or len(out) < size):
            chunk = self._parts[0].read(-1 if size < 0 else size - len(out))
            if not chunk:
                self._parts.pop(0)
            out += chunk
        self._md5.update(out)
        return out

    @property
    def digest(self) -> hashlib._Hash:
        return self._md5


def _valid_key(key: str) -> bool:
    try:
        check_key(key)
    except LakegcError:
        return False
    return True
