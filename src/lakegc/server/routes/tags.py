"""Tags: listed, created, read and deleted, each one call of the repository's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from lakegc.server import models
from lakegc.server.deps import ServedLake
from lakegc.server.models import TagCreation

router = APIRouter()


@router.get("/repositories/{repository}/tags")
def list_tags(
    lake: ServedLake, repository: str, prefix: str = "", after: str = "", amount: int | None = None
) -> dict[str, Any]:
    tags = lake.repository(repository).tags()
    return models.listed(tags, lambda t: t.name, models.tag, prefix=prefix, after=after, amount=amount)


@router.post("/repositories/{repository}/tags", status_code=201)
def create_tag(lake: ServedLake, repository: str, body: TagCreation) -> dict[str, Any]:
    tag = lake.repository(repository).create_tag(body.id, body.ref)
    return models.tag(tag)


@router.get("/repositories/{repository}/tags/{tag}")
def get_tag(lake: ServedLake, repository: str, tag: str) -> dict[str, Any]:
    return models.tag(models.named(lake.repository(repository).tags(), tag, "tag", repository))


@router.delete("/repositories/{repository}/tags/{tag}", status_code=204)
def delete_tag(lake: ServedLake, repository: str, tag: str, force: bool = False) -> Response:
    lake.repository(repository).delete_tag(tag)
    return Response(status_code=204)
