"""Delta Lake GC (`lakegc delta gc`) against delta-rs's own VACUUM, the oracle: for each table, the
files `deltalake.DeltaTable(loc).vacuum(full=True, dry_run=True, ...)` lists are the files lakegc's
dry run lists (sorted, table-relative, as often), then a real run deletes them and the table still
reads with deltalake, with the same rows. The scenarios follow delta-rs's vacuum tests (its Python
`test_vacuum.py` and the core crate's): zero retention, the retention check, kept versions,
stray files in full mode, partitions, time travel inside the retention, checkpoints (classic,
multi-part, V2 with sidecars), null partitions, hidden paths; then what delta-rs does not cover:
deletion vectors, a commit during the run, broken logs, the deletion guard, S3.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import CliResult, Env, one_error, snapshot
from deltalake import DeltaTable, write_deltalake

from lakegc.connectors.delta.log import BrokenLog, log_files, parse_interval, segment, table_key, z85_uuid
from lakegc.connectors.delta.vacuum import hidden

Cli = Callable[..., CliResult]
ROWS = pa.table({"id": pa.array(range(6), pa.int64()), "deleted": pa.array([True, False] * 3), "v": list("abcdef")})
DAY_AGO = time.time() - 86_400


def oracle(
    table: Path, retention_hours: int | None = None, force: bool = False, keep: list[int] | None = None
) -> list[str]:
    """delta-rs's answer."""
    return sorted(
        DeltaTable(str(table)).vacuum(
            retention_hours=retention_hours,
            dry_run=True,
            enforce_retention_duration=not force,
            full=True,
            keep_versions=keep,
        )
    )


def flags(retention_hours: int | None, force: bool, keep: list[int] | None) -> list[str]:
    out = [] if retention_hours is None else ["--retention", f"{retention_hours}h"]
    out += ["--force"] if force else []
    out += ["--keep-versions", ",".join(map(str, keep))] if keep else []
    return out


def same_as_delta_rs(
    cli: Cli, table: Path, retention_hours: int | None = None, force: bool = False, keep: list[int] | None = None
) -> list[str]:
    """Dry run: lakegc lists exactly what delta-rs lists; then a real run deletes it and the table
    reads as before. Returns the list."""
    expected = oracle(table, retention_hours, force, keep)
    dry = cli("delta", "gc", str(table), "--dry-run", "--json", *flags(retention_hours, force, keep)).json()
    assert dry["files"] == expected
    assert dry["dry_run"] is True
    rows = DeltaTable(str(table)).to_pyarrow_table().num_rows
    before = snapshot(table)
    real = cli("delta", "gc", str(table), "--json", *flags(retention_hours, force, keep)).json()
    assert real["files"] == expected
    assert real["state"] == "swept"
    gone = {k for k in before if not (table / k).exists()}
    assert gone == {f for f in expected if f in before}
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == rows
    return expected


def backdate(table: Path, seconds_ago: float = 10 * 86_400) -> None:
    """Age every data file (not the log), as files a week and more old are."""
    when = time.time() - seconds_ago
    for p in table.rglob("*"):
        if p.is_file() and "_delta_log" not in p.parts:
            os.utime(p, (when, when))


