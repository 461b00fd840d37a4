"""lakeFS's JSON shapes, as its OpenAPI gives them and its clients validate them (strictly: dates,
sizes and counts are integers, `next_offset` is always a string)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from lakegc.errors import InvalidArgument, RefNotFound
from lakegc.repo.model import Branch, Change, Commit, Entry, RepositoryInfo, Tag

VERSION = "1.50.0"  # what we answer as lakeFS's version: plain numbers (lakefs-spec parses them)
MAX_PER_PAGE = 1000
DEFAULT_AMOUNT = 100

T = TypeVar("T")
R = TypeVar("R", Branch, Tag)


class Pagination(BaseModel):
    has_more: bool
    next_offset: str
    results: int
    max_per_page: int = MAX_PER_PAGE


def page(
    items: Iterable[T], key: Callable[[T], str], *, prefix: str = "", after: str = "", amount: int | None = None
) -> tuple[list[T], Pagination]:
    """One page of `items` (sorted by `key`): those with `key` starting with `prefix` and greater
    than `after`, at most `amount` (lakeFS's default 100, at most 1000). Reads `items` only as far
    as the page and one more item (to tell whether there is more)."""
    size = DEFAULT_AMOUNT if not amount or amount <= 0 else min(amount, MAX_PER_PAGE)
    wanted = (item for item in items if key(item).startswith(prefix) and key(item) > after)
    chosen = list(itertools.islice(wanted, size + 1))
    more = len(chosen) > size
    chosen = chosen[:size]
    return chosen, Pagination(has_more=more, next_offset=key(chosen[-1]) if more else "", results=len(chosen))


def listed(
    items: Iterable[T],
    key: Callable[[T], str],
    doc: Callable[[T], dict[str, Any]],
    *,
    prefix: str = "",
    after: str = "",
    amount: int | None = None,
) -> dict[str, Any]:
    """One page of `items` as lakeFS lists them: `{"pagination": ..., "results": [doc(item), ...]}`."""
    found, pagination = page(items, key, prefix=prefix, after=after, amount=amount)
    return listing([doc(item) for item in found], pagination)


class RepositoryCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    storage_namespace: str
    default_branch: str = "main"
    sample_data: bool = False
    read_only: bool = False


def repository(info: RepositoryInfo) -> dict[str, Any]:
    return {
        "id": info.name,
        "creation_date": int(info.created_at.timestamp()),
        "default_branch": info.default_branch,
        "storage_namespace": lakefs_namespace(info.storage_namespace),
        "read_only": False,
    }


def lakefs_namespace(location: str) -> str:
    """Our namespace in lakeFS's schemes: a folder is `local:///abs/path` (the clients refuse `file://`)."""
    return "local://" + location.removeprefix("file://") if location.startswith("file://") else location


def listing(results: list[dict[str, Any]], pagination: Pagination) -> dict[str, Any]:
    return {"pagination": pagination.model_dump(), "results": results}


STORAGE_CONFIG = {
    "blockstore_type": "local",
    "blockstore_namespace_example": "local:///data/lakes/my-repo",
    "blockstore_namespace_ValidityRegex": "^(local|s3)://",
    "pre_sign_support": False,
    "pre_sign_support_ui": False,
    "import_support": False,
    "import_validity_regex": "^(local|s3)://",
}


def ref(name: str, commit_id: str) -> dict[str, Any]:
    return {"id": name, "commit_id": commit_id}


def branch(b: Branch) -> dict[str, Any]:
    return ref(b.name, b.head)


def tag(t: Tag) -> dict[str, Any]:
    return ref(t.name, t.commit_id)


def named(refs: Iterable[R], name: str, kind: str, repository: str) -> R:
    """The branch or tag called `name` among `refs` (lakeFS reads one by name; the repository lists them)."""
    found = next((r for r in refs if r.name == name), None)
    if found is None:
        raise RefNotFound(f"{kind} {name!r} not found in repository {repository!r}")
    return found


def commit(c: Commit) -> dict[str, Any]:
    return {
        "id": c.id,
        "parents": list(c.parents),
        "committer": "",
        "message": c.message,
        "creation_date": int(c.creation_date.timestamp()),
        "meta_range_id": c.metarange_id,
        "metadata": {str(k): str(v) for k, v in c.metadata.items()},
    }


def diff(change: Change) -> dict[str, Any]:
    entry = change.right or change.left
    found: dict[str, Any] = {"type": str(change.type), "path": change.path, "path_type": "object"}
    if entry is not None:
        found["size_bytes"] = entry.size
    return found


class BranchCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    source: str
    force: bool = False
    hidden: bool = False


class TagCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    ref: str
    force: bool = False


class CommitCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    message: str
    metadata: dict[str, str] | None = None
    date: int | None = None
    allow_empty: bool = False
    force: bool = False


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    message: str | None = None
    metadata: dict[str, str] | None = None
    strategy: str | None = None
    force: bool = False
    allow_empty: bool = False
    squash_merge: bool = False


class RevertCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    ref: str
    parent_number: int = 0
    force: bool = False
    allow_empty: bool = False


class CherryPickCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    ref: str
    parent_number: int | None = None
    force: bool = False
    allow_empty: bool = False


class ResetCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    path: str | None = None
    force: bool = False


def object_stats(entry: Entry, physical_address: str, *, with_metadata: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {
        "path": entry.path,
        "path_type": "object",
        "physical_address": lakefs_namespace(physical_address),
        "checksum": entry.checksum,
        "mtime": int(entry.mtime.timestamp()),
        "size_bytes": entry.size,
        "content_type": "application/octet-stream",
    }
    if with_metadata:
        found["metadata"] = {str(k): str(v) for k, v in json.loads(entry.metadata or "{}").items()}
    return found


def common_prefix(path: str) -> dict[str, Any]:
    return {"path": path, "path_type": "common_prefix", "physical_address": "", "checksum": "", "mtime": 0}


def grouped(items: Iterable[T], key: Callable[[T], str], prefix: str, delimiter: str) -> Iterator[tuple[str, T | None]]:
    """A listing (or a diff) under `prefix`, from `items` sorted by path: with a delimiter, what
    lies deeper than the next one becomes one common prefix (item None), as lakeFS and S3 list.
    Lazy: the paths sharing a common prefix are next to each other in sorted order, so each prefix
    is given once, in order, without holding the listing."""
    last_prefix = None
    for item in items:
        path = key(item)
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        cut = rest.find(delimiter) if delimiter else -1
        if cut < 0:
            yield path, item
            continue
        common = prefix + rest[: cut + len(delimiter)]
        if common != last_prefix:
            last_prefix = common
            yield common, None


def diff_prefix(path: str) -> dict[str, Any]:
    return {"type": "prefix_changed", "path": path, "path_type": "common_prefix"}


def diff_page(changes: list[Change], *, prefix: str, after: str, amount: int | None, delimiter: str) -> dict[str, Any]:
    """One page of a diff, common prefixes grouped under `delimiter` as lakeFS gives them."""
    found, pagination = page(
        grouped(changes, lambda c: c.path, prefix, delimiter), lambda pair: pair[0], after=after, amount=amount
    )
    results = [diff_prefix(path) if c is None else diff(c) for path, c in found]
    return listing(results, pagination)


class RangeNotSatisfiable(Exception):
    pass


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive byte range a `Range: bytes=...` header asks of an object of `size` bytes (None:
    the whole object); RangeNotSatisfiable when it starts past the end. One range only."""
    if not header:
        return None
    unit, _, spec = header.partition("=")
    first, dash, last = spec.strip().partition("-")
    if unit.strip() != "bytes" or not dash or "," in spec or not (first.isdigit() or last.isdigit()):
        raise InvalidArgument(f"invalid Range header {header!r}: one range, bytes=START-END, START- or -SUFFIX")
    if not first:  # the last N bytes
        if int(last) == 0 or size == 0:
            raise RangeNotSatisfiable
        return max(size - int(last), 0), size - 1
    start = int(first)
    if start >= size:
        raise RangeNotSatisfiable
    end = min(int(last), size - 1) if last else size - 1
    if last and int(last) < start:
        raise InvalidArgument(f"invalid Range header {header!r}: it ends before it starts")
    return start, end


class PathList(BaseModel):
    paths: list[str]


class ObjectCopyCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    src_path: str
    src_ref: str | None = None
    force: bool = False
    shallow: bool = False


class StagingLocation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    physical_address: str | None = None
    presigned_url: str | None = None
    presigned_url_expiry: int | None = None


class StagingMetadata(BaseModel):
    model_config = ConfigDict(extra="ignore")
    staging: StagingLocation
    checksum: str
    size_bytes: int
    user_metadata: dict[str, str] | None = None
    content_type: str | None = None
    mtime: int | None = None
    force: bool = False
