"""Commit-graph algorithms (ancestors, merge_base, log_order) and the three-way merge decision.

Graphs are given as `child: parents` (first parent first) with a date per commit; `D(n)` is day n.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegc.repo.graph import ancestors, holding, log_order, merge_base
from lakegc.repo.merge import three_way
from lakegc.repo.model import AddressKind, Entry

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def D(n: float) -> datetime:
    return T0 + timedelta(days=n)


# name -> (graph, dates)
GRAPHS: dict[str, tuple[dict[str, tuple[str, ...]], dict[str, datetime]]] = {
    # a <- b <- c
    "linear": ({"a": (), "b": ("a",), "c": ("b",)}, {"a": D(0), "b": D(1), "c": D(2)}),
    # a <- b <- c (main), b <- d (feature)
    "fork": ({"a": (), "b": ("a",), "c": ("b",), "d": ("b",)}, {"a": D(0), "b": D(1), "c": D(2), "d": D(3)}),
    # main: a <- b <- d <- m(d, c) <- n ; feature: b <- c <- f
    "merge-then-fork-again": (
        {"a": (), "b": ("a",), "c": ("b",), "d": ("b",), "m": ("d", "c"), "n": ("m",), "f": ("c",)},
        {"a": D(0), "b": D(1), "c": D(2), "d": D(3), "m": D(4), "n": D(5), "f": D(6)},
    ),
    # a <- b, a <- c ; x = merge(b, c), y = merge(c, b): b and c are both best common ancestors
    "criss-cross": (
        {"a": (), "b": ("a",), "c": ("a",), "x": ("b", "c"), "y": ("c", "b")},
        {"a": D(0), "b": D(1), "c": D(2), "x": D(3), "y": D(4)},
    ),
    # same, but the older of the two candidates has the greater id
    "criss-cross-older-greater-id": (
        {"a": (), "z": ("a",), "c": ("a",), "x": ("z", "c"), "y": ("c", "z")},
        {"a": D(0), "z": D(1), "c": D(2), "x": D(3), "y": D(4)},
    ),
    # same dates for both candidates: the greater id wins
    "criss-cross-same-dates": (
        {"a": (), "b": ("a",), "c": ("a",), "x": ("b", "c"), "y": ("c", "b")},
        {"a": D(0), "b": D(1), "c": D(1), "x": D(3), "y": D(4)},
    ),
    # two roots that share nothing
    "disjoint": ({"a": (), "b": ("a",), "p": (), "q": ("p",)}, {"a": D(0), "b": D(1), "p": D(2), "q": D(3)}),
    # backdated: b is older than its parent a; c is older than b
    "backdated": ({"a": (), "b": ("a",), "c": ("b",), "d": ("c",)}, {"a": D(10), "b": D(5), "c": D(1), "d": D(20)}),
    # merge whose second parent is much newer than the first
    "merge-of-newer-branch": (
        {"a": (), "b": ("a",), "c": ("a",), "e": ("c",), "m": ("b", "e")},
        {"a": D(0), "b": D(1), "c": D(5), "e": D(6), "m": D(7)},
    ),
    # diamond with a backdated side: s is older than the root
    "diamond-backdated-side": (
        {"r": (), "s": ("r",), "t": ("r",), "m": ("s", "t")},
        {"r": D(5), "s": D(1), "t": D(6), "m": D(7)},
    ),
}


@pytest.mark.parametrize(
    "graph_name, a, b, expected",
    [
        ("linear", "c", "b", "b"),
        ("linear", "c", "a", "a"),
        ("linear", "c", "c", "c"),
        ("fork", "c", "d", "b"),
        ("fork", "d", "c", "b"),
        ("merge-then-fork-again", "n", "f", "c"),  # after the merge, the feature's base moves to c
        ("merge-then-fork-again", "f", "n", "c"),
        ("merge-then-fork-again", "m", "d", "d"),  # fast-forward case: one is an ancestor
        ("criss-cross", "x", "y", "c"),  # the newer candidate
        ("criss-cross", "y", "x", "c"),
        ("criss-cross-older-greater-id", "x", "y", "c"),  # newest first, id only breaks ties
        ("criss-cross-same-dates", "x", "y", "c"),  # same date: greatest id
        ("criss-cross-same-dates", "y", "x", "c"),
        ("disjoint", "b", "q", None),
        ("disjoint", "q", "b", None),
        ("backdated", "d", "b", "b"),
        ("merge-of-newer-branch", "m", "e", "e"),
        ("merge-of-newer-branch", "b", "e", "a"),
    ],
    ids=lambda v: str(v),
)
def test_merge_base_is_the_best_common_ancestor(graph_name: str, a: str, b: str, expected: str | None) -> None:
    graph, dates = GRAPHS[graph_name]
    assert merge_base(graph, dates, a, b) == expected


@pytest.mark.parametrize(
    "graph_name, start, expected",
    [
        ("linear", "c", ["c", "b", "a"]),
        ("fork", "d", ["d", "b", "a"]),
        ("criss-cross", "y", ["y", "c", "b", "a"]),
        ("merge-then-fork-again", "n", ["n", "m", "d", "c", "b", "a"]),
        ("backdated", "d", ["d", "c", "b", "a"]),  # children first although parents are newer
        ("merge-of-newer-branch", "m", ["m", "e", "c", "b", "a"]),  # newest first across parents
        ("diamond-backdated-side", "m", ["m", "t", "s", "r"]),  # s waits for nothing but still precedes r
        ("criss-cross-same-dates", "x", ["x", "c", "b", "a"]),  # same date: greater id first
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_log_order_is_newest_first_and_never_shows_a_parent_before_its_child(
    graph_name: str, start: str, expected: list[str]
) -> None:
    graph, dates = GRAPHS[graph_name]
    assert list(log_order(graph, dates, start)) == expected


@pytest.mark.parametrize(
    "graph_name, starts, expected",
    [
        ("linear", ("c",), {"a", "b", "c"}),
        ("linear", ("a",), {"a"}),
        ("fork", ("c", "d"), {"a", "b", "c", "d"}),
        ("merge-then-fork-again", ("m",), {"a", "b", "c", "d", "m"}),  # second parents are followed
        ("disjoint", ("b", "q"), {"a", "b", "p", "q"}),
        ("disjoint", (), set()),
    ],
    ids=[
        "linear-head",
        "linear-root",
        "fork-two-starts",
        "merge-follows-second-parent",
        "disjoint-two-starts",
        "no-starts",
    ],
)
def test_ancestors_include_the_starts_and_every_parent(
    graph_name: str, starts: tuple[str, ...], expected: set[str]
) -> None:
    graph, _ = GRAPHS[graph_name]
    assert ancestors(graph, *starts) == expected


def test_ancestors_of_a_commit_missing_from_the_graph_is_itself() -> None:
    assert ancestors({"a": ()}, "zz") == {"zz"}


# ---------------------------------------------------------------------------------------------
# Properties on random DAGs (fixed-length ids, as commit ids are).
# ---------------------------------------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, tuple[str, ...]], dict[str, datetime]]:
    n = draw(st.integers(1, 14))
    ids = [f"c{i:02d}" for i in range(n)]
    graph: dict[str, tuple[str, ...]] = {}
    for i, c in enumerate(ids):
        graph[c] = tuple(draw(st.lists(st.sampled_from(ids[:i]), max_size=2, unique=True))) if i else ()
    dates = {c: D(draw(st.integers(0, 6))) for c in ids}
    return graph, dates


@settings(max_examples=150, deadline=None)
@given(dag=dags(), data=st.data())
def test_log_order_is_a_topological_order_of_all_ancestors(dag, data: st.DataObject) -> None:
    graph, dates = dag
    start = data.draw(st.sampled_from(sorted(graph)))
    order = list(log_order(graph, dates, start))
    assert sorted(order) == sorted(ancestors(graph, start))
    pos = {c: i for i, c in enumerate(order)}
    for c in order:
        for p in graph[c]:
            assert pos[c] < pos[p], f"{p} shown before its child {c}"


@settings(max_examples=100, deadline=None)
@given(dag=dags(), data=st.data())
def test_log_order_is_newest_first_when_dates_follow_the_graph(dag, data: st.DataObject) -> None:
    graph, _ = dag
    dates = {c: D(i) for i, c in enumerate(sorted(graph))}  # every child newer than its parents
    start = data.draw(st.sampled_from(sorted(graph)))
    order = list(log_order(graph, dates, start))
    assert order == sorted(order, key=lambda c: dates[c], reverse=True)


@settings(max_examples=150, deadline=None)
@given(dag=dags(), data=st.data())
def test_merge_base_is_a_common_ancestor_no_other_common_one_descends_from(dag, data: st.DataObject) -> None:
    graph, dates = dag
    a = data.draw(st.sampled_from(sorted(graph)), label="a")
    b = data.draw(st.sampled_from(sorted(graph)), label="b")
    base = merge_base(graph, dates, a, b)
    common = ancestors(graph, a) & ancestors(graph, b)
    assert base == merge_base(graph, dates, b, a), "merge_base must not depend on argument order"
    if not common:
        assert base is None
        return
    assert base in common
    for c in common - {base}:
        assert base not in ancestors(graph, *graph[c]), f"{base} is an ancestor of common ancestor {c}: not the best"


# ---------------------------------------------------------------------------------------------
# three_way: a pure decision over two change sets from the same base.
# ---------------------------------------------------------------------------------------------

M = datetime(2024, 1, 1, tzinfo=UTC)


def E(tag: str) -> Entry:
    return Entry("p", f"data/s/{tag}", AddressKind.RELATIVE, len(tag), tag, M)


@pytest.mark.parametrize(
    "ours, theirs, to_apply, conflicts",
    [
        ({}, {}, {}, []),
        ({}, {"p": E("new")}, {"p": E("new")}, []),
        ({}, {"p": None}, {"p": None}, []),
        ({"p": E("new")}, {}, {}, []),
        ({"p": None}, {}, {}, []),
        ({"p": E("same")}, {"p": E("same")}, {}, []),
        ({"p": E("ours")}, {"p": E("theirs")}, {}, ["p"]),
        ({"p": None}, {"p": E("theirs")}, {}, ["p"]),
        ({"p": E("ours")}, {"p": None}, {}, ["p"]),
        ({"p": None}, {"p": None}, {}, []),
        (
            {"a": E("x"), "c": E("o"), "b": E("o")},
            {"c": E("t"), "b": E("t"), "d": None, "a": E("x")},
            {"d": None},
            ["b", "c"],
        ),
    ],
    ids=[
        "nothing-changed",
        "only-theirs-added",
        "only-theirs-deleted",
        "only-ours-changed",
        "only-ours-deleted",
        "both-same-change",
        "both-different-change",
        "delete-vs-modify",
        "modify-vs-delete",
        "both-delete",
        "mixed-conflicts-sorted",
    ],
)
def test_three_way_applies_their_changes_and_reports_conflicts(ours, theirs, to_apply, conflicts) -> None:
    got_apply, got_conflicts = three_way(ours, theirs)
    assert got_apply == to_apply
    assert got_conflicts == conflicts


@settings(max_examples=100, deadline=None)
@given(
    ours=st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([None, E("1"), E("2")])),
    theirs=st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([None, E("1"), E("2")])),
)
def test_three_way_never_overwrites_ours_and_conflicts_exactly_on_differing_paths(ours, theirs) -> None:
    to_apply, conflicts = three_way(ours, theirs)
    assert not set(to_apply) & set(ours)
    assert to_apply == {p: c for p, c in theirs.items() if p not in ours}
    assert conflicts == sorted(p for p in theirs if p in ours and ours[p] != theirs[p])


def test_a_merge_that_loses_the_race_for_its_branch_leaves_no_orphan_commit(env, tmp_path) -> None:
    """Another writer moves DEST while a merge is computed: the merge retries, and the commit of the
    losing attempt is not recorded (GC would have to keep it as a dangling leaf forever)."""
    import sqlalchemy as sa

    from lakegc.metastore import schema as t
    from lakegc.repo.repository import Lake

    lake = Lake(env.metastore)
    lake.create_repository("race", (tmp_path / "ns").as_uri())
    repo = lake.repository("race")
    repo.create_branch("dev", "main")
    repo.upload("dev", "a", b"x")
    repo.commit("dev", "c1")
    compute, raced = repo._three_way, []

    def other_writer_lands_first(*args):  # type: ignore[no-untyped-def]
        result = compute(*args)
        if not raced:
            raced.append(True)
            repo.create_branch("tmp", "main")
            repo.upload("tmp", "b", b"y")
            repo.commit("tmp", "c2")
            repo.merge("tmp", "main")
        return result

    repo._three_way = other_writer_lands_first  # type: ignore[method-assign]
    merged = repo.merge("dev", "main")
    with repo.ms.read() as conn:
        rows = conn.execute(sa.select(t.commits.c.id, t.commits.c.parents)).all()
    heads = {b.head for b in repo.branches()}
    children_of = {p for r in rows for p in r.parents}
    assert raced and merged.id in heads
    assert [r.id for r in rows if r.id not in heads and r.id not in children_of] == []


# holding: (first-parent graph, set_by) -> commit -> paths holding the object
@pytest.mark.parametrize(
    ("graph", "set_by", "held"),
    [
        pytest.param({"a": (), "b": ("a",)}, {}, {}, id="never-put-anywhere"),
        pytest.param({"a": (), "b": ("a",), "c": ("b",)}, {"p": {"b": True}}, {"b": ["p"], "c": ["p"]}, id="inherited"),
        pytest.param(
            {"a": (), "b": ("a",), "c": ("b",), "d": ("c",)},
            {"p": {"a": True, "c": False}},
            {"a": ["p"], "b": ["p"]},
            id="removed-or-replaced-later",
        ),
        pytest.param(
            {"a": (), "b": ("a",), "c": ("a",), "m": ("c", "b")},
            {"p": {"b": True, "m": True}},
            {"b": ["p"], "m": ["p"]},
            id="a-merge-brings-it-from-its-second-parent",
        ),
        pytest.param(
            {"a": (), "b": ("a",), "m": ("a", "b")},
            {"p": {"b": True}},
            {"b": ["p"]},
            id="a-second-parent-alone-gives-nothing",
        ),
        pytest.param(
            {"a": (), "b": ("a",), "c": ("b",)},
            {"p": {"a": True}, "q": {"b": True}, "r": {"a": True, "b": False, "c": True}},
            {"a": ["p", "r"], "b": ["p", "q"], "c": ["p", "q", "r"]},
            id="several-paths-sorted",
        ),
        pytest.param({"b": ("gone",)}, {"p": {}}, {}, id="a-missing-first-parent-is-the-empty-tree"),
    ],
)
def test_holding(graph: dict[str, tuple[str, ...]], set_by: dict[str, dict[str, bool]], held: dict) -> None:
    assert holding(graph, set_by) == held


def test_holding_walks_a_long_history_without_recursion() -> None:
    graph = {f"c{i}": ((f"c{i - 1}",) if i else ()) for i in range(50_000)}
    assert len(holding(graph, {"p": {"c0": True}})) == 50_000