def stray(table: Path, key: str, seconds_ago: float = 10 * 86_400) -> None:
    path = table / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not referenced by the log")
    when = time.time() - seconds_ago
    os.utime(path, (when, when))


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Where a test's table lives: beside lakegc's home (`tmp_path/home`), never holding it."""
    return tmp_path / "t"


# -- pure rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "columns", "expected"),
    [
        ("part-0.parquet", (), False),
        ("_delta_log/0.json", (), True),
        ("_SUCCESS", (), True),
        (".part-0.parquet.crc", (), True),
        ("_foo/x", (), True),
        ("sub/_x.parquet", (), False),  # only the first character of the whole path counts
        ("sub/.x", (), False),
        ("_change_data/c.parquet", (), False),
        ("_change_dataX/y", (), False),
        ("_delta_index/i.bin", (), False),
        ("_p=1/x.parquet", ("_p",), False),
        ("_pq/x", ("_p",), True),  # a partition folder is `<column>=`, not any name starting so
        ("_p/x", ("_p",), True),
        (".p=1/x", (".p",), False),
        (".p=1/x", (".p", "q"), True),  # two columns: delta-rs never enters a top-level `.` folder
        (".x", (".p", "q"), True),
    ],
)
def test_hidden_paths_follow_delta_rs(key: str, columns: tuple[str, ...], expected: bool) -> None:
    assert hidden(key, columns) is expected


def test_the_spark_filter_hides_what_the_rule_hides(spark) -> None:  # noqa: ANN001
    """`_visible`, the filter the run uses, agrees with `hidden` on every case above."""
    from lakegc.connectors.delta.vacuum import _visible

    cases = test_hidden_paths_follow_delta_rs.pytestmark[0].args[1]
    for columns in {c for _, c, _ in cases}:
        keys = [k for k, _, _ in cases]
        shown = {
            r["address"]
            for r in _visible(spark.createDataFrame([(k,) for k in keys], "address string"), columns).collect()
        }
        assert shown == {k for k in keys if not hidden(k, columns)}, columns


def test_segment_takes_the_newest_complete_checkpoint_and_refuses_holes() -> None:
    names = [f"{v:020d}.json" for v in range(0, 8)]
    names += [f"{3:020d}.checkpoint.parquet", f"{6:020d}.checkpoint.0000000001.0000000002.parquet"]
    seg = segment(log_files(names))
    assert seg.checkpoint is not None and seg.checkpoint.version == 3  # v6's multi-part lacks part 2
    assert [v for v, _ in seg.commits] == [4, 5, 6, 7]
    names.append(f"{6:020d}.checkpoint.0000000002.0000000002.parquet")
    seg = segment(log_files(names))
    assert seg.checkpoint is not None and seg.checkpoint.version == 6 and len(seg.checkpoint.keys) == 2
    assert segment(log_files(names), 2).checkpoint is None
    with pytest.raises(BrokenLog, match="commit 5"):
        segment(log_files([n for n in names if not n.startswith(f"{5:020d}.json")] + []), 5)
    with pytest.raises(BrokenLog, match="not in the Delta log"):
        segment(log_files(names), 9)


def test_paths_decode_as_delta_writes_them() -> None:
    assert table_key("part=a%2520b/x.parquet", ("file:///t/",)) == "part=a%20b/x.parquet"
    assert table_key("file:///t/a/x.parquet", ("file:///t/",)) == "a/x.parquet"
    assert table_key("s3://other/x.parquet", ("file:///t/",)) is None
    assert table_key("s3a://bucket/t/x.parquet", ("s3://bucket/t/",)) == "x.parquet"  # s3a is s3
    # an odd spelling is never a file to delete, but still protects the file it folds to
    for odd, folded in (("a//x.parquet", "a/x.parquet"), ("./x.parquet", "x.parquet"), ("a/../x.parquet", "x.parquet")):
        assert table_key(odd, ("file:///t/",)) is None
        assert table_key(odd, ("file:///t/",), protects=True) == folded
    assert table_key("file:///t/a//x.parquet", ("file:///t/",), protects=True) == "a/x.parquet"
    assert table_key("../x.parquet", ("file:///t/",), protects=True) is None  # outside: nothing of ours
    assert parse_interval("interval 2 days") == timedelta(days=2)
    assert parse_interval("interval 1 week") == timedelta(weeks=1)


# -- delta-rs's scenarios ------------------------------------------------------------------------
def test_vacuum_zero_duration(cli: Cli, table: Path) -> None:
    """Overwrite, then vacuum with no retention: the first write's files go, the second's stay."""
    write_deltalake(table, ROWS, mode="overwrite")
    first = set(os.listdir(table))
    write_deltalake(table, ROWS, mode="overwrite")
    files = same_as_delta_rs(cli, table, retention_hours=0, force=True)
    assert set(files) == {f for f in first if f.endswith(".parquet")}
    assert {f for f in os.listdir(table) if f.endswith(".parquet")}.isdisjoint(first)


def test_vacuum_dry_run_simple_table_retention_check(cli: Cli, table: Path) -> None:
    """The default retention is a week; shorter is refused without --force, and nothing changes."""
    write_deltalake(table, ROWS)
    write_deltalake(table, ROWS, mode="overwrite")
    backdate(table)
    before = snapshot(table)
    assert cli("delta", "gc", str(table), "--dry-run", "--json").json()["files"] == oracle(table) == []
    result = cli("delta", "gc", str(table), "--retention", "167h", ok=False)
    one_error(result, "shorter than the table's delta.deletedFileRetentionDuration", "7d", "--force")
    one_error(cli("delta", "gc", str(table), "--retention", "-1h", ok=False))
    with pytest.raises(Exception, match="168 hours, got 167 hours"):
        oracle(table, 167)
    assert cli("delta", "gc", str(table), "--retention", "169h", "--dry-run", "--json").json()["files"] == oracle(
        table, 169
    )
    assert snapshot(table) == before


def test_table_retention_property_is_the_default_and_the_floor(cli: Cli, table: Path) -> None:
    write_deltalake(table, ROWS, configuration={"delta.deletedFileRetentionDuration": "interval 2 days"})
    write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "three-days-old.parquet", 3 * 86_400)
    stray(table, "one-day-old.parquet", 86_400)
    assert same_as_delta_rs(cli, table) == ["three-days-old.parquet"]
    one_error(cli("delta", "gc", str(table), "--retention", "47h", ok=False), "2d")
    assert cli("delta", "gc", str(table), "--retention", "48h", "--dry-run", "--json").json()["files"] == []


def test_vacuum_keep_versions(cli: Cli, table: Path) -> None:
    """Files a kept version reads stay; without --keep-versions they go."""
    for _ in range(5):
        write_deltalake(table, ROWS, mode="overwrite")
    everything = oracle(table, 0, True)
    kept = oracle(table, 0, True, [2, 3])
    assert len(kept) < len(everything)
    assert cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, None)).json()["files"] == everything
    same_as_delta_rs(cli, table, 0, True, [3, 2])
    assert DeltaTable(str(table), version=2).to_pyarrow_table().num_rows == ROWS.num_rows
    assert DeltaTable(str(table), version=3).to_pyarrow_table().num_rows == ROWS.num_rows


def test_vacuum_keep_versions_from_history_order(cli: Cli, table: Path) -> None:
    for _ in range(4):
        write_deltalake(table, ROWS, mode="overwrite")
    history = [c["version"] for c in DeltaTable(str(table)).history()]
    dry = cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, history)).json()
    assert dry["files"] == oracle(table, 0, True, sorted(history)) == []


def test_a_version_the_log_cannot_give_is_an_error(cli: Cli, table: Path) -> None:
    write_deltalake(table, ROWS)
    one_error(cli("delta", "gc", str(table), "--keep-versions", "7", "--dry-run", ok=False), "version 7")
    one_error(cli("delta", "gc", str(table), "--keep-versions", "a,b", "--dry-run", ok=False), "--keep-versions")


@pytest.mark.parametrize("partitioned", [False, True])
def test_vacuum_full_mode_finds_stray_files(cli: Cli, table: Path, partitioned: bool) -> None:
    """Files the log never named (a failed write's leftovers) go in full mode, when old enough."""
    by = ["deleted"] if partitioned else None
    write_deltalake(table, ROWS, partition_by=by, mode="overwrite")
    write_deltalake(table, ROWS, partition_by=by, mode="overwrite")
    where = "deleted=false/" if partitioned else ""
    stray(table, f"{where}stray_file_not_in_log.parquet")
    stray(table, f"{where}young_stray.parquet", 60)
    files = same_as_delta_rs(cli, table, retention_hours=1, force=True)
    assert f"{where}stray_file_not_in_log.parquet" in files
    assert (table / f"{where}young_stray.parquet").exists()


def test_vacuum_full_keeps_recent_tombstones_readable_for_time_travel(cli: Cli, table: Path) -> None:
    """A file removed inside the retention stays even if it was written long ago."""
    write_deltalake(table, ROWS, partition_by=["deleted"], mode="append")
    backdate(table)
    write_deltalake(table, ROWS, partition_by=["deleted"], mode="append")
    write_deltalake(table, ROWS, partition_by=["deleted"], mode="append")
    dt = DeltaTable(str(table))
    before_optimize = dt.version()
    dt.optimize.compact(min_commit_interval=timedelta(minutes=10))
    same_as_delta_rs(cli, table)
    assert DeltaTable(str(table), version=before_optimize).to_pyarrow_table().num_rows == 3 * ROWS.num_rows


def test_issue_3745_checkpoint_then_append(cli: Cli, table: Path) -> None:
    data = pa.table({"x": pa.array(range(100), pa.int32())})
    write_deltalake(table, data, mode="append")
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(table, data, mode="append")
    same_as_delta_rs(cli, table)
    same_as_delta_rs(cli, table, 0, True)


def test_vacuum_null_partition(cli: Cli, table: Path) -> None:
    data = pa.table({"player": pa.array([3, 4], pa.int64()), "year": pa.array([2023, None], pa.int64())})
    write_deltalake(table, data, partition_by=["year"], mode="append")
    write_deltalake(table, data, partition_by=["year"], mode="append")
    DeltaTable(str(table)).optimize.compact()
    assert len(same_as_delta_rs(cli, table, 0, True)) == 4


def test_partition_values_that_need_escaping(cli: Cli, table: Path) -> None:
    """delta-rs writes `part=a%20b/` folders and names them `part=a%2520b/` in the log."""
    data = pa.table({"x": [1, 2, 3, 4], "part": ["a b", "c%d", "e=f:g", "ü/ß"]})
    write_deltalake(table, data, partition_by=["part"])
    write_deltalake(table, data, partition_by=["part"], mode="overwrite")
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(table, data, partition_by=["part"], mode="overwrite")
    assert len(same_as_delta_rs(cli, table, 0, True)) == 8


@pytest.mark.parametrize("columns", [["_p"], ["_p", "_q"], [".p", "q"]])
def test_hidden_paths_as_delta_rs_skips_them(cli: Cli, table: Path, columns: list[str]) -> None:
    data = pa.table({"x": [1, 2], **{c: ["a", "b"] for c in columns}})
    write_deltalake(table, data, partition_by=columns)
    for key in (
        "_SUCCESS", ".hidden/x", "_foo/x", "_pq/x", "_p=zz/x", "_q=1/x", ".p=1/x", "sub/_x.parquet", "sub/.y",
        "_change_data/c.parquet", "_delta_index/i.bin", "_delta_log/stray.json", "_delta_log/_sidecars/s.parquet",
        "a b.parquet", "x%y.parquet", "ü.parquet", "{a}.parquet", "h#x", "c:d", "deep/a/b/c/d.parquet",
    ):  # fmt: skip
        stray(table, key)
    same_as_delta_rs(cli, table, 1, True)
    assert (table / "_foo/x").exists() and (table / "_delta_log/stray.json").exists()


def test_removes_counted_per_action_and_files_already_gone(cli: Cli, table: Path) -> None:
    """delta-rs lists an expired remove per remove action, whether or not the file is still
    there; a remove with no deletionTimestamp counts as removed at the epoch."""
    write_deltalake(table, ROWS)
    log = table / "_delta_log"
    add = next(json.loads(line)["add"] for line in (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in line)
    write_deltalake(table, ROWS, mode="overwrite")  # removes the first file (now)
    _commit(log, 2, [{"add": add}])  # re-adds it
    _commit(log, 3, [{"remove": {"path": add["path"], "dataChange": True, "size": add["size"]}}])
    write_deltalake(table, ROWS, mode="overwrite")
    files = oracle(table, 0, True)
    assert files.count(add["path"]) == 2  # two remove actions name it (versions 1 and 3)
    dry = cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, None)).json()
    assert dry["files"] == files
    assert dry["num_candidates"] == len(set(files))
    (table / add["path"]).unlink()
    assert cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, None)).json()["files"] == oracle(
        table, 0, True
    )
    same_as_delta_rs(cli, table, 0, True)


