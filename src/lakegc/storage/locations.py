"""Locations of namespaces and objects, in one canonical form, and compared as they really are.

`file:///abs/path` (no trailing slash) and `s3://bucket/prefix` are the canonical forms; `s3a://`
and `s3n://` are `s3://`. A local location is compared after resolving its symlinks: a folder
reached through a link into another one *is* that other one. String prefixes are not containment:
`/lake/ns2` does not lie inside `/lake/ns`.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlparse

from lakegc.errors import InvalidArgument


def normalize_location(location: str) -> str:
    """Canonical form of a namespace or address: `file:///abs/path` (no trailing slash) or
    `s3://bucket/prefix`. lakeFS's `local:///abs/path` is the folder form too."""
    if location.startswith("local://"):
        location = "file://" + location.removeprefix("local://")
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
        raise InvalidArgument(
            f"invalid location {location!r}: use an absolute path, file:///abs/path, local:///abs/path or s3://bucket/prefix"
        )
    _refuse_dot_parts(location, path)
    return Path("/" + posixpath.normpath(path).lstrip("/")).as_uri()


def _refuse_dot_parts(location: str, path: str) -> None:
    if any(p in (".", "..") for p in path.split("/")):
        raise InvalidArgument(f"invalid location {location!r}: '.' and '..' are not allowed")


def relative_to(namespace: str, location: str) -> str | None:
    """The key of `location` inside `namespace`, or None when it lies outside (both normalised)."""
    if location.startswith(namespace + "/"):
        return location[len(namespace) + 1 :]
    return None


def real_location(location: str) -> str:
    """The location as it really is: normalised, and for a local path with every symlink resolved
    (also in a path that does not exist yet: its existing part is resolved)."""
    normal = normalize_location(location)
    if not normal.startswith("file://"):
        return normal
    return Path(os.path.realpath(unquote(urlparse(normal).path))).as_uri()


def within(outer: str, inner: str) -> bool:
    """Is `inner` the same place as `outer` or below it (both normalised or real)?"""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def namespace_key_of(namespace: str, location: str) -> str | None:
    """The key `location` (normalised) names in `namespace`, as written or through symlinks (an
    alias folder linked to the namespace, a symlinked file inside it), or None when it lies outside."""
    key = relative_to(namespace, location)
    if key is None and location.startswith("file://") and namespace.startswith("file://"):
        key = relative_to(real_location(namespace), real_location(location))
    return key
