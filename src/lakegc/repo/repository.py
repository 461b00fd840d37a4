"""The repository API: what the CLI, the Python API and anyone scripting lakegc call.

`Lake` is a metastore and the repositories in it; `Repository` is one of them: refs, staging,
commits and objects. This module validates and composes; the statements it runs are the store's
(`repo.store`), the trees it reads and writes are `repo.trees`', and what GC reads of it goes
through `gc_source()`. Every change that could bring back an object a running sweep may delete is
checked against the sweep's fence (`repo.fence`) in the transaction that makes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO

from lakegc.engine.guard import Protected, check_root
from lakegc.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    DirtyBranch,
    InvalidArgument,
    InvalidToken,
    MergeConflict,
    NamespaceError,
    NothingToCommit,
    ObjectGone,
    ObjectNotFound,
    PathNotFound,
    PreconditionFailed,
    RefNotFound,
    RepoNotFound,
)
from lakegc.metastore import Metastore, sqlite_file
from lakegc.repo import fence, graph, slices, tokens
from lakegc.repo.merge import three_way
from lakegc.repo.model import (
    AddressKind,
    Branch,
    Change,
    Changes,
    ChangeType,
    Commit,
    Entry,
    Precondition,
    RepositoryInfo,
    Tag,
)
from lakegc.repo.store import LakeTx, Transactions, Tx, entry_from_row
from lakegc.repo.trees import TreeStore, as_changes
from lakegc.retention.rules import GcRules, parse_rules
from lakegc.settings import lakegc_home
from lakegc.storage import Storage, check_key, namespace_key_of, normalize_location, open_location, open_storage
from lakegc.storage.namespace import claim_namespace, namespace_overlap
from lakegc.timeutil import as_utc, utcnow
from lakegc.uri import validate_path, validate_ref_name, validate_repo_name

if TYPE_CHECKING:
    from lakegc.repo.gc_source import RepositoryGcSource  # imported when asked for: it loads pyarrow

DEFAULT_TOKEN_TTL = timedelta(hours=24)
_RETRIES = 8


class Lake:
    """A metastore and the repositories it holds."""

    def __init__(self, metastore: Metastore | str | None = None):
        self.metastore = metastore if isinstance(metastore, Metastore) else Metastore(metastore)
        self.store = Transactions(self.metastore, LakeTx)

    def create_repository(self, name: str, namespace: str, default_branch: str = "main") -> RepositoryInfo:
        """A repository over an empty namespace (claimed with a marker so no other metastore can
        take it), with its default branch at an initial empty commit."""
        validate_repo_name(name)
        validate_ref_name(default_branch)
        location = normalize_location(namespace)
        check_root(
            location,
            "namespace",
            self.protected_places(repositories=False),
            refusal="use",
            outcome="no repository was created",
        )
        info = RepositoryInfo(name, location, default_branch, utcnow())
        with self.store.write() as lake:
            if lake.repository(name) is not None:
                raise AlreadyExists(f"repository {name!r} already exists")
            overlap = namespace_overlap(
                location, {f"repository {other!r}": ns for other, ns in lake.namespaces().items()}
            )
            if overlap is not None:
                raise NamespaceError(overlap)
            storage = open_storage(location)
            claim_namespace(storage, name)
            initial = new_commit((), TreeStore(storage).build([]), "Repository created", info.created_at, {})
            lake.insert_repository(info)
            tx = lake.of(name)
            tx.insert_commit(initial, {})
            tx.insert_branch(default_branch, initial.id)
        return info

    def protected_places(self, *, repositories: bool = True, except_repository: str | None = None) -> list[Protected]:
        """What no delete may touch on behalf of this metastore: its database file, lakegc's home
        (connector runs; a root inside it is fine), and every repository's namespace (but
        `except_repository`'s)."""
        places = [Protected("lakegc's home folder", str(lakegc_home().absolute()), inside_ok=True)]
        db = sqlite_file(self.metastore.url)
        if db is not None:
            places.append(Protected("the lakegc metastore database", db))
        if repositories:
            places += [
                Protected(f"the namespace of repository {r.name!r}", r.storage_namespace)
                for r in self.repositories()
                if r.name != except_repository
            ]
        return places

    def repositories(self) -> list[RepositoryInfo]:
        with self.store.read() as lake:
            return lake.repositories()

    def repository(self, name: str) -> Repository:
        validate_repo_name(name)
        with self.store.read() as lake:
            info = lake.repository(name)
        if info is None:
            raise RepoNotFound(f"repository {name!r} not found")
        return Repository(self, info)

    def delete_repository(self, name: str) -> None:
        """Forgets the repository's metadata; its namespace and data stay where they are."""
        self.repository(name)
        with self.store.write() as lake:
            lake.delete_repository(name)

    def token_secret(self) -> bytes:
        with self.store.write() as lake:
            return lake.token_secret()