def test_classic_checkpoint_then_commits(cli: Cli, table: Path) -> None:
    for i in range(4):
        write_deltalake(table, ROWS, mode="overwrite" if i % 2 else "append")
    DeltaTable(str(table)).create_checkpoint()
    for _ in range(2):
        write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "orphan.parquet")
    same_as_delta_rs(cli, table, 0, True)


def test_multi_part_checkpoint(cli: Cli, table: Path) -> None:
    """A checkpoint in parts (Spark writes them for big tables): every part is read; a missing
    part makes the checkpoint unusable, and the commits before it are read instead."""
    classic = _checkpointed(table, 4)
    log, version = classic.parent, int(classic.name.split(".")[0])
    rows = pq.read_table(classic)
    half = rows.num_rows // 2
    for part, piece in enumerate((rows.slice(0, half), rows.slice(half)), start=1):
        pq.write_table(piece, log / f"{version:020d}.checkpoint.{part:010d}.0000000002.parquet")
    classic.unlink()
    (log / "_last_checkpoint").write_text(json.dumps({"version": version, "size": rows.num_rows, "parts": 2}))
    write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "orphan.parquet")
    same_as_delta_rs(cli, table, 0, True)


def test_v2_checkpoint_with_sidecars(cli: Cli, table: Path) -> None:
    """A V2 checkpoint (`N.checkpoint.<uuid>.json`) whose file actions live in sidecars."""
    write_deltalake(table, ROWS, configuration={"delta.checkpointPolicy": "v2"})
    write_deltalake(table, ROWS, mode="append")
    write_deltalake(table, ROWS, mode="overwrite")
    dt = DeltaTable(str(table))
    version = dt.version()
    log = table / "_delta_log"
    actions = [
        json.loads(line) for v in range(version + 1) for line in (log / f"{v:020d}.json").read_text().splitlines()
    ]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"],
                "writerFeatures": ["v2Checkpoint"]}  # fmt: skip
    metadata = [a["metaData"] for a in actions if "metaData" in a][-1]
    live = _live(actions)
    removes = [a["remove"] for a in actions if "remove" in a]
    sidecar = f"{uuid.uuid4()}.parquet"
    (log / "_sidecars").mkdir()
    pq.write_table(
        pa.Table.from_pylist(
            [{"add": _add_row(a), "remove": None} for a in live]
            + [{"add": None, "remove": _remove_row(r)} for r in removes],
            schema=pa.schema([("add", _ADD), ("remove", _REMOVE)]),
        ),
        log / "_sidecars" / sidecar,
    )
    size = (log / "_sidecars" / sidecar).stat().st_size
    top = log / f"{version:020d}.checkpoint.{uuid.uuid4()}.json"
    top.write_text(
        "\n".join(
            json.dumps(a)
            for a in (
                {"checkpointMetadata": {"version": version}},
                {"protocol": protocol},
                {"metaData": metadata},
                {"sidecar": {"path": sidecar, "sizeInBytes": size, "modificationTime": 0}},
            )
        )
        + "\n"
    )
    for v in range(version + 1):
        (log / f"{v:020d}.json").unlink()  # only the checkpoint can give the state now
    stray(table, "orphan.parquet")
    try:
        expected = oracle(table, 0, True)
    except Exception:  # noqa: BLE001 - a deltalake that cannot read V2 checkpoints: the rule by hand
        expected = sorted([r["path"] for r in removes] + ["orphan.parquet"])
    dry = cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, None)).json()
    assert dry["files"] == expected
    assert {a["path"] for a in live}.isdisjoint(dry["files"])


