"""What still references objects: the uncommitted snapshot (from the metastore) and the committed
trees (ranges read on the executors).

Order matters (seed 001): the uncommitted snapshot is taken *before* the commit graph is read, so an
object committed in between is seen either as staged or as committed, never as neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from lakegc.errors import LakegcError
from lakegc.retention.active import CommitNode
from lakegc.engine.arrowio import write_driver_parquet
from lakegc.metastore import schema as t
from lakegc.repo.trees import read_metarange, read_range
from lakegc.repo.repository import Repository
from lakegc.storage import Storage, namespace_key_of, normalize_location


if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COPY_RECORD_WINDOW = timedelta(days=1)
UNCOMMITTED_SCHEMA = pa.schema([("address", pa.string()), ("source", pa.string())])
UNCOMMITTED_DDL = "address string, source string"
ADDRESS_SCHEMA = "address string"
RANGES_DDL = "range_id string, min_path string, trees long"
COUNTS_DDL = "address string, n long, fresh long"
_BATCH = 10_000  # uncommitted references streamed from the metastore at a time
_DEDUP_ROWS = 1 << 18  # range entries summed together on an executor


@dataclass(frozen=True)
class Graph:
    """The small things the driver holds: commits, branch HEADs, tags."""

    commits: dict[str, CommitNode]
    metaranges: dict[str, str]  # commit id -> metarange id
    branches: dict[str, str]  # branch -> HEAD commit id
    tags: list[str]  # tagged commit ids


def namespace_key(namespace: str, address: str, kind: str) -> str | None:
    """An address as a key of the namespace, or None when it lies outside (then GC ignores it)."""
    if kind == "relative":
        return address
    try:  # through symlinks too: an alias of the namespace still names our object
        return namespace_key_of(namespace, normalize_location(address))
    except LakegcError:  # an unparsable external address references nothing of ours
        return None


@dataclass(frozen=True)
class StagingVersion:
    """Where a repository's staging stood at a snapshot (`repositories.staging_version`). A later
    snapshot `since` it reads only what was staged or copied after (a sweep's re-check: a change,
    not the live set)."""

    version: int

    def to_json(self) -> bytes:
        return json.dumps({"staging_version": self.version}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "StagingVersion":
        return cls(int(json.loads(data)["staging_version"]))


def snapshot_uncommitted(repo: Repository, key: str, now: datetime,
                         since: StagingVersion | None = None) -> tuple[int, Graph, StagingVersion]:
    """Write every uncommitted reference (staged entries of all branches, recent copy records, live
    token addresses) to `key`, then read the commit graph, in that order and in one read transaction.
    With `since`, only the entries staged and the copies recorded after it (live tokens: all, they
    are few). Returns the count, the graph and where staging stood.

    Copy records guard the race between a shallow copy and this snapshot (seed 001); the copy's own
    staged entry or commit is the lasting reference, so records older than COPY_RECORD_WINDOW no
    longer count (otherwise one copy, later reset, would pin its object forever)."""
    namespace = repo.info.storage_namespace
    staged_after = [] if since is None else [t.staged_entries.c.version > since.version]
    copied_after = [] if since is None else [t.copy_records.c.version > since.version]
    with repo.ms.read() as conn:
        version = StagingVersion(conn.execute(sa.select(t.repositories.c.staging_version)
                                              .where(t.repositories.c.name == repo.name)).scalar_one())
        staged = conn.execution_options(stream_results=True).execute(
            sa.select(t.staged_entries.c.address, t.staged_entries.c.address_kind).where(
                t.staged_entries.c.repository == repo.name, t.staged_entries.c.tombstone.is_(False), *staged_after))
        copies = conn.execution_options(stream_results=True).execute(
            sa.select(t.copy_records.c.address).where(
                t.copy_records.c.repository == repo.name, t.copy_records.c.created_at > now - COPY_RECORD_WINDOW,
                *copied_after))
        tokens = conn.execution_options(stream_results=True).execute(
            sa.select(t.address_tokens.c.address).where(
                t.address_tokens.c.repository == repo.name, t.address_tokens.c.expires_at > now))

        def batches() -> Iterator[pa.RecordBatch]:
            for source, result, has_kind in (("staged", staged, True), ("copy", copies, False), ("token", tokens, False)):
                for rows in result.partitions(_BATCH):
                    keys = [namespace_key(namespace, r[0], r[1] if has_kind else "relative") for r in rows]
                    kept = [k for k in keys if k is not None]
                    yield pa.RecordBatch.from_pydict({"address": kept, "source": [source] * len(kept)},
                                                     schema=UNCOMMITTED_SCHEMA)

        count = write_driver_parquet(repo.storage, key, batches(), UNCOMMITTED_SCHEMA)
        graph = read_graph(conn, repo.name)
    return count, graph, version


def read_graph(conn: sa.Connection, repo: str) -> Graph:
    rows = conn.execute(sa.select(t.commits.c.id, t.commits.c.parents, t.commits.c.creation_date,
                                  t.commits.c.metarange_id).where(t.commits.c.repository == repo)).all()
    branches = dict(conn.execute(sa.select(t.branches.c.name, t.branches.c.head).where(t.branches.c.repository == repo)).all())
    tags = list(conn.execute(sa.select(t.tags.c.commit_id).where(t.tags.c.repository == repo)).scalars())
    return Graph({r.id: CommitNode(tuple(r.parents), r.creation_date) for r in rows},
                 {r.id: r.metarange_id for r in rows}, branches, tags)


def tree_ranges(spark: "SparkSession", storage: Storage, trees: Mapping[str, int]) -> "DataFrame":
    """(range_id, min_path, trees) of every distinct range of the trees, given as metarange id ->
    weight; `trees` sums the weights of the trees holding the range (with weight 1 for an active
    tree and 0 for an expired one: how many active trees hold it). One pass over the metaranges
    serves both the active and the expired side of a run."""
    from pyspark.sql import functions as F

    from lakegc.engine.spark import work_items

    rows = sorted(trees.items())

    def read_metaranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Most trees share most of their ranges: summed here, in Arrow, before Spark."""
        pending: list[pa.Table] = []
        count = 0
        for batch in batches:
            for index in batch.column(0).to_pylist():
                mid, weight = rows[index]
                table = read_metarange(storage, mid).select(["range_id", "min_path"])  # verified whole
                pending.append(table.append_column("trees", pa.repeat(pa.scalar(weight, pa.int64()), table.num_rows)))
                count += table.num_rows
                if count >= _DEDUP_ROWS:
                    yield from _summed_ranges(pending)
                    pending, count = [], 0
        if pending:
            yield from _summed_ranges(pending)

    return (work_items(spark, len(rows), spark.sparkContext.defaultParallelism * 4)
            .mapInArrow(read_metaranges, RANGES_DDL)
            .groupBy("range_id", "min_path").agg(F.sum("trees").alias("trees")))


