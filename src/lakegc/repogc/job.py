"""A GC run from start to end: preflight checks, mark, sweep, and a record of every step.

Everything that can be wrong with the input (unknown repository, bad rules or cutoffs, a namespace
that is unreachable or not this repository's, a metastore error) fails here, before any listing and
so before any deletion. Under spark-submit, see `lakegc.submit`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from lakegc.engine.delete import Budget, check_budget, quarantine_folder
from lakegc.engine.guard import check_root
from lakegc.engine.progress import Phase, PhaseTimer, no_progress
from lakegc.engine.recorder import Recorder, write_record
from lakegc.engine.runs import (
    REPOSITORY,
    MetastoreRunLog,
    RepositoryDetails,
    Run,
    RunState,
    SweepIncomplete,
    new_run_id,
)
from lakegc.engine.tasks import classic_context, jobs_started
from lakegc.errors import InvalidArgument, LakegcError, NamespaceError
from lakegc.failures import cause
from lakegc.repo.gc_source import GcSource
from lakegc.repo.repository import Lake
from lakegc.repogc.incremental import Plan, plan
from lakegc.repogc.inventory_format import load_inventory
from lakegc.repogc.lease import Lease
from lakegc.repogc.mark import MarkResult, mark
from lakegc.repogc.outputs import ACTIVE_BY_PATH_RULE, ACTIVE_COMMITS, BASE_OUTPUTS, SETTLED, run_folder, run_prefix
from lakegc.repogc.quarantine import Purged, Restored, check_restorable, due_for_purge, purge_expired, restore
from lakegc.repogc.refset import StateUnusable, TreeChange, load_manifest
from lakegc.repogc.runplan import RepositoryPlan, resolve_policies
from lakegc.repogc.simulate import parse_retentions, retention_curve
from lakegc.repogc.sweep import SweepResult, failures, sweep
from lakegc.repogc.trust import RecordUnusable
from lakegc.retention.rules import Policies
from lakegc.storage import Storage
from lakegc.storage.namespace import MARKER
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegc.engine.spark import SessionStart

DEFAULT_MIN_AGE = timedelta(hours=24)
SHOWN_FAILURES = 20  # objects a run's record names that its last sweep could not delete


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
    curve: tuple[str, ...] = ()  # retentions whose retention curve the run also computes (see `simulate`)
    quarantine: timedelta | None = None  # the restore window; None: the rules' quarantine_days, if any
    budget: Budget = field(default_factory=Budget)  # --max-deletes, --max-delete-rate


def check_namespace(source: GcSource) -> None:
    """GC only a namespace that answers, says it belongs to this repository, and passes the
    deletion guard: not the filesystem root or a home folder, holding no metastore database and,
    through symlinks too, neither holding nor inside another repository's namespace."""
    check_root(source.namespace, f"the namespace of repository {source.name!r}", source.protected_places())
    try:
        owner = json.loads(source.storage.read(MARKER)).get("repository")
    except NamespaceError:
        raise
    except (LakegcError, OSError, ValueError) as exc:
        raise NamespaceError(f"namespace {source.namespace} is unreachable or not a lakegc namespace: {exc}") from None
    if owner != source.name:
        raise NamespaceError(f"namespace {source.namespace} belongs to repository {owner!r}, not {source.name!r}")


def run_gc(
    lake: Lake, name: str, options: GcOptions, phase: Phase = no_progress, spark: SparkSession | None = None
) -> Run:
    """Mark, then (unless dry-run or mark-only) sweep. Returns the run's record. Everything that can
    be wrong with the input fails before the lease is taken, so before anything is listed."""
    source = lake.repository(name).gc_source()
    if options.min_age < timedelta(0):
        raise InvalidArgument("--min-age must not be negative")
    check_budget(options.budget)
    now = utcnow()
    policies = resolve_policies(source, options.cutoffs, options.default_cutoff, now)
    curve = parse_retentions(list(options.curve)) if options.curve else []
    check_namespace(source)
    starting = None if spark is not None else _start_spark(options)  # the JVM starts during the rest of the preflight
    inventory = load_inventory(options.inventory, source.namespace, now, options.min_age) if options.inventory else None
    listed = {"manifest": inventory.manifest, "created": inventory.created.isoformat()} if inventory else None
    planned = RepositoryPlan(now, options.cutoffs, options.default_cutoff, options.min_age, None, listed)
    planned = replace(planned, window=quarantine_window(source, options.quarantine))
    log = MetastoreRunLog(lake.metastore, name)
    run_id = new_run_id(now)
    recorder = Recorder(log, run_folder(source.storage, run_id))
    with Lease(lake.metastore, name, run_id) as lease:
        _took_over(log, source, lease)
        due = [] if options.dry_run else due_for_purge(log.list(), now)
        if due:
            spark = spark or starting.result()  # type: ignore[union-attr]
            _purge_before(spark, source, log, due, phase)
        chosen = plan_run(log, source, options, policies)
        spark = spark or starting.result()  # type: ignore[union-attr]
        run = _opened(run_id, name, options, planned, chosen, policies)
        recorder.start(run, planned.to_json())
        timed = PhaseTimer(run, phase, jobs_started(spark))
        with recorder.recording(run):
            result = mark(spark, source, run_id, chosen, policies, now, options.min_age, timed, inventory=inventory)
            if curve:
                in_curve = lambda name, detail="": timed(f"retention curve: {name}", detail)  # noqa: E731
                points = retention_curve(spark, source, curve, now, options.min_age, in_curve).to_json()["points"]
                run.repo.retention_curve = points
            timed.stop()
            record_mark(run, result)
            recorder.transition(run, RunState.MARKED)
        if options.dry_run or options.mark_only:
            return run
        return _sweep(log, recorder, source, run, phase, spark, lease, options.budget)