# -- beyond delta-rs -----------------------------------------------------------------------------
def test_deletion_vector_files_of_live_adds_are_kept(cli: Cli, table: Path) -> None:
    """delta-rs's full vacuum lists a live add's deletion-vector file once it is old (it only
    protects data files): lakegc keeps it, and lists everything else as delta-rs does."""
    write_deltalake(table, ROWS, configuration={"delta.enableDeletionVectors": "true"})
    log = table / "_delta_log"
    add = next(json.loads(line)["add"] for line in (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in line)
    live_dv, old_dv = uuid.uuid4(), uuid.uuid4()
    for dv in (live_dv, old_dv):
        stray(table, f"ab/deletion_vector_{dv}.bin")
    descriptor = {"storageType": "u", "pathOrInlineDv": "ab" + _z85(live_dv.bytes), "offset": 1, "sizeInBytes": 10,
                  "cardinality": 1}  # fmt: skip
    removed = {"path": add["path"], "dataChange": True, "size": add["size"], "deletionTimestamp": int(DAY_AGO * 1000)}
    _commit(log, 1, [{"remove": removed}, {"add": {**add, "deletionVector": descriptor}}])
    stray(table, "orphan.parquet")
    delta_rs = oracle(table, 0, True)
    assert f"ab/deletion_vector_{live_dv}.bin" in delta_rs
    dry = cli("delta", "gc", str(table), "--dry-run", "--json", *flags(0, True, None)).json()
    assert dry["files"] == [f for f in delta_rs if f != f"ab/deletion_vector_{live_dv}.bin"]
    assert f"ab/deletion_vector_{old_dv}.bin" in dry["files"] and "orphan.parquet" in dry["files"]
    cli("delta", "gc", str(table), "--json", *flags(0, True, None))
    assert (table / f"ab/deletion_vector_{live_dv}.bin").exists() and (table / add["path"]).exists()


def test_a_file_removed_again_inside_the_retention_stays(cli: Cli, table: Path) -> None:
    """Removed ten days ago, added back (a RESTORE), removed again today: delta-rs deletes it for
    the old remove and time travel to the version that added it back breaks; lakegc keeps it
    until its last remove is older than the retention, and lists everything else as delta-rs."""
    write_deltalake(table, ROWS)
    backdate(table)
    log = table / "_delta_log"
    add = next(json.loads(line)["add"] for line in (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in line)
    removed = {"path": add["path"], "dataChange": True, "size": add["size"]}
    _commit(log, 1, [{"remove": {**removed, "deletionTimestamp": int((time.time() - 10 * 86_400) * 1000)}}])
    _commit(log, 2, [{"add": add}])
    _commit(log, 3, [{"remove": {**removed, "deletionTimestamp": int(time.time() * 1000)}}])
    write_deltalake(table, ROWS, mode="append")
    stray(table, "orphan.parquet")
    delta_rs = oracle(table)
    assert add["path"] in delta_rs
    dry = cli("delta", "gc", str(table), "--dry-run", "--json").json()
    assert dry["files"] == [f for f in delta_rs if f != add["path"]] == ["orphan.parquet"]
    cli("delta", "gc", str(table))
    assert DeltaTable(str(table), version=2).to_pyarrow_table().num_rows == ROWS.num_rows


def test_live_files_named_oddly_or_absolutely_are_kept(cli: Cli, table: Path) -> None:
    """Adds that spell a file `./x`, `a//x` or as an absolute URI (a shallow clone's adds) keep it:
    a live file is never judged unreferenced for how its path is written."""
    write_deltalake(table, ROWS)
    for key in ("dot.parquet", "a/slashes.parquet", "absolute.parquet"):
        stray(table, key)
    spelled = ("./dot.parquet", "a//slashes.parquet", (table / "absolute.parquet").as_uri())
    adds = [
        {"add": {"path": p, "partitionValues": {}, "size": 25, "modificationTime": 0, "dataChange": True}}
        for p in spelled
    ]
    _commit(table / "_delta_log", 1, adds)
    stray(table, "orphan.parquet")
    run = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()
    assert run["files"] == ["orphan.parquet"]
    assert all((table / key).exists() for key in ("dot.parquet", "a/slashes.parquet", "absolute.parquet"))


def test_a_commit_during_the_run_keeps_its_files(env: Env, tmp_path: Path, spark, monkeypatch) -> None:  # noqa: ANN001
    """A writer commits a file the mark judged unreferenced (written before, committed after the
    table's state was read): the sweep reads the log again and keeps it."""
    from lakegc import api
    from lakegc.connectors.delta import gc as delta_gc

    table = tmp_path / "t"
    write_deltalake(table, ROWS)
    stray(table, "late.parquet")
    stray(table, "orphan.parquet")
    original = delta_gc._sweep

    def commit_then_sweep(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        _commit(table / "_delta_log", 1, [{"add": {"path": "late.parquet", "partitionValues": {}, "size": 25,
                                                    "modificationTime": 0, "dataChange": True}}])  # fmt: skip
        return original(*args, **kwargs)

    monkeypatch.setattr(delta_gc, "_sweep", commit_then_sweep)
    monkeypatch.setenv("LAKEGC_HOME", str(env.home))
    run = api.delta_gc(str(table), retention=timedelta(0), force=True, spark=spark)
    assert run.num_candidates == 2 and run.num_deleted == 1
    assert (table / "late.parquet").exists() and not (table / "orphan.parquet").exists()
    assert run.details["commits since the mark"] == 1


def test_not_a_delta_table_and_broken_logs_delete_nothing(cli: Cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    stray(plain, "x.parquet")
    one_error(cli("delta", "gc", str(plain), "--retention", "0s", "--force", ok=False), "no Delta log")
    one_error(cli("delta", "gc", str(tmp_path / "missing"), ok=False), "does not exist")

    table = tmp_path / "t"
    for _ in range(3):
        write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "orphan.parquet")
    before = snapshot(table)
    (table / "_delta_log" / f"{1:020d}.json").rename(tmp_path / "hidden.json")
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), "incomplete", "commit 1")
    (tmp_path / "hidden.json").rename(table / "_delta_log" / f"{1:020d}.json")
    (table / "_delta_log" / f"{2:020d}.json").write_text('{"add": {"path": "x", "size": 1')
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), "cannot be read")
    assert {k for k in snapshot(table) if k != f"_delta_log/{2:020d}.json"} == {
        k for k in before if k != f"_delta_log/{2:020d}.json"
    }


