"""Objects as both the object routes and the staging routes take and give them: a write's
precondition and user metadata from lakeFS's headers, and an entry's stats with its physical
address. Pure functions of the request's headers and the entry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakegc.errors import InvalidArgument
from lakegc.repo.model import Entry, Precondition
from lakegc.repo.repository import Repository
from lakegc.server import models

USER_META = "x-lakefs-meta-"


def precondition(headers: Mapping[str, str]) -> Precondition | None:
    """The write's condition from `If-None-Match: *` (the path must be absent) and `If-Match: ETAG`."""
    none_match = headers.get("if-none-match", "").strip()
    match = headers.get("if-match", "").strip()
    if none_match and none_match != "*":
        raise InvalidArgument("If-None-Match supports only '*'")
    if not none_match and not match:
        return None
    return Precondition(absent=bool(none_match), checksum=match or None)


def user_metadata(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The object's user metadata, sent as `X-Lakefs-Meta-NAME: VALUE` headers (None: none sent)."""
    found = {name.removeprefix(USER_META): value for name, value in headers.items() if name.startswith(USER_META)}
    return found or None


def stats(repo: Repository, entry: Entry, with_metadata: bool = True) -> dict[str, Any]:
    return models.object_stats(entry, repo.physical_address(entry), with_metadata=with_metadata)
