"""The repository API: what the CLI (and anyone scripting lakegc) calls. No logic lives in the CLI."""

from __future__ import annotations

import hashlib
import json
import re
import secrets as pysecrets
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, BinaryIO, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lakegc.errors import (
    AlreadyExists, AmbiguousRef, ConcurrentUpdate, DirtyBranch, InvalidArgument, InvalidToken,
    LakegcError, MergeConflict, NamespaceError, NothingToCommit, ObjectGone, ObjectNotFound,
    PathNotFound, RefNotFound, RepoNotFound,
)
from lakegc.metastore import Metastore, sqlite_file
from lakegc.settings import lakegc_home
from lakegc.metastore import schema as t
from lakegc.repo import graph, slices, tokens
from lakegc.repo.merge import three_way
from lakegc.repo.model import AddressKind, Branch, Change, ChangeType, Changes, Commit, Entry, RepositoryInfo, Tag
from lakegc.repo.trees import TreeStore, as_changes
from lakegc.retention.rules import GcRules, parse_rules
from lakegc.engine.guard import Protected, check_root
from lakegc.storage import Storage, check_key, namespace_key_of, normalize_location, open_storage, read_location
from lakegc.storage.namespace import claim_namespace, namespace_overlap
from lakegc.timeutil import utcnow
from lakegc.uri import validate_path, validate_ref_name, validate_repo_name

DEFAULT_TOKEN_TTL = timedelta(hours=24)
_COMMIT_PREFIX = re.compile(r"^[0-9a-f]{8,64}$")
_RETRIES = 8


class Lake:
    """A metastore and the repositories it holds."""

    def __init__(self, metastore: Metastore | str | None = None):
        self.metastore = metastore if isinstance(metastore, Metastore) else Metastore(metastore)

    def create_repository(self, name: str, namespace: str, default_branch: str = "main") -> RepositoryInfo:
        validate_repo_name(name)
        validate_ref_name(default_branch)
        location = normalize_location(namespace)
        check_root(location, "namespace", self.protected_places(repositories=False))
        now = utcnow()
        with self.metastore.write() as conn:
            if conn.execute(sa.select(t.repositories.c.name).where(t.repositories.c.name == name)).first():
                raise AlreadyExists(f"repository {name!r} already exists")
            others = {f"repository {other!r}": ns for other, ns in
                      conn.execute(sa.select(t.repositories.c.name, t.repositories.c.storage_namespace))}
            overlap = namespace_overlap(location, others)
            if overlap is not None:
                raise NamespaceError(overlap)
            storage = open_storage(location)
            claim_namespace(storage, name)
            empty_tree = TreeStore(storage).build([])
            initial = _new_commit((), empty_tree, "Repository created", now, {})
            conn.execute(t.repositories.insert().values(
                name=name, storage_namespace=location, default_branch=default_branch, created_at=now))
            _insert_commit(conn, name, initial)
            conn.execute(t.branches.insert().values(repository=name, name=default_branch, head=initial.id))
        return RepositoryInfo(name, location, default_branch, now)

    def protected_places(self, *, repositories: bool = True, except_repository: str | None = None) -> list[Protected]:
        """What no delete may touch on behalf of this metastore: its database file, lakegc's home
        (connector runs; a root inside it is fine), and every repository's namespace (but
        `except_repository`'s)."""
        places = [Protected("lakegc's home folder", str(lakegc_home().absolute()), inside_ok=True)]
        db = sqlite_file(self.metastore.url)
        if db is not None:
            places.append(Protected("the lakegc metastore database", db))
        if repositories:
            places += [Protected(f"the namespace of repository {r.name!r}", r.storage_namespace)
                       for r in self.repositories() if r.name != except_repository]
        return places

    def repositories(self) -> list[RepositoryInfo]:
        with self.metastore.read() as conn:
            rows = conn.execute(sa.select(t.repositories).order_by(t.repositories.c.name)).all()
        return [RepositoryInfo(r.name, r.storage_namespace, r.default_branch, r.created_at) for r in rows]

    def repository(self, name: str) -> Repository:
        validate_repo_name(name)
        with self.metastore.read() as conn:
            row = conn.execute(sa.select(t.repositories).where(t.repositories.c.name == name)).first()
        if row is None:
            raise RepoNotFound(f"repository {name!r} not found")
        return Repository(self, RepositoryInfo(row.name, row.storage_namespace, row.default_branch, row.created_at))

    def delete_repository(self, name: str) -> None:
        """Forgets the repository's metadata; its namespace and data stay where they are."""
        self.repository(name)
        with self.metastore.write() as conn:
            for table in (t.gc_leases, t.gc_runs, t.gc_rules, t.address_tokens, t.copy_records, t.slices, t.staged_entries,
                          t.tags, t.branches, t.commits):
                conn.execute(table.delete().where(table.c.repository == name))
            conn.execute(t.repositories.delete().where(t.repositories.c.name == name))

    def token_secret(self) -> bytes:
        with self.metastore.write() as conn:
            value = conn.execute(sa.select(t.settings.c.value).where(t.settings.c.key == "token_secret")).scalar()
            if value is None:
                value = pysecrets.token_hex(32)
                conn.execute(t.settings.insert().values(key="token_secret", value=value))
        return bytes.fromhex(value)