def _purge_before(spark: SparkSession, source: GcSource, log: MetastoreRunLog, due: list[Run], phase: Phase) -> None:
    """Purge the quarantines whose window has passed before a run marks: a purge that fails is
    tried again by the next run, it never stops this one."""
    try:
        purge_expired(spark, source, log, due, phase)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        phase("purging quarantine failed; the next run tries again", cause(exc))


def _opened(
    run_id: str, name: str, options: GcOptions, planned: RepositoryPlan, chosen: Plan, policies: Policies
) -> Run:
    """The run's record as it starts marking."""
    listed = f"; listed from the inventory taken {planned.inventory['created']}" if planned.inventory else ""
    return Run(
        run_id,
        REPOSITORY,
        name,
        RunState.MARKING,
        options.dry_run,
        planned.now.isoformat(),
        (planned.now - options.min_age).isoformat(),
        options.min_age.total_seconds(),
        mode=chosen.mode,
        mark_only=options.mark_only,
        details=RepositoryDetails(
            policy=policies.described,
            mode_reason=chosen.reason + listed,
            base_run_id=chosen.base.run_id if chosen.base else None,
        ),
    )


def record_mark(run: Run, result: MarkResult) -> None:
    """A repository mark's result in the run's record, in one step."""
    run.record_counts(result.candidates)
    run.num_listed, run.num_young, run.object_ages = result.num_listed, result.num_young, result.object_ages
    run.details = replace(
        run.repo,
        active_commits=len(result.active),
        expired_commits=result.expired,
        num_slices_listed=result.slices_listed,
        num_slices_skipped=result.slices_skipped,
        num_rechecked=result.num_rechecked,
        refs_sha256=result.refs_sha256,
        candidate_ages=result.candidate_ages,
        top=result.top,
    )


def quarantine_window(source: GcSource, given: timedelta | None) -> timedelta | None:
    """How long a run's collected objects wait in its quarantine: `--quarantine` when given, else
    the rules' `quarantine_days`; None (deleted at once) when that is zero or unset."""
    if given is None:
        rules = source.rules()
        given = timedelta(days=rules.quarantine_days) if rules and rules.quarantine_days else None
    if given is not None and given < timedelta(0):
        raise InvalidArgument("--quarantine must not be negative")
    return given or None


def plan_run(log: MetastoreRunLog, source: GcSource, options: GcOptions, policies: Policies) -> Plan:
    """Clean or incremental (see `incremental.plan`), with the base run's settled slices and its
    reference set; clean, saying why, when that set cannot be used. Path rules make every run
    clean: an incremental run moves one count per address forward, and they need one per rule.
    Either way, with the record of the tree files the last run verified (`trust`), if any."""
    runs = log.list()
    if policies.path_rules and not options.clean:
        return _trusting(Plan("clean", "path rules: every run is clean"), source, runs)

    def missing(run: Run) -> list[str]:
        return [name for name in BASE_OUTPUTS if not source.storage.exists(run_prefix(run.run_id) + name)]

    chosen = plan(runs, options.clean, policies.described, options.min_age.total_seconds(), missing)
    if chosen.base is None:
        return _trusting(chosen, source, runs)
    base = chosen.base.run_id
    try:
        refs = load_manifest(source.storage, run_prefix(base), chosen.base.repo.refs_sha256)
        TreeChange.between(refs, source.trees(), set())  # every tree it knew is still here
        settled = json.loads(source.storage.read(run_prefix(base) + SETTLED))
        trust = refs.trust_record(source.storage)
    except (StateUnusable, RecordUnusable, ValueError) as exc:
        why = str(exc).removeprefix("error: ")
        return _trusting(Plan("clean", f"run {base}'s reference set cannot be used: {why}"), source, runs)
    return replace(chosen, settled=frozenset(settled), refs=refs, trust=trust)


