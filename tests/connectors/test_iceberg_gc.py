"""Iceberg GC (`lakegc iceberg gc`): expiry as a pure function over named histories, paths and hidden
files as pure functions, then whole runs through the CLI on Spark against a pyiceberg SqlCatalog on
SQLite with a local warehouse: expiry boundaries, retain-last, refs, orphans, the candidates' reasons
(`expired`, `orphan`), prefix mismatch, shared and nested locations, gc.enabled, and a commit
landing while a run is under way.

Snapshot times come from a clock the tests set (pyiceberg stamps snapshots with `time.time()`), and
every file is aged past the orphan min-age unless a test says otherwise, so only references protect.
What must survive is computed by a plain reference reader of the metadata (`referenced`), not by
the code under test.
"""

from __future__ import annotations

import os
import time as real_time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import CliResult, one_error

from lakegc.connectors.iceberg.expire import Ref, Snap, expiry
from lakegc.connectors.iceberg.paths import Location, hidden, overlap, parse_location, within
from lakegc.engine.collector import RunOptions

Cli = Callable[..., CliResult]
DAY = 86_400_000
NOW = 1_000 * DAY  # ms, for the pure tables
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("_key", pa.string())])


# ================================================================================================
# expiry: which snapshots go (pure)
# ================================================================================================


def chain(*days_ago: float, start: int = 1) -> list[Snap]:
    """A first-parent history, oldest first: ids start, start+1, ..."""
    snaps, parent = [], None
    for i, age in enumerate(days_ago):
        snaps.append(Snap(start + i, parent, int(NOW - age * DAY)))
        parent = start + i
    return snaps


MAIN = chain(20, 10, 8, 6, 1)  # ids 1..5, 5 is main's head
EXPIRY_CASES = {
    "linear history keeps its head and what is younger than the cutoff": (
        MAIN,
        [Ref("main", 5, True)],
        5,
        1,
        {1, 2, 3, 4},
    ),
    "retain-last keeps the newest N of the branch whatever their age": (MAIN, [Ref("main", 5, True)], 5, 3, {1, 2}),
    "retain-last larger than the history keeps it all": (MAIN, [Ref("main", 5, True)], 5, 50, set()),
    "young snapshots never go": (MAIN, [Ref("main", 5, True)], 30, 1, set()),
    "a tag pins an old snapshot, not its ancestors": (
        MAIN,
        [Ref("main", 5, True), Ref("v1", 2, False)],
        5,
        1,
        {1, 3, 4},
    ),
    "a branch keeps its head and walks its own history with retain-last": (
        MAIN + chain(7, 3, start=10)[:1] + [Snap(11, 10, NOW - 3 * DAY)],
        [Ref("main", 5, True), Ref("dev", 11, True)],
        5,
        2,
        {1, 2, 3},
    ),
    "a branch's min-snapshots-to-keep replaces the run's retain-last (here: keeps more)": (
        MAIN,
        [Ref("main", 5, True, min_snapshots_to_keep=4)],
        5,
        1,
        {1},
    ),
    "a branch's max-snapshot-age replaces the run's older-than (here: reaches further back)": (
        MAIN,
        [Ref("main", 5, True, max_snapshot_age_ms=9 * DAY)],
        5,
        1,
        {1, 2},
    ),
    # changed with Iceberg parity: the branch's own age used to be combined with the run's (the
    # more careful won, {1, 2}); Iceberg's RemoveSnapshots lets it replace the run's, younger or older
    "a branch's shorter max-snapshot-age replaces the run's: younger snapshots than --older-than go": (
        MAIN,
        [Ref("main", 5, True, max_snapshot_age_ms=DAY)],
        9,
        1,
        {1, 2, 3, 4},
    ),
    "a branch's smaller min-snapshots-to-keep replaces the run's retain-last (keeps less)": (
        MAIN,
        [Ref("main", 5, True, min_snapshots_to_keep=1)],
        5,
        3,
        {1, 2, 3, 4},
    ),
    # changed with Iceberg parity: the walk down a branch used to go on past an old snapshot and
    # keep younger ancestors below it (clock skew); Iceberg's stops at the first it lets go
    "the walk down a branch stops at the first snapshot it lets go": (
        chain(9, 2, 8, 1),
        [Ref("main", 4, True)],
        5,
        1,
        {1, 2, 3},
    ),
    "a snapshot on no branch's history (rolled back) goes by age alone": (
        MAIN + [Snap(20, 3, NOW - 7 * DAY), Snap(21, 3, NOW - 2 * DAY)],
        [Ref("main", 5, True)],
        5,
        1,
        {1, 2, 3, 4, 20},
    ),
    "a missing parent (expired earlier) ends the walk": (chain(9, 8, start=7)[1:], [Ref("main", 8, True)], 5, 3, set()),
    "a snapshot no ref reaches, older than the cutoff, goes even as the newest": (
        [Snap(1, None, NOW - 9 * DAY)],
        [],
        5,
        1,
        {1},
    ),
}


