"""Recorded tree changes tell exactly which commits hold an object, as reading the trees would.

Every commit records what it changed against its first parent's tree (`tree_changes`), and `gc
explain` finds the commits holding an object from those records, by address, without reading a
tree. Here random histories (uploads, removals, copies, links outside the namespace, commits,
branches, merges, reverts) are built with the repository API, and for every address ever written the
recorded answer is compared with the trees themselves.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakegc.errors import LakegcError
from lakegc.repo.gc_source import namespace_key
from lakegc.repo.repository import Lake
from lakegc.timeutil import utcnow

PATHS = ["a", "b", "d/c", "d/e"]
BRANCHES = ["main", "f1", "f2"]

branch, path = st.sampled_from(BRANCHES), st.sampled_from(PATHS)
op = st.one_of(
    st.tuples(st.just("upload"), branch, path, st.booleans()),  # the flag: commit the branch after
    st.tuples(st.just("remove"), branch, path, st.booleans()),
    st.tuples(st.just("copy"), branch, path, path, st.booleans()),
    st.tuples(st.just("link-outside"), branch, path, st.booleans()),
    st.tuples(st.just("merge"), branch, branch),
    st.tuples(st.just("revert"), branch),
)


def apply(repo, outside: Path, step: tuple, n: int) -> None:
    kind, branch, *rest = step
    if kind in ("merge", "revert"):
        with suppress(LakegcError):  # a dirty branch is committed first
            repo.commit(branch, f"before {kind} {n}")
        repo.merge(rest[0], branch) if kind == "merge" else repo.revert(branch, branch)
        return
    if kind == "upload":
        repo.upload(branch, rest[0], f"{n}".encode())
    elif kind == "remove":
        repo.remove(branch, rest[0])
    elif kind == "copy":
        repo.copy(branch, rest[0], branch, rest[1])
    elif kind == "link-outside":
        (outside / f"o{n}").write_bytes(b"x")
        repo.link(branch, rest[0], (outside / f"o{n}").as_uri(), 1, hashlib.md5(b"x").hexdigest())
    if rest[-1]:
        repo.commit(branch, f"c{n}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=4, max_size=30))
def test_recorded_changes_name_the_commits_the_trees_hold(steps: list[tuple]) -> None:
    root = Path(tempfile.mkdtemp(prefix="lakegc-changes-"))
    try:
        lake = Lake(f"sqlite:///{root / 'lakegc.db'}")
        lake.create_repository("repo", str(root / "ns"))
        repo = lake.repository("repo")
        (root / "outside").mkdir()
        for name in BRANCHES[1:]:
            repo.create_branch(name, "main")
        for n, step in enumerate(steps):
            with suppress(LakegcError):  # nothing to commit, a conflict, a dirty branch, no such path
                apply(repo, root / "outside", step, n)
        source = repo.gc_source()
        graph = source.references_to(utcnow(), "none").graph
        trees = {
            commit: [(e.path, namespace_key(source.namespace, e.address, e.address_kind)) for e in repo.list(commit)]
            for commit in graph.commits
        }
        keys = {key for pairs in trees.values() for _, key in pairs if key is not None}
        event(f"commits: {min(len(graph.commits), 8)}+, objects held: {min(len(keys), 4)}+")
        for key in keys | {"data/never-written"}:
            truth = {c: sorted(p for p, k in pairs if k == key) for c, pairs in trees.items()}
            assert source.references_to(utcnow(), key).holders == {c: ps for c, ps in truth.items() if ps}, key
    finally:
        shutil.rmtree(root, ignore_errors=True)
