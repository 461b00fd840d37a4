"""What a route is handed, as FastAPI dependencies: the lake and the external prefixes `create_app`
keeps on the app, and the user the auth middleware found. The routes close over nothing, so each
resource's router is a plain module-level object, built once at import.

Each is a lookup with no I/O and cannot fail, so declaring it changes neither when a request's own
parameters are checked nor which error a bad request gets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends, Request

from lakegc.repo.repository import Lake
from lakegc.server.users import User


async def served_lake(request: Request) -> Lake:
    return request.app.state.lake


async def external_prefixes(request: Request) -> Sequence[str]:
    """The real locations outside any namespace that staging links may point at."""
    return request.app.state.external


def current_user(request: Request) -> User:
    return request.state.user


ServedLake = Annotated[Lake, Depends(served_lake)]
ExternalPrefixes = Annotated[Sequence[str], Depends(external_prefixes)]
CurrentUser = Annotated[User, Depends(current_user)]