@pytest.mark.parametrize("name", EXPIRY_CASES)
def test_expiry(name: str):
    snaps, refs, older_than_days, retain_last, expected = EXPIRY_CASES[name]
    assert expiry(snaps, refs, NOW, older_than_days * DAY, retain_last).snapshots == expected


def test_expiry_boundary_is_strictly_older_than_the_cutoff():
    at, before = Snap(1, None, NOW - 5 * DAY), Snap(2, None, NOW - 5 * DAY - 1)
    assert expiry([at, before], [], NOW, 5 * DAY, 1).snapshots == {2}


# ================================================================================================
# locations and hidden files (pure)
# ================================================================================================


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("s3://bucket/wh/t/data/f.parquet", Location("s3", "bucket", "/wh/t/data/f.parquet")),
        ("s3a://bucket/wh/t/data/f.parquet", Location("s3", "bucket", "/wh/t/data/f.parquet")),
        ("S3N://Bucket//wh///t/./data/f.parquet", Location("s3", "bucket", "/wh/t/data/f.parquet")),
        ("file:/wh/t/f", Location("file", "", "/wh/t/f")),
        ("file:///wh/t/f", Location("file", "", "/wh/t/f")),
        ("/wh/t/f", Location("file", "", "/wh/t/f")),
        ("file:///wh/t/a%20b", Location("file", "", "/wh/t/a%20b")),  # as written: the store holds `%20`
        ("s3://b/k=10%3A00/a#b?c", Location("s3", "b", "/k=10%3A00/a#b?c")),
        ("gs://b/x", Location("gs", "b", "/x")),
    ],
)
def test_locations_are_compared_after_normalising(uri: str, expected: Location):
    assert parse_location(uri) == expected


def test_within_and_overlap_need_the_same_store_and_a_whole_path_component():
    t = parse_location("s3://b/wh/t")
    assert within(parse_location("s3a://b/wh/t/data/x"), t) and within(t, t)
    assert not within(parse_location("s3://b/wh/t2/data/x"), t)  # a sibling sharing a prefix string
    assert not within(parse_location("s3://other/wh/t/data/x"), t)
    assert overlap(parse_location("s3://b/wh"), t) and overlap(t, parse_location("s3://b/wh/t/inner"))
    assert not overlap(parse_location("s3://b/wh/u"), t)


def test_mismatch_rules_follow_iceberg_what_the_metadata_leaves_out_matches_anything():
    listed = parse_location("s3://b/wh/t/f")
    assert listed.same_prefix(parse_location("s3a://b/wh/t/f"))
    assert listed.same_prefix(Location("", "", "/wh/t/f"))
    assert not listed.same_prefix(parse_location("s3://other/wh/t/f"))
    assert not listed.same_prefix(parse_location("gs://b/wh/t/f"))


@pytest.mark.parametrize(
    "key, fields, expected",
    [
        ("data/00000-0-a.parquet", frozenset(), False),
        ("data/_SUCCESS", frozenset(), True),
        ("data/.00000-0-a.parquet.crc", frozenset(), True),
        ("data/_temporary/0/x.parquet", frozenset(), True),
        ("metadata/.hidden/x", frozenset(), True),
        ("data/_key=a/f.parquet", frozenset(), True),  # not a partition field of any spec: hidden
        ("data/_key=a/f.parquet", frozenset({"_key"}), False),
        ("data/_key=a/_SUCCESS", frozenset({"_key"}), True),
        ("data/key=_a/f.parquet", frozenset(), False),  # only a component's start counts
    ],
)
def test_hidden_paths(key: str, fields: frozenset[str], expected: bool):
    assert hidden(key, fields) is expected


# ================================================================================================
# whole runs through the CLI
# ================================================================================================


class SnapshotClock:
    """Stands in for the `time` module pyiceberg stamps snapshots with."""

    def __init__(self) -> None:
        self.days_ago: float | None = None

    def time(self) -> float:
        now = real_time.time()
        return now if self.days_ago is None else now - self.days_ago * 86_400


@dataclass
class Lake:
    catalog: object
    warehouse: Path
    clock: SnapshotClock
    cli: Cli

    def table(self, name: str, location: str | None = None, partitioned: bool = False):  # type: ignore[no-untyped-def]
        table = self.catalog.create_table(name, schema=SCHEMA, **({"location": location} if location else {}))
        if partitioned:
            with table.update_spec() as spec:
                spec.add_identity("_key")
        return table

    def at(self, days_ago: float, write: Callable[[], object]) -> int:
        """Commit `write` as of `days_ago`; returns the table's new current snapshot id."""
        self.clock.days_ago = days_ago
        try:
            table = write()
        finally:
            self.clock.days_ago = None
        return table.current_snapshot().snapshot_id  # type: ignore[attr-defined]

    def put(self, relative: str, days_old: float, body: bytes = b"junk") -> Path:
        path = self.warehouse / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        age(path, days_old)
        return path

    def files(self) -> set[str]:
        return {p.relative_to(self.warehouse).as_posix() for p in self.warehouse.rglob("*") if p.is_file()}

    def gc(self, *tables: str, ok: bool = True, **options: str) -> CliResult:
        args = [f"--{k.replace('_', '-')}" if v == "" else f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
        return self.cli("iceberg", "gc", "--catalog", "lake", *tables, *args, "--json", ok=ok)


def age(path: Path, days_old: float) -> None:
    when = real_time.time() - days_old * 86_400
    os.utime(path, (when, when))


def age_all(root: Path, days_old: float = 10) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            age(path, days_old)


def rows(*ids: int, key: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "_key": [key] * len(ids)}, schema=SCHEMA)


