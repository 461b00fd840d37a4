"""Which commits stay active: `active_commits` on named graphs.

Each case is a graph of commits `id: days ago` or `id: (days ago, first parent, second parent)`,
branch HEADs, a retention, and the active set we expect. The first block replays lakeFS's own table
(pkg/graveler/retention/active_commits_test.go: default retention 5 days, each HEAD a branch named
after its commit); the rest pin down situations of our own. Every case is also checked against the
reference model (tests/gc_model.py), and again with branch names permuted so that the walks run in
another order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
import support.gc_model as model

from lakegc.retention.active import CommitNode, active_commits, dangling_leaves
from lakegc.retention.rules import GcRules, KeepAll, KeepCount, KeepSince, Policy, policies_from_rules

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
SECOND = 1 / 86400  # in days


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


@dataclass(frozen=True)
class Case:
    graph: dict[str, float | tuple]  # id -> days ago, or (days ago, *parents)
    branches: dict[str, str]  # branch -> HEAD
    expected: set[str]
    retention: dict[str | None, int] | None = None  # lakeFS rules: branch -> days, None -> default
    policies: dict[str | None, Policy] | None = None  # Nessie cutoffs: branch -> policy, None -> default
    tags: tuple[str, ...] = ()
    notes: str = field(default="", compare=False)


def lakefs(graph: dict, heads_retention: dict[str, int], expected: list[str]) -> Case:
    """lakeFS's test harness: a branch per head, named after it, with its retention; default 5."""
    return Case(graph, {h: h for h in heads_retention}, set(expected), {None: 5, **heads_retention})


LAKEFS_CASES = {
    "two_branches": lakefs(
        {"a": 15, "b": (10, "a"), "c": (10, "a"), "d": (5, "c"), "e": (5, "b"), "f": (1, "e")},
        {"f": 7, "d": 3},
        ["b", "d", "e", "f"],
    ),
    "old_heads": lakefs({"a": 15, "b": 20, "c": (20, "a"), "d": (20, "a")}, {"b": 7, "c": 7, "d": 7}, ["b", "c", "d"]),
    "all_commits_active": lakefs(
        {"a": 5, "b": (4, "a"), "c": (3, "b"), "d": (2, "b"), "e": (1, "b")},
        {"d": 15, "e": 7, "c": 2},
        ["a", "b", "c", "d", "e"],
    ),
    "merge": lakefs({"a": 7, "b": (6, "a"), "c": 7, "d": (6, "c", "a")}, {"b": 3, "d": 10}, ["b", "c", "d"]),
    "two_branches_with_previously_expired": lakefs(
        {"a": 15, "b": (10, "a"), "c": (10, "a"), "d": (5, "c"), "e": (7, "b"), "f": (1, "e")},
        {"f": 7, "d": 3},
        ["d", "e", "f"],
    ),
    "merge_in_history": lakefs(
        {
            "e": 21,
            "d": (20, "e"),
            "f": (19, "e"),
            "c": (18, "e"),
            "b": (17, "d"),
            "a": (4, "c"),
            "g": (4, "b", "e"),
            "h": (3, "a", "f"),
        },
        {"h": 14, "g": 7, "f": 7},
        ["h", "a", "b", "c", "f", "g"],
    ),
    "dangling_commits_active": lakefs(
        {
            "a": 15,
            "b": (10, "a"),
            "c": (10, "a"),
            "d": (5, "c"),
            "e": (5, "b"),
            "f": (1, "e"),
            "g": (8, "c"),
            "h": (7, "g"),
            "i": (4, "h"),
        },
        {"f": 7, "d": 3},
        ["b", "d", "e", "f", "h", "i"],
    ),
    "dangling_commits_expired": lakefs(
        {
            "a": 15,
            "b": (10, "a"),
            "c": (10, "a"),
            "d": (5, "c"),
            "e": (5, "b"),
            "f": (1, "e"),
            "g": (8, "c"),
            "h": (7, "g"),
            "i": (6, "h"),
        },
        {"f": 7, "d": 3},
        ["b", "d", "e", "f"],
    ),
    "dangling_from_before_expired": lakefs(
        {
            "root": 20,
            "pre_expired": (20, "root"),
            "e1": (15, "pre_expired"),
            "b": (10, "e1"),
            "c": (10, "e1"),
            "d": (5, "c"),
            "e": (8, "b"),
            "f": (1, "e"),
            "g": (10, "root"),
            "h": (6, "g"),
        },
        {"f": 7, "d": 3},
        ["d", "e", "f"],
    ),
    "retained_by_non_leaf_head": lakefs(
        {"root": 20, "x": (14, "root"), "head2": (10, "x"), "head1": (9, "head2")},
        {"head1": 9, "head2": 12},
        ["head1", "head2", "x"],
    ),
    "reachable_previously_expired": lakefs(
        {
            "ep1": 8,
            "ep2": 8,
            "e5": (6, "ep2"),
            "e4": (7, "ep1", "ep2"),
            "e3": (6, "e5"),
            "e2": (6, "ep2"),
            "e1": (7, "e4"),
            "h3": (1, "e3"),
            "h2": (1, "e2"),
            "h1": (1, "e1"),
        },
        {"h1": 5, "h2": 5, "h3": 5},
        ["h1", "h2", "h3", "e1", "e2", "e3"],
    ),
}

