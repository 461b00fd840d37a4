"""Mark: compute a run's deletion candidates as one Spark job (docs/design.md, "What is live").

    candidates = listing(namespace, older than min-age)
               - addresses of every entry of the active commits   (each distinct range read once)
               - uncommitted references (staged entries, copy records, live tokens)

Each candidate carries its reason: `expired` when an expired commit still holds it (committed
garbage), `uncommitted` when nothing ever committed it (overwritten or reset staging, abandoned
uploads).

The committed side is the run's reference set (`refset`): built from every tree by a clean run,
moved forward from its base run's set by an incremental one, which reads only the trees and ranges
that changed. An incremental run (see `incremental`) also does not list the slices its base run
settled; it looks up, one by one, the objects there that may have lost a reference since, and
treats them as listed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lakegc.engine.ages import ListingTally, listing_tally
from lakegc.engine.arrowio import parquet_writer, read_parquet, write_together, written_parts
from lakegc.engine.candidates import counts_of
from lakegc.engine.columns import CANDIDATES, ddl
from lakegc.engine.listing import stat_objects
from lakegc.engine.progress import Phase
from lakegc.engine.runs import CandidateCounts
from lakegc.repo.gc_source import GcSource
from lakegc.repo.model import CommitGraph
from lakegc.repo.trees import tree_facts
from lakegc.repogc.incremental import Plan, newly_settled
from lakegc.repogc.inventory import Inventory, confirm_present, namespace_listing
from lakegc.repogc.listing import slices
from lakegc.repogc.names import branches_of, commit_ranks, name_candidates, name_tally, top_from_tally
from lakegc.repogc.outputs import (
    ACTIVE_BY_PATH_RULE,
    ACTIVE_COMMITS,
    SETTLED,
    STAGING,
    output_keys,
    run_folder,
    run_prefix,
    uncommitted_key,
)
from lakegc.repogc.references import UNCOMMITTED_DDL, snapshot_uncommitted
from lakegc.repogc.refset import (
    RefSet,
    build_clean,
    build_incremental,
    finish_refset,
    persist,
    refset_writers,
    slice_of,
)
from lakegc.repogc.slice_ages import CANDIDATE_TALLY_KEYS, candidate_ages, candidate_tally
from lakegc.repogc.trust import verify_files
from lakegc.retention.active import ActiveCommits, decide_commits
from lakegc.retention.rules import Policies
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class MarkResult:
    """What a mark found, for the run's record."""

    num_listed: int  # objects the listing found
    num_young: int  # of which younger than min-age: never candidates
    num_uncommitted: int
    active: frozenset[str]
    expired: int
    candidates: CandidateCounts
    slices_listed: int
    slices_skipped: int
    num_rechecked: int
    object_ages: list[dict[str, Any]]
    candidate_ages: list[dict[str, Any]]
    refs_sha256: str  # the reference set's manifest, for the run's record
    top: dict[str, list[dict[str, Any]]]  # the top prefixes, branches and commits by bytes (`names`)


