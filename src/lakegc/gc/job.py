"""A GC run from start to end: preflight checks, mark, sweep, and a record of every step.

Everything that can be wrong with the input (unknown repository, bad rules or cutoffs, a namespace
that is unreachable or not this repository's, a metastore error) fails here, before any listing and
so before any deletion. Under spark-submit, see `lakegc.submit`.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable, Iterator

from lakegc.errors import InvalidArgument, LakegcError, NamespaceError
from lakegc.failures import cause
from lakegc.gc.config import get_rules
from lakegc.gc.incremental import Plan, plan
from lakegc.gc.inventory_format import load_inventory
from lakegc.gc.fence import lower_fence, raise_fence
from lakegc.gc.lease import LEASE_TTL, Lease
from lakegc.gc.mark import BASE_OUTPUTS, SETTLED, mark
from lakegc.gc.refset import StateUnusable, TreeChange, load_manifest
from lakegc.gc.rules import PolicyOf
from lakegc.gc.rules import resolve_policies as rules_policies
from lakegc.gc.runs import IllegalTransition, RunState, RunStore, RunSummary, new_run_id, run_prefix, write_summary
from lakegc.gc.sweep import sweep
from lakegc.repo.repository import Lake, Repository
from lakegc.storage.guard import check_root
from lakegc.storage.namespace import MARKER
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegc.gc.spark import SessionStart

DEFAULT_MIN_AGE = timedelta(hours=24)
Phase = Callable[..., None]  # phase(name, detail="")


@dataclass(frozen=True)
class GcOptions:
    dry_run: bool = False
    mark_only: bool = False
    min_age: timedelta = DEFAULT_MIN_AGE
    clean: bool = False
    cutoffs: tuple[str, ...] = ()
    default_cutoff: str | None = None
    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    inventory: str | None = None  # an S3 Inventory manifest.json to list the namespace from


def resolve_policies(repo: Repository, cutoffs: tuple[str, ...], default_cutoff: str | None,
                     now: datetime) -> tuple[PolicyOf, str]:
    """The run's policies (see `rules.resolve_policies`) with the repository's stored rules."""
    return rules_policies(get_rules(repo) if not (cutoffs or default_cutoff is not None) else None,
                          cutoffs, default_cutoff, now)


def check_namespace(repo: Repository) -> None:
    """GC only a namespace that answers, says it belongs to this repository, and passes the
    deletion guard: not the filesystem root or a home folder, holding no metastore database and,
    through symlinks too, neither holding nor inside another repository's namespace."""
    check_root(repo.info.storage_namespace, f"the namespace of repository {repo.name!r}",
               repo.lake.protected_places(except_repository=repo.name))
    try:
        owner = json.loads(repo.storage.read(MARKER)).get("repository")
    except NamespaceError:
        raise
    except (LakegcError, OSError, ValueError) as exc:
        raise NamespaceError(f"namespace {repo.info.storage_namespace} is unreachable or not a lakegc namespace: {exc}") from None
    if owner != repo.name:
        raise NamespaceError(f"namespace {repo.info.storage_namespace} belongs to repository {owner!r}, not {repo.name!r}")


