"""Committed trees: content-defined, content-addressed Parquet ranges.

Protected here:
- the issue's range-sharing property: one changed path on a 100,000-entry tree writes <= 3 new
  ranges and shares almost every range with the parent tree;
- canonical chunking: `apply(build(A), changes)` is the very tree `build(A + changes)`, whatever
  history produced it (so trees share ranges and GC reads each distinct range once);
- diff / get / entries (with prefixes) agree with a plain dict model.
"""

from __future__ import annotations

import bisect
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakegc.repo import trees
from lakegc.repo.model import AddressKind, Change, ChangeType, Entry, as_changes
from lakegc.repo.trees import (
    METARANGES_PREFIX,
    RANGES_PREFIX,
    RangeRef,
    TreeStore,
    chunk,
    is_natural_cut,
    metarange_id,
    range_id,
)
from lakegc.storage import LocalStorage

MTIME = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
BIG = 100_000


def entry(path: str, n: int = 0, *, metadata: str | None = None, kind: AddressKind = AddressKind.RELATIVE) -> Entry:
    return Entry(
        path,
        f"data/s/obj-{path.replace('/', '_')}-{n}",
        kind,
        10 + n,
        f"sum{n}",
        MTIME + timedelta(seconds=n),
        metadata,
    )


def canonical_id(entries: list[Entry]) -> str:
    """The metarange id `build` would give, computed in memory without writing anything."""
    return metarange_id([RangeRef(range_id(p), p[0].path, p[-1].path, len(p)) for p in chunk(entries)])


def range_files(root: Path) -> set[str]:
    folder = root / RANGES_PREFIX
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


