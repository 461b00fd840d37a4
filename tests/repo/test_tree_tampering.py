"""A tree file is trusted only when its content hashes to its id (docs/safety.md).

Ranges and metaranges are content-addressed: `_lakegc/ranges/<id>` holds exactly the entries whose
hash is <id>. A file that was replaced, cut short, extended, rewritten or lost no longer does, and
GC reading it would see a tree that is not the commit's: objects the commit still holds would look
unreferenced and be deleted. So every tampering below must fail `gc run`, `gc run --dry-run` and
the sweep of a run marked before it with one `error:` line naming the file, the run recorded
`failed`, and not one file gone from the namespace.

The lake: main committed `a` (A1), a natural-cut path and `keep` 30 days ago and overwrote `a` 20
days ago; with 7 days' retention A1 is expired garbage, held only by that first commit (C1). Branch
`old` at C1 makes A1 live again: created before `gc run`, or between the mark and the sweep (C1 is
then newly active, and the sweep's re-check reads its tree). C1's tree is the one tampered with.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import CliResult, Env, age_objects, clone_lake, make_cli, one_error, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegc.errors import CorruptMetadata
from lakegc.repo.model import AddressKind, Entry
from lakegc.repo.trees import (
    METARANGE_SCHEMA,
    METARANGES_PREFIX,
    RANGE_SCHEMA,
    RANGES_PREFIX,
    RangeRef,
    TreeStore,
    is_natural_cut,
    metarange_id,
    range_id,
    read_metarange,
    read_range,
    verify_metarange,
    verify_range,
)
from lakegc.storage import open_storage
from lakegc.storage.local import file_facts
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
CUT = next(p for p in (f"b{i}" for i in itertools.count()) if is_natural_cut(p))  # ends C1's first range
Cli = Callable[..., CliResult]


# -- the lake, built once; every test works on its own twin ----------------------------------------
@dataclass
class Trees:
    """The tree files of a namespace that the tamperings use, by role."""

    ns: Path
    c1: str  # the commit whose tree is tampered with
    m1: str  # C1's metarange
    r1: str  # C1's range holding A1
    m2: str  # main HEAD's metarange (A2 instead of A1)
    r2: str  # main HEAD's range holding A2
    r_dev: str  # the range only dev's tree has
    m_empty: str  # the empty tree's metarange (the repository's first commit)

    def file(self, key: str) -> Path:
        return self.ns / key

    def replace(self, key: str, content: bytes) -> str:
        """Write `content` as `key`, a new file: twins share the old one (hard links)."""
        self.file(key).unlink()
        self.file(key).write_bytes(content)
        return key

    def table(self, key: str) -> pa.Table:
        return pq.read_table(self.file(key))

    def unshare(self, key: str) -> None:
        """Give `key` an inode of its own (twins share files by hard links), before writing it in place."""
        content = self.file(key).read_bytes()
        stat_ = self.file(key).stat()
        self.file(key).unlink()
        self.file(key).write_bytes(content)
        os.utime(self.file(key), ns=(stat_.st_atime_ns, stat_.st_mtime_ns))


def parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def build_lake(root: Path) -> tuple[Env, Trees]:
    env = Env(root / "home", f"sqlite:///{root / 'home' / 'lakegc.db'}", root)
    cli, ns, now = make_cli(env), env.namespace(), utcnow()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps({"default_retention_days": 7, "branches": []}))
    repo = env.lake().repository("repo")

    def commit(branch: str, days: int, files: dict[str, bytes]) -> str:
        for path, content in files.items():
            repo.upload(branch, path, content)
        return repo.commit(branch, f"{days} days ago", date=now - timedelta(days=days)).id

    first = repo.log("main")[-1]
    c1 = commit("main", 30, {"a": b"a version 1", CUT: b"cut after me", "keep": b"kept forever"})
    commit("main", 20, {"a": b"a version 2"})
    cli("branch", "create", f"{REPO}/dev", "--source", f"{REPO}/main")
    commit("dev", 10, {"dev-only": b"only on dev"})
    assert age_objects(ns, now - timedelta(days=40)) == 5  # every object old enough to be a candidate

    store = TreeStore(open_storage(str(ns)))
    tree = {ref: repo.resolve(ref)[0].metarange_id for ref in (c1, "main", "dev")}
    r1, keep = (r.id for r in store.ranges(tree[c1]))
    r2, keep2 = (r.id for r in store.ranges(tree["main"]))
    assert keep == keep2  # C1 and main share the range of `keep`, so A1's range alone tells them apart
    (r_dev,) = {r.id for r in store.ranges(tree["dev"])} - {r2}
    return env, Trees(ns, c1, tree[c1], r1, tree["main"], r2, r_dev, first.metarange_id)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Env, Trees]:
    return build_lake(tmp_path_factory.mktemp("tampering"))


@pytest.fixture(scope="module")
def marked_lake(lake, tmp_path_factory, spark) -> tuple[Env, Trees, str]:
    """The lake after `gc run --mark-only` (A1 a candidate), before `old` exists."""
    env = clone_lake(lake[0].home, lake[0].namespace(), tmp_path_factory.mktemp("marked"))
    run_id = make_cli(env)("gc", "run", REPO, "--mark-only", "--json").json()["run_id"]
    return env, replace(lake[1], ns=env.namespace()), run_id


def twin(base_env: Env, trees: Trees, dest: Path) -> tuple[Env, Cli, Trees]:
    env = clone_lake(base_env.home, base_env.namespace(), dest)
    return env, make_cli(env), replace(trees, ns=env.namespace())


# -- the tamperings: each changes one file of C1's tree and returns its key ------------------------
def range_emptied(t: Trees) -> str:  # the empty tree's content: no entries
    return t.replace(RANGES_PREFIX + t.r1, parquet(RANGE_SCHEMA.empty_table()))


def range_of_another_branch(t: Trees) -> str:
    return t.replace(RANGES_PREFIX + t.r1, t.file(RANGES_PREFIX + t.r2).read_bytes())


def range_cut_short(t: Trees) -> str:  # still valid Parquet, same schema, A1's entry gone
    table = t.table(RANGES_PREFIX + t.r1)
    assert table["path"][0].as_py() == "a"
    return t.replace(RANGES_PREFIX + t.r1, parquet(table.slice(1)))


def range_with_a_metarange_schema(t: Trees) -> str:
    return t.replace(RANGES_PREFIX + t.r1, t.file(METARANGES_PREFIX + t.m2).read_bytes())


def range_not_parquet(t: Trees) -> str:
    return t.replace(RANGES_PREFIX + t.r1, b"PAR1 these bytes are not a Parquet file")


def range_missing(t: Trees) -> str:
    t.file(RANGES_PREFIX + t.r1).unlink()
    return RANGES_PREFIX + t.r1


def metarange_of_another_branch(t: Trees) -> str:
    return t.replace(METARANGES_PREFIX + t.m1, t.file(METARANGES_PREFIX + t.m2).read_bytes())


def metarange_of_the_empty_tree(t: Trees) -> str:
    return t.replace(METARANGES_PREFIX + t.m1, t.file(METARANGES_PREFIX + t.m_empty).read_bytes())


def metarange_missing_a_range(t: Trees) -> str:
    table = t.table(METARANGES_PREFIX + t.m1)
    return t.replace(METARANGES_PREFIX + t.m1, parquet(table.filter(pc.not_equal(table["range_id"], t.r1))))


def metarange_with_an_extra_range(t: Trees) -> str:
    table = t.table(METARANGES_PREFIX + t.m1)
    extra = pa.table(
        {"range_id": [t.r_dev], "min_path": ["dev-only"], "max_path": ["dev-only"], "count": [1]},
        schema=METARANGE_SCHEMA,
    )
    return t.replace(METARANGES_PREFIX + t.m1, parquet(pa.concat_tables([table, extra])))


TAMPERINGS = [
    range_emptied,
    range_of_another_branch,
    range_cut_short,
    range_with_a_metarange_schema,
    range_not_parquet,
    range_missing,
    metarange_of_another_branch,
    metarange_of_the_empty_tree,
    metarange_missing_a_range,
    metarange_with_an_extra_range,
]


def assert_failed_and_nothing_deleted(cli: Cli, result: CliResult, named: str, before: dict, after: dict) -> None:
    one_error(result, named, json_cmd=True)
    runs = cli("gc", "runs", REPO, "--json").json()
    assert [(r["state"], r["num_deleted"]) for r in runs] == [("failed", 0)], runs
    assert named.rsplit("/", 1)[1] in runs[0]["error"]
    assert set(before) <= set(after), f"deleted: {sorted(set(before) - set(after))}"
    assert {k: v for k, v in after.items() if k.startswith("data/")} == {
        k: v for k, v in before.items() if k.startswith("data/")
    }


# -- GC ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_gc_run_over_a_tampered_tree_fails_and_deletes_nothing(lake, tmp_path, spark, tamper, dry_run):
    _, cli, trees = twin(*lake, tmp_path)
    cli("branch", "create", f"{REPO}/old", "--source", f"{REPO}/{trees.c1}")
    named = tamper(trees)
    before = snapshot(trees.ns)
    result = cli("gc", "run", REPO, "--json", *(["--dry-run"] if dry_run else []), ok=False)
    assert_failed_and_nothing_deleted(cli, result, named, before, snapshot(trees.ns))


@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_sweep_rechecking_a_tampered_tree_fails_and_deletes_nothing(marked_lake, tmp_path, tamper):
    env, trees, run_id = marked_lake
    _, cli, trees = twin(env, trees, tmp_path)
    cli("branch", "create", f"{REPO}/old", "--source", f"{REPO}/{trees.c1}")  # revives A1, a candidate
    named = tamper(trees)
    before = snapshot(trees.ns)
    result = cli("gc", "sweep", REPO, run_id, "--json", ok=False)
    assert_failed_and_nothing_deleted(cli, result, named, before, snapshot(trees.ns))


def test_untampered_gc_run_keeps_a1_for_branch_old(lake, tmp_path, spark):
    """The control: what the tamperings would have made GC delete is A1, which `old` holds."""
    _, cli, trees = twin(*lake, tmp_path)
    cli("branch", "create", f"{REPO}/old", "--source", f"{REPO}/{trees.c1}")
    assert cli("gc", "run", REPO, "--json").json()["num_deleted"] == 0
    assert cli("fs", "cat", f"{REPO}/old/a").stdout == "a version 1"


def test_untampered_a_sweep_revives_a1_for_a_branch_made_after_the_mark(marked_lake, tmp_path):
    env, trees, run_id = marked_lake
    _, cli, trees = twin(env, trees, tmp_path)
    cli("branch", "create", f"{REPO}/old", "--source", f"{REPO}/{trees.c1}")
    swept = cli("gc", "sweep", REPO, run_id, "--json").json()
    assert (swept["num_candidates"], swept["num_revived"], swept["num_deleted"]) == (1, 1, 0)
    assert cli("fs", "cat", f"{REPO}/old/a").stdout == "a version 1"


# -- the same tamperings after a run verified the tree (its record of tree files warm) ---------------
# Every run records the tree files it verified with their facts (size, mtime and ctime in ns, inode,
# device) and the next run trusts a file whose facts are unchanged. A tampering must never be
# trusted: each below changes C1's tree after a run read it, and the next run must fail.
def parquet_with_footer(table: pa.Table, metadata: dict[str, str]) -> bytes:
    """The table as Parquet with `metadata` in the file footer only (no Arrow schema, which holds
    schema metadata again, base64 and 8-byte aligned, so its size jumps)."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)
    return sink.getvalue().to_pybytes()