def make_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, bare_warehouse: bool = False) -> Lake:
    """A SqlCatalog named `lake` on SQLite, its warehouse a file:// URI or, as pyiceberg also
    accepts, a bare path."""
    import pyiceberg.table.snapshots
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    spelled = str(warehouse) if bare_warehouse else warehouse.as_uri()
    uri = f"sqlite:///{tmp_path / 'iceberg.db'}"
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__URI", uri)
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", spelled)
    clock = SnapshotClock()
    monkeypatch.setattr(pyiceberg.table.snapshots, "time", clock)
    catalog = SqlCatalog("lake", uri=uri, warehouse=spelled)
    catalog.create_namespace("ns")
    return Lake(catalog, warehouse, clock, cli)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, spark) -> Lake:
    return make_lake(tmp_path, monkeypatch, cli)


def referenced(table) -> set[str]:  # type: ignore[no-untyped-def]
    """A plain reading of the table's metadata: every file any of its snapshots needs."""
    table = table.refresh()
    uris = {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
    for snapshot in table.metadata.snapshots:
        uris.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            uris.add(manifest.manifest_path)
            uris.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return {parse_location(u).path for u in uris}


def on_disk(lake: Lake, paths: set[str]) -> set[str]:
    return {p for p in paths if Path(p).is_file()}


def history(lake: Lake) -> tuple[object, dict[str, int]]:
    """main: S1 20d append [1,2]; S2 10d append [3]; S3 8d delete 3 (S2's file leaves the table);
    S4 6d append [4]; S5 1d append [5] (head)."""
    t = lake.table("ns.t")
    snaps = {
        "S1": lake.at(20, lambda: t.append(rows(1, 2)) or t),
        "S2": lake.at(10, lambda: t.append(rows(3)) or t),
        "S3": lake.at(8, lambda: t.delete("id = 3") or t),
        "S4": lake.at(6, lambda: t.append(rows(4)) or t),
        "S5": lake.at(1, lambda: t.append(rows(5)) or t),
    }
    return t, snaps


def live_files(table, snapshot_id: int) -> set[str]:  # type: ignore[no-untyped-def]
    return {
        parse_location(e.data_file.file_path).path
        for m in table.snapshot_by_id(snapshot_id).manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
    }


def snapshot_ids(table) -> set[int]:  # type: ignore[no-untyped-def]
    return {s.snapshot_id for s in table.refresh().metadata.snapshots}


def ids(table) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def named_by(table, snapshots: set[int]) -> set[str]:  # type: ignore[no-untyped-def]
    """A plain reading of what these snapshots name: their manifest lists, manifests, the files of
    live entries, and their statistics files (no metadata file: a snapshot names none)."""
    table = table.refresh()
    uris = {s.statistics_path for s in table.metadata.statistics if s.snapshot_id in snapshots}
    for snapshot_id in snapshots:
        snapshot = table.snapshot_by_id(snapshot_id)
        uris.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            uris.add(manifest.manifest_path)
            uris.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return {parse_location(u).path for u in uris}


def run_output(run: dict, output: str) -> pa.Table:
    """One output of a run's folder (`candidates`, `deleted`: Parquet parts), empty if none."""
    folder = Path(parse_location(run["location"]).path) / output
    parts = sorted(folder.rglob("*.parquet")) if folder.exists() else []
    return pa.concat_tables([pq.read_table(p) for p in parts]) if parts else pa.table({"address": [], "reason": []})


def candidates_of(run: dict) -> dict[str, str]:
    """A run's candidates: file path -> reason."""
    table = run_output(run, "candidates")
    return {parse_location(a).path: r for a, r in zip(table["address"].to_pylist(), table["reason"].to_pylist())}


def deleted_of(run: dict) -> dict[str, str]:
    """The files a run deleted (its deleted/ rows marked deleted): file path -> reason."""
    table = run_output(run, "deleted")
    if not table.num_rows:
        return {}
    return {
        parse_location(a).path: r
        for a, r, done in zip(table["address"].to_pylist(), table["reason"].to_pylist(), table["deleted"].to_pylist())
        if done
    }


def collectable(lake: Lake, location: str) -> set[str]:
    """Files under a table location that orphan removal may judge: not hidden, old enough."""
    root = lake.warehouse / location
    return {
        str(p)
        for p in root.rglob("*")
        if p.is_file()
        and not any(part[:1] in "_." for part in p.relative_to(root).parts)
        and p.stat().st_mtime < real_time.time() - 3 * 86_400
    }


def test_expire_then_orphans_dry_run_first_then_collect(lake: Lake):
    t, s = history(lake)
    s2_files = live_files(t, s["S2"]) - live_files(t, s["S1"])  # the file S2 added, which S3 deleted
    orphan_old = lake.put("ns/t/data/orphan-old.parquet", 10)
    stale_metadata = lake.put(f"ns/t/metadata/99999-{uuid.uuid4()}.metadata.json", 10)
    kept = [
        lake.put("ns/t/data/_SUCCESS", 10),
        lake.put("ns/t/data/.x.parquet.crc", 10),
        lake.put("ns/t/metadata/_tmp/junk.avro", 10),
        lake.put("ns/outside.parquet", 10),
    ]
    age_all(lake.warehouse / "ns/t")
    kept.append(lake.put("ns/t/data/orphan-new.parquet", 1))
    before_files, before_ids = lake.files(), ids(t)

    dry = lake.gc("ns.t", older_than="5d", dry_run="").json()
    assert (dry["state"], dry["num_deleted"]) == ("marked", 0)
    assert lake.files() == before_files and snapshot_ids(t) == set(s.values())
    assert dry["details"]["snapshots to expire"] == 4

    judged = collectable(lake, "ns/t")
    run = lake.gc("ns.t", older_than="5d").json()
    assert run["state"] == "swept" and run["details"]["snapshots expired"] == 4
    assert snapshot_ids(t) == {s["S5"]}
    assert ids(t) == before_ids == [1, 2, 4, 5]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed  # everything the table still needs is there
    gone = {str(lake.warehouse / f) for f in before_files - lake.files()}
    assert gone == judged - needed  # and everything else it could judge is gone
    assert {str(orphan_old), str(stale_metadata)} <= gone and s2_files <= gone  # S2's data file left with S2
    assert all(p.exists() for p in kept)
    assert run["num_deleted"] == dry["num_candidates"] == len(gone)
    again = lake.gc("ns.t", older_than="5d").json()
    assert (again["num_candidates"], again["details"]["snapshots expired"]) == (0, 0)


def test_expired_snapshots_files_are_expired_a_file_no_snapshot_named_is_orphan(lake: Lake):
    """Why each candidate goes: a file only the snapshots this run expires named is `expired`; a
    failed write's file, which no snapshot ever named, is `orphan`. The dry run and the run agree
    file for file and reason for reason, and the run deletes exactly what the dry run listed."""
    t = lake.table("ns.t")
    s1 = lake.at(20, lambda: t.append(rows(1, 2)) or t)
    s2 = lake.at(12, lambda: t.append(rows(3)) or t)
    lake.at(8, lambda: t.overwrite(rows(1, 2, 3, 6)) or t)  # replaces S1's and S2's data files
    head = lake.at(1, lambda: t.append(rows(7)) or t)
    failed_write = lake.put(f"ns/t/data/00000-0-{uuid.uuid4()}.parquet", 10)
    age_all(lake.warehouse)
    expiring = snapshot_ids(t) - {head}
    expired = named_by(t, expiring) - named_by(t, {head})
    assert live_files(t, s1) | live_files(t, s2) <= expired  # the data files the overwrite replaced
    expected = {**dict.fromkeys(expired, "expired"), str(failed_write): "orphan"}
    before = lake.files()

    dry = lake.gc("ns.t", older_than="5d", dry_run="").json()
    assert lake.files() == before and dry["details"]["snapshots to expire"] == len(expiring) == 4
    assert candidates_of(dry) == expected
    assert dry["candidates_by_reason"] == {"expired": len(expired), "orphan": 1} and dry["num_candidates"] == len(
        expected
    )

    run = lake.gc("ns.t", older_than="5d").json()
    assert (run["state"], run["details"]["snapshots expired"]) == ("swept", 4) and snapshot_ids(t) == {head}
    assert candidates_of(run) == expected and run["candidates_by_reason"] == dry["candidates_by_reason"]
    assert deleted_of(run) == expected and (run["num_deleted"], run["num_failed"]) == (len(expected), 0)
    assert {str(lake.warehouse / f) for f in before - lake.files()} == set(expected)  # deleted, nothing else
    assert ids(t) == [1, 2, 3, 6, 7]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_a_file_an_expired_snapshot_shares_with_a_retained_one_is_kept(lake: Lake):
    """Appends carry the earlier manifests and data files forward: S1's are named by S1, which
    expires, and by the retained head too. Whatever label an expired snapshot's file would get,
    one a retained snapshot names is no candidate."""
    t, s = history(lake)
    age_all(lake.warehouse)
    shared = named_by(t, {s["S1"]}) & named_by(t, {s["S5"]})
    assert live_files(t, s["S1"]) < shared  # S1's data file, and the manifest naming it
    dry = lake.gc("ns.t", older_than="5d", dry_run="").json()
    assert dry["details"]["snapshots to expire"] == 4 and not shared & set(candidates_of(dry))
    run = lake.gc("ns.t", older_than="5d").json()
    assert snapshot_ids(t) == {s["S5"]} and candidates_of(run) == candidates_of(dry)
    assert not shared & set(deleted_of(run)) and on_disk(lake, shared) == shared
    assert set(run["candidates_by_reason"]) == {"expired"} and ids(t) == [1, 2, 4, 5]


def test_a_file_an_expired_snapshot_shares_with_another_tables_snapshot_is_kept(lake: Lake):
    """A file a's expired snapshot added, and that another table adopted (add_files), stays
    with the other table's snapshot: what is kept is decided across tables, whatever the label."""
    a = lake.table("ns.a")
    first = lake.at(9, lambda: a.append(rows(1)) or a)
    (adopted,) = live_files(a, first)
    other = lake.table("ns.other")
    lake.at(9, lambda: other.add_files([Path(adopted).as_uri()]) or other)
    lake.at(8, lambda: a.overwrite(rows(2)) or a)  # the file leaves a
    head = lake.at(1, lambda: a.append(rows(3)) or a)
    age_all(lake.warehouse)
    expiring = snapshot_ids(a) - {head}
    expected = dict.fromkeys(named_by(a, expiring) - named_by(a, {head}) - {adopted}, "expired")
    assert adopted in named_by(a, expiring) and expected
    run = lake.gc("ns.a", older_than="5d").json()
    assert snapshot_ids(a) == {head} and deleted_of(run) == expected
    assert run["candidates_by_reason"] == {"expired": len(expected)}
    assert Path(adopted).exists() and ids(other) == [1] and ids(a) == [2, 3]


def test_a_snapshot_a_tag_saves_while_the_expiry_commits_labels_none_of_its_files(lake: Lake, tmp_path: Path):
    """The commit re-plans when a ref moves under it (`commit_expiry`): the tagged snapshot keeps
    its files, and the candidates are the files of the three snapshots the run did expire, each
    labelled `expired`."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    t, s = history(lake)
    age_all(lake.warehouse)

    def phase(name: str, detail: str = "") -> None:
        if name == "expiring snapshots":  # planned already: S1 to S4
            lake.catalog.load_table("ns.t").manage_snapshots().create_tag(s["S2"], "audit").commit()

    gone = {s["S1"], s["S3"], s["S4"]}
    expected = dict.fromkeys(named_by(t, gone) - named_by(t, {s["S2"], s["S5"]}), "expired")
    options = IcebergGcOptions(older_than=timedelta(days=5))
    run = run_iceberg_gc("lake", ["ns.t"], options, RunOptions(runs_location=str(tmp_path / "runs")), phase)
    assert snapshot_ids(t) == {s["S2"], s["S5"]} and run.details["snapshots expired"] == 3
    assert deleted_of({"location": run.location}) == expected and run.candidates_by_reason == {"expired": len(expected)}
    assert sorted(t.refresh().scan(snapshot_id=s["S2"]).to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_statistics_files_of_expired_snapshots_are_expired(lake: Lake):
    """Expiring a snapshot drops its statistics from the metadata: the file is then an expired
    snapshot's file; the retained snapshot's statistics stay."""
    from pyiceberg.table.statistics import StatisticsFile

    t, s = history(lake)
    stats = {name: lake.warehouse / f"ns/t/metadata/{name}-stats.puffin" for name in ("S1", "S5")}
    with t.update_statistics() as update:
        for name, path in stats.items():
            path.write_bytes(b"PFA1")
            update.set_statistics(
                StatisticsFile(
                    snapshot_id=s[name],
                    statistics_path=path.as_uri(),
                    file_size_in_bytes=4,
                    file_footer_size_in_bytes=4,
                    blob_metadata=[],
                )
            )
    age_all(lake.warehouse)
    run = lake.gc("ns.t", older_than="5d").json()
    assert snapshot_ids(t) == {s["S5"]} and set(run["candidates_by_reason"]) == {"expired"}
    assert deleted_of(run)[str(stats["S1"])] == "expired" and not stats["S1"].exists()
    assert stats["S5"].exists() and ids(t) == [1, 2, 4, 5]


def test_retain_last_and_refs_keep_snapshots_and_their_files(lake: Lake):
    t, s = history(lake)
    lake.at(9, lambda: t.manage_snapshots().create_tag(s["S2"], "v2").commit() or t)
    age_all(lake.warehouse)
    s2_data = live_files(t, s["S2"])
    lake.gc("ns.t", older_than="5d", retain_last="3")
    assert snapshot_ids(t) == {s["S2"], s["S3"], s["S4"], s["S5"]}  # the tag, and main's newest three
    assert on_disk(lake, s2_data) == s2_data  # a tagged snapshot stays readable
    assert sorted(t.refresh().scan(snapshot_id=s["S2"]).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_a_branch_keeps_its_head_and_its_own_retain_last(lake: Lake):
    t, s = history(lake)
    lake.at(7, lambda: t.manage_snapshots().create_branch(s["S2"], "dev").commit() or t)
    lake.at(6.5, lambda: t.append(rows(30), branch="dev") or t)
    dev_head = t.refresh().metadata.refs["dev"].snapshot_id
    age_all(lake.warehouse)
    lake.gc("ns.t", older_than="5d", retain_last="2")
    assert snapshot_ids(t) == {s["S4"], s["S5"], s["S2"], dev_head}
    assert sorted(t.refresh().scan(snapshot_id=dev_head).to_arrow().column("id").to_pylist()) == [1, 2, 3, 30]
    needed = referenced(t)
    assert on_disk(lake, needed) == needed


def test_tables_sharing_or_nesting_locations_protect_each_others_files(lake: Lake):
    shared = (lake.warehouse / "shared").as_uri()
    a = lake.table("ns.a", location=shared)
    b = lake.table("ns.b", location=shared)  # pyiceberg lets two tables share a location (Nessie #12363)
    c = lake.table("ns.c", location=shared + "/inner")
    d = lake.table("ns.d", location=(lake.warehouse / "elsewhere").as_uri())
    for table, first in ((a, 1), (b, 10), (c, 20), (d, 30)):
        lake.at(9, lambda table=table, first=first: table.append(rows(first)) or table)
        lake.at(8, lambda table=table, first=first: table.append(rows(first + 1)) or table)
    orphan = lake.put("shared/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    needed = {name: referenced(tbl) for name, tbl in (("b", b), ("c", c), ("d", d))}
    run = lake.gc("ns.a", older_than="30d").json()
    assert run["details"]["tables protecting their files"] == 3
    for name, paths in needed.items():
        assert on_disk(lake, paths) == paths, f"table {name} lost files"
    assert not orphan.exists()
    assert ids(b) == [10, 11] and ids(c) == [20, 21] and ids(a) == [1, 2]


def test_a_file_another_table_references_is_kept(lake: Lake):
    """add_files lets a table reference a file under another table's location."""
    a = lake.table("ns.a")
    lake.at(9, lambda: a.append(rows(1)) or a)
    foreign = lake.warehouse / "ns/a/data/imported.parquet"
    pq.write_table(rows(99), foreign)
    other = lake.table("ns.other")
    lake.at(9, lambda: other.add_files([foreign.as_uri()]) or other)
    age_all(lake.warehouse)
    lake.gc("ns.a", older_than="5d")
    assert foreign.exists() and ids(other) == [99]


def test_partition_folders_named_like_hidden_paths_are_collected(lake: Lake):
    t = lake.table("ns.p", partitioned=True)
    lake.at(9, lambda: t.append(rows(1, key="x")) or t)
    partition = next(p for p in (lake.warehouse / "ns/p/data").iterdir() if p.is_dir())
    assert partition.name.startswith("_key=")
    orphan = lake.put(f"ns/p/data/{partition.name}/orphan.parquet", 10)
    success = lake.put(f"ns/p/data/{partition.name}/_SUCCESS", 10)
    age_all(lake.warehouse)
    lake.gc("ns.p")
    assert not orphan.exists() and success.exists() and ids(t) == [1]


def test_a_tag_created_while_the_expiry_commits_keeps_its_snapshot(lake: Lake):
    """Removing a snapshot drops the refs on it: a tag created between the plan and the commit
    must fail the commit, and the new plan keeps the tagged snapshot."""
    from lakegc.connectors.iceberg.commit import commit_expiry
    from lakegc.connectors.iceberg.gc import IcebergGcOptions

    t, s = history(lake)
    planned_on = lake.catalog.load_table("ns.t")
    t.manage_snapshots().create_tag(s["S2"], "audit").commit()
    after, committed = commit_expiry(planned_on, int(real_time.time() * 1000), IcebergGcOptions())
    assert after.metadata.refs["audit"].snapshot_id == s["S2"] and committed.snapshots == {s["S1"], s["S3"], s["S4"]}
    assert snapshot_ids(after) == {s["S2"], s["S5"]}


@pytest.mark.parametrize("bare_warehouse", [False, True], ids=["file-uri", "bare-path"])
def test_escaped_partition_values_keep_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, spark, bare_warehouse: bool
):
    """pyiceberg escapes partition values in paths (`10%3A00`), and the store holds the name as
    written: decoding either side, or only one, would make a live file look like an orphan."""
    lake = make_lake(tmp_path, monkeypatch, cli, bare_warehouse)
    t = lake.table("ns.p", partitioned=True)
    lake.at(9, lambda: t.append(rows(1, 2, key="10:00 a/b%é")) or t)
    (partition,) = [p for p in (lake.warehouse / "ns/p/data").iterdir() if p.is_dir()]
    assert "%3A" in partition.name
    orphan = lake.put(f"ns/p/data/{partition.name}/orphan.parquet", 10)
    decoded = lake.put("ns/p/data/_key=10:00 a/b%é/" + next(partition.iterdir()).name, 10)  # same name, decoded
    age_all(lake.warehouse)
    live = on_disk(lake, referenced(t))
    run = lake.gc("ns.p").json()
    assert on_disk(lake, live) == live and ids(t) == [1, 2]
    assert not orphan.exists() and not decoded.exists()
    assert run["num_deleted"] == 2


