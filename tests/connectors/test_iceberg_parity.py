"""`lakegc iceberg gc` decides as Apache Iceberg's own Java actions do: snapshot expiry as
`RemoveSnapshots` (ExpireSnapshots), hidden paths as `DeleteOrphanFiles`. Each test is named after
the Iceberg test it follows (TestRemoveSnapshots, TestExpireSnapshotsAction,
TestRemoveOrphanFilesAction), in snake case; the facts are Iceberg's, the histories ours.

Pure decisions first (`expire.expiry`, `paths.owners_partition_fields`), on histories given in days
before a fixed now; then whole runs through the CLI on Spark against a pyiceberg SqlCatalog, as in
test_iceberg_gc. Behaviour changes from before this parity (a ref's own settings replace the run's
instead of keeping the more careful; the walk down a branch stops at the first snapshot it lets
go; refs age off by max-ref-age; partition statistics of expired snapshots go; another table's
partition fields un-hide nothing) are said so where they are tested.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import CliResult
from test_iceberg_gc import (
    DAY,
    NOW,
    Lake,
    age_all,
    candidates_of,
    chain,
    deleted_of,
    history,
    ids,
    make_lake,
    named_by,
    on_disk,
    referenced,
    rows,
    snapshot_ids,
)

from lakegc.connectors.iceberg.expire import Expiry, Ref, Snap, expiry
from lakegc.connectors.iceberg.paths import hidden, owners_partition_fields
from lakegc.engine.collector import RunOptions

Cli = Callable[..., CliResult]
HOUR = DAY // 24


def expire(
    snaps: list[Snap],
    refs: list[Ref],
    older_than_days: float = 5,
    retain_last: int = 1,
    default_max_ref_age_ms: int | None = None,
) -> Expiry:
    return expiry(snaps, refs, NOW, int(older_than_days * DAY), retain_last, default_max_ref_age_ms)


def snap(snapshot_id: int, parent_id: int | None, days_ago: float) -> Snap:
    return Snap(snapshot_id, parent_id, int(NOW - days_ago * DAY))


# ================================================================================================
# snapshot expiry (pure), after TestRemoveSnapshots
# ================================================================================================


def test_retain_last_with_expire_older_than():
    """Three snapshots, all older than the cutoff, retain last 2: the first goes."""
    assert expire(chain(3, 2, 1), [Ref("main", 3, True)], 0.5, 2) == Expiry(frozenset({1}))


def test_retain_last_with_too_few_snapshots():
    assert expire(chain(3, 2), [Ref("main", 2, True)], 1, 3) == Expiry()


def test_retain_last_keeps_expiring_snapshot():
    """Four snapshots, the cutoff at the second one's time, retain last 2: the walk keeps the newest
    two, and the second too (no older than the cutoff); the first goes."""
    snaps = chain(10, 8, 6, 4)
    assert expire(snaps, [Ref("main", 4, True)], 8, 2).snapshots == {1}


def test_expire_older_than_with_rollback():
    """main rolled back to its first snapshot: the second, on no ref's history and older than the
    cutoff, goes; the first stays as main's head."""
    snaps = [snap(1, None, 10), snap(2, 1, 9)]
    assert expire(snaps, [Ref("main", 1, True)]).snapshots == {2}


def test_retain_unreferenced_snapshots_within_expiration_age():
    """A staged snapshot (on no ref) younger than the cutoff stays; main's old first snapshot goes."""
    snaps = [snap(1, None, 10), snap(2, 1, 3), snap(3, 1, 2)]  # 2 staged, 3 main's head
    assert expire(snaps, [Ref("main", 3, True)]).snapshots == {1}


def test_unreferenced_snapshot_parent_of_tag():
    """A tag pins its snapshot only, not the tag's parent: with main moved back to the first
    snapshot, the old parent of the tagged snapshot is on no ref's history and goes."""
    snaps = [snap(1, None, 10), snap(2, 1, 8), snap(3, 2, 1)]
    assert expire(snaps, [Ref("main", 1, True), Ref("tag", 3, False)]).snapshots == {2}


def test_snapshot_parent_of_branch_not_unreferenced():
    """The same history with a branch where the tag was, keeping its snapshots for ever: its
    history stays whole."""
    snaps = [snap(1, None, 10), snap(2, 1, 8), snap(3, 2, 1)]
    refs = [Ref("main", 1, True), Ref("branch", 3, True, max_snapshot_age_ms=2**62)]
    assert expire(snaps, refs) == Expiry()


