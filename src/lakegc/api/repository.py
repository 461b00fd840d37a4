"""The repository GC API: collect a repository (`gc`, `sweep`), ask about it (`explain`,
`simulate`), undo or finish a quarantine (`restore`, `purge`), read its runs and their candidates,
and keep its retention rules."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from lakegc.api.common import (
    Candidate,
    CandidateFilter,
    Duration,
    Metastore,
    check_limit,
    duration,
    open_lake,
    read_candidates,
)
from lakegc.engine.delete import Budget
from lakegc.engine.progress import Phase, no_progress
from lakegc.engine.runs import MetastoreRunLog, Run
from lakegc.errors import InvalidArgument
from lakegc.repo.gc_source import address_key, namespace_key
from lakegc.repogc.explain import Explanation
from lakegc.repogc.quarantine import Purged, Restored
from lakegc.repogc.simulate import RetentionCurve
from lakegc.retention.rules import GcRules, parse_rules
from lakegc.settings import load_settings
from lakegc.timeutil import utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPOSITORY_REASONS = ("expired", "uncommitted")  # why a repository run marks a candidate


def _min_age(value: Duration | None) -> timedelta:
    """The min-age a read-only command judges by: as given, else the settings' (as `gc` takes it)."""
    age = duration(value or load_settings().gc.min_age)
    if age < timedelta(0):
        raise InvalidArgument("--min-age must not be negative")
    return age


