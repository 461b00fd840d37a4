"""No storage request after a delete round's deadline, the store client's own retries included.

A delete round may send requests until its deadline (`repogc.lease.Lease.deadline`): the run's
lease is sure only until then. lakegc's delete loop checks the deadline before each batch, but an
S3 client retries a failed request by itself (backoff, several attempts, long timeouts), and such a
retry could go out well after the deadline. `sends_until` marks the thread's calls with the
deadline; the S3 client's `before-send` hook (`refuse_late`) refuses any request, first or retried,
once it has passed, and the keys it would have deleted are tried in a later round.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_deadline = threading.local()


class LateRequest(Exception):
    """A request a delete round would have sent after its deadline."""


@contextmanager
def sends_until(deadline: float) -> Iterator[None]:
    """Storage requests made in this thread inside the block are refused from `deadline` (epoch s)."""
    before = getattr(_deadline, "value", None)
    _deadline.value = deadline
    try:
        yield
    finally:
        _deadline.value = before


def refuse_late(**_: object) -> None:
    """A `before-send` hook: raise before a request leaves once this thread's deadline has passed."""
    deadline = getattr(_deadline, "value", None)
    if deadline is not None and time.time() >= deadline:
        raise LateRequest("not sent: the delete round's deadline had passed")
