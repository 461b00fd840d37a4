"""What the repository API reads of the metastore, as plain SQL: refs, commits, staged entries and
recorded tree changes (`Reads`), and the lake's repositories (`LakeReads`).

Plain SQL because a metadata command (`log`, `fs ls`, `fs stat`, `branch list`) runs these and
nothing else: on a SQLite metastore `Metastore.snapshot` runs them on a sqlite3 connection, and the
command never loads SQLAlchemy, a third of a second of its start. The same statements run inside
SQLAlchemy's transactions too (`repo.store.Tx` is a `Reads`), so there is one of each. The SQL is
what SQLite and PostgreSQL both accept, and values come back as typed objects whichever database
and driver answered (`_when`, `_json`): SQLite gives text for timestamps and JSON, psycopg objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

from lakegc.errors import AmbiguousRef, RefNotFound
from lakegc.metastore import Query
from lakegc.repo.model import AddressKind, Branch, Commit, Entry, RepositoryInfo, Tag
from lakegc.timeutil import as_utc
from lakegc.uri import validate_ref_name

COMMIT_ID_CHARS = frozenset("0123456789abcdef")  # a ref of 8 to 64 of these may be a commit id prefix
IN_BATCH = 500  # values per IN (...) list: under every database's bound-parameter limit

_COMMIT = "id, parents, metarange_id, message, creation_date, metadata"
_CHANGES = "SELECT commit_id, path, address, address_kind FROM tree_changes WHERE repository = :repository"
_STAGED = "path, address, address_kind, size, checksum, mtime, metadata, tombstone, version"


class StagedRow(NamedTuple):
    """A staged entry, or a staged deletion (`tombstone`, no address)."""

    path: str
    address: str | None
    address_kind: str | None
    size: int | None
    checksum: str | None
    mtime: datetime | None
    metadata: str | None
    tombstone: bool
    version: int | None


class ChangeRow(NamedTuple):
    """A recorded tree change: `commit_id` set `path` to `address` (None: removed it)."""

    commit_id: str
    path: str
    address: str | None
    address_kind: str | None


def _starting(column: str, prefix: str) -> tuple[str, dict[str, Any]]:
    """The condition that `column` starts with `prefix`, exactly, and its parameters: SQLite's LIKE
    ignores ASCII case, so a LIKE would take "A/" for "a/". The range bound lets the primary key's
    index find the start."""
    return f"{column} >= :prefix AND substr({column}, 1, :prefix_length) = :prefix", {
        "prefix": prefix,
        "prefix_length": len(prefix),
    }


def _one_of(column: str, values: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """`column IN (...)` over `values`, in batches under every database's bound-parameter limit:
    each batch's condition and its parameters."""
    for start in range(0, len(values), IN_BATCH):
        batch = values[start : start + IN_BATCH]
        names = [f"v{n}" for n in range(len(batch))]
        yield f"{column} IN ({', '.join(':' + name for name in names)})", dict(zip(names, batch, strict=True))


