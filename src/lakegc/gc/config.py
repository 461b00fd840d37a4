"""Where a repository's GC rules live: the metastore (one JSON document per repository)."""

from __future__ import annotations

import json

import sqlalchemy as sa

from lakegc.gc.fence import check
from lakegc.gc.rules import GcRules, parse_rules
from lakegc.metastore import schema as t
from lakegc.repo.repository import Repository


def set_rules(repo: Repository, rules: GcRules) -> None:
    with repo.ms.write() as conn:
        check(conn, repo.name, rules_change=True)
        conn.execute(t.gc_rules.delete().where(t.gc_rules.c.repository == repo.name))
        conn.execute(t.gc_rules.insert().values(repository=repo.name, rules=rules.model_dump()))


def get_rules(repo: Repository) -> GcRules | None:
    with repo.ms.read() as conn:
        doc = conn.execute(sa.select(t.gc_rules.c.rules).where(t.gc_rules.c.repository == repo.name)).scalar()
    # Validated again on the way out: a row edited by hand gets the same one-line error as set-config.
    return None if doc is None else parse_rules(json.dumps(doc))


def delete_rules(repo: Repository) -> bool:
    with repo.ms.write() as conn:
        check(conn, repo.name, rules_change=True)
        return bool(conn.execute(t.gc_rules.delete().where(t.gc_rules.c.repository == repo.name)).rowcount)
