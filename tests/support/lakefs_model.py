"""An in-memory model of lakeFS repositories, driven by Python calls from tests, writing into their
storage namespaces what lakeFS writes: objects at lakeFS's addresses, committed trees as range and
metarange SSTables under `_lakefs/`, the GC rules file, and, when a client asks, the GC inputs
(`commits.csv`, the uncommitted Parquet files). The HTTP face is `support.lakefs_standin`.

Facts from lakeFS's source: object addresses (pkg/upload/path_provider.go), the `_lakefs/dummy`
written at repository creation (pkg/api/controller.go ensureStorageNamespace), the first commit
"Repository created" with no metarange (pkg/graveler/ref/manager.go), the GC rules file and the
commits CSV (pkg/graveler/retention/garbage_collection_manager.go), the uncommitted listing
(pkg/catalog/gc_write_uncommitted.go, pkg/graveler/uncommitted_diff_iterator.go).
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
import struct
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import google_crc32c
import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.lakefs.sstable import lakefs_id, read_sstable
from support.lakefs_retention import XID, CommitNode, active_commits
from support.lakefs_sst import write_metarange, write_range
from support.lakefs_storage import Namespace

RELATIVE, FULL = 1, 2  # catalog.Entry address types
PREFIX = "_lakefs"  # lakeFS's committed.block_storage_prefix
DUMMY = "this is dummy data - created by lakeFS to check accessibility"
FIRST_COMMIT = "Repository created"
RULES_KEY = f"{PREFIX}/retention/gc/rules/config.json"  # protobuf, despite its name
PARTITION_INTERVAL, PARTITION_SIZE = timedelta(hours=1), 50000  # upload.PathPartitionProvider defaults


class NotFound(Exception):
    """lakeFS's ErrNotFound family: the server answers 404 with this message."""


@dataclass(frozen=True)
class Entry:
    path: str
    address: str  # relative to the namespace (RELATIVE) or a full URI (FULL)
    size: int
    address_type: int = RELATIVE
    created: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class Commit:
    id: str
    parents: tuple[str, ...]
    created: datetime
    metarange_id: str
    message: str
    tree: dict[str, Entry]  # the model's own copy; the truth for readers is the metarange


@dataclass
class Branch:
    name: str
    commit_id: str
    staging: dict[str, Entry | None] = field(default_factory=dict)  # None: a tombstone


@dataclass
class Repository:
    name: str
    ns: Namespace
    default_branch: str
    created: datetime
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, Branch] = field(default_factory=dict)
    rules: tuple[int, dict[str, int]] | None = None

    @property
    def storage_namespace(self) -> str:
        return self.ns.uri


def empty_sstable() -> bytes:
    """An SSTable of no records (what lakeFS's Pebble writer leaves for an empty metarange; RocksDB's
    writer refuses to write one): an empty index block, an empty metaindex block, the footer."""
    block = struct.pack("<II", 0, 1)  # no entries; one restart point at 0

    def trailer(body: bytes) -> bytes:
        crc = google_crc32c.value(body + b"\x00")
        masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        return b"\x00" + struct.pack("<I", masked)

    blocks = block + trailer(block) + block + trailer(block)
    handles = bytes([13, len(block), 0, len(block)])  # metaindex at 13, index at 0 (uvarints)
    return blocks + b"\x01" + handles.ljust(40, b"\x00") + struct.pack("<IQ", 2, 0x88E241B785F4CFF7)


def _rules_proto(default_days: int, branches: dict[str, int]) -> bytes:
    """graveler.GarbageCollectionRules: default_retention_days = 1, branch_retention_days = 2 (map)."""

    def varint(value: int) -> bytes:
        value &= (1 << 64) - 1
        out = bytearray()
        while value > 0x7F:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes(out + bytes([value]))

    out = b"\x08" + varint(default_days) if default_days else b""
    for name, days in branches.items():
        item = b"\x0a" + varint(len(name.encode())) + name.encode() + (b"\x10" + varint(days) if days else b"")
        out += b"\x12" + varint(len(item)) + item
    return out