def mark(
    spark: SparkSession,
    source: GcSource,
    run_id: str,
    plan: Plan,
    policies: Policies,
    now: datetime,
    min_age: timedelta,
    phase: Phase,
    inventory: Inventory | None = None,
) -> MarkResult:
    storage = source.storage
    prefix = run_prefix(run_id)
    cutoff = now - min_age

    windows = source.slice_windows()
    slice_names = slices(storage)
    to_list = [name for name in slice_names if name not in plan.settled]
    phase("listing the namespace", f"{len(to_list)} of {len(slice_names)} slices + root")
    listed_now = namespace_listing(spark, storage, to_list, windows, cutoff, inventory)
    listing, from_inventory = listed_now.rows, listed_now.from_inventory
    listed = listing_tally(listing, now)  # listed first: the order below keeps concurrent writes safe

    phase("snapshotting uncommitted references", f"{listed.judged} objects older than min-age")
    snapshot = snapshot_uncommitted(source, uncommitted_key(run_id), now)
    num_uncommitted, graph = snapshot.uncommitted, snapshot.graph
    storage.write(f"{prefix}{STAGING}", snapshot.staging.to_json())  # the sweep re-checks only what was staged after

    phase("choosing active commits", f"{num_uncommitted} uncommitted references, {len(graph.commits)} commits")
    decisions = [decide_commits(graph.commits, graph.branches, of, graph.tags) for of in policies.classes()]
    active, *by_path_rule = [decision.active for decision in decisions]
    ranks, by_rank = commit_ranks(graph)
    settled_now = plan.settled | newly_settled(to_list, windows, set(listed.young_slices), now, min_age)
    _record_decisions(storage, prefix, active, by_path_rule, settled_now)
    uncommitted = read_parquet(spark, storage, [uncommitted_key(run_id)], UNCOMMITTED_DDL).select("address")
    objects = listing.where(~listing.young).drop("young")
    before = tree_facts(storage)  # before any tree file is read: what the run's record may trust next time
    if plan.refs is None:
        refs, refs_sha256 = _clean_refs(spark, storage, prefix, plan, graph, policies, decisions, ranks, before, phase)
    else:
        refs = _incremental_refs(spark, storage, plan, graph, active, ranks, before, phase)
        objects = _with_rechecked(spark, storage, plan, refs, objects, uncommitted, cutoff, phase)
    phase("writing candidates", "the listing against the references")
    candidates = _unreferenced(storage, plan, refs, objects, uncommitted)
    candidates = confirm_present(storage, candidates, from_inventory, cutoff)  # inventory rows may be stale
    candidates = name_candidates(candidates, refs.named, by_rank, branches_of(by_rank, decisions))
    writer = _candidates_writer(storage, run_id, candidates, now)  # counted and named as written: not read again
    if plan.refs is None:
        (rows,) = write_together(writer)
    else:  # the change to the set and the candidates in one Spark job
        ranges_rows, parts_rows, rows = write_together(*refset_writers(storage, prefix, refs), writer)
        _, refs_sha256 = finish_refset(storage, prefix, refs, ranges_rows, parts_rows, before)
    for df in [listed_now.cached, *refs.cached]:
        df.unpersist()
    skipped = len(plan.settled & set(slice_names))
    return _result(listed, num_uncommitted, active, graph, len(to_list), skipped, rows, refs_sha256)


def _record_decisions(
    storage: Storage, prefix: str, active: set[str], by_path_rule: list[set[str]], settled: frozenset[str]
) -> None:
    """Write what the sweep re-checks against: the active commits, those active under each path
    rule (what became active under each rule since is protected), and the slices settled now."""
    storage.write(f"{prefix}{ACTIVE_COMMITS}", json.dumps(sorted(active)).encode())
    if by_path_rule:  # the sweep re-checks against what became active under each rule since
        storage.write(f"{prefix}{ACTIVE_BY_PATH_RULE}", json.dumps([sorted(c) for c in by_path_rule]).encode())
    storage.write(f"{prefix}{SETTLED}", json.dumps(sorted(settled)).encode())


def _clean_refs(
    spark: SparkSession,
    storage: Storage,
    prefix: str,
    plan: Plan,
    graph: CommitGraph,
    policies: Policies,
    decisions: list[ActiveCommits],
    ranks: dict[str, int],
    before: dict[str, str],
    phase: Phase,
) -> tuple[RefSet, str]:
    """A clean run's reference set, from every tree (each entry counted under the rule of its path
    when there are path rules), written (`persist`) before the candidates are judged against it;
    with its manifest's SHA-256. Tree files whose facts are unchanged since the plan's record of
    them are not verified again."""
    active, *by_path_rule = [decision.active for decision in decisions]
    trusted = plan.trust.trusted(before) if plan.trust else {}
    phase(
        "reading committed trees",
        f"{len(active)} active, {len(graph.commits) - len(active)} expired commits; {len(trusted)} tree files "
        "trusted as verified before",
    )
    paths = policies.paths if by_path_rule else None
    refs = build_clean(spark, storage, graph.metaranges, active, by_path_rule, paths, ranks, trusted)
    _, refs_sha256 = persist(storage, prefix, refs, before)
    return refs, refs_sha256


def _incremental_refs(
    spark: SparkSession,
    storage: Storage,
    plan: Plan,
    graph: CommitGraph,
    active: set[str],
    ranks: dict[str, int],
    before: dict[str, str],
    phase: Phase,
) -> RefSet:
    """An incremental run's reference set, the base run's moved forward (written later, with the
    candidates). The base set was read from tree files that changed since: their bytes must still
    be those, checked first."""
    trusted = plan.trust.trusted(before) if plan.trust else {}
    changed = plan.trust.changed(before)  # type: ignore[union-attr]
    phase(
        "reading what changed in committed trees",
        f"since run {plan.base.run_id}; {len(changed)} tree files changed since verified",  # type: ignore[union-attr]
    )
    verify_files(storage, changed)  # the base set was read from them: their bytes must still be those
    return build_incremental(spark, storage, plan.refs, graph.metaranges, active, ranks, trusted)


