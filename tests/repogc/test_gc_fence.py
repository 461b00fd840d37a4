"""The fence between a running sweep and ref changes (docs/safety.md; issue 16 finding 2):
a ref created or moved, or an entry copied, while a sweep runs is either refused or keeps every
object it reaches, at every phase of a run and while the deletes are under way."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from conftest import Env
from support.expiring import NAME, PARAMS, expiring_lake, gc_while_hammered, readable

from lakegc.engine.runs import MetastoreRunLog, RunState
from lakegc.errors import LakegcError
from lakegc.repo.fence import FencedByGc
from lakegc.repo.repository import Lake, Repository
from lakegc.repogc.job import GcOptions, run_gc
from lakegc.retention.rules import GcRules
from lakegc.timeutil import utcnow


# -- what writers may and may not do while a fence stands -----------------------------------------
def test_behind_a_fence_every_way_back_to_an_expired_commit_is_refused(env: Env):
    lake, repo, old, paths = expiring_lake(env, objects=3)
    marked_active = {b.head for b in repo.branches()}
    repo.gc_source().raise_fence("run-x", marked_active, PARAMS)
    attempts = {
        "tag": lambda: repo.create_tag("keep", old),
        "branch": lambda: repo.create_branch("revive", old),
        "branch at a prefix": lambda: repo.create_branch("revive2", old[:10]),
        "copy out of it": lambda: repo.copy(old, paths[0], "main", "copied"),
        "merge from it": lambda: repo.merge(old, "main", allow_empty=True),
        "revert to it": lambda: repo.revert("main", repo.log("main")[0].id),
        "rules change": lambda: repo.set_gc_rules(
            GcRules.model_validate({"default_retention_days": 90, "branches": []})
        ),
    }
    for what, attempt in attempts.items():
        with pytest.raises(FencedByGc, match="run-x"):
            attempt()
            pytest.fail(f"{what} was allowed behind the fence")
    assert [t.name for t in repo.tags()] == [] and [b.name for b in repo.branches()] == ["main"]


def test_behind_a_fence_ordinary_work_goes_on(env: Env):
    lake, repo, old, paths = expiring_lake(env, objects=3)
    repo.gc_source().raise_fence("run-x", {b.head for b in repo.branches()}, PARAMS)
    repo.create_branch("feature", "main")  # HEAD is active; main's 7 days reach back to nothing expired
    repo.create_tag("v1", "main")
    repo.upload("feature", "x", b"x")
    repo.commit("feature", "x")
    repo.merge("feature", "main")
    repo.copy("main", paths[0], "feature", "copy")
    repo.delete_branch("feature")
    repo.gc_source().lower_fence("run-x")
    repo.create_tag("keep", old)  # the fence is down: anything goes again


def test_a_branch_whose_retention_reaches_an_expired_ancestor_is_refused(env: Env):
    """Not only the ref's own commit: a new branch at main's HEAD, under a rule that keeps 90 days
    for it, would make main's expired history count again."""
    lake, repo, old, _ = expiring_lake(env, objects=3)
    repo.set_gc_rules(
        GcRules.model_validate(
            {"default_retention_days": 7, "branches": [{"branch_id": "archive", "retention_days": 90}]}
        )
    )
    repo.gc_source().raise_fence("run-x", {b.head for b in repo.branches()}, PARAMS)
    with pytest.raises(FencedByGc, match="branch 'archive'"):
        repo.create_branch("archive", "main")
    repo.create_branch("scratch", "main")  # the default 7 days keep nothing expired


def test_with_path_rules_the_fence_guards_each_rules_expired_commits(env: Env):
    """main keeps 90 days, `t/**` 7: `old` is active for main's other entries and expired for its
    `t/` ones. A branch at `old` would keep its `t/` entries again (HEAD): refused; a branch named
    `long` at main whose `t/` entries a 7-day rule keeps anyway: allowed. Without the per-rule
    record, the first would pass (old is active under main's own rule) or the second be refused."""
    lake, repo, old, _ = expiring_lake(env, objects=3)
    rules = {"default_retention_days": 90, "branches": [], "path_rules": [{"glob": "t/**", "retention_days": 7}]}
    repo.set_gc_rules(GcRules.model_validate(rules))
    source = repo.gc_source()
    graph = source.references_to(utcnow(), "none").graph
    marked = [set(graph.commits), {b.head for b in repo.branches()}]  # as the mark found them
    active = source.raise_fence("run-x", marked[0], PARAMS, marked[1:])
    assert old in active[0] and old not in active[1]
    with pytest.raises(FencedByGc, match="run-x"):
        repo.create_branch("revive", old)
    with pytest.raises(FencedByGc, match="run-x"):
        repo.copy(old, "t/part-00000", "main", "copied")  # entries out of a commit expired under any rule
    repo.create_branch("long", "main")
    repo.create_tag("v1", "main")