def test_a_corrupt_checkpoint_deletes_nothing(cli: Cli, table: Path) -> None:
    _checkpointed(table, 3).write_bytes(b"PAR1 not really")
    before = snapshot(table)
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), "cannot be read")
    assert snapshot(table) == before


def test_unknown_reader_features_are_refused(cli: Cli, table: Path) -> None:
    write_deltalake(table, ROWS)
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["somethingNew"], "writerFeatures": []}
    _commit(table / "_delta_log", 1, [{"protocol": protocol}])
    one_error(cli("delta", "gc", str(table), "--dry-run", ok=False), "somethingNew")


def test_the_deletion_guard_refuses_protected_locations(cli: Cli, env: Env, tmp_path: Path) -> None:
    """A table location holding lakegc's run folder, reached directly or through a symlink, or
    the filesystem root, is refused before anything is listed."""
    write_deltalake(env.home, ROWS)
    stray(env.home, "orphan.parquet")
    link = tmp_path / "link"
    link.symlink_to(env.home, target_is_directory=True)
    before = snapshot(env.home)
    for location in (env.home, link):
        one_error(cli("delta", "gc", str(location), "--retention", "0s", "--force", ok=False), "refusing", "run folder")
    one_error(cli("delta", "gc", "/", "--dry-run", ok=False), "refusing")
    assert {k: v for k, v in snapshot(env.home).items() if not k.startswith("runs/")} == before


def test_runs_are_recorded_and_listed(cli: Cli, tmp_path: Path) -> None:
    write_deltalake(tmp_path / "t", ROWS)
    write_deltalake(tmp_path / "t", ROWS, mode="overwrite")
    run = cli("delta", "gc", str(tmp_path / "t"), "--retention", "0s", "--force", "--json").json()
    assert run["kind"] == "delta" and run["num_deleted"] == 1 and run["files"]
    assert [r["run_id"] for r in cli("delta", "runs", "--json").json()] == [run["run_id"]]
    assert cli("delta", "show", run["run_id"], "--json").json()["num_candidates"] == 1
    shown = cli("delta", "candidates", run["run_id"], "--json").json()
    assert [c["address"] for c in shown] == run["files"] and shown[0]["reason"] == "expired remove"
    text = cli("delta", "gc", str(tmp_path / "t"), "--dry-run").stdout
    assert "delta GC run" in text


