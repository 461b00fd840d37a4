"""Build scenario S1 fast: object files written straight into the namespace (two processes), staged
entries and slices bulk-loaded into the metastore, and the history made through the repository's own
commit, branch and merge code (backdated), so the trees are real ranges a GC has to read.

The history is built so the garbage is known by construction (`truth.parquet`):
- *expired*: feature branches compact their own files before the retention cutoff, before they are
  merged and with nothing branched from them, so only expired commits hold the removed files;
- *uncommitted*: files in the slices that no commit and no staged entry names (abandoned uploads).
Everything else is live: in a branch HEAD's tree (features are created from main and share its
ranges; merges bring a feature's files into main) or staged.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from benchmarks.scenario import HISTORY, NEWEST, RETENTION_DAYS, Scenario
from lakegc.metastore import schema as t
from lakegc.repo import slices as slicing
from lakegc.repo.repository import Lake, Repository
from lakegc.repo.trees import RANGES_PREFIX, TreeStore
from lakegc.retention.active import CommitNode, active_commits
from lakegc.retention.rules import GcRules, policies_from_rules
from lakegc.timeutil import utcnow

REPO = "bench"
OBJECTS_SCHEMA = pa.schema(
    [("address", pa.string()), ("size", pa.int64()), ("mtime", pa.float64()), ("reason", pa.string())]
)  # reason: '' for live objects
_TREE_CACHE_COMMITS = 50  # start a fresh TreeStore this often, so its range cache stays small


@dataclass
class Lakefiles:
    """Where one built scenario lives."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def namespace(self) -> Path:
        return self.root / "ns"

    @property
    def metastore_url(self) -> str:
        return f"sqlite:///{self.home / 'lakegc.db'}"

    @property
    def objects(self) -> Path:
        return self.root / "objects.parquet"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def inventory(self) -> Path:
        """Where an S3 Inventory of the namespace is written (benchmarks.inventory)."""
        return self.root / "inventory"

    def env(self) -> dict[str, str]:
        return {**os.environ, "LAKEGC_HOME": str(self.home), "LAKEGC_METASTORE": self.metastore_url}


@dataclass
class _Objects:
    """Every object written so far: key, size, mtime (epoch s), garbage reason, and the slices they fill."""

    rng: random.Random
    keys: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    mtimes: list[float] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    slices: dict[str, list] = field(default_factory=dict)  # name -> [created, count, writable_until]

    def new(self, when: datetime) -> tuple[str, int, str]:
        """A new object written at `when`: (key, size, md5)."""
        hour = when.replace(minute=0, second=0, microsecond=0)
        name = slicing.slice_name(hour)
        entry = self.slices.setdefault(name, [hour, 0, when])
        entry[1] += 1
        entry[2] = max(entry[2], when)
        key = f"{slicing.DATA_PREFIX}{name}/{int(when.timestamp() * 1e9):016x}{self.rng.getrandbits(64):016x}"
        size = self.rng.randint(64, 2048)
        self.keys.append(key)
        self.sizes.append(size)
        self.mtimes.append(when.timestamp())
        return key, size, _md5(size)

    def table(self) -> pa.Table:
        return pa.table(
            {
                "address": self.keys,
                "size": self.sizes,
                "mtime": self.mtimes,
                "reason": [self.reasons.get(k, "") for k in self.keys],
            },
            schema=OBJECTS_SCHEMA,
        )


def _md5(size: int) -> str:
    return hashlib.md5(_content(size)).hexdigest()


