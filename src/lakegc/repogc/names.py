"""Naming a run's candidates: the path an expired commit held each at, the commit whose expiry freed
it and that commit's branch; and the report's top lists (prefixes, branches, commits by bytes).

Committed garbage is named from the ranges the mark reads anyway (`refset.named`): each range
carries the *rank* of the newest commit holding it (commits ranked by creation), each address the
greatest rank of its ranges and a path naming it. The newest commit holding a candidate is the one
whose expiry freed it (every commit holding it is expired, or it would not be a candidate), and
its branch is the walk that judged it (`decide_commits`' evidence). Uncommitted garbage has no
path, commit or branch. A clean run names every candidate of committed garbage; an incremental
run names those in the ranges it read (the trees that left the active set since its base run).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakegc.repo.model import CommitGraph
from lakegc.retention.active import ActiveCommits

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TOP = 10  # rows of each top list
PREFIX_DEPTH = 2  # a prefix is a path's first folders, at most this many
UNCOMMITTED = "(uncommitted)"  # the name of candidates no commit held
DANGLING = "(dangling)"  # the branch of a commit no branch reaches


def commit_ranks(graph: CommitGraph) -> tuple[dict[str, int], list[str]]:
    """Each tree's rank (its newest commit's place in creation order, from 1) and the commit of
    each rank (index 0 unused)."""
    ordered = sorted(graph.commits, key=lambda c: (graph.commits[c].created, c))
    rank = {commit: i for i, commit in enumerate(ordered, 1)}
    trees: dict[str, int] = {}
    for commit, tree in graph.metaranges.items():
        trees[tree] = max(trees.get(tree, 0), rank[commit])
    return trees, ["", *ordered]


def branches_of(commits: Sequence[str], decisions: Sequence[ActiveCommits]) -> dict[str, str]:
    """The branch each commit lapsed on (the first decision that expired it; `DANGLING` for a
    dangling commit's walk)."""
    found = {}
    for commit in commits[1:]:
        for decision in decisions:
            if commit in decision.lapsed:
                found[commit] = decision.lapsed[commit].branch or DANGLING
                break
    return found


def name_candidates(
    candidates: DataFrame, named: DataFrame | None, commits: Sequence[str], branches: Mapping[str, str]
) -> DataFrame:
    """The candidates with `path`, `commit` and `branch` (null where unknown)."""
    from pyspark.sql import functions as F

    if named is None:
        return candidates.select("*", *(F.lit(None).cast("string").alias(c) for c in ("path", "commit", "branch")))
    by_rank = pa.array(list(commits), pa.string())
    branch_by_rank = pa.array([branches.get(c) for c in commits], pa.string())
    fields = candidates.columns

    def add_names(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ranks = batch.column("rank")
            yield pa.RecordBatch.from_arrays(
                [*(batch.column(f) for f in fields), batch.column("path"), by_rank.take(ranks),
                 branch_by_rank.take(ranks)],
                names=[*fields, "path", "commit", "branch"],
            )  # fmt: skip

    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in candidates.schema.fields)
    joined = candidates.join(named.where(F.col("rank") > 0), "address", "left")
    return joined.select(*fields, "path", "rank").mapInArrow(
        add_names, f"{schema}, path string, commit string, branch string"
    )


def top_lists(candidates: DataFrame, created: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The TOP prefixes, branches and commits by bytes (then count) among the candidates, in one
    Spark job: each candidate counts once under each of its three names, the names are summed and
    ranked within their kind, and only the first TOP of each kind reach the driver. `created`
    dates the commits shown."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    parts = F.split("path", "/")
    depth = F.size(parts) - 1  # folders above the file
    folders = F.slice(parts, 1, F.least(depth, F.lit(PREFIX_DEPTH)))
    prefix = (
        F.when(F.col("path").isNull(), F.lit(UNCOMMITTED))
        .when(depth == 0, F.lit("(root)"))
        .otherwise(F.concat(F.array_join(folders, "/"), F.lit("/")))
    )
    names = F.array(
        F.struct(F.lit("prefixes").alias("kind"), prefix.alias("name")),
        F.struct(F.lit("branches").alias("kind"), F.coalesce("branch", F.lit(UNCOMMITTED)).alias("name")),
        F.struct(F.lit("commits").alias("kind"), F.col("commit").alias("name")),
    )
    ranked = Window.partitionBy("kind").orderBy(F.desc("bytes"), F.desc("candidates"), "name")
    rows = (
        candidates.select(F.explode(names).alias("named"), "size", "branch")
        .select("named.kind", "named.name", "size", "branch")
        .where(F.col("name").isNotNull())
        .groupBy("kind", "name")
        .agg(F.count("*").alias("candidates"), F.sum("size").alias("bytes"), F.first("branch").alias("branch"))
        .withColumn("place", F.row_number().over(ranked))
        .where(F.col("place") <= TOP)
        .collect()  # at most TOP rows of each kind
    )
    found: dict[str, list[dict[str, Any]]] = {"prefixes": [], "branches": [], "commits": []}
    for r in sorted(rows, key=lambda r: (r["kind"], r["place"])):
        row = {"name": r["name"], "candidates": r["candidates"], "bytes": r["bytes"] or 0}
        if r["kind"] == "commits":
            row |= {"branch": r["branch"], "created": created.get(r["name"])}
        found[r["kind"]].append(row)
    return found