def padded_to(size: int, write) -> bytes:
    """The bytes `write(metadata)` gives at exactly `size`. Footer metadata grows the file a byte at
    a time, except where a length's varint gains a byte and the size skips one: a second, short key
    fills that gap. The original's size depends on its random addresses, so a search that reaches
    only some sizes fails now and then (it did, through Arrow's schema metadata)."""
    for pad in range(4096):
        for fill in range(4):
            content = write({"pad": "x" * pad, "fill": "y" * fill})
            if len(content) == size:
                return content
            if fill == 0 and len(content) > size:
                raise AssertionError(f"could not match the range's size {size}")
    raise AssertionError(f"could not match the range's size {size}")


def range_rewritten_in_place_times_restored(t: Trees) -> str:
    """A1's entry cut out, the file rewritten in place to its exact size (same inode, same size),
    then its mtime and atime set back with os.utime: only its ctime still tells."""
    key = RANGES_PREFIX + t.r1
    path, original = t.file(key), t.file(key).stat()
    size = original.st_size
    table = t.table(key).slice(1)
    content = padded_to(size, lambda metadata: parquet_with_footer(table, metadata))
    with open(path, "r+b") as f:
        f.write(content)
    os.utime(path, ns=(original.st_atime_ns, original.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (size, original.st_mtime_ns, original.st_ino)
    return key


def range_swapped_in_by_rename(t: Trees) -> str:
    """A1's entry cut out, written beside the range with the range's mtime, then renamed over it."""
    key = RANGES_PREFIX + t.r1
    path, original = t.file(key), t.file(key).stat()
    forged = path.with_name("forged")
    forged.write_bytes(parquet(t.table(key).slice(1)))
    os.utime(forged, ns=(original.st_atime_ns, original.st_mtime_ns))
    os.rename(forged, path)
    return key


WARM_TAMPERINGS = [*TAMPERINGS, range_rewritten_in_place_times_restored, range_swapped_in_by_rename]


def warm_twin(lake, dest: Path) -> tuple[Cli, Trees, dict]:
    """A twin where `old` holds C1 and a first run has read, verified and recorded C1's tree (its
    files unshared first: a tampering in place must not reach the other twins)."""
    _, cli, trees = twin(*lake, dest)
    for key in (RANGES_PREFIX + trees.r1, METARANGES_PREFIX + trees.m1):
        trees.unshare(key)
    cli("branch", "create", f"{REPO}/old", "--source", f"{REPO}/{trees.c1}")
    first = cli("gc", "run", REPO, "--json").json()
    assert (first["state"], first["num_deleted"]) == ("swept", 0)
    return cli, trees, first


@pytest.mark.parametrize("args", [[], ["--clean"], ["--dry-run"]], ids=["incremental", "clean", "dry-run"])
@pytest.mark.parametrize("tamper", WARM_TAMPERINGS)
def test_a_tree_tampered_after_a_run_verified_it_fails_the_next_run(lake, tmp_path, spark, tamper, args):
    cli, trees, first = warm_twin(lake, tmp_path)
    named = tamper(trees)
    before = snapshot(trees.ns)
    result = cli("gc", "run", REPO, "--json", *args, ok=False)
    one_error(result, named, json_cmd=True)
    runs = cli("gc", "runs", REPO, "--json").json()
    assert [(r["state"], r["num_deleted"]) for r in runs] == [("failed", 0), ("swept", 0)], runs
    after = snapshot(trees.ns)
    assert {k: v for k, v in after.items() if k.startswith("data/")} == {
        k: v for k, v in before.items() if k.startswith("data/")
    }


def test_an_untampered_tree_is_trusted_by_the_next_run(lake, tmp_path, spark):
    """The control: with nothing changed the next run trusts every tree file the first verified
    (its phase says so) and keeps A1 for `old`."""
    cli, trees, first = warm_twin(lake, tmp_path)
    second = cli("gc", "run", REPO, "--clean", "--json").json()
    assert (second["state"], second["num_deleted"]) == ("swept", 0)
    record = pq.read_table(trees.ns / "_lakegc" / "gc" / first["run_id"] / "refs" / "trust.parquet")
    assert record.column("facts").null_count == 0
    assert {RANGES_PREFIX + trees.r1, METARANGES_PREFIX + trees.m1} <= set(record.column("key").to_pylist())
    assert cli("fs", "cat", f"{REPO}/old/a").stdout == "a version 1"


def test_a_forged_record_of_verified_files_is_not_believed(lake, tmp_path, spark):
    """A tamperer who also rewrites the record (and the manifest's digest of it) so that it holds
    the tampered file's facts: the manifest is no longer the one the metastore recorded, so the
    record is not believed, every tree file is verified, and the run fails."""
    cli, trees, first = warm_twin(lake, tmp_path)
    named = range_swapped_in_by_rename(trees)
    refs = trees.ns / "_lakegc" / "gc" / first["run_id"] / "refs"
    record = pq.read_table(refs / "trust.parquet")
    facts = file_facts((trees.ns / named).stat())
    keys = record.column("key").to_pylist()
    forged = record.set_column(
        1, "facts", pa.array([facts if k == named else f for k, f in zip(keys, record.column("facts").to_pylist())])
    )
    content = parquet(forged)
    (refs / "trust.parquet").write_bytes(content)
    manifest = json.loads((refs / "manifest.json").read_text())
    manifest["digests"][manifest["trust"]] = hashlib.sha256(content).hexdigest()
    (refs / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(trees.ns)
    for args in ([], ["--clean"]):
        one_error(cli("gc", "run", REPO, "--json", *args, ok=False), named, json_cmd=True)
    assert {k: v for k, v in snapshot(trees.ns).items() if k.startswith("data/")} == {
        k: v for k, v in before.items() if k.startswith("data/")
    }


def test_a_record_from_where_the_lake_was_before_trusts_nothing(lake, tmp_path, spark):
    """A lake copied elsewhere after a run (as hard links here: the very same inodes, so every
    fact is equal) keeps its runs' records, written at the old namespace URI. The next run there
    stays incremental and trusts none of their files: it verifies every one (its phase says so),
    and a range tampered with in the copy fails it, naming the range, with nothing deleted."""
    _, trees, first = warm_twin(lake, tmp_path / "first")
    recorded = pq.read_metadata(trees.ns / "_lakegc" / "gc" / first["run_id"] / "refs" / "trust.parquet").num_rows
    for name in ("moved", "tampered"):
        env = clone_lake(tmp_path / "first" / "home", trees.ns, tmp_path / name)
        cli, moved = make_cli(env), replace(trees, ns=env.namespace())
        if name == "moved":
            result = cli("gc", "run", REPO, "--json")
            assert (result.json()["mode"], result.json()["num_deleted"]) == ("incremental", 0)
            assert f"; {recorded} tree files changed since verified" in result.stderr
            continue
        moved.unshare(RANGES_PREFIX + trees.r1)
        named = range_swapped_in_by_rename(moved)
        before = snapshot(moved.ns)
        one_error(cli("gc", "run", REPO, "--json", ok=False), named, json_cmd=True)
        assert {k: v for k, v in snapshot(moved.ns).items() if k.startswith("data/")} == {
            k: v for k, v in before.items() if k.startswith("data/")
        }


def test_trusted_facts_are_believed_only_for_the_bytes_they_describe(lake, tmp_path):
    """The mechanism both ways: a file read with the facts it has now is not verified (so trust
    is real), and with any other facts it is (and a tampered one fails)."""
    _, _, trees = twin(*lake, tmp_path)
    storage = open_storage(str(trees.ns))
    key = RANGES_PREFIX + trees.r1
    named = range_swapped_in_by_rename(trees)
    assert named == key
    now = storage.facts(RANGES_PREFIX)[key]
    believed = read_range(storage, trees.r1, trusted=now, columns=["path"])
    assert believed.column("path").to_pylist() == [CUT]  # not verified: A1's entry is gone
    with pytest.raises(CorruptMetadata, match=key):
        read_range(storage, trees.r1, trusted=now.replace(":", ";"))
    with pytest.raises(CorruptMetadata, match=key):
        read_range(storage, trees.r1)


# -- the repository reads through the same check ------------------------------------------------------
@pytest.mark.parametrize("tamper", TAMPERINGS)
def test_reading_a_tampered_tree_is_one_error_naming_the_file(lake, tmp_path, tamper):
    _, cli, trees = twin(*lake, tmp_path)
    named = tamper(trees)
    one_error(cli("fs", "ls", f"{REPO}/{trees.c1}/", ok=False), named)


@pytest.mark.parametrize("tamper", [range_cut_short, metarange_of_another_branch])
def test_a_new_tree_does_not_take_up_a_tampered_file_already_there(lake, tmp_path, tamper):
    """Writing a tree whose range or metarange is already on disk checks that file instead of
    pointing a commit at whatever it now holds."""
    _, cli, trees = twin(*lake, tmp_path)
    c1_entries = list(TreeStore(open_storage(str(trees.ns))).entries(trees.m1))
    named = tamper(trees)
    with pytest.raises(CorruptMetadata, match=named):
        TreeStore(open_storage(str(trees.ns))).build(c1_entries)


# -- verify_range and verify_metarange, pure ------------------------------------------------------------
UTC_PLUS_2 = timezone(timedelta(hours=2))
instants = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from([UTC, UTC_PLUS_2])
)
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


@st.composite
def entries(draw) -> Entry:
    kind = draw(st.sampled_from(AddressKind))
    address = draw(
        texts.map(lambda s: f"data/x/{s}") if kind is AddressKind.RELATIVE else texts.map(lambda s: f"s3://bucket/{s}")
    )
    mtime = draw(st.one_of(instants, instants.map(lambda d: d.replace(microsecond=0))))
    size = draw(st.one_of(st.just(0), st.integers(0, 2**63 - 1)))
    return Entry(draw(texts), address, kind, size, draw(texts), mtime, draw(st.one_of(st.none(), texts)))


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    return open_storage(str(tmp_path_factory.mktemp("ranges")))


@settings(max_examples=300, deadline=None)
@given(st.lists(entries(), min_size=1, max_size=30))
def test_the_arrow_hash_of_a_written_range_is_its_id(storage, es):
    """Unicode paths, whole and fractional seconds, other offsets, no metadata, sizes 0 to 2^63-1,
    relative and full addresses: the range TreeStore wrote verifies, read back from Parquet."""
    rid = TreeStore(storage).write_range(es).id
    assert rid == range_id(es)
    assert read_range(storage, rid).num_rows == len(es)


@settings(max_examples=100, deadline=None)
@given(st.lists(entries(), min_size=1, max_size=10), st.data())
def test_a_changed_or_dropped_entry_fails_verification(es, data):
    table = as_table(es)
    i = data.draw(st.integers(0, len(es) - 1))
    changed = es[:i] + [data.draw(entries())] + es[i + 1 :]
    if range_id(changed) != range_id(es):
        with pytest.raises(CorruptMetadata, match="does not match its id"):
            verify_range(as_table(changed), range_id(es))
    with pytest.raises(CorruptMetadata, match="does not match its id"):
        verify_range(pa.concat_tables([table.slice(0, i), table.slice(i + 1)]), range_id(es))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="0123456789abcdef", min_size=1, max_size=64), max_size=20))