def _trusting(chosen: Plan, source: GcSource, runs: list[Run]) -> Plan:
    """A clean plan with the record of verified tree files the newest run that read trees kept,
    when it can be believed (else every tree file is verified, as it always may be)."""
    last = next((run for run in runs if run.repo.refs_sha256), None)
    if last is None:
        return chosen
    try:
        trust = load_manifest(source.storage, run_prefix(last.run_id), last.repo.refs_sha256).trust_record(
            source.storage
        )
    except (LakegcError, ValueError):  # StateUnusable, RecordUnusable, a store that fails: verify everything
        return chosen
    return replace(chosen, trust=trust)


def sweep_run(
    lake: Lake,
    name: str,
    run_id: str,
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    budget: Budget = Budget(),
) -> Run:
    """Delete the candidates of a marked run, re-checking each against what references it now; or
    go on with a run an earlier sweep left `sweeping` (stopped by a budget, killed, or with objects
    the store would not delete), from what it recorded as done. `run_id` may be a prefix only
    that run's id has."""
    check_budget(budget)
    source = lake.repository(name).gc_source()
    log = MetastoreRunLog(lake.metastore, name)
    run_id = log.resolve(run_id)
    run, _ = log.get(run_id)
    if run.dry_run:
        raise InvalidArgument(
            f"run {run_id} was a dry run and deletes nothing; use `gc run --mark-only` to sweep later"
        )
    check_namespace(source)
    with Lease(lake.metastore, name, run_id) as lease:
        _took_over(log, source, lease)
        run, _ = log.get(run_id)
        if run.state not in (RunState.MARKED, RunState.SWEEPING):
            raise InvalidArgument(
                f"run {run_id} is {run.state}: only a marked run, or one whose sweep stopped, can be swept"
            )
        spark = spark or _start_spark(GcOptions(master=master, conf=conf or {})).result()
        recorder = Recorder(log, run_folder(source.storage, run_id))
        return _sweep(log, recorder, source, run, phase, spark, lease, budget)


def restore_run(
    lake: Lake,
    name: str,
    run_id: str,
    path_glob: str | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: dict[str, str] | None = None,
) -> Restored:
    """Put a run's quarantined objects back (see `quarantine.restore`), holding the repository's
    lease: no sweep or purge runs meanwhile. The next `gc run` is clean (`plan`)."""
    source = lake.repository(name).gc_source()
    log = MetastoreRunLog(lake.metastore, name)
    run_id = log.resolve(run_id)
    check_restorable(log.get(run_id)[0], path_glob)
    check_namespace(source)
    with Lease(lake.metastore, name, f"restore-{run_id}") as lease:
        _took_over(log, source, lease)
        spark = spark or _start_spark(GcOptions(master=master, conf=conf or {})).result()
        return restore(spark, source, log, run_id, path_glob)


def purge_quarantines(
    lake: Lake,
    name: str,
    phase: Phase = no_progress,
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: dict[str, str] | None = None,
) -> list[Purged]:
    """Delete the quarantines whose restore window has passed, holding the repository's lease,
    after the same namespace checks as a sweep. Starts Spark only when there is one to purge."""
    source = lake.repository(name).gc_source()
    log = MetastoreRunLog(lake.metastore, name)
    check_namespace(source)
    with Lease(lake.metastore, name, "purge") as lease:
        _took_over(log, source, lease)
        due = due_for_purge(log.list(), utcnow())
        if not due:
            return []
        spark = spark or _start_spark(GcOptions(master=master, conf=conf or {})).result()
        done = purge_expired(spark, source, log, due, phase)
    stuck = [p for p in done if p.num_left]
    if stuck:
        raise LakegcError(
            f"the quarantine of run {stuck[0].run_id} could not be purged whole ({stuck[0].num_left} object(s) "
            "are still there); the next purge tries again"
        )
    return done


def _sweep(
    log: MetastoreRunLog,
    recorder: Recorder,
    source: GcSource,
    run: Run,
    phase: Phase,
    spark: SparkSession,
    lease: Lease,
    budget: Budget = Budget(),
) -> Run:
    """Sweep a marked run, or go on with one left sweeping, by the plan it was marked with."""
    planned = RepositoryPlan.from_json(log.get(run.run_id)[1], run.run_id)
    policies = planned.policies(source)  # rules that cannot be read now leave the run as it was, not failed
    continued = run.state is RunState.SWEEPING
    _open_window(run, planned)  # before the first move: a sweep that stops or fails has moved objects under it
    if continued:
        run.error = None
        recorder.update(run)
    else:
        recorder.transition(run, RunState.SWEEPING)
    timed = PhaseTimer(run, phase, jobs_started(spark))
    lease.elsewhere = classic_context(spark) is None  # a Connect server's jobs outlive this process
    with recorder.recording(run):
        what = "re-checking and quarantining" if planned.window else "re-checking and deleting"
        timed(f"{what} candidates", f"{run.num_candidates} candidates" + (", continuing" if continued else ""))
        swept = _fenced_sweep(spark, source, run, planned, policies, lease, budget)
        timed.stop()
        record_sweep(run, swept, planned, continued, source.storage)
        again = f"`lakegc gc sweep lakegc://{source.name} {run.run_id}`"
        if run.num_failed:
            raise SweepIncomplete(
                f"{run.num_failed} object(s) could not be deleted (`lakegc gc show lakegc://{source.name} "
                f"{run.run_id}` lists them); the run stays sweeping: {again} retries them"
            )
        if run.num_stopped:
            run.error = f"stopped by --max-deletes with {run.num_stopped} candidate(s) left: {again} continues"
            recorder.update(run)
            return run
        recorder.transition(run, RunState.SWEPT)
    return run