class Repository:
    """One repository: refs, staging, commits and objects."""

    def __init__(self, lake: Lake, info: RepositoryInfo):
        self.lake = lake
        self.info = info
        self.name = info.name
        self.ms = lake.metastore
        self.storage: Storage = open_storage(info.storage_namespace)
        self.trees = TreeStore(self.storage)

    # -- refs ---------------------------------------------------------------
    def resolve(self, ref: str) -> tuple[Commit, str | None]:
        """The commit a ref names, and the branch name when the ref is a branch."""
        with self.ms.read() as conn:
            commit_id, branch = self._resolve(conn, ref)
            return self._commit(conn, commit_id), branch

    def _resolve(self, conn: Connection, ref: str) -> tuple[str, str | None]:
        validate_ref_name(ref)
        found: list[tuple[str, str, str | None]] = []
        head = conn.execute(sa.select(t.branches.c.head).where(self._of(t.branches), t.branches.c.name == ref)).scalar()
        if head:
            found.append(("branch", head, ref))
        tagged = conn.execute(sa.select(t.tags.c.commit_id).where(self._of(t.tags), t.tags.c.name == ref)).scalar()
        if tagged:
            found.append(("tag", tagged, None))
        if _COMMIT_PREFIX.match(ref):
            ids = conn.execute(sa.select(t.commits.c.id).where(
                self._of(t.commits), t.commits.c.id.like(ref + "%")).limit(2)).scalars().all()
            if len(ids) > 1:
                raise AmbiguousRef(f"ref {ref!r} is ambiguous: it is a prefix of several commits")
            found += [("commit", i, None) for i in ids]
        if not found:
            raise RefNotFound(f"ref {ref!r} not found in repository {self.name!r}")
        if len(found) > 1:
            raise AmbiguousRef(f"ref {ref!r} is ambiguous: it names a " + " and a ".join(k for k, _, _ in found))
        return found[0][1], found[0][2]

    def _branch_head(self, conn: Connection, branch: str) -> str:
        validate_ref_name(branch)
        head = conn.execute(sa.select(t.branches.c.head).where(self._of(t.branches), t.branches.c.name == branch)).scalar()
        if head is None:
            raise RefNotFound(f"branch {branch!r} not found in repository {self.name!r}")
        return head

    def _commit(self, conn: Connection, commit_id: str) -> Commit:
        row = conn.execute(sa.select(t.commits).where(self._of(t.commits), t.commits.c.id == commit_id)).first()
        if row is None:
            raise RefNotFound(f"commit {commit_id!r} not found in repository {self.name!r}")
        return _commit_from_row(row)

    def _graph(self, conn: Connection) -> tuple[dict[str, list[str]], dict[str, datetime]]:
        rows = conn.execute(sa.select(t.commits.c.id, t.commits.c.parents, t.commits.c.creation_date)
                            .where(self._of(t.commits))).all()
        return {r.id: list(r.parents) for r in rows}, {r.id: r.creation_date for r in rows}

    def _of(self, table: sa.Table) -> sa.ColumnElement[bool]:
        return table.c.repository == self.name

    # -- branches and tags --------------------------------------------------
    def branches(self) -> list[Branch]:
        with self.ms.read() as conn:
            rows = conn.execute(sa.select(t.branches).where(self._of(t.branches)).order_by(t.branches.c.name)).all()
        return [Branch(r.name, r.head) for r in rows]

    def create_branch(self, name: str, source: str) -> Branch:
        validate_ref_name(name)
        with self.ms.write() as conn:
            commit_id, _ = self._resolve(conn, source)
            self._refuse_taken_ref_name(conn, name)
            self._fenced(conn, branch=(name, commit_id))
            conn.execute(t.branches.insert().values(repository=self.name, name=name, head=commit_id))
        return Branch(name, commit_id)

    def delete_branch(self, name: str) -> None:
        if name == self.info.default_branch:
            raise InvalidArgument(f"branch {name!r} is the default branch of {self.name!r} and cannot be deleted")
        with self.ms.write() as conn:
            self._branch_head(conn, name)
            conn.execute(t.staged_entries.delete().where(self._of(t.staged_entries), t.staged_entries.c.branch == name))
            conn.execute(t.branches.delete().where(self._of(t.branches), t.branches.c.name == name))

    def reset_branch(self, name: str) -> int:
        """Drop every staged change of the branch; returns how many there were."""
        with self.ms.write() as conn:
            self._branch_head(conn, name)
            return conn.execute(t.staged_entries.delete().where(
                self._of(t.staged_entries), t.staged_entries.c.branch == name)).rowcount

    def tags(self) -> list[Tag]:
        with self.ms.read() as conn:
            rows = conn.execute(sa.select(t.tags).where(self._of(t.tags)).order_by(t.tags.c.name)).all()
        return [Tag(r.name, r.commit_id) for r in rows]

    def create_tag(self, name: str, ref: str) -> Tag:
        validate_ref_name(name)
        with self.ms.write() as conn:
            commit_id, _ = self._resolve(conn, ref)
            self._refuse_taken_ref_name(conn, name)
            self._fenced(conn, sources=[commit_id])
            conn.execute(t.tags.insert().values(repository=self.name, name=name, commit_id=commit_id))
        return Tag(name, commit_id)

    def delete_tag(self, name: str) -> None:
        validate_ref_name(name)
        with self.ms.write() as conn:
            if not conn.execute(t.tags.delete().where(self._of(t.tags), t.tags.c.name == name)).rowcount:
                raise RefNotFound(f"tag {name!r} not found in repository {self.name!r}")

    # -- GC rules -----------------------------------------------------------
    def gc_rules(self) -> GcRules | None:
        """The repository's retention rules (None: none set, GC keeps every commit). Validated on
        the way out too: a row edited by hand gets the same one-line error as `gc set-config`."""
        with self.ms.read() as conn:
            doc = conn.execute(sa.select(t.gc_rules.c.rules).where(self._of(t.gc_rules))).scalar()
        return None if doc is None else parse_rules(json.dumps(doc))

    def set_gc_rules(self, rules: GcRules) -> None:
        with self.ms.write() as conn:
            self._fenced(conn, rules_change=True)
            conn.execute(t.gc_rules.delete().where(self._of(t.gc_rules)))
            conn.execute(t.gc_rules.insert().values(repository=self.name, rules=rules.model_dump()))

    def delete_gc_rules(self) -> bool:
        """Remove the rules; False when there were none."""
        with self.ms.write() as conn:
            self._fenced(conn, rules_change=True)
            return bool(conn.execute(t.gc_rules.delete().where(self._of(t.gc_rules))).rowcount)

    def _fenced(self, conn: Connection, **change: Any) -> None:
        """Inside a write transaction: refuse a change a running GC sweep forbids (see gc.fence;
        imported here, not above, since GC builds on this module)."""
        from lakegc.gc.fence import check

        check(conn, self.name, **change)

    def _refuse_taken_ref_name(self, conn: Connection, name: str) -> None:
        for table, kind in ((t.branches, "branch"), (t.tags, "tag")):
            if conn.execute(sa.select(table.c.name).where(self._of(table), table.c.name == name)).first():
                raise AlreadyExists(f"a {kind} named {name!r} already exists in {self.name!r}")

    # -- objects ------------------------------------------------------------
    def upload(self, branch: str, path: str, source: bytes | BinaryIO, metadata: dict[str, Any] | None = None) -> Entry:
        validate_path(path)
        with self.ms.read() as conn:
            self._branch_head(conn, branch)
        info = self.storage.write(slices.object_key(self._current_slice()), source)
        entry = Entry(path, info.key, AddressKind.RELATIVE, info.size, info.checksum or "", info.mtime,
                      json.dumps(metadata, sort_keys=True) if metadata else None)
        with self.ms.write() as conn:
            self._branch_head(conn, branch)
            self._stage(conn, branch, entry)
        return entry

    def _current_slice(self, writable_until: datetime | None = None) -> str:
        """The slice a new object goes to. `writable_until` is the latest time the caller may write
        the object (a token's expiry; now for an upload): incremental GC trusts no object lands later."""
        now = utcnow()
        until = max(now, writable_until or now)
        with self.ms.write() as conn:
            row = conn.execute(sa.select(t.slices).where(self._of(t.slices)).order_by(t.slices.c.name).limit(1)).first()
            if row is None or slices.new_slice_needed(row.created_at, row.objects, now):
                name = slices.slice_name(now)
                if row is None or row.name != name:
                    conn.execute(t.slices.insert().values(repository=self.name, name=name, created_at=now, objects=1,
                                                          writable_until=until))
                    return name
            else:
                name = row.name
            conn.execute(t.slices.update().where(self._of(t.slices), t.slices.c.name == name).values(
                objects=t.slices.c.objects + 1,
                writable_until=sa.case((t.slices.c.writable_until.is_(None), None),  # unknown stays unknown
                                       (t.slices.c.writable_until > until, t.slices.c.writable_until), else_=until)))
            return name

    def stat(self, ref: str, path: str) -> Entry:
        return self._locate(ref, path)[0]

    def _locate(self, ref: str, path: str) -> tuple[Entry, str | None]:
        """The entry `path` has on `ref`, and the commit whose tree held it (None: from staging)."""
        validate_path(path)
        with self.ms.read() as conn:
            commit_id, branch = self._resolve(conn, ref)
            if branch is not None:
                staged = self._staged(conn, branch, path)
                if staged is not None:
                    if staged.address is None:
                        raise PathNotFound(f"path {path!r} not found in {ref!r} (deleted, uncommitted)")
                    return _entry_from_row(staged), None
            commit = self._commit(conn, commit_id)
        entry = self.trees.get(commit.metarange_id, path)
        if entry is None:
            raise PathNotFound(f"path {path!r} not found in {ref!r}")
        return entry, commit_id

    def read(self, ref: str, path: str) -> bytes:
        entry = self.stat(ref, path)
        try:
            if entry.address_kind is AddressKind.RELATIVE:
                return self.storage.read(entry.address)
            return read_location(entry.address)
        except ObjectNotFound:
            raise ObjectGone(f"lakegc://{self.name}/{ref}/{path}") from None

    def physical_address(self, entry: Entry) -> str:
        return self.storage.full_uri(entry.address) if entry.address_kind is AddressKind.RELATIVE else entry.address

    def list(self, ref: str, prefix: str = "") -> Iterator[Entry]:
        """Entries under `prefix`, sorted by path; on a branch, staged changes included."""
        if prefix:
            validate_path(prefix, allow_prefix=True)
        with self.ms.read() as conn:
            commit_id, branch = self._resolve(conn, ref)
            commit = self._commit(conn, commit_id)
            staged = {} if branch is None else {r.path: r for r in conn.execute(
                sa.select(t.staged_entries).where(self._staging_of(branch), t.staged_entries.c.path.startswith(prefix, autoescape=True)))}
        overlay: Changes = {p: None if r.address is None else _entry_from_row(r) for p, r in staged.items()}
        committed = self.trees.entries(commit.metarange_id, prefix)
        yield from _overlay(committed, overlay)

    def remove(self, branch: str, path: str) -> None:
        validate_path(path)
        with self.ms.write() as conn:
            head = self._commit(conn, self._branch_head(conn, branch))
            staged = self._staged(conn, branch, path)
            committed = self.trees.get(head.metarange_id, path) is not None
            if (staged.tombstone if staged is not None else not committed):
                raise PathNotFound(f"path {path!r} not found on branch {branch!r}")
            self._unstage(conn, branch, path)
            if committed:
                conn.execute(t.staged_entries.insert().values(
                    repository=self.name, branch=branch, path=path, tombstone=True))

    def copy(self, src_ref: str, src_path: str, dest_branch: str, dest_path: str) -> Entry:
        """Shallow copy: the new entry shares the source's object. An in-namespace address is
        recorded as copied, so GC keeps it until the copy is committed."""
        validate_path(dest_path)
        source, from_commit = self._locate(src_ref, src_path)
        entry = replace(source, path=dest_path, mtime=utcnow())
        with self.ms.write() as conn:
            self._branch_head(conn, dest_branch)
            self._fenced(conn, sources=[from_commit] if from_commit else [])
            version = self._next_staging_version(conn)
            if entry.address_kind is AddressKind.RELATIVE:
                conn.execute(t.copy_records.insert().values(repository=self.name, address=entry.address,
                                                            created_at=entry.mtime, version=version))
            self._stage(conn, dest_branch, entry, version)
        return entry

    def get_physical_address(self, branch: str, path: str, ttl: timedelta = DEFAULT_TOKEN_TTL) -> tokens.TokenClaims:
        """An address to upload to directly, and its token (see `link`)."""
        validate_path(path)
        expires = utcnow() + ttl
        with self.ms.read() as conn:
            self._branch_head(conn, branch)
        key = slices.object_key(self._current_slice(writable_until=expires))
        with self.ms.write() as conn:
            self._branch_head(conn, branch)
            conn.execute(t.address_tokens.insert().values(
                repository=self.name, address=key, branch=branch, path=path, expires_at=expires))
        return tokens.TokenClaims(self.name, branch, path, key, expires)

    def sign(self, claims: tokens.TokenClaims) -> str:
        return tokens.sign(self.lake.token_secret(), claims)

    def link(self, branch: str, path: str, address: str, size: int, checksum: str, token: str | None = None,
             metadata: dict[str, Any] | None = None) -> Entry:
        """Stage an object that already exists. Outside the namespace anything goes (GC never touches
        it); inside, only an address we handed out, with its live token, once."""
        validate_path(path)
        if size < 0:
            raise InvalidArgument("size must not be negative")
        key, kind = self._classify_address(address)
        entry = Entry(path, key, kind, size, checksum, utcnow(), json.dumps(metadata, sort_keys=True) if metadata else None)
        claims = self._verified_claims(token, key) if kind is AddressKind.RELATIVE else None
        with self.ms.write() as conn:
            self._branch_head(conn, branch)
            if claims is not None:
                self._redeem(conn, claims, branch, path, key)
            self._stage(conn, branch, entry)
        return entry

    def _classify_address(self, address: str) -> tuple[str, AddressKind]:
        if "://" in address or address.startswith("/"):
            location = normalize_location(address)
            if location == self.info.storage_namespace:
                raise InvalidArgument(f"address {address!r} is the namespace itself, not an object")
            key = namespace_key_of(self.info.storage_namespace, location)
            if key is None:
                return location, AddressKind.FULL
        else:
            key = address
        return check_key(key), AddressKind.RELATIVE

    def _verified_claims(self, token: str | None, key: str) -> tokens.TokenClaims:
        if not token:
            raise InvalidToken(f"address {key!r} is inside the namespace: link it with the token from `fs get-address`")
        return tokens.verify(self.lake.token_secret(), token, now=utcnow())

    def _redeem(self, conn: Connection, claims: tokens.TokenClaims, branch: str, path: str, key: str) -> None:
        """Tokens are single-use: redeeming deletes the issued row in the same transaction that stages."""
        if (claims.repository, claims.branch, claims.path, claims.address) != (self.name, branch, path, key):
            raise InvalidToken("invalid token: it was issued for another repository, branch, path or address")
        redeemed = conn.execute(t.address_tokens.delete().where(
            self._of(t.address_tokens), t.address_tokens.c.address == claims.address)).rowcount
        if not redeemed:
            raise InvalidToken("invalid token: already used")

    def _staged(self, conn: Connection, branch: str, path: str) -> sa.Row | None:
        return conn.execute(sa.select(t.staged_entries).where(
            self._staging_of(branch), t.staged_entries.c.path == path)).first()

    def _staging_of(self, branch: str) -> sa.ColumnElement[bool]:
        return sa.and_(self._of(t.staged_entries), t.staged_entries.c.branch == branch)

    def _next_staging_version(self, conn: Connection) -> int:
        """A new staging version for what this write stages or copies (writers queue on one lock,
        so versions follow the order of the writes): a GC sweep re-checks only what was staged or
        copied after its mark."""
        repo = t.repositories
        conn.execute(repo.update().where(repo.c.name == self.name).values(staging_version=repo.c.staging_version + 1))
        return conn.execute(sa.select(repo.c.staging_version).where(repo.c.name == self.name)).scalar_one()

    def _stage(self, conn: Connection, branch: str, entry: Entry, version: int | None = None) -> None:
        self._unstage(conn, branch, entry.path)
        version = version if version is not None else self._next_staging_version(conn)
        conn.execute(t.staged_entries.insert().values(
            repository=self.name, branch=branch, path=entry.path, address=entry.address,
            address_kind=str(entry.address_kind), size=entry.size, checksum=entry.checksum, mtime=entry.mtime,
            metadata=entry.metadata, tombstone=False, version=version))

    def _unstage(self, conn: Connection, branch: str, path: str) -> None:
        conn.execute(t.staged_entries.delete().where(self._staging_of(branch), t.staged_entries.c.path == path))

    # -- history ------------------------------------------------------------
    def commit(self, branch: str, message: str, *, date: datetime | None = None, allow_empty: bool = False,
               metadata: dict[str, Any] | None = None) -> Commit:
        """Apply the branch's staging to its HEAD tree. Only the staged rows we read are cleared, so a
        write that lands while we commit stays staged for the next commit."""
        for _ in range(_RETRIES):
            with self.ms.read() as conn:
                head = self._commit(conn, self._branch_head(conn, branch))
                staged = conn.execute(sa.select(t.staged_entries).where(self._staging_of(branch))).all()
            if not staged and not allow_empty:
                raise NothingToCommit(f"nothing to commit on branch {branch!r} (use --allow-empty)")
            changes: Changes = {r.path: None if r.tombstone else _entry_from_row(r) for r in staged}
            tree = self.trees.apply(head.metarange_id, changes) if changes else head.metarange_id
            commit = _new_commit((head.id,), tree, message, date or utcnow(), metadata or {})
            with self.ms.write() as conn:
                if not self._move_branch(conn, branch, head.id, commit):
                    continue
                if staged:  # one statement, executed for every row read (a commit may clear 100,000s)
                    conn.execute(t.staged_entries.delete().where(
                        self._staging_of(branch), t.staged_entries.c.path == sa.bindparam("p"),
                        t.staged_entries.c.address.is_not_distinct_from(sa.bindparam("a")),
                        t.staged_entries.c.tombstone == sa.bindparam("tomb")),
                        [{"p": r.path, "a": r.address, "tomb": r.tombstone} for r in staged])
            return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving while committing; try again")

    def merge(self, source: str, dest: str, *, message: str | None = None, date: datetime | None = None,
              allow_empty: bool = False) -> Commit:
        """Three-way merge of `source` into branch `dest` from their best common ancestor; always a
        merge commit with parents (dest HEAD, source)."""
        for _ in range(_RETRIES):
            with self.ms.read() as conn:
                src_id, _ = self._resolve(conn, source)
                head = self._commit(conn, self._branch_head(conn, dest))
                self._refuse_dirty(conn, dest, "merge into")
                parents, dates = self._graph(conn)
                base_id = graph.merge_base(parents, dates, head.id, src_id)
                src = self._commit(conn, src_id)
                base = self._commit(conn, base_id) if base_id else None
            if base is None:
                raise InvalidArgument(f"{source!r} and {dest!r} have no common ancestor")
            to_apply = self._three_way(base, head, src)
            if not to_apply and not allow_empty:
                raise NothingToCommit(f"nothing to merge from {source!r} into {dest!r} (use --allow-empty)")
            tree = self.trees.apply(head.metarange_id, to_apply) if to_apply else head.metarange_id
            commit = _new_commit((head.id, src.id), tree, message or f"Merge '{source}' into '{dest}'",
                                 date or utcnow(), {})
            with self.ms.write() as conn:
                self._fenced(conn, sources=[src.id])
                if self._move_branch(conn, dest, head.id, commit):
                    return commit
        raise ConcurrentUpdate(f"branch {dest!r} kept moving while merging; try again")

    def revert(self, branch: str, ref: str, *, parent: int = 1, date: datetime | None = None) -> Commit:
        """A commit on `branch` that undoes what commit `ref` changed against its parent."""
        for _ in range(_RETRIES):
            with self.ms.read() as conn:
                target = self._commit(conn, self._resolve(conn, ref)[0])
                head = self._commit(conn, self._branch_head(conn, branch))
                self._refuse_dirty(conn, branch, "revert on")
                if not 1 <= parent <= len(target.parents):
                    raise InvalidArgument(f"commit {target.id[:12]} has no parent number {parent}")
                undo_to = self._commit(conn, target.parents[parent - 1])
            to_apply = self._three_way(target, head, undo_to)
            if not to_apply:
                raise NothingToCommit(f"reverting {target.id[:12]} changes nothing on {branch!r}")
            tree = self.trees.apply(head.metarange_id, to_apply)
            commit = _new_commit((head.id,), tree, f"Revert {target.id}", date or utcnow(), {})
            with self.ms.write() as conn:
                self._fenced(conn, sources=[undo_to.id])
                if self._move_branch(conn, branch, head.id, commit):
                    return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving while reverting; try again")

    def _three_way(self, base: Commit, ours: Commit, theirs: Commit) -> Changes:
        to_apply, conflicts = three_way(as_changes(self.trees.diff(base.metarange_id, ours.metarange_id)),
                                        as_changes(self.trees.diff(base.metarange_id, theirs.metarange_id)))
        if conflicts:
            raise MergeConflict(conflicts)
        return to_apply

    def _refuse_dirty(self, conn: Connection, branch: str, action: str) -> None:
        if conn.execute(sa.select(t.staged_entries.c.path).where(self._staging_of(branch)).limit(1)).first():
            raise DirtyBranch(f"cannot {action} branch {branch!r}: it has uncommitted changes (commit or reset first)")

    def _move_branch(self, conn: Connection, branch: str, expected_head: str, commit: Commit) -> bool:
        """Compare-and-set of the branch HEAD, recording the commit only when it wins: a commit that
        lost the race would be an orphan GC has to keep as a dangling leaf."""
        moved = conn.execute(t.branches.update().where(
            self._of(t.branches), t.branches.c.name == branch, t.branches.c.head == expected_head,
        ).values(head=commit.id)).rowcount
        if moved:
            _insert_commit(conn, self.name, commit)
        return bool(moved)

    def metaranges(self) -> set[str]:
        """The trees of every commit (commits are never deleted, so this set only grows)."""
        with self.ms.read() as conn:
            return set(conn.execute(sa.select(t.commits.c.metarange_id).where(self._of(t.commits)).distinct()).scalars())

    def log(self, ref: str, amount: int | None = None) -> list[Commit]:
        with self.ms.read() as conn:
            start, _ = self._resolve(conn, ref)
            parents, dates = self._graph(conn)
            ids = []
            for commit_id in graph.log_order(parents, dates, start):
                if amount is not None and len(ids) >= amount:
                    break
                ids.append(commit_id)
            rows = conn.execute(sa.select(t.commits).where(self._of(t.commits), t.commits.c.id.in_(ids))).all()
        by_id = {r.id: _commit_from_row(r) for r in rows}
        return [by_id[i] for i in ids]

    def diff(self, left: str, right: str | None = None) -> list[Change]:
        """Committed changes from `left` to `right`; with no `right`, the uncommitted changes of branch `left`."""
        if right is not None:
            a, _ = self.resolve(left)
            b, _ = self.resolve(right)
            return self.trees.diff(a.metarange_id, b.metarange_id)
        with self.ms.read() as conn:
            head = self._commit(conn, self._branch_head(conn, left))
            staged = conn.execute(sa.select(t.staged_entries).where(self._staging_of(left))
                                  .order_by(t.staged_entries.c.path)).all()
        changes = []
        for r in staged:
            before = self.trees.get(head.metarange_id, r.path)
            after = None if r.tombstone else _entry_from_row(r)
            if before != after:
                kind = ChangeType.ADDED if before is None else ChangeType.REMOVED if after is None else ChangeType.CHANGED
                changes.append(Change(r.path, kind, before, after))
        return changes


