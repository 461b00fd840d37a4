"""A repository's objects on its branches: uploading and linking them, reading, listing, copying
and removing them, and the address tokens that let a client write one directly.

Mixed into `Repository` (`repo.repository`), whose state it reads; a module of its own because what
a branch holds is one concern, its refs and history others. Every change that could bring back an
object a running sweep may delete is checked against the sweep's fence (`repo.fence`) in the
transaction that makes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from lakegc.errors import InvalidArgument, InvalidToken, ObjectGone, ObjectNotFound, PathNotFound, PreconditionFailed
from lakegc.repo import fence, slices, tokens
from lakegc.repo.model import AddressKind, Changes, Entry, Precondition, RepositoryInfo
from lakegc.repo.reads import Reads, entry_from_row
from lakegc.storage import Storage, check_key, namespace_key_of, normalize_location, open_location
from lakegc.timeutil import as_utc, utcnow
from lakegc.uri import validate_path

if TYPE_CHECKING:
    from lakegc.repo.store import Tx
    from lakegc.repo.transactions import Transactions
    from lakegc.repo.trees import TreeStore

DEFAULT_TOKEN_TTL = timedelta(hours=24)


class _TokenSecret(Protocol):
    def token_secret(self) -> bytes: ...


class Objects:
    """The object operations of `Repository`, on its store, trees and storage."""

    name: str
    info: RepositoryInfo
    lake: _TokenSecret
    store: Transactions[Tx, Reads]
    storage: Storage
    trees: TreeStore

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
        with self.store.snapshot() as tx:
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
        with self.store.snapshot() as tx:
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
        with self.store.snapshot() as tx:
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
        with self.store.snapshot() as tx:
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


def _check_claims(claims: tokens.TokenClaims, repository: str, branch: str, path: str, key: str) -> None:
    if (claims.repository, claims.branch, claims.path, claims.address) != (repository, branch, path, key):
        raise InvalidToken("invalid token: it was issued for another repository, branch, path or address")


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