def _content(size: int) -> bytes:
    return (b"lakegc benchmark object " * (size // 24 + 1))[:size]


def build(scenario: Scenario, root: Path, seed: int = 1) -> dict:
    """Build the lake under `root` (which must not exist); returns the manifest (also written)."""
    started = time.monotonic()
    files = Lakefiles(root)
    files.home.mkdir(parents=True)
    now = utcnow()
    rng = random.Random(seed)
    lake = Lake(files.metastore_url)
    lake.create_repository(REPO, str(files.namespace))
    repo = lake.repository(REPO)
    repo.set_gc_rules(GcRules(default_retention_days=RETENTION_DAYS, branches=[]))
    objects = _Objects(rng)
    expired = _history(repo, scenario, objects, now, rng)
    _stage(repo, scenario, objects, now, rng)
    for _ in range(scenario.stale - expired):  # abandoned uploads: in a slice, named by nothing
        key, _, _ = objects.new(now - NEWEST - rng.random() * (HISTORY - NEWEST))
        objects.reasons[key] = "uncommitted"
    _insert_slices(repo, objects.slices)
    table = objects.table()
    pq.write_table(table, files.objects)
    write_files(files.namespace, table)
    ranges = list((files.namespace / RANGES_PREFIX).iterdir())
    manifest = {
        "scenario": scenario.__dict__,
        "seed": seed,
        "generated_at": now.isoformat(),
        "objects": table.num_rows,
        "stale": len(objects.reasons),
        "stale_expired": expired,
        "commits": _count(repo, t.commits),
        "branches": _count(repo, t.branches),
        "staged": _count(repo, t.staged_entries),
        "slices": len(objects.slices),
        "ranges": len(ranges),
        "range_entries": sum(pq.read_metadata(path).num_rows for path in ranges),
        "active_ranges": active_ranges(repo, now),
        "build_s": round(time.monotonic() - started, 1),
    }
    files.manifest.write_text(json.dumps(manifest))
    return manifest


def _history(repo: Repository, sc: Scenario, objects: _Objects, now: datetime, rng: random.Random) -> int:
    """Commits, branches and merges in time order; returns how many files only expired commits hold."""
    start, end = now - HISTORY, now - NEWEST
    compact_before = now - timedelta(days=RETENTION_DAYS + 1)
    features = [f"feature-{i:03d}" for i in range(1, sc.branches)]
    plain = sc.commits - sc.merges
    on_main = max(2, plain // 5)
    per_feature = [
        (plain - on_main) // len(features) + (i < (plain - on_main) % len(features)) for i in range(len(features))
    ]
    events: list[tuple[datetime, int, str, str]] = []  # (when, order, kind, branch)
    events += [(start + (end - start) * rng.random(), 1, "commit", "main") for _ in range(on_main)]
    merged = set(rng.sample(features, sc.merges))
    for name, count in zip(features, per_feature):
        created = start + timedelta(hours=1) + (end - start - timedelta(days=2)) * rng.random()
        last = min(created + timedelta(days=rng.uniform(1, 20)), end - timedelta(hours=2))
        events.append((created, 0, "branch", name))
        events += [(created + (last - created) * (i + 1) / count, 1, "commit", name) for i in range(count)]
        if name in merged:
            events.append((last + timedelta(hours=1), 2, "merge", name))
    events.sort()
    compacting = [e for e in events if e[2] == "commit" and e[3] != "main" and e[0] < compact_before]
    to_remove = sc.stale_expired
    per_compaction = -(-to_remove // max(1, len(compacting)))
    adds = [sc.committed // plain + (i < sc.committed % plain) for i in range(plain)]
    own: dict[str, list[tuple[str, str]]] = defaultdict(list)  # branch -> its own live (path, address)
    parts: dict[str, int] = defaultdict(int)
    removed = 0
    for i, (when, _, kind, branch) in enumerate(events):
        if i % _TREE_CACHE_COMMITS == 0:
            repo.trees = TreeStore(repo.storage)
        if kind == "branch":
            repo.create_branch(branch, "main")
            continue
        if kind == "merge":
            repo.merge(branch, "main", date=when)
            continue
        rows = []
        if branch != "main" and when < compact_before and own[branch] and removed < to_remove:
            n = min(per_compaction, len(own[branch]), to_remove - removed)
            for path, address in own[branch][:n]:
                rows.append(
                    {
                        "path": path,
                        "address": None,
                        "address_kind": None,
                        "size": None,
                        "checksum": None,
                        "mtime": None,
                        "metadata": None,
                        "tombstone": True,
                    }
                )
                objects.reasons[address] = "expired"
            del own[branch][:n]
            removed += n
        part = parts[branch]
        parts[branch] += 1
        for j in range(adds.pop()):
            path = f"tables/{branch}/part={part:05d}/file-{j:05d}.parquet"
            written = when - timedelta(minutes=rng.uniform(1, 30))
            key, size, md5 = objects.new(written)
            own[branch].append((path, key))
            rows.append(
                {
                    "path": path,
                    "address": key,
                    "address_kind": "relative",
                    "size": size,
                    "checksum": md5,
                    "mtime": written,
                    "metadata": None,
                    "tombstone": False,
                }
            )
        _insert_staged(repo, branch, rows)
        repo.commit(branch, f"{branch}: part {part}", date=when)
    releases = [c for c in repo.log("main") if c.message.startswith("main:")]  # main's own commits only
    for n, commit in enumerate(releases[5 :: max(1, len(releases) // 6)][:5]):
        repo.create_tag(f"v0.{n}", commit.id)
    return removed


def _stage(repo: Repository, sc: Scenario, objects: _Objects, now: datetime, rng: random.Random) -> None:
    """The uncommitted references: staged uploads of the last five days, on every branch."""
    branches = [b.name for b in repo.branches()]
    rows: dict[str, list[dict]] = defaultdict(list)
    for i in range(sc.uncommitted):
        written = now - NEWEST - timedelta(days=5) * rng.random()
        key, size, md5 = objects.new(written)
        branch = branches[i % len(branches)]
        rows[branch].append(
            {
                "path": f"staging/{branch}/{i:07d}.parquet",
                "address": key,
                "address_kind": "relative",
                "size": size,
                "checksum": md5,
                "mtime": written,
                "metadata": None,
                "tombstone": False,
            }
        )
    for branch, branch_rows in rows.items():
        _insert_staged(repo, branch, branch_rows)


def _insert_staged(repo: Repository, branch: str, rows: list[dict]) -> None:
    if rows:
        with repo.ms.write() as conn:
            conn.execute(t.staged_entries.insert(), [{"repository": repo.name, "branch": branch, **r} for r in rows])


def _insert_slices(repo: Repository, found: dict[str, list]) -> None:
    """Record the slices objects were written into. A slice already recorded (a second change in
    the same hour) was written into again just now, as a writer's slice would be: its count grows
    and it is writable until now, so an incremental run lists it again."""
    with repo.ms.write() as conn:
        known = set(
            conn.execute(
                sa.select(t.slices.c.name).where(t.slices.c.repository == repo.name, t.slices.c.name.in_(list(found)))
            ).scalars()
        )
        new = [
            {"repository": repo.name, "name": name, "created_at": created, "objects": count, "writable_until": until}
            for name, (created, count, until) in found.items()
            if name not in known
        ]
        if new:
            conn.execute(t.slices.insert(), new)
        for name in known:
            conn.execute(
                t.slices.update()
                .where(t.slices.c.repository == repo.name, t.slices.c.name == name)
                .values(objects=t.slices.c.objects + found[name][1], writable_until=utcnow())
            )


def _count(repo: Repository, table: sa.Table) -> int:
    with repo.ms.read() as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(table).where(table.c.repository == repo.name)
        ).scalar()


def active_ranges(repo: Repository, now: datetime) -> list[str]:
    """The distinct ranges of the commits the repository's rules keep: what the floor script reads."""
    with repo.ms.read() as conn:
        rows = conn.execute(
            sa.select(t.commits.c.id, t.commits.c.parents, t.commits.c.creation_date, t.commits.c.metarange_id).where(
                t.commits.c.repository == repo.name
            )
        ).all()
        heads = dict(
            conn.execute(
                sa.select(t.branches.c.name, t.branches.c.head).where(t.branches.c.repository == repo.name)
            ).all()
        )
        tags = list(conn.execute(sa.select(t.tags.c.commit_id).where(t.tags.c.repository == repo.name)).scalars())
    commits = {r.id: CommitNode(tuple(r.parents), r.creation_date) for r in rows}
    rules = GcRules(default_retention_days=RETENTION_DAYS, branches=[])
    active = active_commits(commits, heads, policies_from_rules(rules, now), tags)
    trees = TreeStore(repo.storage)
    return sorted({ref.id for r in rows if r.id in active for ref in trees.ranges(r.metarange_id)})


def write_files(namespace: Path, objects: pa.Table, processes: int = 2) -> None:
    """Write the objects' files with their sizes and backdated mtimes, in `processes` processes."""
    keys, sizes, mtimes = (objects.column(c).to_pylist() for c in ("address", "size", "mtime"))
    for folder in {k.rsplit("/", 1)[0] for k in keys}:
        (namespace / folder).mkdir(parents=True, exist_ok=True)
    step = -(-len(keys) // processes)
    chunks = [
        (str(namespace), keys[i : i + step], sizes[i : i + step], mtimes[i : i + step])
        for i in range(0, len(keys), step)
    ]
    with ProcessPoolExecutor(processes) as pool:
        list(pool.map(_write_chunk, chunks))


def _write_chunk(chunk: tuple[str, list[str], list[int], list[float]]) -> None:
    root, keys, sizes, mtimes = chunk
    for key, size, mtime in zip(keys, sizes, mtimes):
        path = f"{root}/{key}"
        with open(path, "wb") as f:
            f.write(_content(size))
        os.utime(path, (mtime, mtime))


def apply_change(files: Lakefiles, fraction: float = 0.01, seed: int = 2, count: int | None = None) -> pa.Table:
    """What happens between two GC runs: `fraction` of the lake's object count (or `count` objects)
    arrives, half of it committed on a few branches, 3/10 staged and 1/5 abandoned. Writes land in
    new slices, as a writer's would. Returns the new objects with their garbage reason ('' when live)."""
    rng = random.Random(seed)
    repo = Lake(files.metastore_url).repository(REPO)
    when = utcnow() - NEWEST + timedelta(hours=1)  # after every commit so far, older than the 24 h min-age
    count = count if count is not None else max(10, round(pq.read_metadata(files.objects).num_rows * fraction))
    objects = _Objects(rng)
    branches = [b.name for b in repo.branches()][:5]

    def new_rows(n: int, folder: str) -> list[dict]:
        rows = []
        for i in range(n):
            written = when + timedelta(minutes=rng.uniform(0, 10))
            key, size, md5 = objects.new(written)
            rows.append(
                {
                    "path": f"{folder}/{i:07d}.parquet",
                    "address": key,
                    "address_kind": "relative",
                    "size": size,
                    "checksum": md5,
                    "mtime": written,
                    "metadata": None,
                    "tombstone": False,
                }
            )
        return rows

    for n, branch in enumerate(branches):
        _insert_staged(repo, branch, new_rows(count // 2 // len(branches), f"tables/{branch}/part=change"))
        repo.commit(branch, f"{branch}: change", date=when + timedelta(minutes=20 + n))
    for branch in branches:
        _insert_staged(repo, branch, new_rows(count * 3 // 10 // len(branches), f"staging/{branch}/change"))
    for _ in range(count // 5):
        key, _, _ = objects.new(when + timedelta(minutes=rng.uniform(0, 10)))
        objects.reasons[key] = "uncommitted"
    _insert_slices(repo, objects.slices)
    table = objects.table()
    write_files(files.namespace, table)
    return table
