"""The HTTP status lakeFS gives each of our errors."""

from __future__ import annotations

from lakegc import errors
from lakegc.errors import LakegcError
from lakegc.repo.fence import FencedByGc

# lakeFS's status for each of our errors (the most specific class listed first wins).
STATUS: list[tuple[type[LakegcError], int]] = [
    (errors.ObjectGone, 410),
    (errors.NotFound, 404),
    (errors.ObjectNotFound, 404),
    (errors.AlreadyExists, 409),
    (errors.MergeConflict, 409),
    (errors.ConcurrentUpdate, 409),
    (errors.PreconditionFailed, 412),
    (FencedByGc, 423),  # locked until the sweep ends: not 409, which lakeFS's clients read as "exists"
    (errors.MetastoreError, 503),
    (errors.CorruptMetadata, 500),
]


def status_of(exc: LakegcError) -> int:
    """The HTTP status of one of our errors: what the client sent is wrong (400) unless listed."""
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 400)