# A recurring shape: a <- b <- c <- d <- e on main, all a day apart and long ago.
CHAIN = {"a": 50, "b": (40, "a"), "c": (30, "b"), "d": (20, "c"), "e": (10, "d")}

OUR_CASES = {
    # -- boundaries ------------------------------------------------------------------------------
    "child_created_exactly_days_ago_does_not_keep_its_parent": Case(
        {"a": 10, "b": (7, "a"), "c": (3, "b")},
        {"main": "c"},
        {"b", "c"},
        {None: 7, "main": 7},
        notes="b was created exactly at the threshold, not after it: b was not HEAD 7 days ago, a was "
        "HEAD until just before, so a goes",
    ),
    "child_created_a_second_inside_the_window_keeps_its_parent": Case(
        {"a": 10, "b": (7 - SECOND, "a"), "c": (3, "b")}, {"main": "c"}, {"a", "b", "c"}, {None: 7, "main": 7}
    ),
    "dangling_leaf_created_exactly_days_ago_expires": Case({"a": 10, "b": (7, "a")}, {"main": "a"}, {"a"}, {None: 7}),
    "dangling_leaf_a_second_inside_the_window_stays_with_its_parent": Case(
        {"r": 30, "a": (10, "r"), "b": (7 - SECOND, "a")}, {"main": "r"}, {"r", "a", "b"}, {None: 7}
    ),
    "retention_zero_keeps_only_heads": Case(
        {"a": 3, "b": (2, "a"), "c": (1, "b"), "d": (0, "b")},
        {"main": "c", "dev": "d"},
        {"c", "d"},
        {None: 0},
        notes="d was created at `now` exactly: not after the threshold",
    ),
    "retention_zero_head_dated_in_the_future_keeps_its_parent": Case(
        {"a": 3, "b": (2, "a"), "c": (-1, "b")}, {"main": "c"}, {"b", "c"}, {None: 0}
    ),
    # -- heads and their ages --------------------------------------------------------------------
    "head_older_than_its_retention_stays_alone": Case({"a": 30, "b": (20, "a")}, {"main": "b"}, {"b"}, {None: 7}),
    "branch_created_at_an_old_commit_keeps_it_as_head": Case(
        {"a": 30, "b": (20, "a"), "c": (1, "b")}, {"main": "c", "old": "a"}, {"a", "b", "c"}, {None: 5}
    ),
    "head_whose_first_parent_is_another_branchs_head": Case(
        {"r": 20, "m": (10, "r"), "f": (1, "m")},
        {"main": "m", "feature": "f"},
        {"f", "m", "r"},
        {None: 1, "main": 3, "feature": 14},
        notes="main's own 3 days keep only m; feature's 14 days reach through m to r",
    ),
    "two_branches_at_the_same_commit_longest_retention_wins": Case(
        CHAIN, {"main": "e", "release": "e"}, {"e", "d", "c"}, {None: 1, "main": 5, "release": 25}
    ),
    # -- a commit reached from several heads with different retentions ----------------------------
    "shared_chain_longest_retention_wins": Case(
        {"a": 20, "b": (12, "a"), "c": (6, "b"), "d": (1, "c")},
        {"short": "d", "long": "c"},
        {"a", "b", "c", "d"},
        {None: 1, "short": 3, "long": 15},
    ),
    "old_branch_walked_first_does_not_hide_a_newer_sibling": Case(
        {"p": 50, "c1": (40, "p"), "c2": (1, "p")},
        {"alpha": "c1", "beta": "c2"},
        {"c1", "c2", "p"},
        {None: 1, "alpha": 30, "beta": 5},
        notes="alpha (30 days) reaches p first and does not keep it (c1 is 40 days old); beta's c2 was "
        "created yesterday, so p was beta's HEAD 5 days ago and stays. lakeFS prunes at p here.",
    ),
    "short_branch_walked_first_then_long_branch_extends_the_chain": Case(
        {"a": 40, "b": (30, "a"), "c": (20, "b"), "d": (1, "c"), "x": (2, "c")},
        {"alpha": "d", "beta": "x"},
        {"a", "b", "c", "d", "x"},
        {None: 1, "alpha": 3, "beta": 35},
    ),
    # -- backdated, out-of-order dates -----------------------------------------------------------
    "backdated_history_walk_continues_past_old_commits": Case(
        {"root": 1, "x": (20, "root"), "y": (2, "x"), "z": (25, "y"), "h": (1, "z")},
        {"main": "h"},
        {"h", "z", "x"},
        {None: 5},
        notes="z is old but was HEAD until h; y is new, so x was HEAD 5 days ago; x itself is old",
    ),
    "backdated_dangling_leaf_expires_but_its_newer_stretch_keeps_parents": Case(
        {"r0": 40, "m": (1, "r0"), "r": 30, "p": (3, "r"), "q": (20, "p")},
        {"main": "m"},
        {"m", "r0", "r"},
        {None: 7},
        notes="q (the leaf) is 20 days old, so neither q nor its parent p is kept; p was created "
        "3 days ago, so the walk going on past them keeps r",
    ),
    # -- merges ------------------------------------------------------------------------------------
    "second_parent_of_a_merge_is_not_followed_after_its_branch_is_deleted": Case(
        {"a": 30, "s1": (25, "a"), "s2": (20, "s1"), "m": (1, "a", "s2")},
        {"main": "m"},
        {"m", "a"},
        {None: 7},
        notes="s2 became a dangling leaf (no commit's first parent) and is too old",
    ),
    "second_parent_kept_by_its_own_branch": Case(
        {"a": 30, "s1": (25, "a"), "s2": (20, "s1"), "m": (1, "a", "s2")},
        {"main": "m", "feature": "s2"},
        {"m", "a", "s2"},
        {None: 7},
    ),
    "merge_commit_whose_first_parent_is_older_than_its_second": Case(
        {"a": 40, "b": (35, "a"), "s": (2, "a"), "m": (1, "b", "s"), "n": (0.5, "m")},
        {"main": "n"},
        {"n", "m", "b", "s", "a"},
        {None: 7},
        notes="s is a dangling leaf inside the window: its hypothetical HEAD keeps s and a",
    ),
    # -- dangling leaves -------------------------------------------------------------------------
    "dangling_chain_after_a_reset_stays_while_recent": Case(
        {"a": 20, "x": (1, "a"), "d1": (9, "a"), "d2": (6, "d1"), "d3": (2, "d2")},
        {"main": "x"},
        {"x", "d3", "d2", "d1"},
        {None: 7, "main": 1},
    ),
    "dangling_leaf_uses_the_default_not_a_deleted_branchs_rule": Case(
        {"a": 20, "b": (10, "a"), "gone": (4, "b")}, {"main": "b"}, {"b"}, {None: 3, "main": 3, "feature": 30}
    ),
    # -- tags --------------------------------------------------------------------------------------
    "tagged_commit_is_active_but_not_its_ancestors": Case(
        {"a": 30, "b": (25, "a"), "c": (20, "b"), "d": (1, "c")}, {"main": "d"}, {"d", "c", "b"}, {None: 5}, tags=("b",)
    ),
    "tagged_dangling_commit_is_active": Case(
        {"a": 30, "b": (25, "a"), "t": (20, "a")}, {"main": "b"}, {"b", "t"}, {None: 5}, tags=("t",)
    ),
    # -- no rules ----------------------------------------------------------------------------------
    "no_rules_keep_every_commit_including_dangling_ones": Case(
        {"a": 300, "b": (200, "a"), "c": (100, "b"), "d": (150, "b"), "m": (50, "c", "d"), "z": (400, "a")},
        {"main": "m"},
        {"a", "b", "c", "d", "m", "z"},
    ),
    # -- Nessie-style cutoff policies --------------------------------------------------------------
    "keep_count_keeps_the_first_n_commits_of_the_chain": Case(
        CHAIN, {"main": "e"}, {"e", "d", "c"}, policies={"main": KeepCount(3), None: KeepCount(1)}
    ),
    "keep_count_one_keeps_only_the_head": Case(CHAIN, {"main": "e"}, {"e"}, policies={None: KeepCount(1)}),
    "keep_count_longer_than_the_chain_keeps_all_of_it": Case(
        CHAIN, {"main": "e"}, set(CHAIN), policies={None: KeepCount(99)}
    ),
    "keep_count_follows_first_parents_only": Case(
        {"a": 5, "b": (4, "a"), "s": (3, "a"), "m": (1, "b", "s")},
        {"main": "m", "side": "s"},
        {"m", "b", "s"},
        policies={None: KeepCount(2), "side": KeepCount(1)},
    ),
    "dangling_with_keep_count_one_expires_the_leaf": Case(
        {"r": 5, "h": (1, "r"), "leaf": (1, "r")},
        {"main": "h"},
        {"h"},
        policies={None: KeepCount(1)},
        notes="the hypothetical HEAD above the leaf is the one commit kept",
    ),
    "dangling_with_keep_count_two_keeps_the_leaf": Case(
        {"r": 5, "h": (1, "r"), "leaf": (1, "r")},
        {"main": "h"},
        {"h", "leaf"},
        policies={None: KeepCount(2), "main": KeepCount(1)},
    ),
    "dangling_with_keep_count_three_keeps_the_leaf_and_its_parent": Case(
        {"r": 5, "h": (1, "r"), "leaf": (1, "r")},
        {"main": "h"},
        {"h", "leaf", "r"},
        policies={None: KeepCount(3), "main": KeepCount(1)},
    ),
    "keep_since_date_is_a_retention_reaching_back_to_it": Case(
        CHAIN, {"main": "e"}, {"e", "d"}, policies={None: KeepSince(ago(15))}
    ),
    "keep_since_date_exactly_a_commits_date_drops_its_parent": Case(
        CHAIN, {"main": "e"}, {"e", "d"}, policies={None: KeepSince(ago(20))}
    ),
    "keep_since_date_in_the_future_keeps_only_heads": Case(
        CHAIN, {"main": "e"}, {"e"}, policies={None: KeepSince(NOW + timedelta(days=1))}
    ),
    "none_for_one_branch_count_for_the_others": Case(
        {**CHAIN, "f": (5, "c"), "g": (4, "f")},
        {"main": "e", "dev": "g"},
        {"a", "b", "c", "d", "e", "g"},
        policies={"main": KeepAll(), None: KeepCount(1)},
    ),
    "none_as_default_keeps_dangling_leaves_and_their_chains": Case(
        {**CHAIN, "f": (500, "b")},
        {"main": "e"},
        {"e", "f", "b", "a"},
        policies={"main": KeepCount(1), None: KeepAll()},
    ),
}