def test_a_dead_sweepers_fence_comes_down_with_its_lease(env: Env, spark):
    lake, repo, old, _ = expiring_lake(env, objects=3)
    repo.gc_source().raise_fence("run-dead", {b.head for b in repo.branches()}, PARAMS)
    with pytest.raises(FencedByGc):
        repo.create_tag("keep", old)
    run_gc(lake, NAME, GcOptions(dry_run=True), spark=spark)  # takes the (free) lease over
    repo.create_tag("keep", old)


# -- races with a real run ------------------------------------------------------------------------
PHASES = ["listing", "snapshotting", "choosing", "reading", "writing", "re-checking"]


@pytest.mark.parametrize("at", PHASES)
def test_a_ref_created_at_any_phase_is_refused_or_keeps_its_objects(env: Env, spark, at: str):
    lake, repo, old, paths = expiring_lake(env)
    other = Lake(env.metastore).repository(NAME)  # another writer: its own connections
    outcome: dict[str, object] = {}

    def phase(name: str, detail: str = "") -> None:
        if name.startswith(at):
            for kind, make in (
                ("tag", lambda: other.create_tag("t", old)),
                ("branch", lambda: other.create_branch("b", old)),
            ):
                try:
                    make()
                    outcome[kind] = "created"
                except FencedByGc:
                    outcome[kind] = "refused"

    summary = run_gc(lake, NAME, GcOptions(min_age=timedelta(hours=1)), phase=phase, spark=spark)
    assert summary.state is RunState.SWEPT
    assert set(outcome) == {"tag", "branch"}
    for kind, ref in (("tag", "t"), ("branch", "b")):
        if outcome[kind] == "created":
            assert readable(repo, ref, paths), f"{kind} created at {at!r} lost objects"
    # Every phase callback runs before the fence goes up (the sweep's first step): the re-check
    # must have seen these refs and kept their objects. Refs made behind the fence: the next test.
    assert outcome == {"tag": "created", "branch": "created"}
    # Made before the mark read the graph, they keep the objects from being candidates at all;
    # made after, the sweep's re-check revives them.
    assert summary.repo.num_revived == (0 if at in ("listing", "snapshotting") else len(paths))


def test_refs_hammered_while_the_deletes_run_never_lose_an_object(env: Env, spark, monkeypatch):
    """From the moment the fence stands until it comes down, a writer creates a tag or a branch on
    the expiring commit as fast as it can (issue 16 lost a 5,000-object commit's objects this way).
    Every attempt is refused, and the sweep deletes exactly the expired objects."""
    lake, repo, old, paths = expiring_lake(env, objects=300)
    other = Lake(env.metastore).repository(NAME)

    def attempt(name: str) -> bool | None:
        try:
            (other.create_tag if name[-1] in "13579" else other.create_branch)(name, old)
            return True
        except FencedByGc:
            return False
        except LakegcError:
            return None

    created, refused, deleted = gc_while_hammered(lake, spark, monkeypatch, attempt)
    assert refused > 0, "the writer never ran while the fence stood"
    for ref in created:
        assert readable(repo, ref, paths), f"ref {ref} lost objects"
    assert created == [] and deleted == len(paths)


def test_a_sweep_past_its_lease_deadline_defers_and_finishes_in_later_rounds(env: Env, spark, monkeypatch):
    """No delete starts after the deadline the lease guarantees; deferred objects are deleted in
    the next round, after the lease is checked again, and are never counted as failed."""
    lake, repo, old, paths = expiring_lake(env, objects=30)
    deadlines = [0.0]  # the first round's deadline has already passed
    from lakegc.repogc.lease import Lease

    original = Lease.deadline
    monkeypatch.setattr(Lease, "deadline", lambda lease: deadlines.pop() if deadlines else original(lease))
    summary = run_gc(lake, NAME, GcOptions(min_age=timedelta(hours=1)), spark=spark)
    assert summary.state is RunState.SWEPT
    assert (summary.num_deleted, summary.num_failed) == (len(paths), 0)
    rounds = {Path(k).parent.name.rsplit("-", 1)[1] for k in _keys(repo, summary.run_id, "deleted")}
    assert rounds == {"1"}  # round 0 tried nothing: its rows went to deferred/, round 1 deleted them all
    assert len(_keys(repo, summary.run_id, "deferred")) >= 1
    assert not readable(repo, old, paths[:1])
    assert MetastoreRunLog(lake.metastore, NAME).get(summary.run_id)[0].num_deleted == len(paths)


