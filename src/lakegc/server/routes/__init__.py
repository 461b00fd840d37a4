"""The routes of `lakegc serve`, one router per resource of lakeFS's API, each a translation onto
the repository API (see app.py). Included here in the order the server has always matched them."""

from __future__ import annotations

from fastapi import APIRouter

from lakegc.server.routes.auth import router as auth
from lakegc.server.routes.branches import router as branches
from lakegc.server.routes.commits import router as commits
from lakegc.server.routes.config import router as config
from lakegc.server.routes.gc_rules import router as gc_rules
from lakegc.server.routes.objects import router as objects
from lakegc.server.routes.refs import router as refs
from lakegc.server.routes.repositories import router as repositories
from lakegc.server.routes.staging import router as staging
from lakegc.server.routes.tags import router as tags

# FastAPI tries routes in the order they were included, and a request goes to the first path that
# matches: a resource whose paths overlap another's comes before it where it must win.
RESOURCES = (gc_rules, config, auth, repositories, branches, commits, tags, refs, objects, staging)

api = APIRouter(prefix="/api/v1")
for _router in RESOURCES:
    api.include_router(_router)