def gc(
    repository: str,
    *,
    metastore: Metastore = None,
    dry_run: bool = False,
    mark_only: bool = False,
    min_age: Duration | None = None,
    clean: bool = False,
    cutoffs: tuple[str, ...] | list[str] = (),
    default_cutoff: str | None = None,
    inventory: str | None = None,
    curve: tuple[str, ...] | list[str] = (),
    quarantine: Duration | None = None,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> Run:
    """Collect a repository: mark what no retained commit, staged entry, copy or live token
    references and is older than `min_age` (default 24h), then, unless `dry_run` or `mark_only`,
    sweep it (re-checking each candidate first). `cutoffs` (`REGEX=POLICY`) and `default_cutoff`
    replace the stored rules for this run; `clean` ignores earlier runs; `inventory` lists the
    namespace from an S3 Inventory manifest; `curve` (durations) also computes the retention curve
    for the report (as `simulate` does, one more pass); `quarantine` (a duration) moves what is
    collected into the run's quarantine for that long instead of deleting it (default: the rules'
    `quarantine_days`); `max_deletes` and `max_delete_rate` (objects a second) bound the sweep,
    which then leaves the run `sweeping` for `sweep` to continue. Returns the run's record, also
    when nothing was deleted; a failed run raises (its record says `failed` and why)."""
    from lakegc.repogc.job import GcOptions, run_gc

    settings = load_settings()
    options = GcOptions(
        dry_run=dry_run,
        mark_only=mark_only,
        min_age=duration(min_age or settings.gc.min_age),
        clean=clean,
        cutoffs=tuple(cutoffs),
        default_cutoff=default_cutoff,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
        inventory=inventory,
        curve=tuple(curve),
        quarantine=None if quarantine is None else duration(quarantine),
        budget=Budget(max_deletes, max_delete_rate),
    )
    return run_gc(open_lake(metastore), repository, options, progress, spark=spark)


def explain(
    repository: str,
    ref: str | None = None,
    path: str | None = None,
    *,
    address: str | None = None,
    metastore: Metastore = None,
    min_age: Duration | None = None,
    cutoffs: tuple[str, ...] | list[str] = (),
    default_cutoff: str | None = None,
) -> Explanation:
    """Why the object at `path` on `ref` (or at the physical `address`, a full location or a key of
    the namespace) would be kept or collected by a `gc` run started now with the same options:
    its verdict and every reason, with evidence. Reads only; deletes and records nothing."""
    from lakegc.repogc.explain import explain_key
    from lakegc.repogc.job import check_namespace
    from lakegc.repogc.outputs import run_folder
    from lakegc.repogc.runplan import resolve_policies

    if (address is None) == (path is None):
        raise InvalidArgument("explain an object by its path on a ref, or by its address: one of the two")
    lake = open_lake(metastore)
    repo = lake.repository(repository)
    source = repo.gc_source()
    age = _min_age(min_age)
    now = utcnow()
    policies = resolve_policies(source, tuple(cutoffs), default_cutoff, now)
    if address is None:
        entry = repo.stat(ref or repo.info.default_branch, path)  # type: ignore[arg-type]
        key, full = namespace_key(source.namespace, entry.address, entry.address_kind), repo.physical_address(entry)
    else:
        key, full = address_key(source.namespace, address), address
        full = source.storage.full_uri(key) if key is not None else full
    check_namespace(source)
    log = MetastoreRunLog(lake.metastore, repository)
    return explain_key(source, key, full, policies, now, age, log.list(), lambda r: run_folder(source.storage, r))


def simulate(
    repository: str,
    retentions: list[str] | tuple[str, ...],
    *,
    metastore: Metastore = None,
    min_age: Duration | None = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> RetentionCurve:
    """The retention curve: for each duration in `retentions`, what `gc(dry_run=True, clean=True,
    default_cutoff=R)` would collect (candidates and bytes), all from one pass over the lake.
    Deletes nothing, records no run."""
    from lakegc.engine.spark import SessionStart
    from lakegc.repogc.job import check_namespace
    from lakegc.repogc.simulate import parse_retentions, retention_curve

    settings = load_settings()
    parsed = parse_retentions(list(retentions))
    age = _min_age(min_age)
    source = open_lake(metastore).repository(repository).gc_source()
    check_namespace(source)
    now = utcnow()
    session = spark or SessionStart(settings.master(master, remote), settings.spark_conf(conf)).result()
    return retention_curve(session, source, parsed, now, age, progress)


def sweep(
    repository: str,
    run_id: str,
    *,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
    max_deletes: int | None = None,
    max_delete_rate: float | None = None,
) -> Run:
    """Delete the candidates of a run marked with `mark_only`, re-checking each first, or go on
    with a run whose sweep stopped (a budget, a crash, objects the store would not delete).
    `run_id` may be a prefix only that run's id has."""
    from lakegc.repogc.job import sweep_run

    settings = load_settings()
    return sweep_run(
        open_lake(metastore),
        repository,
        run_id,
        progress,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
        budget=Budget(max_deletes, max_delete_rate),
    )


def restore(
    repository: str,
    run_id: str,
    *,
    path: str | None = None,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    spark: SparkSession | None = None,
) -> Restored:
    """Move a run's quarantined objects (or those whose repository path or address matches the
    glob `path`) back to their addresses; reads of them work again. An error names what is gone
    when the quarantine (or part of it) was purged."""
    from lakegc.repogc.job import restore_run

    settings = load_settings()
    lake = open_lake(metastore)
    return restore_run(
        lake,
        repository,
        run_id,
        path,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
    )


def purge(
    repository: str,
    *,
    metastore: Metastore = None,
    master: str | None = None,
    remote: str | None = None,
    conf: dict[str, str] | None = None,
    progress: Phase = no_progress,
    spark: SparkSession | None = None,
) -> list[Purged]:
    """Delete the quarantines of runs whose restore window has passed (every `gc` run does too)."""
    from lakegc.repogc.job import purge_quarantines

    settings = load_settings()
    return purge_quarantines(
        open_lake(metastore),
        repository,
        progress,
        spark=spark,
        master=settings.master(master, remote),
        conf=settings.spark_conf(conf),
    )


def runs(repository: str, *, metastore: Metastore = None) -> list[Run]:
    """The repository's GC runs, newest first."""
    lake = open_lake(metastore)
    lake.repository(repository)
    return MetastoreRunLog(lake.metastore, repository).list()


def run(repository: str, run_id: str, *, metastore: Metastore = None) -> Run:
    """One run of the repository, by its id or a prefix only it has."""
    lake = open_lake(metastore)
    lake.repository(repository)
    log = MetastoreRunLog(lake.metastore, repository)
    return log.get(log.resolve(run_id))[0]


def candidates(
    repository: str,
    run_id: str,
    *,
    metastore: Metastore = None,
    limit: int | None = None,
    prefix: str | None = None,
    branch: str | None = None,
    reason: str | None = None,
) -> Iterator[Candidate]:
    """The candidates a repository run marked, streamed from its folder (never all in memory); only
    those whose path starts with `prefix`, whose commit lapsed on `branch`, of `reason`, when given."""
    from lakegc.repogc.outputs import run_folder

    check_limit(limit)
    if reason is not None and reason not in REPOSITORY_REASONS:
        raise InvalidArgument(f"invalid reason {reason!r}: {' or '.join(REPOSITORY_REASONS)}")
    lake = open_lake(metastore)
    found = run(repository, run_id, metastore=lake)  # here, not when the first candidate is asked for
    wanted = CandidateFilter(prefix, branch, reason)
    return read_candidates(run_folder(lake.repository(repository).storage, found.run_id), limit, wanted)


def failures(repository: str, run_id: str, *, metastore: Metastore = None, limit: int = 20) -> list[tuple[str, str]]:
    """The objects the run's newest sweep could not delete (address, the store's error), at most
    `limit`: what `num_failed` counts, and what `sweep` tries again."""
    from lakegc.repogc.sweep import failures as recorded_failures

    lake = open_lake(metastore)
    found = run(repository, run_id, metastore=lake)
    if not found.num_failed:
        return []
    return recorded_failures(lake.repository(repository).storage, found.run_id, limit)


def get_rules(repository: str, *, metastore: Metastore = None) -> GcRules | None:
    """The repository's retention rules (None: none set, every commit is kept)."""
    return open_lake(metastore).repository(repository).gc_rules()


def set_rules(repository: str, rules: GcRules | dict | str, *, metastore: Metastore = None) -> GcRules:
    """Set the repository's retention rules: lakeFS's JSON as text, a dict, or `GcRules`."""
    import json

    parsed = (
        rules if isinstance(rules, GcRules) else parse_rules(rules if isinstance(rules, str) else json.dumps(rules))
    )
    open_lake(metastore).repository(repository).set_gc_rules(parsed)
    return parsed


def delete_rules(repository: str, *, metastore: Metastore = None) -> bool:
    """Remove the repository's rules; False when there were none."""
    return open_lake(metastore).repository(repository).delete_gc_rules()
