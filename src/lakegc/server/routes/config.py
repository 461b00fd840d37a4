"""What lakeFS's clients ask before anything else: the version and the storage they may write to
(lakefs-spec parses the version; lakefs-sdk reads whether presigned URLs are served)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from lakegc.server import models

router = APIRouter()


@router.get("/config")
def config() -> dict[str, Any]:
    return {"version_config": {"version": models.VERSION}, "storage_config": models.STORAGE_CONFIG}


@router.get("/config/version")
def version() -> dict[str, Any]:
    return {"version": models.VERSION}


@router.get("/config/storage")
def storage() -> dict[str, Any]:
    return models.STORAGE_CONFIG