CASES = {**LAKEFS_CASES, **OUR_CASES}


# -- building the inputs ---------------------------------------------------------------------------


def nodes(graph: dict[str, float | tuple]) -> dict[str, tuple[tuple[str, ...], datetime]]:
    out = {}
    for cid, spec in graph.items():
        days, *parents = spec if isinstance(spec, tuple) else (spec,)
        out[cid] = (tuple(parents), ago(days))
    return out


def planner_policies(case: Case, rename: dict[str, str]):
    if case.policies is not None:
        policies = {rename.get(b, b) if b else None: p for b, p in case.policies.items()}
        return lambda branch: policies.get(branch, policies[None])
    if case.retention is None:
        return policies_from_rules(None, NOW)
    rules = GcRules.model_validate(
        {
            "default_retention_days": case.retention[None],
            "branches": [{"branch_id": rename.get(b, b), "retention_days": d} for b, d in case.retention.items() if b],
        }
    )
    return policies_from_rules(rules, NOW)


def model_retention(case: Case) -> model.Retention:
    if case.policies is not None:

        def as_model(policy: Policy) -> model.Policy:
            if isinstance(policy, KeepCount):
                return model.Count(policy.count)
            if isinstance(policy, KeepSince):
                return model.Since(policy.threshold)
            return model.All()

        return lambda branch: as_model(case.policies.get(branch, case.policies[None]))
    if case.retention is None:
        return model.retention_from_rules(None)
    return model.retention_from_rules(
        {
            "default_retention_days": case.retention[None],
            "branches": [{"branch_id": b, "retention_days": d} for b, d in case.retention.items() if b],
        }
    )