class Model:
    """lakeFS repositories. `local_path` is the local blockstore's root; `range_size` the most
    entries a range gets (lakeFS splits by bytes; tests want multi-range trees from few objects)."""

    def __init__(self, local_path: Path | None = None, range_size: int = 3, uncommitted_page_size: int = 1000):
        self.local_path = local_path
        self.range_size = range_size
        self.uncommitted_page_size = uncommitted_page_size  # stands for lakeFS's ugc.prepare_max_file_size
        # lakeFS also cuts a page by time (ugc.prepare_interval): a page may then write nothing, and
        # answer no location, while earlier ones did. True: one such page comes last.
        self.empty_last_page = False
        self.repos: dict[str, Repository] = {}
        self._partition: tuple[str, datetime, int] | None = None

    def repo(self, name: str) -> Repository:
        if name not in self.repos:
            raise NotFound("repository not found")
        return self.repos[name]

    # --- repositories and branches
    def create_repository(self, name: str, storage_namespace: str, default_branch: str = "main") -> Repository:
        ns = Namespace(storage_namespace, self.local_path)
        now = datetime.now(UTC)
        repo = Repository(name, ns, default_branch, now)
        ns.put(f"{PREFIX}/dummy", DUMMY.encode())
        first = self._add_commit(repo, (), now, "", FIRST_COMMIT, {})
        repo.branches[default_branch] = Branch(default_branch, first.id)
        self.repos[name] = repo
        return repo

    def create_branch(self, repo: str, name: str, source_ref: str) -> str:
        r = self.repo(repo)
        commit_id = self.resolve(repo, source_ref)
        r.branches[name] = Branch(name, commit_id)
        return commit_id

    def delete_branch(self, repo: str, name: str) -> None:
        del self.repo(repo).branches[name]  # its staged objects stay in storage, now unreferenced

    def reset_branch(self, repo: str, branch: str) -> None:
        self.repo(repo).branches[branch].staging.clear()

    def resolve(self, repo: str, ref: str) -> str:
        r = self.repo(repo)
        if ref in r.branches:
            return r.branches[ref].commit_id
        if ref in r.commits:
            return ref
        raise NotFound(f"ref {ref} not found")

    # --- objects
    def new_address(self, layout: str = "data") -> str:
        """A fresh object address relative to the namespace: `data/<partition>/<xid>` (the partition
        a time-descending xid, renewed hourly or every 50,000 ids), or an older 32-hex root name."""
        if layout == "root":
            return uuid.uuid4().hex
        if layout != "data":
            raise ValueError(f"layout {layout!r}: data or root")
        now = datetime.now(UTC)
        if (
            self._partition is None
            or now - self._partition[1] > PARTITION_INTERVAL
            or self._partition[2] >= PARTITION_SIZE
        ):
            self._partition = (XID.descending(now), now, 0)
        part, since, count = self._partition
        self._partition = (part, since, count + 1)
        return f"data/{part}/{XID.new()}"

    def upload(
        self,
        repo: str,
        branch: str,
        path: str,
        data: bytes = b"data",
        layout: str = "data",
        created: datetime | None = None,
    ) -> str:
        """Write the object into the namespace and stage it on the branch; its address (relative)."""
        r = self.repo(repo)
        address = self.new_address(layout)
        r.ns.put(address, data)
        self.stage(repo, branch, path, address, size=len(data), created=created)
        return address

    def stage(
        self,
        repo: str,
        branch: str,
        path: str,
        address: str,
        size: int = 0,
        full: bool = False,
        data: bytes | None = None,
        created: datetime | None = None,
    ) -> Entry:
        """Stage an entry at `address` as it is: relative to the namespace, or (full=True) a full URI,
        inside the namespace or outside it, as imports reference objects. With `data`, the object is
        written there first."""
        r = self.repo(repo)
        if data is not None:
            r.ns.put_uri(address, data) if full else r.ns.put(address, data)
            size = len(data)
        entry = Entry(path, address, size, FULL if full else RELATIVE, created or datetime.now(UTC))
        r.branches[branch].staging[path] = entry
        return entry

    def delete(self, repo: str, branch: str, path: str) -> None:
        self.repo(repo).branches[branch].staging[path] = None

    def tree(self, repo: str, ref: str) -> dict[str, Entry]:
        return dict(self.repo(repo).commits[self.resolve(repo, ref)].tree)

    # --- commits
    def commit(self, repo: str, branch: str, message: str = "commit", date: datetime | None = None) -> str:
        """Commit the branch's staging: its whole tree written as ranges and a metarange."""
        r = self.repo(repo)
        b = r.branches[branch]
        parent = r.commits[b.commit_id]
        tree = dict(parent.tree)
        for path, entry in b.staging.items():
            if entry is None:
                tree.pop(path, None)
            else:
                tree[path] = entry
        if tree == parent.tree:
            raise ValueError("no changes")  # lakeFS: graveler.ErrNoChanges (400)
        commit = self._add_commit(
            r, (b.commit_id,), date or datetime.now(UTC), self._write_tree(r, tree), message, tree
        )
        b.commit_id, b.staging = commit.id, {}
        return commit.id

    def merge(self, repo: str, source: str, destination: str, date: datetime | None = None) -> str:
        """A merge commit on `destination` (first parent its HEAD, second the source's): the source's
        tree over the destination's, no conflict handling."""
        r = self.repo(repo)
        dest, src = r.branches[destination], self.resolve(repo, source)
        tree = {**r.commits[dest.commit_id].tree, **r.commits[src].tree}
        when = date or datetime.now(UTC)
        commit = self._add_commit(r, (dest.commit_id, src), when, self._write_tree(r, tree), f"Merge {source}", tree)
        dest.commit_id = commit.id
        return commit.id

    def _add_commit(self, r: Repository, parents: tuple, when: datetime, metarange: str, message: str, tree) -> Commit:
        seed = f"{r.name}|{parents}|{when.isoformat()}|{metarange}|{message}|{len(r.commits)}|{uuid.uuid4()}"
        commit = Commit(hashlib.sha256(seed.encode()).hexdigest(), parents, when, metarange, message, tree)
        r.commits[commit.id] = commit
        return commit

    def _write_tree(self, r: Repository, tree: dict[str, Entry]) -> str:
        paths = sorted(tree)
        ranges = []
        for i in range(0, len(paths), self.range_size):
            chunk = [tree[p] for p in paths[i : i + self.range_size]]
            range_id, data = write_range([(e.path, e.address, e.size, e.address_type) for e in chunk])
            r.ns.put(f"{PREFIX}/{range_id}", data)
            ranges.append((range_id, chunk[0].path, chunk[-1].path, len(chunk), len(data)))
        if ranges:
            metarange_id, data = write_metarange(ranges)
        else:
            data = empty_sstable()
            metarange_id = lakefs_id(read_sstable(data, "empty metarange"))
        r.ns.put(f"{PREFIX}/{metarange_id}", data)
        return metarange_id

    # --- GC rules
    def set_gc_rules(self, repo: str, default_retention_days: int, branches: dict[str, int] | None = None) -> None:
        r = self.repo(repo)
        r.rules = (default_retention_days, dict(branches or {}))
        r.ns.put(RULES_KEY, _rules_proto(default_retention_days, r.rules[1]))

    def delete_gc_rules(self, repo: str) -> None:
        r = self.repo(repo)
        r.rules = None
        r.ns.put(RULES_KEY, b"")  # lakeFS saves the nil rules: an empty file, read back as "not found"

    def gc_rules(self, repo: str) -> tuple[int, dict[str, int]]:
        rules = self.repo(repo).rules
        if rules is None:
            raise NotFound("not found")
        return rules

    # --- GC inputs
    def active(self, repo: str, now: datetime | None = None) -> set[str]:
        r = self.repo(repo)
        default, branches = self.gc_rules(repo)
        nodes = {c.id: CommitNode(c.parents, c.created) for c in r.commits.values()}
        return active_commits(nodes, {b.name: b.commit_id for b in r.branches.values()}, default, branches, now)

    def prepare_commits(self, repo: str) -> dict[str, str]:
        """Write commits.csv (the active commits only, each `false`, in no order) for a new run."""
        r = self.repo(repo)
        try:
            active = list(self.active(repo))
        except NotFound as e:
            raise NotFound(f"get gc rules: {e}") from None
        random.shuffle(active)  # lakeFS writes them from a Go map
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["commit_id", "expired", "metarange_id"])
        writer.writerows([c, "false", r.commits[c].metarange_id] for c in active)
        run_id = XID.descending()
        key = f"{PREFIX}/retention/gc/commits/run_id={run_id}/commits.csv"
        r.ns.put(key, out.getvalue().encode())
        return {
            "run_id": run_id,
            "gc_commits_location": r.ns.location(key),
            "gc_addresses_location": r.ns.location(f"{PREFIX}/retention/gc/addresses/"),
            "key": key,
        }

    def uncommitted(self, repo: str) -> list[tuple[str, str, str, int]]:
        """(branch, path, address relative to the namespace, creation unix seconds) of every staged
        object lakeFS lists: branches and paths in order, tombstones and staged values equal to the
        committed ones skipped, full addresses outside the namespace skipped, inside it relativized."""
        r = self.repo(repo)
        prefix = r.ns.normalized()
        out = []
        for name in sorted(r.branches):
            b = r.branches[name]
            committed = r.commits[b.commit_id].tree
            for path in sorted(b.staging):
                entry = b.staging[path]
                if entry is None or committed.get(path) == entry:
                    continue
                address = entry.address
                if entry.address_type != RELATIVE:
                    if not address.startswith(prefix):
                        continue
                    address = address[len(prefix) :]
                out.append((name, path, address, int(entry.created.timestamp())))
        return out

    def prepare_uncommitted(self, repo: str, mark: dict | None) -> tuple[str, str, dict | None]:
        """One page: (run id, location or "" when nothing was written, the next mark or None)."""
        r = self.repo(repo)
        run_id = mark["run_id"] if mark else XID.descending()
        rows = self.uncommitted(repo)
        if mark:  # the branch seeks to the mark's branch, and within it to the mark's path
            rows = [
                row
                for row in rows
                if row[0] > mark["branch"] or (row[0] == mark["branch"] and row[1] >= mark.get("path", ""))
            ]
        page, rest = rows[: self.uncommitted_page_size], rows[self.uncommitted_page_size :]
        next_mark = {"branch": rest[0][0], "path": rest[0][1], "run_id": run_id, "key": ""} if rest else None
        if next_mark is None and page and self.empty_last_page:
            next_mark = {"branch": "\U0010ffff", "path": "", "run_id": run_id, "key": ""}  # past every branch
        if not page:
            return run_id, "", next_mark
        table = pa.table(
            {"physical_address": [row[2] for row in page], "creation_date": [row[3] for row in page]},
            schema=pa.schema([("physical_address", pa.string()), ("creation_date", pa.int64())]),
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="gzip")
        location_key = f"{PREFIX}/retention/gc/uncommitted/{run_id}/uncommitted/"
        r.ns.put(location_key + XID.new(), buffer.getvalue())
        return run_id, r.ns.location(location_key), next_mark