def test_min_snapshots_to_keep_multiple_branches():
    """Behaviour change: a branch's own min-snapshots-to-keep and max-snapshot-age replace the
    run's values. All three snapshots are younger than the run's 5 days; main keeps its head only
    (its own settings: 1 snapshot, 1 hour), the branch its newest three. Once the branch asks
    for one, the first snapshot goes though it is younger than --older-than: it is on both
    branches' histories, and both let it go."""
    snaps = [snap(1, None, 3), snap(2, 1, 2), snap(3, 2, 1)]  # 3: the branch's head, off main
    main = Ref("main", 2, True, min_snapshots_to_keep=1, max_snapshot_age_ms=HOUR)
    branch = Ref("branch", 3, True, min_snapshots_to_keep=3, max_snapshot_age_ms=HOUR)
    assert expire(snaps, [main, branch]) == Expiry()
    fewer = Ref("branch", 3, True, min_snapshots_to_keep=1, max_snapshot_age_ms=HOUR)
    assert expire(snaps, [main, fewer]).snapshots == {1}


def test_max_snapshot_age_multiple_branches():
    """Behaviour change, as above for max-snapshot-age: a branch keeping its snapshots for ever
    keeps the first snapshot main lets go; when its own age shrinks to main's, the first goes."""
    snaps = [snap(1, None, 3), snap(2, 1, 1), snap(3, 2, 0.5)]
    main = Ref("main", 2, True, min_snapshots_to_keep=1, max_snapshot_age_ms=2 * DAY)
    forever = Ref("branch", 3, True, min_snapshots_to_keep=1, max_snapshot_age_ms=2**62)
    assert expire(snaps, [main, forever]) == Expiry()
    aging = Ref("branch", 3, True, min_snapshots_to_keep=1, max_snapshot_age_ms=2 * DAY)
    assert expire(snaps, [main, aging]).snapshots == {1}


def test_tag_expiration():
    """A tag older than its max-ref-age is removed; its snapshot then goes or stays on its own (here
    it goes: old, and on main's history behind the head). A branch without a limit stays."""
    snaps = chain(10, 1)
    refs = [Ref("main", 2, True), Ref("tag", 1, False, max_ref_age_ms=DAY), Ref("branch", 2, True)]
    assert expire(snaps, refs) == Expiry(frozenset({1}), ("tag",))


def test_branch_expiration():
    """A branch older than its max-ref-age is removed with its own history's protection; a tag
    without a limit stays."""
    snaps = chain(10, 9, 1)
    refs = [Ref("main", 3, True), Ref("branch", 1, True, max_ref_age_ms=DAY, min_snapshots_to_keep=5)]
    refs.append(Ref("tag", 2, False))
    assert expire(snaps, refs) == Expiry(frozenset({1}), ("branch",))


def test_main_never_expires_by_max_ref_age():
    snaps = chain(10)
    assert expire(snaps, [Ref("main", 1, True, max_ref_age_ms=1)], default_max_ref_age_ms=1) == Expiry()


def test_max_ref_age_boundary_keeps_a_ref_exactly_that_old():
    snaps = [snap(1, None, 10), snap(2, None, 1)]
    refs = [Ref("main", 2, True), Ref("at", 1, False, max_ref_age_ms=10 * DAY)]
    assert expire(snaps, refs) == Expiry()
    refs = [Ref("main", 2, True), Ref("past", 1, False, max_ref_age_ms=10 * DAY - 1)]
    assert expire(snaps, refs) == Expiry(frozenset({1}), ("past",))


def test_the_tables_max_ref_age_is_the_default_a_refs_own_replaces():
    """`history.expire.max-ref-age-ms` applies to refs without their own; a ref's own replaces it,
    longer or shorter."""
    snaps = [snap(1, None, 10), snap(2, None, 8), snap(3, None, 0.5)]
    refs = [
        Ref("main", 3, True),
        Ref("default", 1, False),
        Ref("longer", 2, False, max_ref_age_ms=30 * DAY),
        Ref("shorter", 3, False, max_ref_age_ms=HOUR),
    ]
    assert expire(snaps, refs, default_max_ref_age_ms=2 * DAY) == Expiry(frozenset({1}), ("default", "shorter"))