def _with_rechecked(
    spark: SparkSession,
    storage: Storage,
    plan: Plan,
    refs: RefSet,
    objects: DataFrame,
    uncommitted: DataFrame,
    cutoff: datetime,
    phase: Phase,
) -> DataFrame:
    """An incremental run's objects to judge: the listed ones, and, in the slices it did not list,
    those looked up because they may have lost a reference since the base run and nothing holds
    now (`rechecked`; the young ones only counted)."""
    from pyspark.sql import functions as F

    objects = objects.select(*objects.columns, F.lit(False).alias("young"), F.lit(False).alias("rechecked"))
    if plan.settled:  # nothing settled: every slice was listed, nothing to look up
        phase("looking up what lost a reference since the base run", f"run {plan.base.run_id}")  # type: ignore[union-attr]
        suspects = _suspects(spark, storage, plan, refs, uncommitted)
        unheld = refs.counted_now(storage, suspects).where(F.col("n") <= 0).select("address", "slice")
        found = stat_objects(spark, storage, unheld.join(uncommitted, "address", "left_anti"), cutoff)
        objects = objects.unionByName(found.withColumn("rechecked", F.lit(True)))  # young ones only counted
    return objects


def _unreferenced(storage: Storage, plan: Plan, refs: RefSet, objects: DataFrame, uncommitted: DataFrame) -> DataFrame:
    """The run's candidates before they are confirmed and named: against the whole set a clean run
    built (`_candidates`), or against the counts now of an incremental one (`_candidates_now`)."""
    if plan.refs is None:
        return _candidates(objects, refs.addresses.drop("part"), uncommitted)
    return _candidates_now(refs.counted_now(storage, objects), uncommitted)


def _candidates_writer(storage: Storage, run_id: str, candidates: DataFrame, now: datetime) -> DataFrame:
    """What writes the run's candidates (run it with `write_together`), tallied as written for the
    run's record (`_tally`), each file holding what `_stored` keeps of its rows."""
    return parquet_writer(
        candidates,
        storage,
        run_folder(storage, run_id).key("candidates"),
        tally=(_tally(now), _TALLY_KEYS),
        written_as=_stored,
    )


def _result(
    listed: ListingTally,
    num_uncommitted: int,
    active: set[str],
    graph: CommitGraph,
    slices_listed: int,
    slices_skipped: int,
    rows: list[Any],
    refs_sha256: str,
) -> MarkResult:
    """The run's record of a mark: what was listed and decided, and what the candidates' writers
    tallied (`_tally`: the candidates are not read again), the top lists only when there is a
    candidate."""
    ages, names, num_rechecked = _split(written_parts(rows, _TALLY_KEYS).tally)
    counts = counts_of(ages)
    created = {c: node.created.isoformat() for c, node in graph.commits.items()}
    top = top_from_tally(names, created) if counts.total else {}
    return MarkResult(
        listed.listed,
        listed.young,
        num_uncommitted,
        frozenset(active),
        len(graph.commits) - len(active),
        counts,
        slices_listed,
        slices_skipped,
        num_rechecked,
        listed.ages,
        candidate_ages(ages),
        refs_sha256,
        top,
    )


_TALLY_KEYS = [*CANDIDATE_TALLY_KEYS, "kind", "name", "branch"]
_TALLY = pa.schema(
    [
        ("bucket", pa.int64()),
        ("reason", pa.string()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("branch", pa.string()),
        ("count", pa.int64()),
        ("bytes", pa.int64()),
    ]
)


def _tally(now: datetime) -> Callable[[pa.RecordBatch], pa.Table]:
    """What a batch of candidates adds to the run's record: by slice age and reason
    (`candidate_tally`: kind null), by name for the top lists (`name_tally`) and, in an
    incremental run, the objects it looked up again (kind `rechecked`)."""
    by_age = candidate_tally(now)

    def tally(batch: pa.RecordBatch) -> pa.Table:
        tables = []
        if "young" in batch.schema.names:  # an incremental run's: objects looked up, young ones not candidates
            looked = pc.sum(batch.column("rechecked").cast(pa.int64())).as_py() or 0
            tables.append(pa.table({"kind": ["rechecked"], "count": [looked], "bytes": [0]}))
            batch = _stored(batch)
        tables += [by_age(batch), name_tally(batch)]
        return pa.concat_tables([_conformed(table) for table in tables])

    return tally


def _conformed(table: pa.Table) -> pa.Table:
    """`table` with the columns of `_TALLY`, those it lacks null."""
    n = table.num_rows
    return pa.table(
        [table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type) for f in _TALLY],
        schema=_TALLY,
    )


