"""Pure algorithms over a commit graph: ancestry, merge base, log order.

A graph is a mapping commit id -> parent ids (first parent first), with creation dates beside it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

Graph = Mapping[str, Sequence[str]]


def ancestors(graph: Graph, *starts: str) -> set[str]:
    """The starting commits and every commit reachable from them through any parent."""
    seen = set(starts)
    stack = list(starts)
    while stack:
        for parent in graph.get(stack.pop(), ()):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


def merge_base(graph: Graph, dates: Mapping[str, datetime], a: str, b: str) -> str | None:
    """The best common ancestor: a common ancestor that is no ancestor of another common one.
    Criss-cross histories can have several; we take the newest (then the greatest id) so the
    choice is deterministic."""
    common = ancestors(graph, a) & ancestors(graph, b)
    if not common:
        return None
    proper = ancestors(graph, *(p for c in common for p in graph.get(c, ())))
    best = common - proper
    return max(best, key=lambda c: (dates[c], c))


def first_parents(graph: Graph) -> dict[str, Sequence[str]]:
    """The graph with only each commit's first parent: a branch's own line of history."""
    return {c: tuple(ps[:1]) for c, ps in graph.items()}


def log_order(graph: Graph, dates: Mapping[str, datetime], start: str) -> Iterator[str]:
    """Ancestors of `start`, newest first, never a parent before its child: backdated commits
    still show under the commits built on them."""
    reachable = ancestors(graph, start)
    waiting = {c: 0 for c in reachable}  # children not yet shown
    for c in reachable:
        for p in set(graph.get(c, ())):
            waiting[p] += 1
    heap = [(-dates[start].timestamp(), _desc(start), start)]
    while heap:
        _, _, commit = heapq.heappop(heap)
        yield commit
        for p in set(graph.get(commit, ())):
            waiting[p] -= 1
            if waiting[p] == 0:
                heapq.heappush(heap, (-dates[p].timestamp(), _desc(p), p))


def _desc(commit_id: str) -> tuple[int, ...]:
    """Ties on date break by id, descending, inside a min-heap."""
    return tuple(-ord(ch) for ch in commit_id)


def holding(graph: Graph, set_by: Mapping[str, Mapping[str, bool]]) -> dict[str, list[str]]:
    """Commit -> the paths at which its tree holds an object (commits holding it nowhere left out).

    `set_by[path][commit]` says what `commit` did to `path` against its first parent's tree: put
    the object there (True) or something else, or nothing (False). A commit's tree is its first
    parent's with its own changes applied, so a path holds the object in a commit when the nearest
    commit on its first-parent line that changed the path put the object there. One walk per path,
    each commit decided once (first parents before their children), no tree read."""
    order = _first_parents_first(graph)
    held: dict[str, list[str]] = {}
    for path in sorted(set_by):
        changes = set_by[path]
        holds: dict[str, bool] = {}
        for commit in order:
            parents = graph.get(commit, ())
            inherited = holds.get(parents[0], False) if parents else False
            holds[commit] = changes.get(commit, inherited)
            if holds[commit]:
                held.setdefault(commit, []).append(path)
    return held


def _first_parents_first(graph: Graph) -> list[str]:
    """Every commit of `graph`, each after its first parent (the first-parent links form a forest)."""
    children: dict[str, list[str]] = {}
    roots = []
    for commit, parents in graph.items():
        if parents and parents[0] in graph:
            children.setdefault(parents[0], []).append(commit)
        else:
            roots.append(commit)
    order = []
    stack = sorted(roots, reverse=True)
    while stack:
        commit = stack.pop()
        order.append(commit)
        stack += children.get(commit, ())
    return order