def _keys(repo: Repository, run_id: str, name: str) -> list[str]:
    from lakegc.repogc.outputs import output_keys

    return output_keys(repo.storage, run_id, name)


def test_a_ref_made_on_an_expiring_commit_just_before_the_deletes_start_loses_nothing(env: Env, spark, monkeypatch):
    """Issue 16's finding as it was reproduced on v0.5.0, through nothing but public behaviour:
    the moment the sweep checks its lease to start deleting (after its re-check), another writer
    tags the expiring commit and branches from it. v0.5.0 accepted both and deleted every object
    they read; now the fence refuses them (or, were they accepted, they would read everything)."""
    from lakegc.repogc.lease import Lease

    lake, repo, old, paths = expiring_lake(env, objects=200)
    other = Lake(env.metastore).repository(NAME)
    outcomes: dict[str, str] = {}
    original = Lease.check

    def check(self: Lease) -> None:
        for kind, make in (
            ("tag", lambda: other.create_tag("late", old)),
            ("branch", lambda: other.create_branch("late-branch", old)),
        ):
            if kind not in outcomes:
                try:
                    make()
                    outcomes[kind] = "created"
                except LakegcError as exc:
                    outcomes[kind] = f"refused: {exc}"
        original(self)

    monkeypatch.setattr(Lease, "check", check)
    summary = run_gc(lake, NAME, GcOptions(min_age=timedelta(hours=1)), spark=spark)
    assert set(outcomes) == {"tag", "branch"}
    for kind, ref in (("tag", "late"), ("branch", "late-branch")):
        if outcomes[kind] == "created":
            assert readable(repo, ref, paths), f"the {kind} made before the deletes lost its objects"
        else:
            assert "is deleting objects of expired commits" in outcomes[kind]
    assert summary.state is RunState.SWEPT


def test_a_connect_run_that_fails_mid_round_keeps_its_fence_up_until_the_round_could_have_ended(
    env: Env, spark, monkeypatch
):
    """On Spark Connect a client's error (the network, an interrupt) does not stop the server's
    delete round: the run's fence must stay up until that round's deadline plus half a lease have
    passed (a writer could otherwise bring back what the round still deletes), then come down with
    the lease. Here a round is handed out and the client fails at once, with ROUND at 2 s."""
    import threading
    import time

    import sqlalchemy as sa

    from lakegc.metastore import schema as t
    from lakegc.repogc import job
    from lakegc.repogc import lease as lease_module

    lake, repo, old, paths = expiring_lake(env, objects=30)
    monkeypatch.setattr(lease_module, "ROUND", timedelta(seconds=2))
    monkeypatch.setattr(job, "classic_context", lambda session: None)  # as a Connect session has none
    handed: list[float] = []

    def failing_sweep(*args: object, before_delete, **kwargs: object) -> None:
        before_delete()  # a round handed to the server, which goes on alone
        handed.append(time.monotonic())
        raise RuntimeError("the client lost the server in the middle of a round")

    monkeypatch.setattr(job, "sweep", failing_sweep)
    fenced: list[tuple[float, int]] = []
    stop = threading.Event()

    def rows(table: sa.Table) -> int:
        with lake.metastore.read() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()

    def watch() -> None:
        while not stop.wait(0.1):
            fenced.append((time.monotonic(), rows(t.gc_fences)))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(Exception, match="lost the server"):
            run_gc(lake, NAME, GcOptions(min_age=timedelta(hours=1)), spark=spark)
        ended = time.monotonic()
    finally:
        stop.set()
        watcher.join()
    assert ended - handed[0] >= 3.5  # deadline (2 s) plus half a lease (2 s), less the check's own time
    assert any(count for when, count in fenced if when >= handed[0] + 3.5)  # still up near the end
    assert rows(t.gc_fences) == 0 and rows(t.gc_leases) == 0  # both released once the round cannot be going
    assert readable(repo, old, paths)  # nothing deleted: the round here never ran