def run_gc(lake: Lake, name: str, options: GcOptions, phase: Phase = lambda *_: None,
           spark: "SparkSession | None" = None) -> RunSummary:
    """Mark, then (unless dry-run or mark-only) sweep. Returns the run's summary."""
    repo = lake.repository(name)
    if options.min_age < timedelta(0):
        raise InvalidArgument("--min-age must not be negative")
    now = utcnow()
    policy_of, policy = resolve_policies(repo, options.cutoffs, options.default_cutoff, now)
    check_namespace(repo)
    starting = None if spark is not None else _start_spark(options)  # the JVM starts during the rest of the preflight
    inventory = load_inventory(options.inventory, repo.info.storage_namespace, now, options.min_age) \
        if options.inventory else None
    store = RunStore(lake.metastore, name)
    run_id = new_run_id(now)
    with Lease(lake.metastore, name, run_id) as lease:
        _report_interrupted(store, repo, lease.interrupted)
        chosen = plan_run(store, repo, options, policy)
        spark = spark or starting.result()  # type: ignore[union-attr]
        listed = f"; listed from the inventory taken {inventory.created.isoformat()}" if inventory else ""
        summary = RunSummary(run_id, name, RunState.MARKING, chosen.mode, options.dry_run, options.mark_only,
                             now.isoformat(), None, (now - options.min_age).isoformat(),
                             options.min_age.total_seconds(), policy, mode_reason=chosen.reason + listed,
                             base_run_id=chosen.base.run_id if chosen.base else None)
        store.create(summary, {"cutoffs": list(options.cutoffs), "default_cutoff": options.default_cutoff,
                               "min_age_seconds": options.min_age.total_seconds(), "now": now.isoformat(),
                               "inventory": inventory and {"manifest": inventory.manifest,
                                                          "created": inventory.created.isoformat()}})
        timed = PhaseTimer(summary, phase)
        with _recorded(store, repo, summary):
            result = mark(spark, repo, run_id, chosen, policy_of, now, options.min_age, timed, inventory=inventory)
            timed.stop()
            summary.num_listed, summary.num_candidates = result.num_listed, result.num_candidates
            summary.bytes_candidates, summary.candidates_by_reason = result.bytes_candidates, result.by_reason
            summary.active_commits, summary.expired_commits = len(result.active), result.expired
            summary.num_slices_listed, summary.num_slices_skipped = result.slices_listed, result.slices_skipped
            summary.num_rechecked, summary.refs_sha256 = result.num_rechecked, result.refs_sha256
            summary.object_ages, summary.candidate_ages = result.object_ages, result.candidate_ages
            store.transition(summary, RunState.MARKED)
            write_summary(repo.storage, summary)
        if options.dry_run or options.mark_only:
            return summary
        return _sweep(store, repo, summary, phase, spark, lease)


def plan_run(store: RunStore, repo: Repository, options: GcOptions, policy: str) -> Plan:
    """Clean or incremental (see `incremental.plan`), with the base run's settled slices and its
    reference set; clean, saying why, when that set cannot be used."""
    def missing(run: RunSummary) -> list[str]:
        return [name for name in BASE_OUTPUTS if not repo.storage.exists(run_prefix(run.run_id) + name)]

    chosen = plan(store.list(), options.clean, policy, options.min_age.total_seconds(), missing)
    if chosen.base is None:
        return chosen
    base = chosen.base.run_id
    try:
        refs = load_manifest(repo.storage, run_prefix(base), chosen.base.refs_sha256)
        TreeChange.between(refs, repo.metaranges(), set())  # every tree it knew is still here
        settled = json.loads(repo.storage.read(run_prefix(base) + SETTLED))
    except (StateUnusable, ValueError) as exc:
        return Plan("clean", f"run {base}'s reference set cannot be used: {str(exc).removeprefix('error: ')}")
    return replace(chosen, settled=frozenset(settled), refs=refs)


def sweep_run(lake: Lake, name: str, run_id: str, phase: Phase = lambda *_: None,
              spark: "SparkSession | None" = None) -> RunSummary:
    """Delete the candidates of a marked run, re-checking each against what references it now."""
    repo = lake.repository(name)
    store = RunStore(lake.metastore, name)
    summary, _ = store.get(run_id)
    if summary.dry_run:
        raise InvalidArgument(f"run {run_id} was a dry run and deletes nothing; use `gc run --mark-only` to sweep later")
    check_namespace(repo)
    with Lease(lake.metastore, name, run_id) as lease:
        _report_interrupted(store, repo, lease.interrupted)
        summary, _ = store.get(run_id)
        if summary.state is not RunState.MARKED:
            raise InvalidArgument(f"run {run_id} is {summary.state}: only a marked run can be swept")
        return _sweep(store, repo, summary, phase, spark or _spark(GcOptions()), lease)


