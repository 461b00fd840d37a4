"""What lakeFS serves under a ref: its log, a merge of one ref into a branch, and the diff of two refs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from lakegc.errors import InvalidArgument
from lakegc.server import models
from lakegc.server.deps import ServedLake
from lakegc.server.models import MergeRequest
from lakegc.timeutil import as_utc

router = APIRouter()


@router.get("/repositories/{repository}/refs/{ref}/commits")
def log(
    lake: ServedLake,
    repository: str,
    ref: str,
    after: str = "",
    amount: int | None = None,
    objects: Annotated[list[str] | None, Query()] = None,
    prefixes: Annotated[list[str] | None, Query()] = None,
    limit: bool = False,
    first_parent: bool = False,
    since: datetime | None = None,
    stop_at: str | None = None,
) -> dict[str, Any]:
    """The log from `ref` in lakeFS's order, paged by commit id (`after` is the last id seen)."""
    commits = lake.repository(repository).log(
        ref,
        first_parent=first_parent,
        since=None if since is None else as_utc(since),
        stop_at=stop_at or None,
        paths=objects or (),
        prefixes=prefixes or (),
    )
    ids = [c.id for c in commits]
    start = ids.index(after) + 1 if after in ids else 0
    return models.listed(commits[start:], lambda c: c.id, models.commit, amount=amount)


@router.post("/repositories/{repository}/refs/{source}/merge/{destination}")
def merge(
    lake: ServedLake, repository: str, source: str, destination: str, body: MergeRequest | None = None
) -> dict[str, Any]:
    body = body or MergeRequest()
    made = lake.repository(repository).merge(source, destination, message=body.message, allow_empty=body.allow_empty)
    return {"reference": made.id}


@router.get("/repositories/{repository}/refs/{left}/diff/{right}")
def diff_refs(
    lake: ServedLake,
    repository: str,
    left: str,
    right: str,
    prefix: str = "",
    after: str = "",
    amount: int | None = None,
    delimiter: str = "",
    diff_type: Annotated[str, Query(alias="type")] = "three_dot",
    include_right_stats: bool = False,
) -> dict[str, Any]:
    """lakeFS's default is `three_dot`: what `right` changed since its merge base with `left`."""
    if diff_type not in ("two_dot", "three_dot"):
        raise InvalidArgument(f"invalid diff type {diff_type!r}: two_dot or three_dot")
    changes = lake.repository(repository).diff(left, right, three_dot=diff_type == "three_dot")
    return models.diff_page(changes, prefix=prefix, after=after, amount=amount, delimiter=delimiter)
