"""Who the key pair belongs to: the one route of lakeFS's auth API that its clients call (the pair
itself is checked by the middleware in app.py before any route runs)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lakegc.server.deps import CurrentUser

router = APIRouter()


@router.get("/user")
def user(who: CurrentUser) -> dict[str, Any]:
    return {"user": {"id": who.name, "creation_date": int(who.created_at.timestamp())}}
