"""Claiming a namespace for a repository: one namespace, one repository, across metastores too."""

from __future__ import annotations

import json

from lakegc.errors import LakegcError, NamespaceError
from lakegc.storage.base import Storage
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