def test_a_young_snapshot_of_an_aged_off_ref_stays_by_its_age():
    """A ref removed by its max-ref-age leaves its snapshot on no ref: younger than the run's
    cutoff, it stays, as Iceberg's unreferenced snapshots do."""
    snaps = [snap(1, None, 10), snap(2, 1, 1), snap(3, 1, 2)]
    refs = [Ref("main", 2, True), Ref("side", 3, True, max_ref_age_ms=DAY)]
    assert expire(snaps, refs) == Expiry(frozenset({1}), ("side",))


def test_file_cleanup_on_all_refs_aged_off():
    """Every ref but main aged off: what only they kept goes; main keeps its head."""
    snaps = [snap(1, None, 10), snap(2, 1, 9), snap(3, 2, 1), snap(4, 1, 8)]
    refs = [
        Ref("main", 3, True),
        Ref("tag", 1, False, max_ref_age_ms=DAY),
        Ref("branch", 4, True, max_ref_age_ms=DAY, max_snapshot_age_ms=2**62),
    ]
    assert expire(snaps, refs) == Expiry(frozenset({1, 2, 4}), ("branch", "tag"))


def test_a_ref_whose_snapshot_is_gone_is_left_alone():
    """Iceberg drops such a ref; pyiceberg's commit cannot remove it, and it keeps nothing."""
    snaps = chain(10, 1)
    assert expire(snaps, [Ref("main", 2, True), Ref("ghost", 99, True, max_ref_age_ms=1)]) == Expiry(frozenset({1}))


# ================================================================================================
# hidden partition folders (pure), after TestRemoveOrphanFilesAction
# ================================================================================================

SCOPES = {"": frozenset({"_c2", "c3"}), "inner/": frozenset({"c3"}), "shared/": frozenset({"_a", "_b"})}


@pytest.mark.parametrize(
    "key, fields",
    [
        ("data/_c2=AA/c3=AAAA/f.parquet", {"_c2", "c3"}),  # the root's own table
        ("inner/data/_c2=AA/f.parquet", {"c3"}),  # a table at inner/ owns it, not the root's
        ("inner", {"_c2", "c3"}),  # a file named like the folder is the root's
        ("shared/data/f.parquet", {"_a", "_b"}),  # tables sharing a location: their union
    ],
)
def test_a_file_is_judged_by_its_own_tables_partition_fields(key: str, fields: set[str]):
    assert owners_partition_fields(key, SCOPES) == fields


def test_hidden_partition_paths_of_another_table_are_hidden():
    """Behaviour change: another collected table's `_c2` partition field used to un-hide `_c2=`
    folders under every location of the run."""
    key = "inner/data/_c2=AA/f.parquet"
    assert hidden(key, owners_partition_fields(key, SCOPES))
    assert not hidden("data/_c2=AA/f.parquet", owners_partition_fields("data/_c2=AA/f.parquet", SCOPES))
    assert owners_partition_fields("anything", {"x/": frozenset({"_c2"})}) == frozenset()


# ================================================================================================
# whole runs through the CLI
# ================================================================================================


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, spark) -> Lake:
    return make_lake(tmp_path, monkeypatch, cli)


def set_ref(table, name: str, snapshot_id: int, branch: bool = True, **retention: int):  # type: ignore[no-untyped-def]
    """Point a ref at a snapshot with retention settings (`max_ref_age_ms`, `max_snapshot_age_ms`,
    `min_snapshots_to_keep`), as Java's manageSnapshots().setMaxRefAgeMs(...) does: pyiceberg 0.12
    has no call to change an existing ref's settings, and its writes to a branch drop them."""
    from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

    table = table.refresh()
    current = table.metadata.refs.get(name)
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(ref=name, snapshot_id=current.snapshot_id if current else None),),
        (
            SetSnapshotRefUpdate(
                ref_name=name, type="branch" if branch else "tag", snapshot_id=snapshot_id, **retention
            ),
        ),
    )
    return table.refresh()


def refs_of(table) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {name: ref.snapshot_id for name, ref in table.refresh().metadata.refs.items()}


def scan_ids(table, snapshot_id: int) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(table.refresh().scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist())


def manifest_lists(lake: Lake, location: str) -> set[str]:
    return {p.name for p in (lake.warehouse / location / "metadata").glob("snap-*.avro")}