def _sweep(store: RunStore, repo: Repository, summary: RunSummary, phase: Phase, spark: "SparkSession",
           lease: Lease) -> RunSummary:
    _, params = store.get(summary.run_id)
    marked_now = datetime.fromisoformat(params["now"])
    policy_of, _ = resolve_policies(repo, tuple(params["cutoffs"]), params["default_cutoff"], marked_now)
    store.transition(summary, RunState.SWEEPING)
    timed = PhaseTimer(summary, phase)
    with _recorded(store, repo, summary):
        timed("re-checking and deleting candidates", f"{summary.num_candidates} candidates")
        marked_active = set(json.loads(repo.storage.read(f"{run_prefix(summary.run_id)}active_commits.json")))
        fenced_active = raise_fence(repo.ms, repo.name, summary.run_id, marked_active, params)
        try:
            deleted, nbytes, failed, revived = sweep(spark, repo, summary.run_id, policy_of, marked_active, marked_now,
                                                     fenced_active, before_delete=lambda: _deadline(lease),
                                                     refs_sha256=summary.refs_sha256)
        finally:
            lower_fence(repo.ms, repo.name, summary.run_id)
        timed.stop()
        summary.num_deleted, summary.bytes_deleted, summary.num_failed, summary.num_revived = deleted, nbytes, failed, revived
        if failed:
            raise LakegcError(f"{failed} object(s) could not be deleted; see {run_prefix(summary.run_id)}deleted/ "
                              "(run `gc run` again to retry them)")
        store.transition(summary, RunState.SWEPT)
        write_summary(repo.storage, summary)
    return summary


def _deadline(lease: Lease) -> float:
    """Until when this run may delete: its lease, just checked (and so renewed), cannot be taken
    over for LEASE_TTL; half of it leaves room for clock skew between driver and executors and for
    a request already under way."""
    lease.check()
    return time.time() + LEASE_TTL.total_seconds() / 2


def _report_interrupted(store: RunStore, repo: Repository, run_ids: list[str]) -> None:
    """Rewrite the summary.json of runs the lease found dead, so the namespace says so too."""
    for run_id in run_ids:
        write_summary(repo.storage, store.get(run_id)[0])


@contextmanager
def _recorded(store: RunStore, repo: Repository, summary: RunSummary) -> Iterator[None]:
    """Any failure inside marks the run failed, keeps the error, writes the summary, and re-raises
    (unexpected errors as one readable LakegcError line)."""
    try:
        yield
    except BaseException as exc:
        summary.error = cause(exc)
        try:
            store.transition(summary, RunState.FAILED)
        except IllegalTransition:
            pass  # already closed (its lease was taken over): the original error is the one to tell
        finally:
            write_summary(repo.storage, summary)
        if isinstance(exc, Exception) and not isinstance(exc, LakegcError):
            raise LakegcError(f"GC run {summary.run_id} failed: {summary.error}") from exc
        raise


class PhaseTimer:
    """Calls the phase callback and records how long each phase took in the summary."""

    def __init__(self, summary: RunSummary, phase: Phase):
        self.summary, self.phase = summary, phase
        self.current: str | None = None
        self.started = time.monotonic()

    def __call__(self, name: str, detail: str = "") -> None:
        self.stop()
        self.current, self.started = name, time.monotonic()
        self.phase(name, detail)

    def stop(self) -> None:
        if self.current is not None:
            self.summary.phases[self.current] = round(time.monotonic() - self.started, 3)
            self.current = None


def _spark(options: GcOptions) -> "SparkSession":
    from lakegc.gc.spark import spark_session

    return spark_session(options.master, options.conf)


def _start_spark(options: GcOptions) -> "SessionStart":
    from lakegc.gc.spark import SessionStart

    return SessionStart(options.master, options.conf)