def run_planner(case: Case, rename: dict[str, str] | None = None, reverse: bool = False) -> set[str]:
    rename = rename or {}
    commits = {cid: CommitNode(parents, created) for cid, (parents, created) in nodes(case.graph).items()}
    items = list(case.branches.items())
    branches = {rename.get(b, b): head for b, head in (reversed(items) if reverse else items)}
    return active_commits(commits, branches, planner_policies(case, rename), case.tags)


def reversing_names(names) -> dict[str, str]:
    """A renaming that reverses the sorted order of the branch names (so walks run the other way)."""
    ordered = sorted(names)
    return {name: f"{i:02d}-{name}" for i, name in zip(range(len(ordered) - 1, -1, -1), ordered)}


# -- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_active_commits(name: str):
    case = CASES[name]
    assert run_planner(case) == case.expected, case.notes


@pytest.mark.parametrize("name", CASES)
def test_reference_model_agrees_with_the_table(name: str):
    case = CASES[name]
    commits = {cid: model.Commit(p, c) for cid, (p, c) in nodes(case.graph).items()}
    assert model.active_set(commits, case.branches, model_retention(case), NOW, case.tags) == case.expected


@pytest.mark.parametrize("name", CASES)
def test_result_does_not_depend_on_branch_name_order(name: str):
    case = CASES[name]
    rename = reversing_names(case.branches)
    assert rename != {b: b for b in case.branches}
    assert run_planner(case, rename) == case.expected
    assert run_planner(case, rename, reverse=True) == case.expected
    assert run_planner(case, reverse=True) == case.expected