def test_retain_n_available_snapshots_with_transaction(lake: Lake):
    """Three appends, all older than the cutoff, retain last 2: one snapshot and its manifest list
    go, two stay."""
    t = lake.table("ns.t")
    first = lake.at(10, lambda: t.append(rows(1)) or t)
    lake.at(9, lambda: t.append(rows(2)) or t)
    lake.at(8, lambda: t.append(rows(3)) or t)
    age_all(lake.warehouse)
    assert len(manifest_lists(lake, "ns/t")) == 3
    run = lake.gc("ns.t", older_than="1d", retain_last="2").json()
    assert run["details"]["snapshots expired"] == 1 and first not in snapshot_ids(t)
    assert len(snapshot_ids(t)) == 2 and len(manifest_lists(lake, "ns/t")) == 2 and ids(t) == [1, 2, 3]


def test_expire_older_than_with_rollback_with_reachable_cleanup(lake: Lake):
    """main rolled back to its first snapshot: the rolled-back snapshot goes with the files only
    it named (labelled `expired`); the first snapshot's files stay."""
    t = lake.table("ns.t")
    first = lake.at(10, lambda: t.append(rows(1, 2)) or t)
    second = lake.at(9, lambda: t.delete("id = 2") or t)
    t.manage_snapshots().rollback_to_snapshot(first).commit()
    age_all(lake.warehouse)
    expected = dict.fromkeys(named_by(t, {second}) - named_by(t, {first}), "expired")
    assert expected
    run = lake.gc("ns.t").json()
    assert snapshot_ids(t) == {first} and deleted_of(run) == expected and ids(t) == [1, 2]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_branch_expires_by_its_own_max_snapshot_age(lake: Lake):
    """Behaviour change: a branch's max-snapshot-age of one day replaces the run's five: the
    branch's snapshots of 4 and 3 days ago go (the walk keeps its head, then stops), though the
    run alone would keep them. main, with no setting of its own, keeps its head."""
    t = lake.table("ns.t")
    head = lake.at(20, lambda: t.append(rows(1)) or t)
    t.manage_snapshots().create_branch(head, "dev").commit()
    for n, days_ago in ((2, 4), (3, 3), (4, 2)):
        lake.at(days_ago, lambda n=n: t.append(rows(n), branch="dev") or t)
    dev_ids = snapshot_ids(t) - {head}
    dev_head = refs_of(t)["dev"]
    set_ref(t, "dev", dev_head, max_snapshot_age_ms=DAY, min_snapshots_to_keep=1)
    age_all(lake.warehouse)
    gone = dev_ids - {dev_head}
    expected = dict.fromkeys(named_by(t, gone) - named_by(t, {head, dev_head}), "expired")
    dry = lake.gc("ns.t", dry_run="").json()
    assert dry["details"]["snapshots to expire"] == 2 and candidates_of(dry) == expected
    run = lake.gc("ns.t").json()
    assert snapshot_ids(t) == {head, dev_head} and deleted_of(run) == expected
    assert scan_ids(t, dev_head) == [1, 2, 3, 4] and ids(t) == [1]
    assert t.refresh().metadata.refs["dev"].max_snapshot_age_ms == DAY  # the ref itself is untouched