class Reads:
    """A repository's reads in one read transaction (`query` runs the SQL)."""

    def __init__(self, query: Query, repository: str):
        self.query, self.repository = query, repository

    def _rows(self, sql: str, **params: Any) -> list[Any]:
        return list(self.query(sql, {"repository": self.repository, **params}))

    def _value(self, sql: str, **params: Any) -> Any:
        rows = self._rows(sql, **params)
        return rows[0][0] if rows else None

    # -- refs ---------------------------------------------------------------
    def resolve(self, ref: str) -> tuple[str, str | None]:
        """The commit a ref names, and the branch name when the ref is a branch. A name that is
        both a branch and a tag, or a prefix of several commits, is ambiguous, never a guess."""
        validate_ref_name(ref)
        found: list[tuple[str, str, str | None]] = []
        head = self._value("SELECT head FROM branches WHERE repository = :repository AND name = :ref", ref=ref)
        if head:
            found.append(("branch", head, ref))
        tagged = self._value("SELECT commit_id FROM tags WHERE repository = :repository AND name = :ref", ref=ref)
        if tagged:
            found.append(("tag", tagged, None))
        if 8 <= len(ref) <= 64 and set(ref) <= COMMIT_ID_CHARS:  # lowercase hex: no LIKE wildcard, no case
            sql = "SELECT id FROM commits WHERE repository = :repository AND id LIKE :pattern LIMIT 2"
            ids = [r[0] for r in self._rows(sql, pattern=ref + "%")]
            if len(ids) > 1:
                raise AmbiguousRef(f"ref {ref!r} is ambiguous: it is a prefix of several commits")
            found += [("commit", i, None) for i in ids]
        if not found:
            raise RefNotFound(f"ref {ref!r} not found in repository {self.repository!r}")
        if len(found) > 1:
            raise AmbiguousRef(f"ref {ref!r} is ambiguous: it names a " + " and a ".join(k for k, _, _ in found))
        return found[0][1], found[0][2]

    def branch_head(self, branch: str) -> str:
        validate_ref_name(branch)
        head = self._value("SELECT head FROM branches WHERE repository = :repository AND name = :name", name=branch)
        if head is None:
            raise RefNotFound(f"branch {branch!r} not found in repository {self.repository!r}")
        return head

    def branches(self) -> list[Branch]:
        sql = "SELECT name, head FROM branches WHERE repository = :repository ORDER BY name"
        return [Branch(name, head) for name, head in self._rows(sql)]

    def branch_heads(self) -> dict[str, str]:
        return {b.name: b.head for b in self.branches()}

    def tags(self) -> list[Tag]:
        sql = "SELECT name, commit_id FROM tags WHERE repository = :repository ORDER BY name"
        return [Tag(name, commit_id) for name, commit_id in self._rows(sql)]

    # -- commits ------------------------------------------------------------
    def commit(self, commit_id: str) -> Commit:
        rows = self._rows(f"SELECT {_COMMIT} FROM commits WHERE repository = :repository AND id = :id", id=commit_id)
        if not rows:
            raise RefNotFound(f"commit {commit_id!r} not found in repository {self.repository!r}")
        return _commit(rows[0])

    def commits(self, ids: list[str]) -> dict[str, Commit]:
        found: dict[str, Commit] = {}
        for among, params in _one_of("id", sorted(set(ids))):
            sql = f"SELECT {_COMMIT} FROM commits WHERE repository = :repository AND {among}"
            found.update((c.id, c) for c in map(_commit, self._rows(sql, **params)))
        return found

    def parents_and_dates(self) -> tuple[dict[str, list[str]], dict[str, datetime]]:
        rows = self._rows("SELECT id, parents, creation_date FROM commits WHERE repository = :repository")
        return {r[0]: list(_json(r[1])) for r in rows}, {r[0]: _when(r[2]) for r in rows}

    # -- staging ------------------------------------------------------------
    def staged(self, branch: str, path: str) -> StagedRow | None:
        sql = (
            f"SELECT {_STAGED} FROM staged_entries WHERE repository = :repository AND branch = :branch AND path = :path"
        )
        rows = self._rows(sql, branch=branch, path=path)
        return _staged(rows[0]) if rows else None

    def staged_rows(self, branch: str, prefix: str | None = None, ordered: bool = False) -> list[StagedRow]:
        sql = f"SELECT {_STAGED} FROM staged_entries WHERE repository = :repository AND branch = :branch"
        params: dict[str, Any] = {"branch": branch}
        if prefix is not None:
            starting, more = _starting("path", prefix)
            sql += " AND " + starting
            params.update(more)
        if ordered:
            sql += " ORDER BY path"
        return [_staged(r) for r in self._rows(sql, **params)]

    def has_staging(self, branch: str) -> bool:
        sql = "SELECT 1 FROM staged_entries WHERE repository = :repository AND branch = :branch LIMIT 1"
        return self._value(sql, branch=branch) is not None

    # -- recorded tree changes ------------------------------------------------
    def commits_without_changes(self) -> int:
        """How many commits have no `tree_changes` record (made before schema v5)."""
        sql = (
            "SELECT count(*) FROM commits WHERE repository = :repository"
            " AND (changes_recorded IS NULL OR changes_recorded = :no)"
        )
        return self._value(sql, no=False)

    def changes_at(self, paths: list[str]) -> list[ChangeRow]:
        """Every recorded change to `paths`."""
        rows: list[ChangeRow] = []
        for among, params in _one_of("path", paths):
            rows += map(ChangeRow._make, self._rows(f"{_CHANGES} AND {among}", **params))
        return rows

    def changes_under(self, prefixes: list[str]) -> list[ChangeRow]:
        """Every recorded change to a path starting with one of `prefixes`."""
        rows: list[ChangeRow] = []
        for prefix in prefixes:
            starting, params = _starting("path", prefix)
            rows += map(ChangeRow._make, self._rows(f"{_CHANGES} AND {starting}", **params))
        return rows


class LakeReads:
    """The lake's repositories, in one read transaction."""

    _INFO = "SELECT name, storage_namespace, default_branch, created_at FROM repositories"

    def __init__(self, query: Query):
        self.query = query

    def repository(self, name: str) -> RepositoryInfo | None:
        rows = self.query(self._INFO + " WHERE name = :name", {"name": name})
        return _info(rows[0]) if rows else None

    def repositories(self) -> list[RepositoryInfo]:
        return [_info(r) for r in self.query(self._INFO + " ORDER BY name")]

    def namespaces(self) -> dict[str, str]:
        return {r.name: r.storage_namespace for r in self.repositories()}


def entry_from_row(row: StagedRow) -> Entry:
    return Entry(row.path, row.address, AddressKind(row.address_kind), row.size, row.checksum, row.mtime, row.metadata)


def _when(value: datetime | str | None) -> datetime | None:
    """A timestamp as an aware UTC datetime: psycopg gives one, SQLite the text SQLAlchemy wrote."""
    if value is None:
        return None
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


def _json(value: Any) -> Any:
    """A JSON column's value: psycopg parses it, SQLite keeps the text."""
    return json.loads(value) if isinstance(value, str) else value


def _commit(row: Any) -> Commit:
    commit_id, parents, metarange_id, message, created, metadata = row
    return Commit(commit_id, tuple(_json(parents)), metarange_id, message, _when(created), dict(_json(metadata)))


def _staged(row: Any) -> StagedRow:
    path, address, kind, size, checksum, mtime, metadata, tombstone, version = row
    return StagedRow(path, address, kind, size, checksum, _when(mtime), metadata, bool(tombstone), version)


def _info(row: Any) -> RepositoryInfo:
    name, namespace, default_branch, created_at = row
    return RepositoryInfo(name, namespace, default_branch, _when(created_at))