@pytest.mark.parametrize("name", CASES)
def test_dangling_leaves_match_the_definition(name: str):
    case = CASES[name]
    graph = nodes(case.graph)
    commits = {cid: CommitNode(p, c) for cid, (p, c) in graph.items()}
    expected = model.dangling_leaves({cid: model.Commit(p, c) for cid, (p, c) in graph.items()}, case.branches.values())
    assert set(dangling_leaves(commits, case.branches.values())) == expected


def test_dangling_leaves_in_lakefs_dangling_table():
    graph = nodes(LAKEFS_CASES["dangling_from_before_expired"].graph)
    commits = {cid: CommitNode(p, c) for cid, (p, c) in graph.items()}
    assert sorted(dangling_leaves(commits, ["f", "d"])) == ["h"]


def test_unknown_tagged_commit_is_ignored():
    case = OUR_CASES["head_older_than_its_retention_stays_alone"]
    commits = {cid: CommitNode(p, c) for cid, (p, c) in nodes(case.graph).items()}
    assert active_commits(commits, case.branches, planner_policies(case, {}), ["no-such-commit"]) == {"b"}


def test_every_commit_of_a_case_is_either_active_or_expired():
    """Sanity of the table itself: expected sets name only commits of their graphs."""
    for name, case in CASES.items():
        assert case.expected <= set(case.graph), name
        assert set(case.branches.values()) <= set(case.graph), name