def _summed_ranges(tables: list[pa.Table]) -> list[pa.RecordBatch]:
    grouped = pa.concat_tables(tables).group_by(["range_id", "min_path"]).aggregate([("trees", "sum")])
    return grouped.select(["range_id", "min_path", "trees_sum"]).rename_columns(["range_id", "min_path", "trees"]).to_batches()


def entry_counts(spark: "SparkSession", storage: Storage, ranges: "DataFrame") -> "DataFrame":
    """(address, n, fresh) over the entries of the ranges (rows with range_id, min_path, weight and
    fresh): each range read once, on the executors, each of its entries adding the range's weight
    to its address's n and its `fresh` to the address's fresh. Every address of the ranges gets a
    row, also when its n is 0."""
    from pyspark.sql import functions as F

    namespace = storage.uri

    def read_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Ranges arrive grouped by their first path, so the versions of one stretch of the tree
        (a commit that appends to a folder rewrites its last range, keeping its first path) meet
        in one task, and their shared entries are summed here, in Arrow, before Spark ever sees
        them."""
        pending: list[pa.Table] = []
        rows = 0
        for batch in batches:
            for rid, weight, fresh in zip(*(batch.column(c).to_pylist() for c in ("range_id", "weight", "fresh"))):
                addresses = _range_addresses(storage, namespace, rid)
                pending.append(pa.table({"address": addresses,
                                         "n": pa.repeat(pa.scalar(weight, pa.int64()), len(addresses)),
                                         "fresh": pa.repeat(pa.scalar(fresh, pa.int64()), len(addresses))}))
                rows += len(addresses)
                if rows >= _DEDUP_ROWS:
                    yield from _summed_addresses(pending)
                    pending, rows = [], 0
        if pending:
            yield from _summed_addresses(pending)

    return (ranges.select("range_id", "min_path", F.col("weight").cast("long"), F.col("fresh").cast("long"))
            .repartition(spark.sparkContext.defaultParallelism * 4, "min_path").sortWithinPartitions("min_path")
            .mapInArrow(read_ranges, COUNTS_DDL)
            .groupBy("address").agg(F.sum("n").alias("n"), F.sum("fresh").alias("fresh")))


def _summed_addresses(tables: list[pa.Table]) -> list[pa.RecordBatch]:
    grouped = pa.concat_tables(tables).group_by("address").aggregate([("n", "sum"), ("fresh", "sum")])
    return grouped.select(["address", "n_sum", "fresh_sum"]).rename_columns(["address", "n", "fresh"]).to_batches()


def _range_addresses(storage: Storage, namespace: str, range_id: str) -> pa.Array:
    """The namespace keys one range references (entries outside the namespace left out). The range
    is read whole: every column counts in the hash that proves it is the range its id names."""
    table = read_range(storage, range_id)
    if pc.all(pc.equal(table.column("address_kind"), "relative")).as_py() is not False:
        return table.column("address").combine_chunks()  # the common case: no Python objects
    pairs = zip(table.column("address").to_pylist(), table.column("address_kind").to_pylist())
    keys = [namespace_key(namespace, a, k) for a, k in pairs]
    return pa.array([k for k in keys if k is not None], pa.string())
