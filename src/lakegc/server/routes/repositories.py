"""Repositories: listed, created, read and deleted through the lake, which holds them all."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from lakegc.server import models
from lakegc.server.deps import ServedLake
from lakegc.server.models import RepositoryCreation

router = APIRouter()


@router.get("/repositories")
def list_repositories(lake: ServedLake, prefix: str = "", after: str = "", amount: int | None = None) -> dict[str, Any]:
    repositories = lake.repositories()
    return models.listed(repositories, lambda r: r.name, models.repository, prefix=prefix, after=after, amount=amount)


@router.post("/repositories", status_code=201)
def create_repository(lake: ServedLake, body: RepositoryCreation, bare: bool = False) -> dict[str, Any]:
    return models.repository(lake.create_repository(body.name, body.storage_namespace, body.default_branch))


@router.get("/repositories/{repository}")
def get_repository(lake: ServedLake, repository: str) -> dict[str, Any]:
    return models.repository(lake.repository(repository).info)


@router.delete("/repositories/{repository}", status_code=204)
def delete_repository(lake: ServedLake, repository: str, force: bool = False) -> Response:
    lake.delete_repository(repository)
    return Response(status_code=204)


@router.get("/repositories/{repository}/metadata")
def repository_metadata(lake: ServedLake, repository: str) -> dict[str, str]:
    lake.repository(repository)
    return {}