def test_the_arrow_hash_of_a_metarange_is_its_id(ids):
    refs = [RangeRef(rid, "a", "b", 1) for rid in ids]
    table = pa.table(
        {"range_id": ids, "min_path": ["a"] * len(ids), "max_path": ["b"] * len(ids), "count": [1] * len(ids)},
        schema=METARANGE_SCHEMA,
    )
    assert verify_metarange(table, metarange_id(refs)) is table
    if ids:
        with pytest.raises(CorruptMetadata, match="does not match its id"):
            verify_metarange(table.slice(1), metarange_id(refs))


def as_table(es: list[Entry]) -> pa.Table:
    return pa.table(
        {
            "path": [e.path for e in es],
            "address": [e.address for e in es],
            "address_kind": [str(e.address_kind) for e in es],
            "size": [e.size for e in es],
            "checksum": [e.checksum for e in es],
            "mtime": [e.mtime for e in es],
            "metadata": [e.metadata for e in es],
        },
        schema=RANGE_SCHEMA,
    )


ONE = [Entry("p", "data/x/1", AddressKind.RELATIVE, 3, "c", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))]
RESHAPED = {
    "a column missing": lambda t: t.drop_columns(["checksum"]),
    "a column more": lambda t: t.append_column("extra", pa.array(["x"])),
    "a column retyped": lambda t: t.set_column(3, "size", pa.array([3], pa.int32())),
    "mtime in nanoseconds": lambda t: t.set_column(5, "mtime", t["mtime"].cast(pa.timestamp("ns", tz="UTC"))),
    "a null path": lambda t: t.set_column(0, "path", pa.array([None], pa.string())),
    "no columns": lambda t: pa.table({}),
}


@pytest.mark.parametrize("reshape", RESHAPED.values(), ids=RESHAPED.keys())
def test_a_range_of_another_shape_fails_verification(reshape):
    with pytest.raises(CorruptMetadata, match=f"^range {RANGES_PREFIX}{range_id(ONE)}: its content does not match"):
        verify_range(reshape(as_table(ONE)), range_id(ONE))


@pytest.mark.parametrize("content", [b"", b"PAR1", b"not parquet at all", parquet(pa.table({"x": [1]}))[:-9]])
def test_an_unreadable_range_file_fails_verification(storage, content):
    storage.write(RANGES_PREFIX + "unreadable", content)
    with pytest.raises(CorruptMetadata, match=f"^range {RANGES_PREFIX}unreadable: its content does not match"):
        read_range(storage, "unreadable")


def test_missing_tree_files_are_corrupt_metadata_too(storage):
    with pytest.raises(CorruptMetadata, match=f"^metarange {METARANGES_PREFIX}nothing is missing"):
        read_metarange(storage, "nothing")