def test_a_table_on_s3(cli: Cli, bucket) -> None:  # noqa: ANN001
    opts = {"AWS_ENDPOINT_URL": bucket.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}
    opts |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    uri = f"s3://{bucket.name}/tables/events"
    write_deltalake(uri, ROWS, storage_options=opts)
    write_deltalake(uri, ROWS, mode="overwrite", storage_options=opts)
    DeltaTable(uri, storage_options=opts).create_checkpoint()  # read in ranges, a row group per task
    write_deltalake(uri, ROWS, mode="overwrite", storage_options=opts)
    bucket.put("tables/events/stray.parquet")
    expected = sorted(
        DeltaTable(uri, storage_options=opts).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
        )
    )
    assert len(expected) == 3
    assert cli("delta", "gc", uri, "--retention", "0s", "--force", "--json").json()["files"] == expected
    assert not {f"tables/events/{f}" for f in expected} & bucket.keys()
    assert DeltaTable(uri, storage_options=opts).to_pyarrow_table().num_rows == ROWS.num_rows


# -- helpers that write log entries by hand ------------------------------------------------------
def _checkpointed(table: Path, writes: int) -> Path:
    """`writes` writes (appends and overwrites in turn), then a classic checkpoint: its path."""
    for i in range(writes):
        write_deltalake(table, ROWS, mode="overwrite" if i % 2 else "append")
    dt = DeltaTable(str(table))
    dt.create_checkpoint()
    return table / "_delta_log" / f"{dt.version():020d}.checkpoint.parquet"


def _commit(log: Path, version: int, actions: list[dict]) -> None:
    lines = [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}, *actions]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def _live(actions: list[dict]) -> list[dict]:
    live: dict[str, dict] = {}
    for a in actions:
        if "add" in a:
            live[a["add"]["path"]] = a["add"]
        elif "remove" in a:
            live.pop(a["remove"]["path"], None)
    return list(live.values())


_PV = pa.map_(pa.string(), pa.string())
_ADD = pa.struct([("path", pa.string()), ("partitionValues", _PV), ("size", pa.int64()),
                  ("modificationTime", pa.int64()), ("dataChange", pa.bool_())])  # fmt: skip
_REMOVE = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
                     ("size", pa.int64())])  # fmt: skip


def _add_row(a: dict) -> dict:
    return {"path": a["path"], "partitionValues": list((a.get("partitionValues") or {}).items()), "size": a["size"],
            "modificationTime": a["modificationTime"], "dataChange": True}  # fmt: skip


def _remove_row(r: dict) -> dict:
    return {
        "path": r["path"],
        "deletionTimestamp": r.get("deletionTimestamp"),
        "dataChange": True,
        "size": r.get("size"),
    }


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(raw: bytes) -> str:
    out = ""
    for i in range(0, len(raw), 4):
        n, chunk = int.from_bytes(raw[i : i + 4], "big"), ""
        for _ in range(5):
            n, r = divmod(n, 85)
            chunk = _Z85[r] + chunk
        out += chunk
    return out


def test_z85_round_trip() -> None:
    value = uuid.uuid4()
    assert z85_uuid(_z85(value.bytes)) == value


# -- attacks: a log that names files outside its table, symlinks, stale hints ----------------------
def test_log_paths_that_climb_out_of_the_table_are_never_this_tables(cli: Cli, tmp_path: Path) -> None:
    """Remove actions naming `../victim/x`, an absolute path elsewhere, or `..` spelled with
    percent escapes (in a commit and in a checkpoint) name no file of this table: nothing outside
    is deleted, and the run goes on with the rest."""
    table, victim = tmp_path / "t", tmp_path / "victim"
    write_deltalake(table, ROWS)
    for name in ("a.parquet", "b.parquet", "c.parquet", "d.parquet"):
        stray(victim, name)
    climbing = (
        "../victim/a.parquet",
        (victim / "b.parquet").as_uri(),
        "%2E%2E/victim/c.parquet",
        "x/../../victim/d.parquet",
    )
    removes = [{"remove": {"path": p, "dataChange": True, "size": 1, "deletionTimestamp": 1}} for p in climbing]
    _commit(table / "_delta_log", 1, removes)
    DeltaTable(str(table)).create_checkpoint()  # the same removes again, in Parquet
    _commit(table / "_delta_log", 2, removes)
    stray(table, "orphan.parquet")
    before = snapshot(victim)
    run = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()
    assert run["files"] == ["orphan.parquet"]
    assert snapshot(victim) == before


def test_a_symlinked_folder_in_the_table_is_never_followed(cli: Cli, tmp_path: Path) -> None:
    """A partition folder that is a symlink to somewhere else: the listing does not enter it, and
    an expired remove naming a file through it is not deleted there: a file the listing did not
    find is never sent to delete, and the run counts it as not found."""
    table, elsewhere = tmp_path / "t", tmp_path / "elsewhere"
    write_deltalake(table, ROWS)
    stray(elsewhere, "old.parquet")
    stray(elsewhere, "unreferenced.parquet")
    (table / "p=x").symlink_to(elsewhere, target_is_directory=True)
    remove = {"path": "p=x/old.parquet", "dataChange": True, "size": 1, "deletionTimestamp": 1}
    _commit(table / "_delta_log", 1, [{"remove": remove}])
    before = snapshot(elsewhere)
    run = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()
    assert (run["num_candidates"], run["num_deleted"], run["details"]["removed files not found"]) == (0, 0, 1)
    assert snapshot(elsewhere) == before