def test_files_younger_than_the_orphan_min_age_stay(lake: Lake):
    t = lake.table("ns.t")
    lake.at(9, lambda: t.append(rows(1)) or t)
    age_all(lake.warehouse, 2)
    young = lake.put("ns/t/data/young.parquet", 2)
    run = lake.gc("ns.t").json()  # default --orphan-min-age 3d
    assert young.exists() and run["num_candidates"] == 0
    run = lake.gc("ns.t", orphan_min_age="1d").json()
    assert not young.exists() and run["num_deleted"] == 1


def _reference_under_another_scheme(lake: Lake, table, local: Path) -> None:  # type: ignore[no-untyped-def]
    """Commit a data file entry naming `local`'s path under s3:// (metadata written by another engine)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"s3://bucket{local}",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=local.stat().st_size,
    )
    data_file.spec_id = 0
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)


@pytest.mark.parametrize("mode", ["error", "ignore", "delete"])
def test_prefix_mismatch(lake: Lake, mode: str):
    t = lake.table("ns.t")
    lake.at(9, lambda: t.append(rows(1)) or t)
    same_path = lake.put("ns/t/data/named-elsewhere.parquet", 10)
    _reference_under_another_scheme(lake, t, same_path)
    orphan = lake.put("ns/t/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    if mode == "error":
        one_error(lake.gc("ns.t", ok=False), "prefix mismatch", "another scheme or authority", "nothing was deleted")
        assert same_path.exists() and orphan.exists()
        return
    run = lake.gc("ns.t", prefix_mismatch=mode, older_than="30d").json()  # no expiry: orphans only
    assert not orphan.exists()
    assert same_path.exists() is (mode == "ignore")
    assert run["candidates_by_reason"] == ({"orphan": 1} if mode == "ignore" else {"orphan": 1, "prefix mismatch": 1})


def test_delete_files_of_retained_snapshots_are_kept(lake: Lake):
    """pyiceberg 0.12 writes no delete files; this commits a positional delete file the way a
    merge-on-read engine would (a delete manifest)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriterV2
    from pyiceberg.typedef import Record

    class DeleteManifestWriter(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    t = lake.table("ns.t")
    lake.at(9, lambda: t.append(rows(1, 2, 3)) or t)
    data_path = t.inspect.files()["file_path"][0].as_py()
    deletes = lake.warehouse / "ns/t/data/positional-deletes.parquet"
    pq.write_table(pa.table({"file_path": [data_path], "pos": pa.array([1], pa.int64())}), deletes)
    entry = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=deletes.as_uri(),
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=deletes.stat().st_size,
    )
    entry.spec_id = 0

    def commit() -> object:
        with t.transaction() as tx:
            append = tx.update_snapshot().fast_append()
            append.new_manifest_writer = lambda spec: DeleteManifestWriter(  # type: ignore[method-assign]
                spec, append.schema(), append.new_manifest_output(), append._snapshot_id, append._compression
            )
            append.append_data_file(entry)
            append.commit()
        return t

    lake.at(8, commit)
    assert ids(t) == [1, 3]
    age_all(lake.warehouse)
    lake.gc("ns.t", older_than="5d")
    assert deletes.exists() and ids(t) == [1, 3]


