"""A repository's GC rules, on lakeFS's current path (settings/gc_rules) and its older one
(gc/rules, written with POST): the same three handlers on both."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Response

from lakegc.errors import NotFound
from lakegc.retention.rules import parse_rules
from lakegc.server.deps import ServedLake

router = APIRouter()


def get_gc_rules(lake: ServedLake, repository: str) -> dict[str, Any]:
    rules = lake.repository(repository).gc_rules()
    if rules is None:
        raise NotFound(f"repository {repository!r} has no GC rules")
    return rules.to_doc()


def set_gc_rules(lake: ServedLake, repository: str, body: dict[str, Any]) -> Response:
    lake.repository(repository).set_gc_rules(parse_rules(json.dumps(body)))
    return Response(status_code=204)


def delete_gc_rules(lake: ServedLake, repository: str) -> Response:
    lake.repository(repository).delete_gc_rules()
    return Response(status_code=204)


for _path, _write in (
    ("/repositories/{repository}/settings/gc_rules", "PUT"),
    ("/repositories/{repository}/gc/rules", "POST"),
):
    router.add_api_route(_path, get_gc_rules, methods=["GET"])
    router.add_api_route(_path, set_gc_rules, methods=[_write], status_code=204)
    router.add_api_route(_path, delete_gc_rules, methods=["DELETE"], status_code=204)
