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


NAME_KINDS = ("prefixes", "branches", "commits")
_PREFIX = rf"^(?P<prefix>(?:[^/]*/){{1,{PREFIX_DEPTH}}})"  # a path's first folders, each with its "/"


def name_tally(batch: pa.RecordBatch) -> pa.Table:
    """What one batch of named candidates (`name_candidates`) adds to the top lists: a row per
    candidate and kind (kind, name, branch, count, bytes): under its prefix (its first folders,
    `(root)` for a file at the top, `(uncommitted)` when no commit held it), its branch, and its
    commit (the commit's branch beside it). Counted by the tasks that write the candidates, so
    the lists cost no pass of their own (`top_from_tally` ranks them)."""
    import pyarrow.compute as pc

    paths, size = batch.column("path"), pc.fill_null(batch.column("size"), 0)
    matched = pc.fill_null(pc.match_substring_regex(paths, _PREFIX), False)
    folders = pc.if_else(matched, pc.extract_regex(paths, _PREFIX).field("prefix"), "(root)")
    prefix = pc.if_else(pc.is_null(paths), UNCOMMITTED, folders)
    branch = pc.fill_null(batch.column("branch"), UNCOMMITTED)
    n = batch.num_rows
    none = pa.nulls(n, pa.string())
    tables = [
        pa.table({"kind": pa.repeat("prefixes", n), "name": prefix, "branch": none}),
        pa.table({"kind": pa.repeat("branches", n), "name": branch, "branch": none}),
        pa.table({"kind": pa.repeat("commits", n), "name": batch.column("commit"), "branch": batch.column("branch")}),
    ]
    counted = [
        kind.append_column("count", pa.repeat(pa.scalar(1, pa.int64()), n)).append_column("bytes", size)
        for kind in tables
    ]
    named = pa.concat_tables([kind.cast(counted[0].schema) for kind in counted])
    return named.filter(pc.is_valid(named.column("name")))


def top_from_tally(tallied: pa.Table | None, created: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The TOP prefixes, branches and commits by bytes (then count, then name) from the summed
    `name_tally` rows; `created` dates the commits shown."""
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in NAME_KINDS}
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in tallied.to_pylist() if tallied is not None else []:
        total = totals.setdefault((row["kind"], row["name"]), {"candidates": 0, "bytes": 0, "branch": row["branch"]})
        total["candidates"] += int(row["count"])
        total["bytes"] += int(row["bytes"] or 0)
        total["branch"] = total["branch"] or row["branch"]
    ranked = sorted(totals.items(), key=lambda item: (-item[1]["bytes"], -item[1]["candidates"], item[0][1]))
    for (kind, name), total in ranked:
        if len(found[kind]) < TOP:
            row = {"name": name, "candidates": total["candidates"], "bytes": total["bytes"]}
            if kind == "commits":
                row |= {"branch": total["branch"], "created": created.get(name)}
            found[kind].append(row)
    return found