class Repository:
    """One repository: refs, staging, commits and objects."""

    def __init__(self, lake: Lake, info: RepositoryInfo):
        self.lake = lake
        self.info = info
        self.name = info.name
        self.ms = lake.metastore
        self.store = Transactions(lake.metastore, lambda conn: Tx(conn, info.name))
        self.storage: Storage = open_storage(info.storage_namespace)
        self.trees = TreeStore(self.storage)

    def gc_source(self) -> RepositoryGcSource:
        """What repository GC reads of this repository (`repo.gc_source`)."""
        from lakegc.repo.gc_source import RepositoryGcSource

        return RepositoryGcSource(
            self.name,
            self.info.storage_namespace,
            self.storage,
            self.store,
            self.gc_rules,
            lambda: self.lake.protected_places(except_repository=self.name),
        )

    # -- refs ---------------------------------------------------------------
    def resolve(self, ref: str) -> tuple[Commit, str | None]:
        """The commit a ref names, and the branch name when the ref is a branch."""
        with self.store.read() as tx:
            commit_id, branch = tx.resolve(ref)
            return tx.commit(commit_id), branch

    def branches(self) -> list[Branch]:
        with self.store.read() as tx:
            return tx.branches()

    def create_branch(self, name: str, source: str) -> Branch:
        validate_ref_name(name)
        with self.store.write() as tx:
            tx.refuse_taken_ref_name(name)  # first: "exists" whatever the source (lakeFS's clients rely on it)
            commit_id, _ = tx.resolve(source)
            fence.check(tx, branch=(name, commit_id))
            tx.insert_branch(name, commit_id)
        return Branch(name, commit_id)

    def delete_branch(self, name: str) -> None:
        if name == self.info.default_branch:
            raise InvalidArgument(f"branch {name!r} is the default branch of {self.name!r} and cannot be deleted")
        with self.store.write() as tx:
            tx.branch_head(name)
            tx.delete_branch(name)

    def reset_branch(self, name: str, *, path: str | None = None, prefix: str | None = None) -> int:
        """Drop staged changes of the branch: every one, the one at `path`, or those under
        `prefix`; returns how many there were (none at `path` is no error, as in lakeFS)."""
        if path is not None:
            validate_path(path)
        elif prefix:
            validate_path(prefix, allow_prefix=True)
        with self.store.write() as tx:
            tx.branch_head(name)
            if path is None:
                return tx.clear_staging(name, prefix or "")
            if tx.staged(name, path) is None:
                return 0
            tx.unstage(name, path)
            return 1

    def tags(self) -> list[Tag]:
        with self.store.read() as tx:
            return tx.tags()

    def create_tag(self, name: str, ref: str) -> Tag:
        validate_ref_name(name)
        with self.store.write() as tx:
            commit_id, _ = tx.resolve(ref)
            tx.refuse_taken_ref_name(name)
            fence.check(tx, sources=[commit_id])
            tx.insert_tag(name, commit_id)
        return Tag(name, commit_id)

    def delete_tag(self, name: str) -> None:
        validate_ref_name(name)
        with self.store.write() as tx:
            if not tx.delete_tag(name):
                raise RefNotFound(f"tag {name!r} not found in repository {self.name!r}")

    # -- GC rules -----------------------------------------------------------
    def gc_rules(self) -> GcRules | None:
        """The repository's retention rules (None: none set, GC keeps every commit). Validated on
        the way out too: a row edited by hand gets the same one-line error as `gc set-config`."""
        with self.store.read() as tx:
            doc = tx.gc_rules_doc()
        return None if doc is None else parse_rules(json.dumps(doc))

    def set_gc_rules(self, rules: GcRules) -> None:
        with self.store.write() as tx:
            fence.check(tx, rules_change=True)
            tx.set_gc_rules_doc(rules.to_doc())

    def delete_gc_rules(self) -> bool:
        """Remove the rules; False when there were none."""
        with self.store.write() as tx:
            fence.check(tx, rules_change=True)
            return tx.delete_gc_rules()

    # -- objects ------------------------------------------------------------
    def upload(
        self,
        branch: str,
        path: str,
        source: bytes | BinaryIO,
        metadata: dict[str, Any] | None = None,
        when: Precondition | None = None,
    ) -> Entry:
        """Write `source` (bytes, or a stream read in chunks) as a new object and stage it at `path`;
        with `when`, only if the path holds what it says when the entry is staged (PreconditionFailed)."""
        validate_path(path)
        with self.store.read() as tx:
            tx.branch_head(branch)
        info = self.storage.write(slices.object_key(self._current_slice()), source)
        entry = Entry(
            path,
            info.key,
            AddressKind.RELATIVE,
            info.size,
            info.checksum or "",
            info.mtime,
            json.dumps(metadata, sort_keys=True) if metadata else None,
        )
        with self.store.write() as tx:
            tx.branch_head(branch)
            self._check_precondition(tx, branch, path, when)
            tx.stage(branch, entry)
        return entry

    def _check_precondition(self, tx: Tx, branch: str, path: str, when: Precondition | None) -> None:
        if when is None:
            return
        staged = tx.staged(branch, path)
        if staged is not None:
            current = None if staged.address is None else entry_from_row(staged)
        else:
            current = self.trees.get(tx.commit(tx.branch_head(branch)).metarange_id, path)
        if not when.holds(current):
            raise PreconditionFailed(
                f"path {path!r} on branch {branch!r} " + ("exists" if when.absent and current else "has changed")
            )

    def _current_slice(self, writable_until: datetime | None = None) -> str:
        """The slice a new object goes to. `writable_until` is the latest time the caller may write
        the object (a token's expiry; now for an upload): incremental GC trusts no object lands later."""
        now = utcnow()
        until = max(now, writable_until or now)
        with self.store.write() as tx:
            row = tx.newest_slice()
            if row is None or slices.new_slice_needed(row.created_at, row.objects, now):
                name = slices.slice_name(now)
                if row is None or row.name != name:
                    tx.open_slice(name, now, until)
                    return name
            else:
                name = row.name
            tx.count_into_slice(name, until)
            return name

    def stat(self, ref: str, path: str) -> Entry:
        return self._locate(ref, path)[0]

    def _locate(self, ref: str, path: str) -> tuple[Entry, str | None]:
        """The entry `path` has on `ref`, and the commit whose tree held it (None: from staging)."""
        validate_path(path)
        with self.store.read() as tx:
            commit_id, branch = tx.resolve(ref)
            if branch is not None:
                staged = tx.staged(branch, path)
                if staged is not None:
                    if staged.address is None:
                        raise PathNotFound(f"path {path!r} not found in {ref!r} (deleted, uncommitted)")
                    return entry_from_row(staged), None
            commit = tx.commit(commit_id)
        entry = self.trees.get(commit.metarange_id, path)
        if entry is None:
            raise PathNotFound(f"path {path!r} not found in {ref!r}")
        return entry, commit_id

    def read(self, ref: str, path: str) -> bytes:
        with self.open(ref, path)[1] as stream:
            return stream.read()

    def open(self, ref: str, path: str) -> tuple[Entry, BinaryIO]:
        """The entry `path` has on `ref` and its content as a stream (ObjectGone: collected)."""
        entry = self.stat(ref, path)
        try:
            if entry.address_kind is AddressKind.RELATIVE:
                return entry, self.storage.open_read(entry.address)
            return entry, open_location(entry.address)
        except ObjectNotFound:
            raise ObjectGone(f"lakegc://{self.name}/{ref}/{path}") from None

    def collected(self, entry: Entry) -> bool:
        """Is the entry's object gone from the namespace (what a read answers 410 for)? Objects
        outside the namespace are not ours to collect: never."""
        return entry.address_kind is AddressKind.RELATIVE and self.storage.stat(entry.address) is None

    def physical_address(self, entry: Entry) -> str:
        return self.storage.full_uri(entry.address) if entry.address_kind is AddressKind.RELATIVE else entry.address

    def list(self, ref: str, prefix: str = "", after: str = "") -> Iterator[Entry]:
        """Entries under `prefix` with a path greater than `after`, sorted by path; on a branch,
        staged changes included. Lazy: a caller that stops early reads no further ranges."""
        if prefix:
            validate_path(prefix, allow_prefix=True)
        with self.store.read() as tx:
            commit_id, branch = tx.resolve(ref)
            commit = tx.commit(commit_id)
            staged = [] if branch is None else tx.staged_rows(branch, prefix)
        overlay: Changes = {r.path: None if r.address is None else entry_from_row(r) for r in staged if r.path > after}
        yield from _overlay(self.trees.entries(commit.metarange_id, prefix, after), overlay)

    def remove(self, branch: str, path: str) -> bool:
        """Remove `path` from the branch: a committed path gets a staged deletion (True); a path
        that is only staged is unstaged, and nothing is left to commit (False)."""
        validate_path(path)
        with self.store.write() as tx:
            head = tx.commit(tx.branch_head(branch))
            staged = tx.staged(branch, path)
            committed = self.trees.get(head.metarange_id, path) is not None
            if staged.tombstone if staged is not None else not committed:
                raise PathNotFound(f"path {path!r} not found on branch {branch!r}")
            tx.unstage(branch, path)
            if committed:
                tx.stage_deletion(branch, path)
        return committed

    def copy(self, src_ref: str, src_path: str, dest_branch: str, dest_path: str) -> Entry:
        """Shallow copy: the new entry shares the source's object. An in-namespace address is
        recorded as copied, so GC keeps it until the copy is committed."""
        validate_path(dest_path)
        source, from_commit = self._locate(src_ref, src_path)
        entry = replace(source, path=dest_path, mtime=utcnow())
        with self.store.write() as tx:
            tx.branch_head(dest_branch)
            fence.check(tx, sources=[from_commit] if from_commit else [])
            version = tx.next_staging_version()
            if entry.address_kind is AddressKind.RELATIVE:
                tx.record_copy(entry.address, entry.mtime, version)
            tx.stage(dest_branch, entry, version)
        return entry

    def get_physical_address(self, branch: str, path: str, ttl: timedelta = DEFAULT_TOKEN_TTL) -> tokens.TokenClaims:
        """An address to upload to directly, and its token (see `link`)."""
        validate_path(path)
        expires = utcnow() + ttl
        with self.store.read() as tx:
            tx.branch_head(branch)
        key = slices.object_key(self._current_slice(writable_until=expires))
        with self.store.write() as tx:
            tx.branch_head(branch)
            tx.issue_token(key, branch, path, expires, now=utcnow())
        return tokens.TokenClaims(self.name, branch, path, key, expires)

    def sign(self, claims: tokens.TokenClaims) -> str:
        return tokens.sign(self.lake.token_secret(), claims)

    def link(
        self,
        branch: str,
        path: str,
        address: str,
        size: int,
        checksum: str,
        token: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        issued: bool = False,
        when: Precondition | None = None,
    ) -> Entry:
        """Stage an object that already exists. Outside the namespace anything goes (GC never touches
        it); inside, only an address we handed out, with its live token, once, and only when the
        object there has the size and checksum given: a link that fails leaves the token usable.
        `issued` (the server's staging links, whose clients carry no token): an address handed out
        for this branch and path and not expired is its own proof, read from the metastore."""
        validate_path(path)
        if size < 0:
            raise InvalidArgument("size must not be negative")
        key, kind = self._classify_address(address)
        entry = Entry(
            path, key, kind, size, checksum, utcnow(), json.dumps(metadata, sort_keys=True) if metadata else None
        )
        claims = None
        if kind is AddressKind.RELATIVE:
            claims = self._issued_claims(key) if issued and not token else self._verified_claims(token, key)
            _check_claims(claims, self.name, branch, path, key)
            self._check_object(key, size, checksum)
        with self.store.write() as tx:
            tx.branch_head(branch)
            self._check_precondition(tx, branch, path, when)
            if claims is not None and not tx.redeem_token(claims.address):
                raise InvalidToken("invalid token: already used")
            tx.stage(branch, entry)
        return entry

    def outside_namespace(self, address: str) -> str | None:
        """The address as a location when it lies outside the namespace (None: an object of it)."""
        key, kind = self._classify_address(address)
        return key if kind is AddressKind.FULL else None

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

    def _issued_claims(self, key: str) -> tokens.TokenClaims:
        with self.store.read() as tx:
            row = tx.issued_token(key)
        if row is None:
            raise InvalidToken(
                f"address {key!r} is inside the namespace and was not handed out for linking (or is already linked)"
            )
        claims = tokens.TokenClaims(self.name, row.branch, row.path, key, as_utc(row.expires_at))
        if claims.expires_at <= utcnow():
            raise InvalidToken(f"invalid token: the address {key!r} expired at {claims.expires_at.isoformat()}")
        return claims

    def _check_object(self, key: str, size: int, checksum: str) -> None:
        """The object at `key` is there, with `size` bytes whose checksum is `checksum` (the MD5 of
        its content in hex, as `fs upload` records it, or the store's ETag)."""
        where = self.storage.full_uri(key)
        info = self.storage.stat(key)
        if info is None:
            raise InvalidArgument(f"no object at {where}: write it there before linking it (the token stays valid)")
        if info.size != size:
            raise InvalidArgument(f"the object at {where} has {info.size} bytes, not {size} (the token stays valid)")
        given = checksum.strip().strip('"').lower()
        if info.checksum and given == info.checksum.strip('"').lower():
            return
        digest = hashlib.md5(usedforsecurity=False)
        with self.storage.open_read(key) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if given != digest.hexdigest():
            raise InvalidArgument(
                f"checksum {checksum!r} does not match the object at {where} (its MD5 is "
                f"{digest.hexdigest()}); the token stays valid"
            )

    # -- history ------------------------------------------------------------
    def commit(
        self,
        branch: str,
        message: str,
        *,
        date: datetime | None = None,
        allow_empty: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> Commit:
        """Apply the branch's staging to its HEAD tree. Only the staged rows we read are cleared, so a
        write that lands while we commit stays staged for the next commit."""
        for _ in range(_RETRIES):
            with self.store.read() as tx:
                head = tx.commit(tx.branch_head(branch))
                staged = tx.staged_rows(branch)
            if not staged and not allow_empty:
                raise NothingToCommit(f"nothing to commit on branch {branch!r} (use --allow-empty)")
            changes: Changes = {r.path: None if r.tombstone else entry_from_row(r) for r in staged}
            tree = self.trees.apply(head.metarange_id, changes) if changes else head.metarange_id
            commit = new_commit((head.id,), tree, message, date or utcnow(), metadata or {})
            with self.store.write() as tx:
                if not tx.move_branch(branch, head.id, commit, changes):
                    continue
                tx.clear_committed(branch, staged)
            return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving while committing; try again")

    def merge(
        self,
        source: str,
        dest: str,
        *,
        message: str | None = None,
        date: datetime | None = None,
        allow_empty: bool = False,
    ) -> Commit:
        """Three-way merge of `source` into branch `dest` from their best common ancestor; always a
        merge commit with parents (dest HEAD, source)."""
        for _ in range(_RETRIES):
            with self.store.read() as tx:
                src_id, _ = tx.resolve(source)
                head = tx.commit(tx.branch_head(dest))
                _refuse_dirty(tx, dest, "merge into")
                parents, dates = tx.parents_and_dates()
                base_id = graph.merge_base(parents, dates, head.id, src_id)
                src = tx.commit(src_id)
                base = tx.commit(base_id) if base_id else None
            if base is None:
                raise InvalidArgument(f"{source!r} and {dest!r} have no common ancestor")
            to_apply = self._three_way(base, head, src)
            if not to_apply and not allow_empty:
                raise NothingToCommit(f"nothing to merge from {source!r} into {dest!r} (use --allow-empty)")
            tree = self.trees.apply(head.metarange_id, to_apply) if to_apply else head.metarange_id
            commit = new_commit(
                (head.id, src.id), tree, message or f"Merge '{source}' into '{dest}'", date or utcnow(), {}
            )
            with self.store.write() as tx:
                fence.check(tx, sources=[src.id])
                if tx.move_branch(dest, head.id, commit, to_apply):
                    return commit
        raise ConcurrentUpdate(f"branch {dest!r} kept moving while merging; try again")

    def revert(self, branch: str, ref: str, *, parent: int = 1, date: datetime | None = None) -> Commit:
        """A commit on `branch` that undoes what commit `ref` changed against its parent."""
        return self._replay(branch, ref, parent, undo=True, date=date)

    def cherry_pick(self, branch: str, ref: str, *, parent: int = 1, date: datetime | None = None) -> Commit:
        """A commit on `branch` that applies what commit `ref` changed against its parent (number
        `parent` for a merge commit), with `ref`'s message and metadata."""
        return self._replay(branch, ref, parent, undo=False, date=date)

    def _replay(self, branch: str, ref: str, parent: int, *, undo: bool, date: datetime | None) -> Commit:
        """Apply onto `branch` the change commit `ref` made against its parent number `parent`, or
        its inverse (`undo`), three-way from there. Entries come out of `ref` (a cherry-pick) or its
        parent (a revert): that commit is the one the fence must allow."""
        action = "revert" if undo else "cherry-pick"
        for _ in range(_RETRIES):
            with self.store.read() as tx:
                target = tx.commit(tx.resolve(ref)[0])
                head = tx.commit(tx.branch_head(branch))
                _refuse_dirty(tx, branch, f"{action} on")
                if not 1 <= parent <= len(target.parents):
                    raise InvalidArgument(f"commit {target.id[:12]} has no parent number {parent}")
                before = tx.commit(target.parents[parent - 1])
            base, source = (target, before) if undo else (before, target)
            to_apply = self._three_way(base, head, source)
            if not to_apply:
                raise NothingToCommit(f"{action} of {target.id[:12]} changes nothing on {branch!r}")
            tree = self.trees.apply(head.metarange_id, to_apply)
            message, metadata = (f"Revert {target.id}", {}) if undo else (target.message, dict(target.metadata))
            commit = new_commit((head.id,), tree, message, date or utcnow(), metadata)
            with self.store.write() as tx:
                fence.check(tx, sources=[source.id])
                if tx.move_branch(branch, head.id, commit, to_apply):
                    return commit
        raise ConcurrentUpdate(f"branch {branch!r} kept moving during the {action}; try again")

    def _three_way(self, base: Commit, ours: Commit, theirs: Commit) -> Changes:
        to_apply, conflicts = three_way(
            as_changes(self.trees.diff(base.metarange_id, ours.metarange_id)),
            as_changes(self.trees.diff(base.metarange_id, theirs.metarange_id)),
        )
        if conflicts:
            raise MergeConflict(conflicts)
        return to_apply

    def log(
        self,
        ref: str,
        amount: int | None = None,
        *,
        first_parent: bool = False,
        since: datetime | None = None,
        stop_at: str | None = None,
        paths: Sequence[str] = (),
        prefixes: Sequence[str] = (),
    ) -> list[Commit]:
        """The commits reachable from `ref`, newest first (never a parent before its child), at
        most `amount`: only first parents with `first_parent`, none older than `since`, none past
        commit `stop_at` (which is shown), and with `paths` or `prefixes` only those that changed
        one of them against their first parent: from the commits' recorded tree changes, or, while
        the repository has commits from before they were recorded, by comparing their trees."""
        for path in paths:
            validate_path(path)
        touched: set[str] | None = None
        with self.store.read() as tx:
            if (paths or prefixes) and not tx.commits_without_changes():
                changes = [*tx.changes_at(list(paths)), *tx.changes_under(list(prefixes))]
                touched = {r.commit_id for r in changes}
            start, _ = tx.resolve(ref)
            stop = tx.resolve(stop_at)[0] if stop_at else None
            parents, dates = tx.parents_and_dates()
            walk = graph.first_parents(parents) if first_parent else parents
            ids = []
            for commit_id in graph.log_order(walk, dates, start):
                if amount is not None and len(ids) >= amount:
                    break
                if since is None or dates[commit_id] >= since:
                    ids.append(commit_id)
                if commit_id == stop:
                    break
            by_id = tx.commits(ids + [p for i in ids for p in parents[i][:1]])
        if touched is not None:
            ids = [i for i in ids if i in touched]
        elif paths or prefixes:
            ids = [i for i in ids if self._touches(by_id[i], by_id, paths, prefixes)]
        return [by_id[i] for i in ids]

    def _touches(
        self, commit: Commit, by_id: Mapping[str, Commit], paths: Sequence[str], prefixes: Sequence[str]
    ) -> bool:
        """Did `commit` change any of `paths`, or anything under `prefixes`, against its first parent?"""
        after = commit.metarange_id
        before = by_id[commit.parents[0]].metarange_id if commit.parents else None

        def at(tree: str | None, path: str) -> Entry | None:
            return None if tree is None else self.trees.get(tree, path)

        if any(at(before, p) != at(after, p) for p in paths):
            return True
        if not prefixes:
            return False
        if before is None:  # a root commit changed whatever its tree holds
            return any(next(self.trees.entries(after, p), None) is not None for p in prefixes)
        return any(c.path.startswith(tuple(prefixes)) for c in self.trees.diff(before, after))

    def diff(self, left: str, right: str | None = None, *, three_dot: bool = False) -> list[Change]:
        """Committed changes from `left` to `right` (with `three_dot`, from their merge base to
        `right`: what `right` did since it last met `left`); with no `right`, the uncommitted
        changes of branch `left`."""
        if right is not None:
            with self.store.read() as tx:
                a, b = tx.resolve(left)[0], tx.resolve(right)[0]
                if three_dot:
                    parents, dates = tx.parents_and_dates()
                    a = graph.merge_base(parents, dates, a, b) or a
                a_tree, b_tree = tx.commit(a).metarange_id, tx.commit(b).metarange_id
            return self.trees.diff(a_tree, b_tree)
        with self.store.read() as tx:
            head = tx.commit(tx.branch_head(left))
            staged = tx.staged_rows(left, ordered=True)
        changes = []
        for r in staged:
            before = self.trees.get(head.metarange_id, r.path)
            after = None if r.tombstone else entry_from_row(r)
            if before != after:
                kind = (
                    ChangeType.ADDED if before is None else ChangeType.REMOVED if after is None else ChangeType.CHANGED
                )
                changes.append(Change(r.path, kind, before, after))
        return changes


def new_commit(parents: tuple[str, ...], tree: str, message: str, date: datetime, metadata: dict[str, Any]) -> Commit:
    """Commit ids hash their content: the same parents, tree, message, metadata and date are the same commit."""
    payload = json.dumps([list(parents), tree, message, metadata, date.isoformat()], sort_keys=True)
    return Commit(hashlib.sha256(payload.encode()).hexdigest(), parents, tree, message, date, metadata)


def _check_claims(claims: tokens.TokenClaims, repository: str, branch: str, path: str, key: str) -> None:
    if (claims.repository, claims.branch, claims.path, claims.address) != (repository, branch, path, key):
        raise InvalidToken("invalid token: it was issued for another repository, branch, path or address")


def _refuse_dirty(tx: Tx, branch: str, action: str) -> None:
    if tx.has_staging(branch):
        raise DirtyBranch(f"cannot {action} branch {branch!r}: it has uncommitted changes (commit or reset first)")


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


__all__ = ["DEFAULT_TOKEN_TTL", "Lake", "Repository", "new_commit"]