def test_expire_refs_by_max_ref_age_ms(lake: Lake):
    """Refs older than their max-ref-age go in the expiry commit (after Iceberg's testTagExpiration,
    testBranchExpiration and testCleanupWhenBranchOnMainAgedOff); main never does, whatever it
    says. Behaviour change: refs used to be kept for ever. A removed ref's snapshots then go unless
    something else keeps them: the tag's S2 goes, as does the side branch's own snapshot and the
    file only it added (`expired`); main keeps the head an aged-off tag named. A tag within its
    limit, and one with none, keep theirs. The dry
    run names the refs it would remove and changes nothing."""
    t, s = history(lake)
    t.manage_snapshots().create_branch(s["S2"], "side").commit()
    lake.at(9, lambda: t.append(rows(30), branch="side") or t)
    side = refs_of(t)["side"]
    set_ref(t, "side", side, max_ref_age_ms=5 * DAY)
    set_ref(t, "old", s["S2"], branch=False, max_ref_age_ms=7 * DAY)
    set_ref(t, "keep", s["S3"], branch=False)
    set_ref(t, "recent", s["S5"], branch=False, max_ref_age_ms=2 * DAY)
    set_ref(t, "stale", s["S5"], branch=False, max_ref_age_ms=12 * HOUR)  # goes; main keeps S5
    set_ref(t, "main", s["S5"], max_ref_age_ms=1)
    age_all(lake.warehouse)
    gone = {s["S1"], s["S2"], s["S4"], side}
    expected = dict.fromkeys(named_by(t, gone) - named_by(t, {s["S3"], s["S5"]}), "expired")
    (side_file,) = {p for p in named_by(t, {side}) if p.endswith(".parquet")} - named_by(t, {s["S2"]})
    before, refs_before = lake.files(), refs_of(t)

    dry = lake.gc("ns.t", dry_run="").json()
    aged_off = ["old", "side", "stale"]
    assert dry["details"]["refs to expire"] == 3 and dry["details"]["tables"][0]["refs expired"] == aged_off
    assert lake.files() == before and refs_of(t) == refs_before and candidates_of(dry) == expected

    run = lake.gc("ns.t").json()
    assert run["details"]["refs expired"] == 3 and run["details"]["tables"][0]["refs expired"] == aged_off
    assert refs_of(t) == {"main": s["S5"], "keep": s["S3"], "recent": s["S5"]}
    assert snapshot_ids(t) == {s["S3"], s["S5"]} and deleted_of(run) == expected == candidates_of(dry)
    assert side_file in expected and not Path(side_file).exists()
    assert scan_ids(t, s["S3"]) == [1, 2] and ids(t) == [1, 2, 4, 5]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_tag_expiration_alone_is_committed_and_a_dry_run_commits_nothing(lake: Lake):
    """After testTagExpiration: a tag past its max-ref-age on main's head is the whole expiry (no
    snapshot goes). The dry run reports it and leaves the table as it was; the run removes it."""
    t, s = history(lake)
    set_ref(t, "tag", s["S5"], branch=False, max_ref_age_ms=12 * HOUR)
    age_all(lake.warehouse)
    refs_before, metadata_before = refs_of(t), t.refresh().metadata_location
    dry = lake.gc("ns.t", older_than="30d", dry_run="").json()
    assert dry["details"]["refs to expire"] == 1 and dry["details"]["snapshots to expire"] == 0
    assert refs_of(t) == refs_before and t.refresh().metadata_location == metadata_before
    run = lake.gc("ns.t", older_than="30d").json()
    assert run["details"]["refs expired"] == 1 and run["details"]["tables"][0]["refs expired"] == ["tag"]
    assert refs_of(t) == {"main": s["S5"]} and snapshot_ids(t) == set(s.values()) and run["num_candidates"] == 0


def test_an_aged_off_ref_that_moves_while_the_expiry_commits_is_kept(lake: Lake, tmp_path: Path):
    """Safety over parity: the plan removes branch `side` (older than its max-ref-age), and a
    writer moves it before the commit. The commit asserts every ref where the plan saw it, the
    removed one too, so it fails and is planned again: `side` stays, at its new head."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    t, s = history(lake)
    t.manage_snapshots().create_branch(s["S2"], "side").commit()
    set_ref(t, "side", s["S2"], max_ref_age_ms=5 * DAY)
    age_all(lake.warehouse)
    moved: list[int] = []

    def phase(name: str, detail: str = "") -> None:
        if name == "expiring snapshots":  # planned already: side ages off
            writer = lake.catalog.load_table("ns.t")
            writer.append(rows(40), branch="side")
            moved.append(writer.refresh().metadata.refs["side"].snapshot_id)

    options = IcebergGcOptions(older_than=timedelta(days=5))
    run = run_iceberg_gc("lake", ["ns.t"], options, RunOptions(runs_location=str(tmp_path / "runs")), phase)
    assert refs_of(t)["side"] == moved[0] and run.details["refs expired"] == 0
    assert run.details["tables"][0]["refs expired"] == []
    assert scan_ids(t, moved[0]) == [1, 2, 3, 40]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_retention_settings_changed_while_the_expiry_commits_make_another_plan(lake: Lake, tmp_path: Path):
    """The plan expires main's old snapshots (retain last 1 by default); before the commit, an
    operator sets the table's history.expire.min-snapshots-to-keep to 3. The commit asserts the
    settings the plan was made with, fails, and the plan made again keeps three."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    t = lake.table("ns.t")
    for n, days_ago in ((1, 13), (2, 12), (3, 11), (4, 10)):
        lake.at(days_ago, lambda n=n: t.append(rows(n)) or t)
    age_all(lake.warehouse)

    def phase(name: str, detail: str = "") -> None:
        if name == "expiring snapshots":  # planned already: three snapshots go
            with lake.catalog.load_table("ns.t").transaction() as tx:
                tx.set_properties({"history.expire.min-snapshots-to-keep": "3"})

    run = run_iceberg_gc("lake", ["ns.t"], IcebergGcOptions(), RunOptions(runs_location=str(tmp_path / "runs")), phase)
    assert run.details["snapshots expired"] == 1
    assert len(snapshot_ids(lake.catalog.load_table("ns.t"))) == 3


