"""The one interface between repository GC (`lakegc.repogc`) and the repository it collects.

GC never reads the repository's tables. It asks a `GcSource` for what it needs: the commit graph,
the uncommitted references (staged entries, recent copy records, live address tokens) together with
the graph as they stood at one moment, the slices and until when each may still receive objects,
the trees, the retention rules, and a fence around its sweep (`repo.fence`). lakeFS has its
GarbageCollectionManager for this, Nessie a live-set SPI; here the repository answers the same way
whatever stores its commits and staging (`RepositoryGcSource` reads them from the metastore).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from lakegc.errors import InvalidArgument, LakegcError
from lakegc.repo import fence
from lakegc.repo.graph import holding
from lakegc.repo.model import CommitGraph
from lakegc.repo.slices import SliceWindow
from lakegc.retention.rules import GcRules
from lakegc.storage import Storage, namespace_key_of, normalize_location

if TYPE_CHECKING:
    from lakegc.engine.guard import Protected
    from lakegc.repo.reads import Reads
    from lakegc.repo.store import Tx
    from lakegc.repo.transactions import Transactions

# Copy records close the race between a shallow copy and GC's snapshot of staging; the copy's own
# staged entry (then its commit) is the lasting reference, so a record counts for a day only
# (kept longer, one copy later reset would pin its object forever).
COPY_RECORD_WINDOW = timedelta(days=1)
UNCOMMITTED = pa.schema([("address", pa.string()), ("source", pa.string())])  # source: staged | copy | token
_BATCH = 10_000  # uncommitted references streamed from the metastore at a time


@dataclass(frozen=True)
class StagingVersion:
    """Where a repository's staging stood at a snapshot. A later snapshot `since` it reads only
    what was staged or copied after (a sweep's re-check: a change, not the live set)."""

    version: int

    def to_json(self) -> bytes:
        return json.dumps({"staging_version": self.version}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> StagingVersion:
        return cls(int(json.loads(data)["staging_version"]))


@dataclass(frozen=True)
class Snapshot:
    """What `GcSource.snapshot` saw: how many uncommitted references it wrote, the commit graph
    right after them, and where staging stood."""

    uncommitted: int
    graph: CommitGraph
    staging: StagingVersion


@dataclass(frozen=True)
class UncommittedRef:
    """One uncommitted reference to an object: a staged entry (`branch`, `path`), a copy record
    (`when`: copied at) or an address token (`branch`, `path`, `when`: it expires)."""

    source: str  # staged | copy | token
    branch: str | None = None
    path: str | None = None
    when: datetime | None = None


@dataclass(frozen=True)
class References:
    """What `GcSource.references_to` read for one namespace key, in one transaction: its uncommitted
    references, the commit graph, and the commits whose trees hold it (commit -> paths), from the
    recorded tree changes; `holders` is None when some commit has no record (made before schema
    v5), and only reading the trees can tell."""

    uncommitted: list[UncommittedRef]
    graph: CommitGraph
    holders: dict[str, list[str]] | None


Write = Callable[[Iterator[pa.RecordBatch]], int]  # stores UNCOMMITTED batches, returns the rows stored


class GcSource(Protocol):
    """What repository GC needs from the repository it collects (see the module)."""

    name: str
    namespace: str  # normalised: file:///abs/path or s3://bucket/prefix
    storage: Storage

    def rules(self) -> GcRules | None:
        """The stored retention rules (None: keep every commit)."""
        ...

    def trees(self) -> set[str]:
        """The metarange id of every commit (commits are never deleted: this set only grows)."""
        ...

    def slice_windows(self) -> dict[str, SliceWindow]: ...

    def snapshot(self, now: datetime, write: Write, since: StagingVersion | None = None) -> Snapshot:
        """Hand every uncommitted reference to `write` (as namespace keys; with `since`, only those
        staged or copied after it, and the live tokens), then read the commit graph, both in one
        read transaction and in that order: an object committed in between is seen as staged or as
        committed, never as neither."""
        ...

    def references_to(self, now: datetime, key: str) -> References:
        """The uncommitted references to the namespace key `key` and the commit graph, read as
        `snapshot` reads them (one transaction, that order), and the commits holding it: what
        `gc explain` judges one object by. Look-ups by address, whatever the repository's size."""
        ...

    def raise_fence(
        self, run_id: str, marked_active: set[str], params: dict[str, Any], marked_by_rule: Sequence[set[str]] = ()
    ) -> list[set[str]]:
        """Fence a sweep (`repo.fence`); returns the commits active now, per path class."""
        ...

    def lower_fence(self, run_id: str | None = None) -> None:
        """Take the sweep's fence down (None: whatever fence stands, a dead sweeper's)."""
        ...

    def protected_places(self) -> list[Protected]:
        """What a delete in this namespace must never touch: the metastore, lakegc's home, every
        other repository's namespace."""
        ...


def namespace_key(namespace: str, address: str, kind: str) -> str | None:
    """An entry's address as a key of the namespace, or None when it lies outside (GC ignores it)."""
    if kind == "relative":
        return address
    try:  # through symlinks too: an alias of the namespace still names our object
        return namespace_key_of(namespace, normalize_location(address))
    except LakegcError:  # an unparsable external address references nothing of ours
        return None


def address_key(namespace: str, address: str) -> str | None:
    """A physical address as given by a user: a full location (`s3://...`, `file:///...`, `/abs`),
    its namespace key or None when it lies outside; anything else is a key of the namespace."""
    if "://" in address or address.startswith("/"):
        return namespace_key_of(namespace, normalize_location(address))  # a bad location is an error here
    parts = address.split("/")
    if not address or any(part in ("", ".", "..") for part in parts):
        raise InvalidArgument(f"invalid address {address!r}: a full location or a key of the namespace (data/...)")
    return address


class RepositoryGcSource:
    """A repository's `GcSource`, read from the metastore. Given the parts of the repository it reads
    (its transactions, how to read its rules and which places are protected), never the repository
    itself: the repository makes its GC source, so this module must not need it."""

    def __init__(
        self,
        name: str,
        namespace: str,
        storage: Storage,
        store: Transactions[Tx, Reads],
        rules: Callable[[], GcRules | None],
        protected: Callable[[], list[Protected]],
    ):
        self.name, self.namespace, self.storage = name, namespace, storage
        self._store, self._rules, self._protected = store, rules, protected

    def rules(self) -> GcRules | None:
        return self._rules()

    def trees(self) -> set[str]:
        with self._store.read() as tx:
            return tx.metaranges()

    def slice_windows(self) -> dict[str, SliceWindow]:
        with self._store.read() as tx:
            return {r.name: SliceWindow(r.name, r.created_at, r.writable_until) for r in tx.slice_rows()}

    def snapshot(self, now: datetime, write: Write, since: StagingVersion | None = None) -> Snapshot:
        with self._store.read() as tx:
            staging = StagingVersion(tx.staging_version())
            streams = tx.uncommitted_addresses(now, COPY_RECORD_WINDOW, None if since is None else since.version)

            def batches() -> Iterator[pa.RecordBatch]:
                for source, result in streams:
                    for rows in result.partitions(_BATCH):
                        keys = [k for r in rows if (k := namespace_key(self.namespace, r[0], r[1])) is not None]
                        yield pa.RecordBatch.from_pydict(
                            {"address": keys, "source": [source] * len(keys)}, schema=UNCOMMITTED
                        )

            count = write(batches())
            graph = tx.commit_graph()
        return Snapshot(count, graph, staging)

    def external_references(self, now: datetime) -> Iterator[str]:
        """The full addresses the uncommitted references name (staged links to objects outside the
        namespace, or named in full): what a warehouse run must keep wherever they lie."""
        with self._store.read() as tx:
            for _source, result in tx.uncommitted_addresses(now, COPY_RECORD_WINDOW, None):
                for rows in result.partitions(_BATCH):
                    yield from (r[0] for r in rows if r[1] != "relative")

    def references_to(self, now: datetime, key: str) -> References:
        found: list[UncommittedRef] = []
        with self._store.read() as tx:
            for source, result in tx.uncommitted_addresses(now, COPY_RECORD_WINDOW, None, detail=True, key=key):
                found += [
                    UncommittedRef(source, branch, path, when)
                    for address, kind, branch, path, when in result
                    if namespace_key(self.namespace, address, kind) == key
                ]
            graph = tx.commit_graph()
            holders = None if tx.commits_without_changes() else self._holders(tx, graph, key)
        return References(found, graph, holders)

    def _holders(self, tx: Tx, graph: CommitGraph, key: str) -> dict[str, list[str]]:
        """The commits whose trees hold `key`, from the recorded changes of the paths it was put at."""
        paths = sorted({r.path for r in tx.changes_naming(key) if self._names(r, key)})
        set_by: dict[str, dict[str, bool]] = {path: {} for path in paths}
        for r in tx.changes_at(paths):
            set_by[r.path][r.commit_id] = self._names(r, key)
        return holding({c: node.parents for c, node in graph.commits.items()}, set_by)

    def _names(self, change: Any, key: str) -> bool:
        return change.address is not None and namespace_key(self.namespace, change.address, change.address_kind) == key

    def raise_fence(
        self, run_id: str, marked_active: set[str], params: dict[str, Any], marked_by_rule: Sequence[set[str]] = ()
    ) -> list[set[str]]:
        with self._store.write() as tx:
            return fence.raise_fence(tx, run_id, marked_active, params, marked_by_rule)

    def lower_fence(self, run_id: str | None = None) -> None:
        with self._store.write() as tx:
            tx.drop_fence(run_id)

    def protected_places(self) -> list[Protected]:
        return self._protected()