def _stored(batch: pa.RecordBatch) -> pa.RecordBatch:
    """What a candidates file holds of a batch: an incremental run's young objects looked up are
    no candidates, and its flags are not stored."""
    if "young" not in batch.schema.names:
        return batch
    kept = batch.filter(pc.invert(batch.column("young")))
    return kept.select([name for name in kept.schema.names if name not in ("young", "rechecked")])


def _split(tallied: pa.Table | None) -> tuple[pa.Table | None, pa.Table | None, int]:
    """The run's tally as (by slice age and reason, by name, objects looked up again)."""
    if tallied is None:
        return None, None, 0
    kind = tallied.column("kind")
    by_age, rechecked = pc.is_null(kind), pc.fill_null(pc.equal(kind, "rechecked"), False)
    ages = tallied.filter(by_age).select([*CANDIDATE_TALLY_KEYS, "count", "bytes"])
    names = tallied.filter(pc.invert(pc.or_(by_age, rechecked))).select(["kind", "name", "branch", "count", "bytes"])
    return ages, names, int(pc.sum(tallied.filter(rechecked).column("count")).as_py() or 0)


def _suspects(spark: SparkSession, storage: Storage, plan: Plan, refs: RefSet, uncommitted: DataFrame) -> DataFrame:
    """Addresses in the settled slices that had a reference at the base run and may have lost it
    (see `incremental`), with their slice: the last committed entry gone (`refs.lost`), no longer
    uncommitted, or revived by the base run's sweep."""
    base = plan.base.run_id  # type: ignore[union-attr]
    staged_then = read_parquet(spark, storage, [uncommitted_key(base)], UNCOMMITTED_DDL).select("address")
    revived = read_parquet(spark, storage, output_keys(storage, base, "revived"), ddl(CANDIDATES)).select("address")
    addresses = refs.lost.union(staged_then.join(uncommitted, "address", "left_anti")).union(revived)  # type: ignore[union-attr]
    return addresses.mapInArrow(_in_slices(plan.settled), "address string, slice string").distinct()


def _in_slices(names: frozenset[str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Of rows (address), those that lie in one of the slices `names`, with their slice. On
    the executors, in Arrow: a Spark `isin` of the names costs a JVM round trip per name on the
    driver (a run that settled 1,236 slices spent 1.8 s building it)."""
    value_set = pa.array(sorted(names), pa.string())

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            addresses = batch.column("address")
            slices = slice_of(addresses)
            yield pa.RecordBatch.from_arrays([addresses, slices], names=["address", "slice"]).filter(
                pc.is_in(slices, value_set=value_set)
            )

    return keep


def _candidates_now(objects: DataFrame, uncommitted: DataFrame) -> DataFrame:
    """An incremental run's `_candidates`: the objects with their `n` and `known` now
    (`RefSet.counted_now`) that nothing references, `expired` when the set has a row for them."""
    from pyspark.sql import functions as F

    reason = F.when(F.col("known"), F.lit("expired")).otherwise(F.lit("uncommitted")).alias("reason")
    return (
        objects.where(F.col("n") <= 0)
        .join(uncommitted, "address", "left_anti")
        .select("address", "size", "mtime", reason, "young", "rechecked")
    )


def _candidates(objects: DataFrame, addresses: DataFrame, uncommitted: DataFrame) -> DataFrame:
    """Objects nothing references now: no active entry holds them (`n` > 0 in the reference set)
    and nothing uncommitted does. Each is `expired` when an expired commit's tree holds it (it has a
    row in the set) and `uncommitted` otherwise."""
    from pyspark.sql import functions as F

    protected = addresses.where(F.col("n") > 0).select("address").union(uncommitted)
    in_trees = addresses.where(F.col("n") == 0).select("address", F.lit(True).alias("in_expired_commit"))
    return (
        objects.join(protected, "address", "left_anti")
        .join(in_trees, "address", "left")
        .select(
            "address",
            "size",
            "mtime",
            F.when(F.col("in_expired_commit"), F.lit("expired")).otherwise(F.lit("uncommitted")).alias("reason"),
        )
    )