def _partition_stats(table, snapshot_id: int, path: Path) -> None:  # type: ignore[no-untyped-def]
    """Commit a partition-statistics entry (pyiceberg 0.12 has no call for it)."""
    from pyiceberg.table.statistics import PartitionStatisticsFile
    from pyiceberg.table.update import SetPartitionStatisticsUpdate

    if not path.exists():
        path.write_bytes(b"PAR1")
    table = table.refresh()
    entry = PartitionStatisticsFile(snapshot_id=snapshot_id, statistics_path=path.as_uri(), file_size_in_bytes=4)
    table.catalog.commit_table(table, (), (SetPartitionStatisticsUpdate(partition_statistics=entry),))


def test_expire_with_partition_statistics_files(lake: Lake):
    """Behaviour change: expiring a snapshot now removes its partition-statistics entry too
    (pyiceberg's snapshot removal drops only table statistics), and the file goes as `expired`,
    in the dry run's candidates as in the run. The retained head's stays."""
    t, s = history(lake)
    stats = {name: lake.warehouse / f"ns/t/metadata/partition-stats-{name}.parquet" for name in ("S1", "S5")}
    for name, path in stats.items():
        _partition_stats(t, s[name], path)
    age_all(lake.warehouse)
    dry = lake.gc("ns.t", dry_run="").json()
    assert candidates_of(dry)[str(stats["S1"])] == "expired" and str(stats["S5"]) not in candidates_of(dry)
    run = lake.gc("ns.t").json()
    assert snapshot_ids(t) == {s["S5"]} and deleted_of(run)[str(stats["S1"])] == "expired"
    assert not stats["S1"].exists() and stats["S5"].exists()
    assert [p.snapshot_id for p in t.refresh().metadata.partition_statistics] == [s["S5"]]
    assert candidates_of(run) == candidates_of(dry)


def test_expire_with_partition_statistics_files_with_reuse(lake: Lake):
    """A retained snapshot's partition statistics naming the expired one's file keep that file;
    only the expired snapshot's entry leaves the metadata."""
    t, s = history(lake)
    shared = lake.warehouse / "ns/t/metadata/partition-stats-shared.parquet"
    _partition_stats(t, s["S1"], shared)
    _partition_stats(t, s["S5"], shared)
    age_all(lake.warehouse)
    run = lake.gc("ns.t").json()
    assert snapshot_ids(t) == {s["S5"]} and shared.exists() and str(shared) not in deleted_of(run)
    assert [p.snapshot_id for p in t.refresh().metadata.partition_statistics] == [s["S5"]]


# -- hidden partition folders, after TestRemoveOrphanFilesAction ----------------------------------
HIDDEN_SCHEMA = pa.schema([pa.field("_c1", pa.int64()), pa.field("_c2", pa.string()), pa.field("c3", pa.string())])


def hidden_table(lake: Lake, name: str, *fields: str, location: str | None = None):  # type: ignore[no-untyped-def]
    """A table partitioned by identity on `fields` (pyiceberg writes truncate only with
    pyiceberg-core; the field names are what matter here), one row written 9 days ago."""
    t = lake.catalog.create_table(name, schema=HIDDEN_SCHEMA, **({"location": location} if location else {}))
    if fields:
        with t.update_spec() as spec:
            for field in fields:
                spec.add_identity(field)
    data = pa.table({"_c1": [1], "_c2": ["AA"], "c3": ["AAAA"]}, schema=HIDDEN_SCHEMA)
    lake.at(9, lambda: t.append(data) or t)
    return t


