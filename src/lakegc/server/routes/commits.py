"""Commits: made on a branch from its staged changes, and read by id (or any ref)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter

from lakegc.server import models
from lakegc.server.deps import ServedLake
from lakegc.server.models import CommitCreation

router = APIRouter()


@router.post("/repositories/{repository}/branches/{branch}/commits", status_code=201)
def commit(lake: ServedLake, repository: str, branch: str, body: CommitCreation) -> dict[str, Any]:
    date = None if body.date is None else datetime.fromtimestamp(body.date, UTC)
    made = lake.repository(repository).commit(
        branch, body.message, date=date, allow_empty=body.allow_empty, metadata=body.metadata
    )
    return models.commit(made)


@router.get("/repositories/{repository}/commits/{ref}")
def get_commit(lake: ServedLake, repository: str, ref: str) -> dict[str, Any]:
    return models.commit(lake.repository(repository).resolve(ref)[0])
