"""Storage namespaces: parse a location, open the backend that serves it."""

from __future__ import annotations

from typing import BinaryIO
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
    "open_location",
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
    with open_location(location) as f:
        return f.read()


def open_location(location: str) -> BinaryIO:
    """An object by full URI as a stream: read in chunks, never held whole in memory."""
    location = normalize_location(location)
    if location.startswith("file://"):
        try:
            return open(unquote(urlparse(location).path), "rb")  # noqa: SIM115 (the caller closes it)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(f"{location} does not exist") from None
    bucket, key = split_s3(location)
    return S3Storage(f"s3://{bucket}").open_read(key)