class CountingStorage(LocalStorage):
    """A LocalStorage that remembers which keys were read."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, key: str) -> bytes:
        self.reads.append(key)
        return super().read(key)


@contextmanager
def chunking(mask: int, max_entries: int) -> Iterator[None]:
    """Small ranges, so that small examples have many natural and forced cuts.
    `is_natural_cut` reads `_CUT_MASK` and `chunk`/`apply` read `MAX_ENTRIES` at call time."""
    with mock.patch.object(trees, "_CUT_MASK", mask), mock.patch.object(trees, "MAX_ENTRIES", max_entries):
        yield


# ---------------------------------------------------------------------------------------------
# The 100,000-entry tree of the issue: one changed path writes <= 3 new ranges.
# ---------------------------------------------------------------------------------------------


@dataclass
class BigTree:
    root: Path
    mid: str
    entries: list[Entry]
    paths: list[str]
    refs: list[RangeRef]


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> BigTree:
    root = tmp_path_factory.mktemp("big-tree")
    entries = [Entry(f"p/{i:06d}", f"data/s/obj{i}", AddressKind.RELATIVE, i, f"sum{i}", MTIME) for i in range(BIG)]
    entries.sort(key=lambda e: e.path)
    store = TreeStore(LocalStorage(root))
    mid = store.build(entries)
    return BigTree(root, mid, entries, [e.path for e in entries], list(store.ranges(mid)))


def _fresh_path(big: BigTree, after: str, *, cut: bool) -> str:
    """A path not in the tree that sorts right after `after`, and is (or is not) a natural cut."""
    for j in range(100_000):
        candidate = f"{after}-new{j}"
        if is_natural_cut(candidate) == cut:
            i = bisect.bisect_left(big.paths, candidate)
            assert i == len(big.paths) or big.paths[i] != candidate
            return candidate
    raise AssertionError("no candidate path found")


def _boundary(big: BigTree) -> str:
    """The last path of a range in the middle of the tree: a natural cut."""
    ref = big.refs[len(big.refs) // 2]
    assert is_natural_cut(ref.max_path)
    return ref.max_path


def _change_case(big: BigTree, case: str) -> dict[str, Entry | None]:
    middle = big.paths[BIG // 2 + 7]
    if case == "modify-middle-path":
        return {middle: replace(big.entries[BIG // 2 + 7], size=999_999, checksum="changed")}
    if case == "modify-first-path":
        return {big.paths[0]: replace(big.entries[0], address="data/s/other")}
    if case == "modify-last-path":
        return {big.paths[-1]: replace(big.entries[-1], checksum="changed")}
    if case == "modify-range-boundary-path":
        p = _boundary(big)
        return {p: entry(p, 5)}
    if case == "add-path-inside-a-range":
        p = _fresh_path(big, middle, cut=False)
        return {p: entry(p)}
    if case == "add-path-that-is-a-natural-cut":  # splits a range in two
        p = _fresh_path(big, middle, cut=True)
        return {p: entry(p)}
    if case == "add-path-right-after-a-range-boundary":
        p = _fresh_path(big, _boundary(big), cut=False)
        return {p: entry(p)}
    if case == "add-path-before-every-path":
        return {"a/first": entry("a/first")}
    if case == "add-path-after-every-path":
        return {"z/last": entry("z/last")}
    if case == "remove-path-inside-a-range":
        assert not is_natural_cut(middle)
        return {middle: None}
    if case == "remove-range-boundary-path":  # joins two ranges
        return {_boundary(big): None}
    if case == "remove-last-path":
        return {big.paths[-1]: None}
    raise AssertionError(case)


ONE_PATH_CASES = [
    "modify-middle-path",
    "modify-first-path",
    "modify-last-path",
    "modify-range-boundary-path",
    "add-path-inside-a-range",
    "add-path-that-is-a-natural-cut",
    "add-path-right-after-a-range-boundary",
    "add-path-before-every-path",
    "add-path-after-every-path",
    "remove-path-inside-a-range",
    "remove-range-boundary-path",
    "remove-last-path",
]


def test_big_tree_is_chunked_into_about_a_hundred_content_defined_ranges(big_tree: BigTree) -> None:
    n = len(big_tree.refs)
    assert 40 <= n <= 250, f"{n} ranges for {BIG} entries with ~1,024 per range"
    assert range_files(big_tree.root) == {r.id for r in big_tree.refs}
    assert sum(r.count for r in big_tree.refs) == BIG
    for ref in big_tree.refs[:-1]:
        assert is_natural_cut(ref.max_path) or ref.count == trees.MAX_ENTRIES
    assert big_tree.mid == canonical_id(big_tree.entries)


@pytest.mark.parametrize("case", ONE_PATH_CASES)
def test_one_changed_path_on_100k_tree_writes_at_most_3_new_ranges(big_tree: BigTree, case: str) -> None:
    changes = _change_case(big_tree, case)
    ((path, new),) = changes.items()
    storage = CountingStorage(big_tree.root)
    store = TreeStore(storage)  # cold cache: the parent tree is read back from storage, as a commit does
    before = range_files(big_tree.root)

    mid = store.apply(big_tree.mid, changes)

    written = range_files(big_tree.root) - before
    assert len(written) <= 3, f"{case}: {len(written)} new range files"
    old_ids = [r.id for r in big_tree.refs]
    new_ids = [r.id for r in store.ranges(mid)]
    shared = set(old_ids) & set(new_ids)
    assert len(shared) >= len(old_ids) - 2, f"{case}: only {len(shared)} of {len(old_ids)} ranges shared"
    assert 1 <= len(set(new_ids) - set(old_ids)) <= 3
    assert len([k for k in storage.reads if k.startswith(RANGES_PREFIX)]) <= 3, "apply read untouched ranges"
    # The result is the canonical tree of the new entry set, and holds the change.
    expected = dict(zip(big_tree.paths, big_tree.entries))
    if new is None:
        del expected[path]
    else:
        expected[path] = new
    assert mid == canonical_id([expected[p] for p in sorted(expected)])
    assert TreeStore(LocalStorage(big_tree.root)).get(mid, path) == new
    assert [c.path for c in TreeStore(LocalStorage(big_tree.root)).diff(big_tree.mid, mid)] == [path]


def test_applying_no_changes_returns_the_same_tree_and_writes_nothing(big_tree: BigTree) -> None:
    before = set(p.name for p in (big_tree.root / "_lakegc").rglob("*"))
    assert TreeStore(LocalStorage(big_tree.root)).apply(big_tree.mid, {}) == big_tree.mid
    assert set(p.name for p in (big_tree.root / "_lakegc").rglob("*")) == before


# ---------------------------------------------------------------------------------------------
# Small, exact examples.
# ---------------------------------------------------------------------------------------------


def test_build_writes_ranges_and_metarange_under_lakegc_prefixes(tmp_path: Path) -> None:
    assert RANGES_PREFIX == "_lakegc/ranges/"
    storage = LocalStorage(tmp_path)
    with chunking(1, 4):
        mid = TreeStore(storage).build([entry(f"k{i:02d}") for i in range(20)])
        refs = TreeStore(storage).ranges(mid)
    keys = {o.key for o in storage.list()}
    assert keys == {RANGES_PREFIX + r.id for r in refs} | {METARANGES_PREFIX + mid}
    assert len(refs) >= 5


def test_building_the_same_entries_twice_gives_the_same_ids_and_no_new_files(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    items = [entry(f"k{i:03d}", i) for i in range(300)]
    with chunking(15, 40):
        first = TreeStore(storage).build(items)
        files = sorted(o.key for o in storage.list())
        second = TreeStore(storage).build(items)
    assert first == second
    assert sorted(o.key for o in storage.list()) == files


def test_empty_tree_has_no_ranges_and_answers_nothing(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    mid = TreeStore(storage).build([])
    store = TreeStore(storage)
    assert store.ranges(mid) == []
    assert list(store.entries(mid)) == []
    assert store.get(mid, "a") is None
    assert store.diff(mid, mid) == []


def test_changes_on_an_empty_tree_build_the_canonical_tree(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    items = [entry(f"k{i:02d}") for i in range(30)]
    with chunking(3, 5):
        empty = TreeStore(storage).build([])
        applied = TreeStore(storage).apply(empty, {e.path: e for e in items})
        assert applied == TreeStore(storage).build(items)


def test_forced_cut_after_max_entries_when_no_path_is_a_natural_cut() -> None:
    items = [entry(f"k{i:02d}") for i in range(23)]
    with chunking((1 << 64) - 1, 5):  # only a zero hash would cut
        assert [len(p) for p in chunk(items)] == [5, 5, 5, 5, 3]


def test_every_path_cuts_when_the_mask_is_zero() -> None:
    items = [entry(f"k{i}") for i in range(4)]
    with chunking(0, 100):
        assert [[e.path for e in p] for p in chunk(items)] == [["k0"], ["k1"], ["k2"], ["k3"]]


def test_natural_cut_depends_only_on_the_path() -> None:
    paths = [f"x/{i}" for i in range(5000)]
    first = [is_natural_cut(p) for p in paths]
    assert first == [is_natural_cut(p) for p in paths]
    assert 0 < sum(first) < 30  # about 1 in 1,024


@pytest.mark.parametrize(
    "field, value",
    [
        ("address", "data/s/elsewhere"),
        ("address_kind", AddressKind.FULL),
        ("size", 12345),
        ("checksum", "other"),
        ("mtime", MTIME + timedelta(microseconds=1)),
        ("metadata", '{"k": 1}'),
    ],
    ids=["address", "address-kind", "size", "checksum", "mtime-by-a-microsecond", "metadata"],
)
def test_range_id_changes_when_any_entry_field_changes(field: str, value: object) -> None:
    base = [entry("a"), entry("b", 1)]
    changed = [base[0], replace(base[1], **{field: value})]
    assert range_id(base) != range_id(changed)


def test_range_entries_survive_the_parquet_round_trip(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    items = [entry("a", 1, metadata='{"x": [1, 2]}'), entry("b", 2, kind=AddressKind.FULL), entry("c", 3)]
    ref = TreeStore(storage).write_range(items)
    read = TreeStore(storage).range_entries(ref.id)
    assert read == items
    assert all(e.mtime.tzinfo is not None and e.mtime.utcoffset() == timedelta(0) for e in read)
    assert range_id(read) == ref.id  # rewriting a range read back gives the same content address


def test_as_changes_turns_a_diff_into_edits() -> None:
    a, b = entry("a"), entry("b")
    diff = [Change("a", ChangeType.REMOVED, a, None), Change("b", ChangeType.ADDED, None, b)]
    assert as_changes(diff) == {"a": None, "b": b}


@pytest.mark.parametrize(
    "prefix, expected",
    [
        ("", ["a", "a/b", "a/b/c", "a/bc", "a0", "b/x", "b/y", "c"]),
        ("a", ["a", "a/b", "a/b/c", "a/bc", "a0"]),
        ("a/", ["a/b", "a/b/c", "a/bc"]),
        ("a/b", ["a/b", "a/b/c", "a/bc"]),
        ("a/b/", ["a/b/c"]),
        ("b/", ["b/x", "b/y"]),
        ("c", ["c"]),
        ("0", []),
        ("bb", []),
        ("d", []),
    ],
    ids=[
        "root",
        "a-as-string-prefix",
        "a-folder",
        "a/b-string",
        "a/b-folder",
        "b-folder",
        "last-path",
        "before-every-path",
        "between-paths",
        "after-every-path",
    ],
)
@pytest.mark.parametrize("mask", [0, 1, 7], ids=["a-range-per-path", "ranges-of-about-2", "ranges-of-about-8"])
def test_entries_lists_exactly_the_paths_under_a_prefix(
    tmp_path: Path, prefix: str, expected: list[str], mask: int
) -> None:
    paths = ["a", "a/b", "a/b/c", "a/bc", "a0", "b/x", "b/y", "c"]
    storage = LocalStorage(tmp_path)
    with chunking(mask, 100):
        mid = TreeStore(storage).build([entry(p) for p in sorted(paths)])
    assert [e.path for e in TreeStore(storage).entries(mid, prefix)] == expected


# ---------------------------------------------------------------------------------------------
# Properties with small ranges.
# ---------------------------------------------------------------------------------------------

PATHS = st.text(alphabet="ab/-.", min_size=1, max_size=5)
CHUNKINGS = st.sampled_from([(0, 8), (1, 3), (3, 5), (7, 4), (15, 100), ((1 << 64) - 1, 3)])


@st.composite
def entry_sets(draw: st.DrawFn) -> dict[str, Entry]:
    paths = draw(st.sets(PATHS, max_size=40))
    return {p: entry(p, draw(st.integers(0, 3)), metadata=draw(st.sampled_from([None, '{"m": 1}']))) for p in paths}


@st.composite
def change_sets(draw: st.DrawFn, base: dict[str, Entry]) -> dict[str, Entry | None]:
    """Edits on existing paths (modify, remove, re-put the same entry) and on new ones (add, remove a
    path that is not there)."""
    existing = sorted(base)
    picked = draw(st.lists(st.sampled_from(existing), max_size=10, unique=True)) if existing else []
    fresh = draw(st.sets(PATHS, max_size=8)) - set(base)
    changes: dict[str, Entry | None] = {}
    for p in picked:
        changes[p] = draw(st.sampled_from([None, entry(p, 7), base[p]]))
    for p in fresh:
        changes[p] = draw(st.sampled_from([None, entry(p, 9)]))
    return changes


def applied(base: dict[str, Entry], changes: dict[str, Entry | None]) -> dict[str, Entry]:
    out = dict(base)
    for p, e in changes.items():
        if e is None:
            out.pop(p, None)
        else:
            out[p] = e
    return out


def naive_diff(left: dict[str, Entry], right: dict[str, Entry]) -> list[Change]:
    out = []
    for p in sorted(left.keys() | right.keys()):
        a, b = left.get(p), right.get(p)
        if a == b:
            continue
        kind = ChangeType.ADDED if a is None else ChangeType.REMOVED if b is None else ChangeType.CHANGED
        out.append(Change(p, kind, a, b))
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tree-props")


def _storage(scratch: Path) -> LocalStorage:
    return LocalStorage(tempfile.mkdtemp(dir=scratch))


PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(data=st.data(), cut=CHUNKINGS)
def test_apply_gives_the_same_tree_as_building_the_changed_entries(
    scratch: Path, data: st.DataObject, cut: tuple[int, int]
) -> None:
    base = data.draw(entry_sets(), label="base")
    changes = data.draw(change_sets(base), label="changes")
    storage = _storage(scratch)
    with chunking(*cut):
        parent = TreeStore(storage).build([base[p] for p in sorted(base)])
        child = TreeStore(storage).apply(parent, changes)  # cold cache: reads the parent back from Parquet
        want = applied(base, changes)
        assert child == TreeStore(storage).build([want[p] for p in sorted(want)])
        assert list(TreeStore(storage).entries(child)) == [want[p] for p in sorted(want)]


@PROPS
@given(data=st.data(), cut=CHUNKINGS)
def test_apply_in_two_steps_equals_apply_in_one(scratch: Path, data: st.DataObject, cut: tuple[int, int]) -> None:
    base = data.draw(entry_sets(), label="base")
    first = data.draw(change_sets(base), label="first")
    second = data.draw(change_sets(applied(base, first)), label="second")
    storage = _storage(scratch)
    with chunking(*cut):
        store = TreeStore(storage)
        parent = store.build([base[p] for p in sorted(base)])
        stepwise = store.apply(store.apply(parent, first), second)
        final = applied(applied(base, first), second)
        assert stepwise == TreeStore(storage).apply(parent, naive_edits(base, final))


def naive_edits(left: dict[str, Entry], right: dict[str, Entry]) -> dict[str, Entry | None]:
    return {c.path: c.right for c in naive_diff(left, right)}


@PROPS
@given(data=st.data(), cut=CHUNKINGS)
def test_diff_equals_a_dict_diff_and_applies_back(scratch: Path, data: st.DataObject, cut: tuple[int, int]) -> None:
    left = data.draw(entry_sets(), label="left")
    right = applied(left, data.draw(change_sets(left), label="changes"))
    storage = _storage(scratch)
    with chunking(*cut):
        lid = TreeStore(storage).build([left[p] for p in sorted(left)])
        rid = TreeStore(storage).build([right[p] for p in sorted(right)])
        store = TreeStore(storage)
        diff = store.diff(lid, rid)
        assert diff == naive_diff(left, right)
        assert TreeStore(storage).diff(rid, lid) == naive_diff(right, left)
        assert TreeStore(storage).apply(lid, as_changes(diff)) == rid
        assert (lid == rid) == (diff == [])


@PROPS
@given(base=entry_sets(), probes=st.lists(st.text(alphabet="ab/-.", max_size=5), max_size=15), cut=CHUNKINGS)
def test_get_and_prefix_listing_agree_with_a_dict(
    scratch: Path, base: dict[str, Entry], probes: list[str], cut: tuple[int, int]
) -> None:
    storage = _storage(scratch)
    with chunking(*cut):
        mid = TreeStore(storage).build([base[p] for p in sorted(base)])
        store = TreeStore(storage)
        assert list(store.entries(mid)) == [base[p] for p in sorted(base)]
        for probe in probes + sorted(base)[:10]:
            assert store.get(mid, probe) == base.get(probe), probe
            assert [e.path for e in store.entries(mid, probe)] == sorted(p for p in base if p.startswith(probe)), probe
            for prefix in ("", probe[:1]):  # a listing's later page: from after `probe`
                assert [e.path for e in store.entries(mid, prefix, after=probe)] == sorted(
                    p for p in base if p.startswith(prefix) and p > probe
                ), (prefix, probe)
