"""A lakeFS storage namespace as lakeFS's block adapters see it: `local://x/y` under the local
blockstore's path (lakeFS's `blockstore.local.path`), or `s3://bucket/prefix` through boto3 with the
process's AWS_* variables."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3


@dataclass
class Namespace:
    uri: str  # the repository's storage namespace, as given
    local_path: Path | None  # the local blockstore's root (local:// namespaces only)

    def __post_init__(self) -> None:
        parsed = urlparse(self.uri)
        if parsed.scheme not in ("local", "s3"):
            raise ValueError(f"unsupported storage namespace {self.uri!r}: local:// or s3:// only")
        if parsed.scheme == "local" and self.local_path is None:
            raise ValueError("a local:// namespace needs the stand-in's local_path")
        self.scheme = parsed.scheme
        # block.resolveRelative: the namespace's host and path, trailing slash dropped
        self.root = (parsed.netloc + parsed.path).rstrip("/")
        self._s3: Any = None

    # --- lakeFS's QualifiedKey.Format(): the full location answered to clients
    def location(self, key: str) -> str:
        if self.scheme == "local":  # local.QualifiedKey: path.Join(blockstore path, namespace, key)
            joined = posixpath.join(str(self.local_path), self.root, key)
            return "local://" + posixpath.normpath(joined) + ("/" if key.endswith("/") else "")
        return f"s3://{self.root}/{key}"  # block.formatPathWithNamespace

    def normalized(self) -> str:
        """catalog.normalizeStorageNamespace: the namespace string with one trailing slash."""
        return self.uri if self.uri.endswith("/") else self.uri + "/"

    # --- bytes
    def put(self, key: str, data: bytes) -> None:
        """Write `key` relative to the namespace."""
        if self.scheme == "local":
            path = self.local_path / self.root / key  # type: ignore[operator]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        else:
            bucket, _, prefix = self.root.partition("/")
            self.client().put_object(Bucket=bucket, Key=f"{prefix}/{key}" if prefix else key, Body=data)

    def get(self, key: str) -> bytes:
        if self.scheme == "local":
            return (self.local_path / self.root / key).read_bytes()  # type: ignore[operator]
        bucket, _, prefix = self.root.partition("/")
        body = self.client().get_object(Bucket=bucket, Key=f"{prefix}/{key}" if prefix else key)["Body"]
        return body.read()

    def put_uri(self, uri: str, data: bytes) -> None:
        """Write a FULL address (as imports reference): s3://bucket/key, or local://path under the
        local blockstore's root."""
        parsed = urlparse(uri)
        if parsed.scheme == "s3":
            self.client().put_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"), Body=data)
        elif parsed.scheme == "local" and self.local_path is not None:
            where = parsed.netloc + parsed.path  # local:///abs/path, or local://x/y under the root
            path = Path(where) if where.startswith("/") else self.local_path / where
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        else:
            raise ValueError(f"cannot write {uri!r}")

    def key_of(self, location: str) -> str | None:
        """The key relative to the namespace of a full location inside it, else None."""
        prefix = self.location("")
        return location[len(prefix) :] if location.startswith(prefix) else None

    def presign(self, key: str) -> str:
        bucket, _, prefix = self.root.partition("/")
        params = {"Bucket": bucket, "Key": f"{prefix}/{key}" if prefix else key}
        return self.client().generate_presigned_url("get_object", Params=params, ExpiresIn=900)

    def client(self) -> Any:
        if self._s3 is None:
            self._s3 = boto3.client("s3")  # AWS_ENDPOINT_URL, keys and region from the environment
        return self._s3