def test_a_file_committed_while_the_run_marks_is_not_deleted(lake: Lake, tmp_path: Path):
    """The race a sweep must survive: a file listed as an orphan is committed (add_files) before the
    deletes start. The sweep re-reads the catalog and keeps what the table now references."""
    from lakegc.connectors.iceberg.gc import IcebergGcOptions, run_iceberg_gc

    t = lake.table("ns.t")
    lake.at(9, lambda: t.append(rows(1)) or t)
    late = lake.warehouse / "ns/t/data/late.parquet"
    pq.write_table(rows(7), late)
    age_all(lake.warehouse)

    def phase(name: str, detail: str = "") -> None:
        if name == "re-reading the catalog":
            lake.catalog.load_table("ns.t").add_files([late.as_uri()])

    run = run_iceberg_gc("lake", ["ns.t"], IcebergGcOptions(), RunOptions(runs_location=str(tmp_path / "runs")), phase)
    assert run.num_candidates == 1 and run.num_deleted == 0
    assert run.details["tables changed during the run"] == "ns.t"
    assert late.exists() and ids(t) == [1, 7]


def test_bad_input_is_refused_before_anything_changes(lake: Lake, monkeypatch: pytest.MonkeyPatch):
    t, s = history(lake)
    off = lake.table("ns.off", location=(lake.warehouse / "ns/t").as_uri())
    with off.transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})
    age_all(lake.warehouse)
    orphan = lake.put("ns/t/data/orphan.parquet", 10)
    before = lake.files(), snapshot_ids(t)
    one_error(lake.gc("ns.t", ok=False), "ns.off", "gc.enabled=false")  # shares ns.t's location
    one_error(lake.gc("ns.off", ok=False), "ns.off", "gc.enabled=false")
    one_error(lake.gc("ns.missing", ok=False), "ns.missing", "not found")
    one_error(lake.cli("iceberg", "gc", "--catalog", "nosuch", "ns.t", ok=False), "no iceberg catalog 'nosuch'")
    one_error(lake.gc("ns.t", ok=False, retain_last="0"), "--retain-last")
    one_error(lake.gc("ns.t", ok=False, older_than="5 days"), "invalid duration")
    monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__URI", "sqlite:////nonexistent/dir/x.db")
    one_error(lake.cli("iceberg", "gc", "--catalog", "broken", "ns.t", ok=False), "broken")
    odd = lake.table("ns.odd")
    with odd.transaction() as tx:
        tx.set_properties({"gc.enabled": "no"})  # Iceberg reads anything but "true" as false
    one_error(lake.gc("ns.odd", ok=False), "ns.odd", "gc.enabled=no")
    home = lake.warehouse.parent / "home"
    home.mkdir()
    (home / ".pyiceberg.yaml").write_text("catalog: [unclosed\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    one_error(lake.gc("ns.t", ok=False), "configuration cannot be read")
    assert (lake.files() - {f for f in lake.files() if f.startswith("ns/odd/")}, snapshot_ids(t)) == before
    assert orphan.exists()


def test_catalog_from_pyiceberg_yaml(lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The catalog is resolved the pyiceberg way: .pyiceberg.yaml in $PYICEBERG_HOME."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri = os.environ["PYICEBERG_CATALOG__LAKE__URI"]
    home = tmp_path / "pyiceberg-home"
    home.mkdir()
    (home / ".pyiceberg.yaml").write_text(
        f"catalog:\n  fromyaml:\n    type: sql\n    uri: {uri}\n    warehouse: {lake.warehouse.as_uri()}\n"
    )
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    catalog = SqlCatalog("fromyaml", uri=uri, warehouse=lake.warehouse.as_uri())
    catalog.create_namespace("y")
    t = catalog.create_table("y.t", schema=SCHEMA)
    lake.at(9, lambda: t.append(rows(1)) or t)
    orphan = lake.put("y/t/data/orphan.parquet", 10)
    age_all(lake.warehouse)
    run = lake.cli("iceberg", "gc", "--catalog", "fromyaml", "y.t", "--json").json()
    assert run["num_deleted"] == 1 and not orphan.exists() and ids(t) == [1]


def test_a_delete_budget_holds_for_iceberg_runs_too(lake: Lake, spark) -> None:
    """The budget every collector's sweep is held to (`engine.collector`): at most --max-deletes
    files go, the run says how many it left (swept, exit 0, the error names the budget), nothing
    the table needs is among them, and the next run deletes the rest."""
    from lakegc import api
    from lakegc.errors import InvalidArgument

    t, _ = history(lake)
    orphans = [lake.put(f"ns/t/data/orphan-{i}.parquet", 10) for i in range(5)]
    age_all(lake.warehouse / "ns/t")
    needed = referenced(t)
    first = lake.gc("ns.t", older_than="30d", max_deletes="2").json()  # through the CLI, as people run it
    assert (first["state"], first["num_deleted"], first["num_stopped"]) == ("swept", 2, first["num_candidates"] - 2)
    assert first["num_candidates"] >= 5 and "--max-deletes" in first["error"] and "lakegc iceberg gc" in first["error"]
    assert sum(p.exists() for p in orphans) == 3 and on_disk(lake, needed) == needed
    none = api.iceberg_gc("lake", ["ns.t"], older_than="30d", max_deletes=0, spark=spark)
    assert (none.num_deleted, none.num_stopped) == (0, none.num_candidates) and sum(p.exists() for p in orphans) == 3
    rest = api.iceberg_gc("lake", ["ns.t"], older_than="30d", max_delete_rate=100, spark=spark)
    assert (rest.num_deleted, rest.num_stopped, rest.error) == (first["num_stopped"], 0, None)
    assert not any(p.exists() for p in orphans) and on_disk(lake, referenced(t)) == referenced(t)
    before = lake.files()
    with pytest.raises(InvalidArgument, match="--max-deletes"):
        api.iceberg_gc("lake", ["ns.t"], max_deletes=-1, spark=spark)
    assert lake.files() == before


def test_a_delete_budget_is_one_budget_across_table_locations(lake: Lake, spark) -> None:
    """Two tables, two locations, each deleted through its own storage: --max-deletes 3 lets three
    files go in all (chosen once, before the locations split them), never three per location."""
    from lakegc import api

    t, u = lake.table("ns.t"), lake.table("ns.u")
    lake.at(20, lambda: t.append(rows(1)) or t)
    lake.at(20, lambda: u.append(rows(2)) or u)
    orphans = [lake.put(f"ns/{name}/data/orphan-{i}.parquet", 10) for name in "tu" for i in range(4)]
    age_all(lake.warehouse)
    run = api.iceberg_gc("lake", ["ns.t", "ns.u"], older_than="30d", max_deletes=3, spark=spark)
    assert (run.num_deleted, run.num_stopped, run.num_candidates) == (3, 5, 8)
    assert sum(p.exists() for p in orphans) == 5
    assert on_disk(lake, referenced(t) | referenced(u)) == referenced(t) | referenced(u)