def _new_commit(parents: tuple[str, ...], tree: str, message: str, date: datetime, metadata: dict[str, Any]) -> Commit:
    """Commit ids hash their content: the same parents, tree, message, metadata and date are the same commit."""
    payload = json.dumps([list(parents), tree, message, metadata, date.isoformat()], sort_keys=True)
    return Commit(hashlib.sha256(payload.encode()).hexdigest(), parents, tree, message, date, metadata)


def _insert_commit(conn: Connection, repo: str, commit: Commit) -> None:
    exists = conn.execute(sa.select(t.commits.c.id).where(t.commits.c.repository == repo, t.commits.c.id == commit.id)).first()
    if not exists:
        conn.execute(t.commits.insert().values(
            repository=repo, id=commit.id, parents=list(commit.parents), metarange_id=commit.metarange_id,
            message=commit.message, metadata=commit.metadata, creation_date=commit.creation_date))


def _commit_from_row(row: sa.Row) -> Commit:
    return Commit(row.id, tuple(row.parents), row.metarange_id, row.message, row.creation_date, dict(row.metadata))


def _entry_from_row(row: sa.Row) -> Entry:
    return Entry(row.path, row.address, AddressKind(row.address_kind), row.size, row.checksum, row.mtime, row.metadata)


def _overlay(committed: Iterator[Entry], staged: Changes) -> Iterator[Entry]:
    """Merge sorted committed entries with staged ones; a staged None hides the path."""
    pending = sorted(staged.items())
    i = 0
    for entry in committed:
        while i < len(pending) and pending[i][0] < entry.path:
            if pending[i][1] is not None:
                yield pending[i][1]
            i += 1
        if i < len(pending) and pending[i][0] == entry.path:
            if pending[i][1] is not None:
                yield pending[i][1]
            i += 1
            continue
        yield entry
    yield from (e for _, e in pending[i:] if e is not None)


__all__ = ["Lake", "Repository", "LakegcError"]