def test_a_stale_last_checkpoint_hint_is_not_trusted(cli: Cli, table: Path) -> None:
    """`_last_checkpoint` naming a checkpoint that does not exist: the log's listing decides."""
    for _ in range(3):
        write_deltalake(table, ROWS, mode="overwrite")
    expected = oracle(table, 0, True)
    (table / "_delta_log" / "_last_checkpoint").write_text('{"version": 99, "size": 3}')
    assert cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()["files"] == expected


def test_wrong_flags_are_one_line_errors(cli: Cli, table: Path) -> None:
    write_deltalake(table, ROWS)
    one_error(cli("delta", "gc", str(table), "--retention", "soon", ok=False), "invalid duration")
    one_error(cli("delta", "gc", str(table), "--keep-versions", "-1", ok=False), "--keep-versions")
    one_error(cli("delta", "gc", str(table / "_delta_log"), "--dry-run", ok=False), "no Delta log")


# -- attacks from the review: nested tables, unknown writers, a log replaced, spellings -----------
def test_a_delta_table_nested_inside_is_refused(cli: Cli, table: Path) -> None:
    """A table inside the table's folder would be wiped (its log too): refused, nothing deleted."""
    write_deltalake(table, ROWS)
    write_deltalake(table / "sub", ROWS)
    backdate(table)
    before = snapshot(table)
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), "inside this one", "sub/")
    assert snapshot(table) == before


@pytest.mark.parametrize("feature", ["icebergCompatV2", "coordinatedCommits-preview", "somethingNewer"])
def test_writer_features_lakegc_does_not_collect_are_refused(cli: Cli, table: Path, feature: str) -> None:
    """UniForm keeps Iceberg metadata no Delta action names; coordinated commits keep the newest
    commits outside `_delta_log/`: such tables, and unknown writer features, are refused."""
    write_deltalake(table, ROWS)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", feature]}
    _commit(table / "_delta_log", 1, [{"protocol": protocol}])
    stray(table, "metadata/v1.metadata.json")
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), feature)
    assert (table / "metadata/v1.metadata.json").exists()


def test_a_log_replaced_during_the_run_deletes_nothing(env: Env, table: Path, spark, monkeypatch) -> None:  # noqa: ANN001
    """The table is dropped and recreated between the mark and the sweep (its version's commit is
    another file now): the sweep stops, nothing is deleted."""
    from lakegc import api
    from lakegc.connectors.delta import gc as delta_gc
    from lakegc.errors import LakegcError

    write_deltalake(table, ROWS)
    write_deltalake(table, ROWS, mode="overwrite")
    stray(table, "orphan.parquet")
    original = delta_gc._sweep

    def replace_then_sweep(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        shutil.rmtree(table / "_delta_log")
        write_deltalake(table, ROWS, mode="overwrite")  # another table at the same place, version 0 again
        write_deltalake(table, ROWS, mode="append")
        return original(*args, **kwargs)

    monkeypatch.setattr(delta_gc, "_sweep", replace_then_sweep)
    monkeypatch.setenv("LAKEGC_HOME", str(env.home))
    before = {k for k in snapshot(table) if not k.startswith("_delta_log/")}
    with pytest.raises(LakegcError, match="changed under the run"):
        api.delta_gc(str(table), retention=timedelta(0), force=True, spark=spark)
    assert before <= set(snapshot(table))


def test_adds_spelled_as_written_or_with_colons_keep_their_files(cli: Cli, table: Path) -> None:
    """A writer that does not escape its paths (`ts=10%3A00` is the folder's real name) and a
    relative path with `:` in its first folder: both files stay."""
    write_deltalake(table, ROWS)
    for key in ("ts=10%3A00/raw.parquet", "ts=10:00/colon.parquet"):
        stray(table, key)
    adds = [
        {"add": {"path": p, "partitionValues": {}, "size": 25, "modificationTime": 0, "dataChange": True}}
        for p in ("ts=10%3A00/raw.parquet", "ts=10:00/colon.parquet")
    ]
    _commit(table / "_delta_log", 1, adds)
    stray(table, "orphan.parquet")
    assert cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()["files"] == [
        "orphan.parquet"
    ]
    assert (table / "ts=10%3A00/raw.parquet").exists() and (table / "ts=10:00/colon.parquet").exists()


def test_absolute_adds_through_the_real_location_keep_their_files(cli: Cli, tmp_path: Path) -> None:
    """The table is run through a symlinked parent; a shallow clone's add names the real path."""
    real, link = tmp_path / "real", tmp_path / "link"
    write_deltalake(real / "t", ROWS)
    link.symlink_to(real, target_is_directory=True)
    stray(real / "t", "cloned.parquet")
    add = {"path": (real / "t" / "cloned.parquet").as_uri(), "partitionValues": {}, "size": 25,
           "modificationTime": 0, "dataChange": True}  # fmt: skip
    _commit(real / "t" / "_delta_log", 1, [{"add": add}])
    files = cli("delta", "gc", str(link / "t"), "--retention", "0s", "--force", "--json").json()["files"]
    assert files == [] and (real / "t" / "cloned.parquet").exists()


def test_a_checkpoint_without_add_paths_deletes_nothing(cli: Cli, table: Path) -> None:
    """A checkpoint whose add column lost its paths would make every file look unreferenced."""
    checkpoint = _checkpointed(table, 2)
    rows = pq.read_table(checkpoint)
    pq.write_table(rows.drop_columns(["add"]), checkpoint)
    backdate(table)
    before = snapshot(table)
    one_error(cli("delta", "gc", str(table), "--retention", "0s", "--force", ok=False), "add.path")
    assert snapshot(table) == before


def test_deletion_vectors_stay_even_when_the_newest_protocol_drops_the_feature(cli: Cli, table: Path) -> None:
    """A remove inside the retention names a file with a deletion vector; the newest protocol no
    longer lists deletionVectors: time travel still needs the vector's file, so it stays."""
    write_deltalake(table, ROWS, configuration={"delta.enableDeletionVectors": "true"})
    log = table / "_delta_log"
    add = next(json.loads(line)["add"] for line in (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in line)
    dv = uuid.uuid4()
    stray(table, f"deletion_vector_{dv}.bin")
    descriptor = {
        "storageType": "u",
        "pathOrInlineDv": _z85(dv.bytes),
        "offset": 1,
        "sizeInBytes": 10,
        "cardinality": 1,
    }
    removed = {
        "path": add["path"],
        "dataChange": True,
        "size": add["size"],
        "deletionTimestamp": int(time.time() * 1000),
    }
    _commit(log, 1, [{"remove": removed}, {"add": {**add, "deletionVector": descriptor}}])
    _commit(log, 2, [{"remove": {**removed, "deletionVector": descriptor}}])
    _commit(log, 3, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}])
    run = cli("delta", "gc", str(table), "--retention", "1h", "--force", "--json").json()
    assert f"deletion_vector_{dv}.bin" not in run["files"]
    assert (table / f"deletion_vector_{dv}.bin").exists()


