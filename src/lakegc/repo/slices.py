"""Slices and object ids: where an uploaded object lands in the namespace.

Slice names sort newest first (an inverted creation time), so a listing of `data/` meets new slices
first and an incremental GC can stop at the last slice it read. A writer opens a new slice every
hour or after SLICE_MAX_OBJECTS objects.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

DATA_PREFIX = "data/"
SLICE_MAX_OBJECTS = 50_000
SLICE_MAX_AGE = timedelta(hours=1)
SLICE_EPOCH_END = 10**10  # far beyond any real timestamp in seconds


def slice_name(created: datetime) -> str:
    return f"{SLICE_EPOCH_END - int(created.timestamp()):010d}"


def slice_created(name: str) -> int:
    """Unix seconds a slice was opened, read back from its name."""
    return SLICE_EPOCH_END - int(name)


def new_slice_needed(created: datetime, objects: int, now: datetime) -> bool:
    return objects >= SLICE_MAX_OBJECTS or now - created >= SLICE_MAX_AGE


def object_id() -> str:
    """Unique, and starts with its creation time in nanoseconds (hex) for humans and tools."""
    return f"{time.time_ns():016x}{secrets.token_hex(8)}"


def object_key(slice_: str) -> str:
    return f"{DATA_PREFIX}{slice_}/{object_id()}"


@dataclass(frozen=True)
class SliceWindow:
    """A slice as the metastore knows it: when it was opened and until when an object may still land
    in it (incremental GC skips slices no object can land in any more)."""

    name: str
    created_at: datetime
    writable_until: datetime | None  # None: unknown (slices from before schema v2)
