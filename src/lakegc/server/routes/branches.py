"""Branches: listed, created, read, deleted, reset, reverted, cherry-picked onto and diffed
against their staged changes, each one call of the repository's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from lakegc.errors import InvalidArgument
from lakegc.server import models
from lakegc.server.deps import ServedLake
from lakegc.server.models import BranchCreation, CherryPickCreation, ResetCreation, RevertCreation

router = APIRouter()


@router.get("/repositories/{repository}/branches")
def list_branches(
    lake: ServedLake, repository: str, prefix: str = "", after: str = "", amount: int | None = None
) -> dict[str, Any]:
    branches = lake.repository(repository).branches()
    return models.listed(branches, lambda b: b.name, models.branch, prefix=prefix, after=after, amount=amount)


@router.post("/repositories/{repository}/branches", status_code=201)
def create_branch(lake: ServedLake, repository: str, body: BranchCreation) -> PlainTextResponse:
    branch = lake.repository(repository).create_branch(body.name, body.source)
    return PlainTextResponse(branch.head, status_code=201)


@router.get("/repositories/{repository}/branches/{branch}")
def get_branch(lake: ServedLake, repository: str, branch: str) -> dict[str, Any]:
    return models.branch(models.named(lake.repository(repository).branches(), branch, "branch", repository))


@router.delete("/repositories/{repository}/branches/{branch}", status_code=204)
def delete_branch(lake: ServedLake, repository: str, branch: str, force: bool = False) -> Response:
    lake.repository(repository).delete_branch(branch)
    return Response(status_code=204)


@router.put("/repositories/{repository}/branches/{branch}", status_code=204)
def reset_branch(lake: ServedLake, repository: str, branch: str, body: ResetCreation) -> Response:
    """Drop staged changes: all of them (type `reset`), the one at `path` (`object`), or those
    under `path` (`common_prefix`)."""
    repo = lake.repository(repository)
    repo.reset_branch(branch, **reset_scope(body))
    return Response(status_code=204)


def reset_scope(body: ResetCreation) -> dict[str, str]:
    """`Repository.reset_branch`'s keywords for the reset `body` asks for; InvalidArgument for a
    type it does not know, or one that needs a path without it."""
    if body.type == "reset":
        return {}
    if body.type in ("object", "common_prefix") and body.path:
        return {"path" if body.type == "object" else "prefix": body.path}
    raise InvalidArgument(
        f"invalid reset: type {body.type!r} with path {body.path!r} (type is reset, or object or "
        "common_prefix with a path)"
    )


@router.post("/repositories/{repository}/branches/{branch}/revert", status_code=204)
def revert_branch(lake: ServedLake, repository: str, branch: str, body: RevertCreation) -> Response:
    lake.repository(repository).revert(branch, body.ref, parent=max(body.parent_number, 1))
    return Response(status_code=204)


@router.get("/repositories/{repository}/branches/{branch}/diff")
def diff_branch(
    lake: ServedLake,
    repository: str,
    branch: str,
    prefix: str = "",
    after: str = "",
    amount: int | None = None,
    delimiter: str = "",
) -> dict[str, Any]:
    changes = lake.repository(repository).diff(branch)
    return models.diff_page(changes, prefix=prefix, after=after, amount=amount, delimiter=delimiter)


@router.post("/repositories/{repository}/branches/{branch}/cherry-pick", status_code=201)
def cherry_pick(lake: ServedLake, repository: str, branch: str, body: CherryPickCreation) -> dict[str, Any]:
    made = lake.repository(repository).cherry_pick(branch, body.ref, parent=body.parent_number or 1)
    return models.commit(made)
