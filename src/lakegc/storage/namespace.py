"""Claiming a namespace for a repository: one namespace, one repository, across metastores too."""

from __future__ import annotations

import json

from lakegc.errors import LakegcError, NamespaceError
from lakegc.storage.base import Storage
from lakegc.storage.locations import real_location, within
from lakegc.timeutil import utcnow

MARKER = "_lakegc/repository.json"


def claim_namespace(storage: Storage, repository: str) -> None:
    """Refuse a namespace that holds anything (another repository's marker, or foreign data GC
    would mistake for garbage), then mark it as ours."""
    storage.prepare()
    if not storage.is_empty():
        if storage.exists(MARKER):
            owner = json.loads(storage.read(MARKER)).get("repository", "?")
            raise NamespaceError(f"namespace {storage.uri} is already used by repository {owner!r}")
        raise NamespaceError(f"namespace {storage.uri} is not empty: a repository needs a namespace of its own")
    try:
        storage.write(MARKER, json.dumps({"repository": repository, "created_at": utcnow().isoformat()}).encode())
    except LakegcError:
        raise
    except OSError as exc:
        raise NamespaceError(f"namespace {storage.uri} is not writable: {exc.strerror}") from None


def namespace_overlap(location: str, others: dict[str, str]) -> str | None:
    """Why a new namespace may not be created at `location`: it equals, holds or lies inside
    another one (`others`: what it is -> its location), as written or as it really is (through
    symlinks). None when it may."""
    real = real_location(location)
    for what, other in others.items():
        other_real = real_location(other)
        for mine, theirs in ((location, other), (real, other_real)):
            if within(mine, theirs) or within(theirs, mine):
                shown = other if other_real == other else f"{other}, really {other_real}"
                return f"namespace {location} overlaps {what} ({shown})"
    return None