def test_malformed_metadata_is_one_error(cli: Cli, table: Path) -> None:
    write_deltalake(table, ROWS)
    metadata = json.loads(
        next(line for line in (table / "_delta_log" / f"{0:020d}.json").read_text().splitlines() if "metaData" in line)
    )["metaData"]
    _commit(table / "_delta_log", 1, [{"metaData": {**metadata, "partitionColumns": "deleted"}}])
    one_error(cli("delta", "gc", str(table), "--dry-run", ok=False), "malformed")
    _commit(
        table / "_delta_log",
        2,
        [
            {
                "metaData": {
                    **metadata,
                    "configuration": {"delta.deletedFileRetentionDuration": "interval 99999999999 days"},
                }
            }
        ],
    )
    one_error(cli("delta", "gc", str(table), "--dry-run", ok=False), "deletedFileRetentionDuration")


def test_checkpoints_on_s3_are_read_in_ranges() -> None:
    """A Parquet file read through ranged reads fetches its footer and the columns asked for, not
    the whole file (a checkpoint of millions of adds never comes whole to the driver)."""
    import io as _io

    from lakegc.connectors.delta.actions import _Ranged

    big = pa.table(
        {
            "add": [{"path": f"p/{i:08d}.parquet"} for i in range(50_000)],
            "stats": [uuid.uuid4().hex * 4 for _ in range(50_000)],
        }
    )
    sink = _io.BytesIO()
    pq.write_table(big, sink, row_group_size=25_000)
    data, fetched = sink.getvalue(), []

    def read(start: int, length: int) -> bytes:
        fetched.append(length)
        return data[start : start + length]

    file = pq.ParquetFile(_Ranged(read, len(data)))
    assert file.read_row_groups([1], columns=["add.path"]).num_rows == 25_000
    assert sum(fetched) < len(data) / 4


def test_a_delete_budget_stops_short_and_the_next_run_deletes_the_rest(cli: Cli, table: Path) -> None:
    """--max-deletes: the run deletes that many, says how many are left (exit 0), lists only what
    it deleted; the next run, paced by --max-delete-rate, deletes the rest; the table reads."""
    write_deltalake(table, ROWS)
    for i in range(10):
        stray(table, f"orphan-{i}.parquet")
    run = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--max-deletes", "4", "--json").json()
    assert (run["num_deleted"], run["num_stopped"], run["num_candidates"]) == (4, 6, 10)
    assert "--max-deletes" in run["error"] and run["state"] == "swept"
    assert len(run["files"]) == 4 and not any((table / f).exists() for f in run["files"])
    assert sum((table / f"orphan-{i}.parquet").exists() for i in range(10)) == 6
    again = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--max-delete-rate", "50", "--json").json()
    assert (again["num_deleted"], again["num_stopped"]) == (6, 0) and not again["error"]
    assert not any((table / f"orphan-{i}.parquet").exists() for i in range(10))
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == ROWS.num_rows
    one_error(cli("delta", "gc", str(table), "--max-delete-rate", "0", ok=False), "--max-delete-rate")


def test_budgeted_runs_count_each_file_and_its_bytes_once(cli: Cli, table: Path) -> None:
    """The review's case (issue 33, finding 3): files removed by overwrites, collected over two
    budgeted runs. Each file is deleted and counted once; the bytes over both runs add up to what
    the files held; files an earlier run deleted are listed as delta-rs lists them, never counted."""
    for i in range(3):
        write_deltalake(table, ROWS, mode="overwrite" if i else "append")
    removed = {f: (table / f).stat().st_size for f in oracle(table, 0, True)}
    stray(table, "orphan.parquet")
    removed["orphan.parquet"] = (table / "orphan.parquet").stat().st_size
    first = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--max-deletes", "1", "--json").json()
    assert (first["num_deleted"], first["num_candidates"]) == (1, len(removed))
    again = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()
    assert again["num_deleted"] == len(removed) - 1 and again["num_candidates"] == len(removed) - 1
    assert first["bytes_deleted"] + again["bytes_deleted"] == sum(removed.values())
    assert again["details"]["removed files not found"] == (1 if first["files"] != ["orphan.parquet"] else 0)
    assert not any((table / f).exists() for f in removed)
    third = cli("delta", "gc", str(table), "--retention", "0s", "--force", "--json").json()
    assert (third["num_candidates"], third["num_deleted"], third["bytes_deleted"]) == (0, 0, 0)
    assert third["files"] == oracle(table, 0, True)  # delta-rs still lists the removes' files
    assert third["details"]["removed files not found"] == len(removed) - 1
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == ROWS.num_rows
