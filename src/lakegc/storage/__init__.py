"""Storage namespaces: parse a location, open the backend that serves it."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from lakegc.errors import ObjectNotFound
from lakegc.storage.base import DeleteOutcome, ObjectInfo, Storage, check_key, read_table
from lakegc.storage.local import LocalStorage
from lakegc.storage.locations import namespace_key_of, normalize_location, real_location, relative_to, within
from lakegc.storage.s3 import S3Settings, S3Storage, split_s3

__all__ = [
    "DeleteOutcome",
    "ObjectInfo",
    "Storage",
    "LocalStorage",
    "S3Settings",
    "S3Storage",
    "check_key",
    "namespace_key_of",
    "normalize_location",
    "open_storage",
    "read_location",
    "read_table",
    "real_location",
    "relative_to",
    "within",
]


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