def _fenced_sweep(
    spark: SparkSession,
    source: GcSource,
    run: Run,
    planned: RepositoryPlan,
    policies: Policies,
    lease: Lease,
    budget: Budget,
) -> SweepResult:
    """The sweep itself (`sweep.sweep`), with the writers' fence up from before the first delete
    until no delete round can still run."""
    changed = policies.described != run.repo.policy and (bool(policies.path_rules) or "path_rules" in run.repo.policy)
    marked_active = _marked_active(source, run, len(policies.path_rules), changed)
    fenced_active = source.raise_fence(run.run_id, marked_active[0], planned.to_json(), marked_active[1:])
    try:
        return sweep(
            spark,
            source,
            run.run_id,
            policies,
            marked_active,
            planned.now,
            fenced_active,
            before_delete=lease.deadline,
            refs_sha256=None if changed else run.repo.refs_sha256,  # counted under other path rules: not reused
            budget=budget,
            quarantine=quarantine_folder(run.run_id) if planned.window else None,
        )
    except BaseException:
        lease.wait_out_rounds()  # a round on a Connect server may still delete: the fence stays up till it cannot
        raise
    finally:
        source.lower_fence(run.run_id)


def _open_window(run: Run, planned: RepositoryPlan) -> None:
    """Open the run's restore window (again): what its sweep moves waits the whole window."""
    if planned.window:
        run.details = replace(run.repo, quarantine_until=(utcnow() + planned.window).isoformat(), purged_at=None)


def record_sweep(run: Run, swept: SweepResult, planned: RepositoryPlan, continued: bool, storage: Storage) -> None:
    """A repository sweep's result in the run's record, in one step: moved into the window (not
    deleted: restorable until purged) or deleted, and the first objects it could not delete."""
    deletes = swept.deletes
    if planned.window:
        run.details = replace(run.repo, num_moved=deletes.deleted, bytes_moved=deletes.bytes)
        run.record_sweep(replace(deletes, deleted=0, bytes=0), swept.stopped)
    else:
        run.record_sweep(deletes, swept.stopped)
    shown = SHOWN_FAILURES if run.num_failed else 0
    run.failed = [{"address": a, "error": e} for a, e in failures(storage, run.run_id, shown)]
    run.details = replace(run.repo, num_revived=(run.repo.num_revived if continued else 0) + swept.revived)
    _open_window(run, planned)


def _marked_active(source: GcSource, run: Run, rules: int, changed: bool) -> list[set[str]]:
    """The commits the mark found active, per path class (the branches' policies, then `rules`
    path rules). Path rules `changed` since the mark (added, removed or edited: an entry's class
    may differ now) count as nothing active at the mark, in every class: the sweep then re-reads
    every entry that is live now instead of trusting a judgement made under other rules (safe,
    and slower)."""
    prefix = run_prefix(run.run_id)
    classes = 1 + rules
    if changed:
        return [set() for _ in range(classes)]
    marked = [set(json.loads(source.storage.read(prefix + ACTIVE_COMMITS)))]
    if classes > 1:
        with contextlib.suppress(LakegcError, OSError, ValueError):
            marked += [set(c) for c in json.loads(source.storage.read(prefix + ACTIVE_BY_PATH_RULE))]
    return marked if len(marked) == classes else [set() for _ in range(classes)]


def _took_over(log: MetastoreRunLog, source: GcSource, lease: Lease) -> None:
    """What taking the lease over settles: a dead sweeper's fence comes down (it can no longer
    delete: every delete round ends at a deadline inside the lease it held, see `Lease.deadline`), and
    the runs it left working, which the lease closed as failed, say so in their folders too."""
    source.lower_fence()
    for run_id in lease.interrupted:
        write_record(run_folder(source.storage, run_id), log.get(run_id)[0])


def _start_spark(options: GcOptions) -> SessionStart:
    from lakegc.engine.spark import SessionStart

    return SessionStart(options.master, options.conf)