def test_hidden_partition_paths(lake: Lake):
    """Orphans in the table's own `_c2=AA/c3=AAAA` partition folder are found and deleted."""
    t = hidden_table(lake, "ns.h", "_c2", "c3")
    assert (lake.warehouse / "ns/h/data/_c2=AA/c3=AAAA").is_dir()
    orphans = [lake.put(f"ns/h/data/_c2=AA/c3=AAAA/orphan-{i}.parquet", 10) for i in range(2)]
    age_all(lake.warehouse)
    run = lake.gc("ns.h").json()
    assert run["num_deleted"] == 2 and not any(p.exists() for p in orphans)
    assert t.refresh().scan().to_arrow().num_rows == 1


def test_hidden_partition_paths_with_partition_evolution(lake: Lake):
    """A field added by spec evolution (`_c1`) un-hides its folders as the first spec's do."""
    t = hidden_table(lake, "ns.h", "_c2")
    with t.update_spec() as spec:
        spec.add_identity("_c1")
    orphans = [lake.put("ns/h/data/_c2=AA/orphan.parquet", 10), lake.put("ns/h/data/_c2=AA/_c1=1/orphan.parquet", 10)]
    age_all(lake.warehouse)
    run = lake.gc("ns.h").json()
    assert run["num_deleted"] == 2 and not any(p.exists() for p in orphans)


def test_hidden_paths_starting_with_partition_names_are_ignored(lake: Lake):
    """`_c2/` (no `=value`) is no partition folder: hidden, kept."""
    hidden_table(lake, "ns.h", "_c2", "c3")
    kept = lake.put("ns/h/data/_c2/file.txt", 10)
    age_all(lake.warehouse)
    run = lake.gc("ns.h").json()
    assert run["num_candidates"] == 0 and kept.exists()


def test_hidden_partition_paths_of_another_table_stay_hidden(lake: Lake):
    """Behaviour change: the partition fields that un-hide a folder are those of the table the
    file belongs to. ns.p (partitioned by `_c2`) holds ns.c, unpartitioned, in a sub-folder, and
    ns.u lies elsewhere, unpartitioned; all three are collected in one run (one listing for p and
    c). A `_c2=` folder is p's partition folder in p's data, and a hidden folder in c's or u's."""
    hidden_table(lake, "ns.p", "_c2", location=(lake.warehouse / "p").as_uri())
    hidden_table(lake, "ns.c", location=(lake.warehouse / "p/c").as_uri())
    hidden_table(lake, "ns.u", location=(lake.warehouse / "u").as_uri())
    goes = lake.put("p/data/_c2=AA/orphan.parquet", 10)
    stays = [lake.put("p/c/data/_c2=AA/orphan.parquet", 10), lake.put("u/data/_c2=AA/orphan.parquet", 10)]
    age_all(lake.warehouse)
    run = lake.gc("ns.p", "ns.c", "ns.u").json()
    assert not goes.exists() and all(p.exists() for p in stays)
    assert set(deleted_of(run)) == {str(goes)}


def test_table_history_properties_apply_when_the_run_gives_none(lake: Lake):
    """Iceberg's procedure called without retain_last / older_than uses the table's
    history.expire.* properties: with min-snapshots-to-keep=3 a run without flags keeps three old
    snapshots of four; --retain-last given on the command line replaces the property."""
    t = lake.table("ns.t")
    for n, days_ago in ((1, 13), (2, 12), (3, 11), (4, 10)):
        lake.at(days_ago, lambda n=n: t.append(rows(n)) or t)
    with t.transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "3", "history.expire.max-snapshot-age-ms": "1000"})
    t = lake.catalog.load_table("ns.t")
    age_all(lake.warehouse)
    assert len(snapshot_ids(t)) == 4
    run = lake.gc("ns.t").json()
    assert run["details"]["snapshots expired"] == 1 and len(snapshot_ids(lake.catalog.load_table("ns.t"))) == 3
    run = lake.gc("ns.t", retain_last="1").json()
    assert run["details"]["snapshots expired"] == 2 and len(snapshot_ids(lake.catalog.load_table("ns.t"))) == 1
    assert ids(lake.catalog.load_table("ns.t")) == [1, 2, 3, 4]
