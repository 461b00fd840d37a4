"""Staging backing: a client writes an object itself, to an address the server hands out, then
links it to a path; the way lakeFS's clients write without sending the data through the server."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from lakegc.errors import InvalidArgument
from lakegc.server import models
from lakegc.server.deps import ExternalPrefixes, ServedLake
from lakegc.server.entries import precondition, stats
from lakegc.server.models import StagingMetadata
from lakegc.storage import real_location, within

router = APIRouter()


@router.get("/repositories/{repository}/branches/{branch}/staging/backing")
def get_physical_address(
    lake: ServedLake, repository: str, branch: str, path: str, presign: bool = False
) -> dict[str, Any]:
    """A fresh address in the namespace to write `path`'s object to, then link it (PUT below)
    before it expires; GC keeps it meanwhile. No presigned URLs (pre_sign_support is false)."""
    if presign:
        raise InvalidArgument("presigned URLs are not served by lakegc: write to physical_address yourself")
    repo = lake.repository(repository)
    claims = repo.get_physical_address(branch, path)
    return {"physical_address": models.lakefs_namespace(repo.storage.full_uri(claims.address))}


@router.put("/repositories/{repository}/branches/{branch}/staging/backing")
def link_physical_address(
    request: Request,
    lake: ServedLake,
    external: ExternalPrefixes,
    repository: str,
    branch: str,
    path: str,
    body: StagingMetadata,
) -> dict[str, Any]:
    """Link an object already written as `path`: an address GET handed out for this branch and
    path and not expired (once), or one outside the namespace under an allowed external prefix."""
    address = body.staging.physical_address
    if not address:
        raise InvalidArgument("staging.physical_address is required")
    if not body.checksum:
        raise InvalidArgument("checksum is required")
    repo = lake.repository(repository)
    outside = repo.outside_namespace(address)
    if outside is not None and not any(within(prefix, real_location(outside)) for prefix in external):
        raise InvalidArgument(
            f"address {address!r} is outside the repository's namespace and under no allowed external "
            "prefix (lakegc serve --allowed-external-prefix)"
        )
    entry = repo.link(
        branch,
        path,
        address,
        body.size_bytes,
        body.checksum,
        metadata=body.user_metadata,
        issued=True,
        when=precondition(request.headers),
    )
    return stats(repo, entry)
