"""Storage namespaces: parse a location, open the backend that serves it."""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote, urlparse

from lakegc.errors import InvalidArgument, ObjectNotFound
from lakegc.storage.base import DeleteOutcome, ObjectInfo, Storage, check_key, read_table
from lakegc.storage.local import LocalStorage
from lakegc.storage.s3 import S3Settings, S3Storage, split_s3

__all__ = [
    "DeleteOutcome", "ObjectInfo", "Storage", "LocalStorage", "S3Settings", "S3Storage", "check_key",
    "normalize_location", "open_storage", "read_location", "read_table", "relative_to",
]


def normalize_location(location: str) -> str:
    """Canonical form of a namespace or address: `file:///abs/path` (no trailing slash) or `s3://bucket/prefix`."""
    if location.startswith("file://"):
        parsed = urlparse(location)
        if parsed.netloc not in ("", "localhost"):
            raise InvalidArgument(f"invalid location {location!r}: file URIs must be file:///absolute/path")
        path = unquote(parsed.path)
    elif location.startswith("/"):
        path = location
    elif location.startswith(("s3://", "s3a://", "s3n://")):
        parsed = urlparse(location)
        if not parsed.netloc:
            raise InvalidArgument(f"invalid location {location!r}: no bucket")
        _refuse_dot_parts(location, parsed.path)
        prefix = parsed.path.strip("/")
        return f"s3://{parsed.netloc}" + (f"/{prefix}" if prefix else "")
    else:
        raise InvalidArgument(f"invalid location {location!r}: use an absolute path, file:///abs/path or s3://bucket/prefix")
    _refuse_dot_parts(location, path)
    return Path("/" + posixpath.normpath(path).lstrip("/")).as_uri()


def _refuse_dot_parts(location: str, path: str) -> None:
    if any(p in (".", "..") for p in path.split("/")):
        raise InvalidArgument(f"invalid location {location!r}: '.' and '..' are not allowed")


def relative_to(namespace: str, location: str) -> str | None:
    """The key of `location` inside `namespace`, or None when it lies outside (both normalised)."""
    if location.startswith(namespace + "/"):
        return location[len(namespace) + 1:]
    return None


def open_storage(namespace: str) -> Storage:
    namespace = normalize_location(namespace)
    if namespace.startswith("file://"):
        return LocalStorage(unquote(urlparse(namespace).path))
    return S3Storage(namespace)


def read_location(location: str) -> bytes:
    """Read an object by full URI (addresses linked from outside the namespace)."""
    location = normalize_location(location)
    if location.startswith("file://"):
        try:
            return Path(unquote(urlparse(location).path)).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(f"{location} does not exist") from None
    bucket, key = split_s3(location)
    return S3Storage(f"s3://{bucket}").read(key)
