"""The restore window and delete budgets (docs/safety.md, "The restore window"; docs/cli.md,
`gc restore`, `gc purge`, `--max-deletes`), through the CLI on a real lake and local Spark.

A repository whose main branch overwrote `tables/orders/part-N` and `logs/day-N` long ago holds
expired versions; with `quarantine_days` a run moves them into its quarantine, where reads answer
410, `gc restore` brings them (or those matching a glob) back, and `gc purge` (or the next
`gc run` after the window) deletes them for good. Each attack on it is kept as a test: a
tampered record naming a live object, a symlink planted in the quarantine, a restore after a
purge, a missing quarantined object, bad flags.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import CliResult, Env, age_objects, one_error, snapshot

from lakegc.engine.delete import MIN_RATE, Pacing, _Pace
from lakegc.timeutil import utcnow

REPO = "lakegc://repo"
RULES = {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 7}], "quarantine_days": 3}
Cli = Callable[..., CliResult]
N = 6  # paths of each kind


@pytest.fixture
def lake(env: Env, cli: Cli, put, spark) -> dict[str, Any]:
    """main: c1 (30 days ago) writes v1 of every path, c2 (20 days ago) overwrites all with v2, c3
    (now) adds `keep`. c1 lapsed 10 days ago: its v1 objects are the garbage."""
    ns = env.namespace()
    cli("repo", "create", REPO, str(ns))
    cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(RULES))
    paths = [f"tables/orders/part-{i}" for i in range(N)] + [f"logs/day-{i}" for i in range(N)]
    old = {p: put(f"{REPO}/main/{p}", f"v1 {p}")["physical_address"] for p in paths}
    c1 = commit(cli, "c1", 30)
    for p in paths:
        put(f"{REPO}/main/{p}", f"v2 {p}")
    commit(cli, "c2", 20)
    put(f"{REPO}/main/keep", "keep")
    commit(cli, "c3", 0)
    age_objects(ns, utcnow() - timedelta(days=40))
    return {"ns": ns, "old": old, "c1": c1, "paths": paths}


def commit(cli: Cli, message: str, days_ago: float) -> str:
    when = (utcnow() - timedelta(days=days_ago)).isoformat()
    return cli("commit", f"{REPO}/main", "-m", message, "--date", when, "--json").json()["id"]


def key(address: str) -> str:
    return address.split("/ns/", 1)[1]


def data(ns: Path) -> set[str]:
    return {k for k in snapshot(ns) if k.startswith("data/")}


def quarantined(ns: Path, run_id: str) -> set[str]:
    folder = ns / "_lakegc" / "quarantine" / run_id
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def run(cli: Cli, *args: str, ok: bool = True) -> CliResult:
    return cli("gc", "run", REPO, "--min-age", "1h", *args, "--json", ok=ok)


def reads(cli: Cli, lake: dict[str, Any], path: str) -> CliResult:
    return cli("fs", "cat", f"{REPO}/{lake['c1']}/{path}", ok=False)


def test_a_run_with_a_window_quarantines_reads_answer_410_and_restore_brings_them_back(cli: Cli, lake) -> None:
    ns, old = lake["ns"], lake["old"]
    live_before = {k: v for k, v in snapshot(ns).items() if k.startswith("data/") and k not in map(key, old.values())}
    swept = run(cli).json()
    assert swept["state"] == "swept" and swept["num_failed"] == 0
    assert (swept["num_moved"], swept["num_deleted"], swept["num_restored"], swept["num_purged"]) == (len(old), 0, 0, 0)
    assert swept["quarantine_until"] is not None
    until = swept["quarantine_until"]
    assert timedelta(days=3) - timedelta(minutes=5) < (_at(until) - utcnow()) <= timedelta(days=3)
    moved = {key(a) for a in old.values()}
    assert quarantined(ns, swept["run_id"]) == moved
    assert not (data(ns) & moved)
    gone = reads(cli, lake, "logs/day-0")
    assert gone.exit_code != 0 and "gone" in gone.stderr and "410" in gone.stderr
    assert {k: v for k, v in snapshot(ns).items() if k in live_before} == live_before  # live objects untouched
    shown = cli("gc", "show", REPO, swept["run_id"]).stdout
    assert "moved to the restore window" in shown and "restore window" in shown and "purge due" in shown
    one = old["logs/day-0"]
    explained = cli("gc", "explain", REPO, "--address", one, "--min-age", "1h", "--json").json()
    assert (explained["verdict"], explained["deleted_by"]) == ("deleted", swept["run_id"])

    restored = cli("gc", "restore", REPO, swept["run_id"], "--json").json()
    assert (restored["num_restored"], restored["num_missing"]) == (len(old), 0)
    assert reads(cli, lake, "logs/day-0").stdout == "v1 logs/day-0"
    assert quarantined(ns, swept["run_id"]) == set() and moved <= data(ns)
    record = cli("gc", "show", REPO, swept["run_id"], "--json").json()
    assert record["restored"][0]["num_restored"] == len(old) and record["restored"][0]["path"] is None
    explained = cli("gc", "explain", REPO, "--address", one, "--min-age", "1h", "--json").json()
    assert (explained["verdict"], explained["deleted_by"]) == ("collect", None)  # back, and garbage still

    again = run(cli).json()  # the restored objects are garbage still: the next run (clean) takes them again
    assert again["mode"] == "clean" and "restored" in again["mode_reason"]
    assert again["num_moved"] == len(old) and quarantined(ns, again["run_id"]) == moved


def test_restore_by_glob_brings_back_only_what_matches_a_path_or_an_address(cli: Cli, lake) -> None:
    ns, old = lake["ns"], lake["old"]
    swept = run(cli).json()
    done = cli("gc", "restore", REPO, swept["run_id"], "--path", "tables/orders/**", "--json").json()
    assert done["num_restored"] == N
    orders = {key(a) for p, a in old.items() if p.startswith("tables/orders/")}
    assert quarantined(ns, swept["run_id"]) == {key(a) for a in old.values()} - orders
    assert reads(cli, lake, "tables/orders/part-1").stdout == "v1 tables/orders/part-1"
    assert reads(cli, lake, "logs/day-1").exit_code != 0
    one = key(old["logs/day-2"])
    by_address = cli("gc", "restore", REPO, swept["run_id"][:12], "--path", one, "--json").json()
    assert by_address["num_restored"] == 1 and reads(cli, lake, "logs/day-2").stdout == "v1 logs/day-2"
    one_error(cli("gc", "restore", REPO, swept["run_id"], "--path", "nothing/**", ok=False), "matches")


def test_purge_deletes_only_quarantines_whose_window_passed_and_restore_after_it_names_what_is_gone(
    cli: Cli, lake
) -> None:
    ns, old = lake["ns"], lake["old"]
    swept = run(cli, "--quarantine", "2s").json()
    assert cli("gc", "purge", REPO, "--json").json() == {"repository": "repo", "purged": [], "num_purged": 0}
    assert quarantined(ns, swept["run_id"]) == {key(a) for a in old.values()}
    time.sleep(2.5)
    purged = cli("gc", "purge", REPO, "--json").json()
    assert purged["num_purged"] == len(old) and purged["purged"][0]["run_id"] == swept["run_id"]
    assert quarantined(ns, swept["run_id"]) == set()
    record = cli("gc", "show", REPO, swept["run_id"], "--json").json()
    assert record["purged_at"] is not None
    assert (record["num_moved"], record["num_restored"], record["num_purged"]) == (len(old), 0, len(old))
    assert record["bytes_purged"] == record["bytes_moved"] > 0
    report = (Path(record["location"].removeprefix("file://")) / "report.html").read_text()
    assert f"reclaimed: {len(old)} objects purged from the restore window" in report
    line = one_error(cli("gc", "restore", REPO, swept["run_id"], ok=False), "purged", "gone")
    assert swept["run_id"] in line and f"{len(old)} object(s)" in line
    assert cli("gc", "purge", REPO, "--json").json()["num_purged"] == 0  # purged once


def test_every_gc_run_purges_expired_quarantines_first(cli: Cli, lake, put) -> None:
    ns = lake["ns"]
    first = run(cli, "--quarantine", "1s").json()
    time.sleep(1.5)
    second = run(cli).json()  # nothing new to collect; the first run's window has passed
    assert second["state"] == "swept" and quarantined(ns, first["run_id"]) == set()
    assert cli("gc", "show", REPO, first["run_id"], "--json").json()["purged_at"] is not None


def test_a_purge_that_fails_never_stops_a_gc_run_and_leaves_the_quarantine_for_the_next(cli: Cli, lake) -> None:
    ns = lake["ns"]
    first = run(cli, "--quarantine", "1s").json()
    records = ns / "_lakegc" / "gc" / first["run_id"] / "deleted"
    saved = {p: p.read_bytes() for p in records.rglob("*.parquet")}
    for part in saved:
        part.write_bytes(b"not parquet")  # the purge cannot read what the run moved
    time.sleep(1.5)
    second = cli("gc", "run", REPO, "--min-age", "1h", "--json")
    assert second.json()["state"] == "swept" and "purging quarantine failed" in second.stderr
    assert quarantined(ns, first["run_id"]) == {key(a) for a in lake["old"].values()}  # kept, whole
    assert cli("gc", "show", REPO, first["run_id"], "--json").json()["purged_at"] is None
    for part, data in saved.items():
        part.write_bytes(data)
    assert cli("gc", "purge", REPO, "--json").json()["num_purged"] == len(lake["old"])
    assert quarantined(ns, first["run_id"]) == set()


def test_a_sweep_that_fails_after_moving_keeps_its_window_restore_and_purge(
    cli: Cli, lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window opens before the first move: objects a failed sweep moved can be restored, and
    are purged once it passes (not stranded in a quarantine no purge looks at)."""
    import lakegc.repogc.job as job

    real_sweep = job.sweep

    def moves_then_fails(*args: Any, **kwargs: Any) -> Any:
        real_sweep(*args, **kwargs)
        raise RuntimeError("the driver failed after the moves")

    monkeypatch.setattr(job, "sweep", moves_then_fails)
    failed = run(cli, "--quarantine", "2s", ok=False)
    assert failed.exit_code == 1
    monkeypatch.setattr(job, "sweep", real_sweep)
    record = cli("gc", "runs", REPO, "--json").json()[0]
    assert record["state"] == "failed" and record["quarantine_until"] is not None
    moved = {key(a) for a in lake["old"].values()}
    assert quarantined(lake["ns"], record["run_id"]) == moved
    done = cli("gc", "restore", REPO, record["run_id"], "--path", "logs/**", "--json").json()
    assert done["num_restored"] == N
    time.sleep(2.5)
    assert cli("gc", "purge", REPO, "--json").json()["num_purged"] == N
    assert quarantined(lake["ns"], record["run_id"]) == set()


def test_a_window_of_zero_deletes_at_once_and_restore_says_there_is_nothing(cli: Cli, lake) -> None:
    swept = run(cli, "--quarantine", "0s").json()
    assert swept["quarantine_until"] is None and swept["num_deleted"] == len(lake["old"])
    assert not (lake["ns"] / "_lakegc" / "quarantine").exists()
    one_error(cli("gc", "restore", REPO, swept["run_id"], ok=False), "no restore window")


def test_a_quarantined_object_that_went_missing_is_named_and_the_rest_restored(cli: Cli, lake) -> None:
    ns, old = lake["ns"], lake["old"]
    swept = run(cli).json()
    lost = key(old["logs/day-3"])
    (ns / "_lakegc" / "quarantine" / swept["run_id"] / lost).unlink()
    line = one_error(cli("gc", "restore", REPO, swept["run_id"], ok=False), "gone")
    assert lost in line and f"{len(old) - 1} restored" in line
    assert {key(a) for a in old.values()} - {lost} <= data(ns)


# -- attacks ----------------------------------------------------------------------------------------
def test_a_tampered_record_naming_a_live_object_restores_nothing_over_it_and_purges_nothing_of_it(
    cli: Cli, lake
) -> None:
    """A record in the run's deleted/ claims a live object was quarantined: restore finds nothing
    of it in the quarantine (and never writes over an address), purge deletes only inside the
    quarantine folder."""
    ns = lake["ns"]
    swept = run(cli, "--quarantine", "1s").json()
    live = next(k for k in data(ns) if not k.startswith("_"))
    content = (ns / live).read_bytes()
    forged = pa.table(
        {
            "address": [live, "../outside", "_lakegc/gc/x"],
            "size": [1, 1, 1],
            "mtime": pa.array([utcnow()] * 3, pa.timestamp("us", tz="UTC")),
            "reason": ["forged"] * 3,
            "deleted": [True] * 3,
            "error": pa.array([None] * 3, pa.string()),
        }
    )
    pq.write_table(forged, ns / "_lakegc" / "gc" / swept["run_id"] / "deleted" / "batch-forged.parquet")
    (ns.parent / "outside").write_bytes(b"precious")
    line = one_error(cli("gc", "restore", REPO, swept["run_id"], "--json", ok=False), "gone", "../outside")
    assert "_lakegc/gc/x" in line  # named, never moved; the live object is at its address already: left as it is
    assert (ns / live).read_bytes() == content
    time.sleep(1.5)
    cli("gc", "purge", REPO)
    assert (ns / live).read_bytes() == content and (ns.parent / "outside").read_bytes() == b"precious"
    assert (ns / "_lakegc" / "gc" / swept["run_id"] / "summary.json").exists()


def test_a_symlink_planted_in_a_quarantine_is_never_followed_by_a_purge(cli: Cli, lake) -> None:
    ns = lake["ns"]
    swept = run(cli, "--quarantine", "1s").json()
    precious = ns.parent / "precious"
    precious.mkdir()
    (precious / "file").write_bytes(b"keep me")
    folder = ns / "_lakegc" / "quarantine" / swept["run_id"]
    os.symlink(precious, folder / "data" / "linked-dir")
    os.symlink(precious / "file", folder / "linked-file")
    time.sleep(1.5)
    cli("gc", "purge", REPO, ok=False)
    assert (precious / "file").read_bytes() == b"keep me"


def test_bad_flags_are_one_line_errors_and_change_nothing(cli: Cli, lake) -> None:
    before = snapshot(lake["ns"])
    one_error(run(cli, "--quarantine", "soon", ok=False), "duration")
    one_error(run(cli, "--quarantine", "-1d", ok=False), "-1d")
    one_error(run(cli, "--max-delete-rate", "0", ok=False), "max-delete-rate")
    assert cli("gc", "run", REPO, "--max-deletes", "-1", ok=False).exit_code != 0
    one_error(cli("gc", "restore", REPO, "nosuchrun", ok=False), "nosuchrun")
    bad = {**RULES, "quarantine_days": -1}
    one_error(cli("gc", "set-config", REPO, "-f", "-", input=json.dumps(bad), ok=False), "quarantine_days")
    assert snapshot(lake["ns"]) == before


# -- budgets ----------------------------------------------------------------------------------------
def test_max_deletes_stops_the_sweep_and_gc_sweep_continues_it(cli: Cli, lake) -> None:
    ns, old = lake["ns"], lake["old"]
    garbage = {key(a) for a in old.values()}
    stopped = cli("gc", "run", REPO, "--min-age", "1h", "--quarantine", "0s", "--max-deletes", "5")
    assert "gc sweep lakegc://repo" in stopped.stdout  # how to go on
    first = cli("gc", "runs", REPO, "--json").json()[0]
    assert first["state"] == "sweeping" and first["num_deleted"] == 5 and first["num_stopped"] == len(old) - 5
    assert "--max-deletes" in first["error"]
    assert len(garbage & data(ns)) == len(old) - 5
    more = cli("gc", "sweep", REPO, first["run_id"], "--max-deletes", "4", "--json").json()
    assert more["state"] == "sweeping" and more["num_deleted"] == 9 and more["num_stopped"] == len(old) - 9
    rest = cli("gc", "sweep", REPO, first["run_id"], "--json").json()
    assert rest["state"] == "swept" and rest["num_deleted"] == len(old) and rest["error"] is None
    assert not (garbage & data(ns))
    assert run(cli).json()["mode"] == "incremental"  # a finished run is a base again


def test_a_rate_limited_sweep_takes_at_least_the_time_the_rate_allows(cli: Cli, lake) -> None:
    swept = run(cli, "--quarantine", "0s", "--max-delete-rate", "4").json()
    assert swept["state"] == "swept" and swept["num_deleted"] == len(lake["old"])
    sweep_s = next(s for phase, s in swept["phases"].items() if "deleting" in phase)
    # 12 objects at 4 a second over 2 tasks (2 a second each, the first request at once): >= 2.5 s
    assert sweep_s >= 2.5, swept["phases"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_task_paces_itself_at_its_share_and_halves_under_throttling_then_recovers() -> None:
    clock = FakeClock()
    pace = _Pace(Pacing(rate=100.0, tasks=4), clock=clock, sleep=clock.sleep)
    assert pace.rate == 25.0 and pace.batch(1_000) == 25
    for _ in range(4):
        pace.wait(25)
    assert clock.now == pytest.approx(3.0)  # 100 keys at 25 a second, the first request at once
    pace.went(25, 0.1, throttled=True)
    assert pace.rate == 12.5 and pace.slowdowns == 1
    pace.went(12, 0.1, throttled=True)
    assert pace.rate == 6.25
    for _ in range(10):
        pace.went(6, 0.1, throttled=False)
    assert pace.rate == 25.0  # back to its share, never above


def test_a_task_without_a_limit_slows_down_when_throttled_and_becomes_unbounded_again() -> None:
    clock = FakeClock()
    pace = _Pace(Pacing(), clock=clock, sleep=clock.sleep)
    assert pace.rate is None and pace.batch(5_000) == 1_000
    pace.went(1_000, 0.5, throttled=True)  # 2,000 a second observed: halved
    assert pace.rate == 1_000.0 and clock.slept  # and a jittered pause
    for _ in range(3):
        pace.went(10, 1.0, throttled=True)
    assert pace.rate >= MIN_RATE
    while pace.rate is not None:
        pace.went(int(pace.rate), 0.01, throttled=False)
    assert pace.batch(5_000) == 1_000


def _at(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


# -- the record says what happened (issue 33, finding 2) ---------------------------------------------
def test_a_run_that_only_moved_objects_says_so_in_every_record(cli: Cli, lake, env: Env) -> None:
    """Moved into the window is not deleted: gc runs, gc show, --json and report.html all say
    moved, and what it holds; nothing claims bytes reclaimed before a purge."""
    old = lake["old"]
    swept = run(cli).json()
    moved_bytes = swept["bytes_moved"]
    assert (swept["num_moved"], swept["num_deleted"], swept["bytes_deleted"]) == (len(old), 0, 0) and moved_bytes > 0
    table = cli("gc", "runs", REPO).stdout
    assert "RESTORE WINDOW" in table and f"{len(old)} moved, 0 restored, 0 purged" in table
    report = (Path(swept["location"].removeprefix("file://")) / "report.html").read_text()
    assert f"moved to the restore window: {len(old)} objects" in report and "reclaimed" not in report
    shown = cli("gc", "show", REPO, swept["run_id"]).stdout
    assert f"{len(old)} (" in shown and "in the window" in shown


def test_restoring_the_same_objects_again_counts_each_once(cli: Cli, lake) -> None:
    """The review's sequence: restore by glob (6), then whole (the other 6), then whole again (0):
    the record ends at 12 restored for 12 moved, and the repeats say they were restored before."""
    old = lake["old"]
    swept = run(cli).json()
    first = cli("gc", "restore", REPO, swept["run_id"], "--path", "logs/**", "--json").json()
    assert (first["num_restored"], first["num_already_restored"], first["num_missing"]) == (N, 0, 0)
    second = cli("gc", "restore", REPO, swept["run_id"], "--json").json()
    assert (second["num_restored"], second["num_already_restored"], second["num_missing"]) == (N, N, 0)
    third = cli("gc", "restore", REPO, swept["run_id"])
    assert "Restored 0 object(s)" in third.stdout and f"{len(old)} were restored before" in third.stdout
    record = cli("gc", "show", REPO, swept["run_id"], "--json").json()
    assert (record["num_moved"], record["num_restored"], record["num_purged"]) == (len(old), len(old), 0)
    assert record["bytes_restored"] == record["bytes_moved"]
    assert [r["num_restored"] for r in record["restored"]] == [N, N, 0]


def test_a_missing_object_is_named_even_after_an_earlier_restore(cli: Cli, lake) -> None:
    """An object no restore put back and no longer in the quarantine is gone: named in the error,
    counted as missing, never as restored."""
    ns, old = lake["ns"], lake["old"]
    swept = run(cli).json()
    cli("gc", "restore", REPO, swept["run_id"], "--path", "tables/**")
    lost = key(old["logs/day-3"])
    (ns / "_lakegc" / "quarantine" / swept["run_id"] / lost).unlink()
    line = one_error(cli("gc", "restore", REPO, swept["run_id"], ok=False), "gone")
    assert lost in line and f"{N - 1} restored" in line
    record = cli("gc", "show", REPO, swept["run_id"], "--json").json()
    assert record["num_restored"] == 2 * N - 1


def test_refusals_that_need_no_spark_come_before_it(cli: Cli, lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """gc restore of a run without a window (or purged) is refused without starting Spark."""
    import lakegc.repogc.job as job

    swept = run(cli, "--quarantine", "0s").json()
    windowed = run(cli).json()

    def no_spark(*_: Any, **__: Any) -> Any:
        raise AssertionError("Spark started for a restore that cannot happen")

    monkeypatch.setattr(job, "_start_spark", no_spark)
    one_error(cli("gc", "restore", REPO, swept["run_id"], ok=False), "no restore window")
    one_error(cli("gc", "restore", REPO, windowed["run_id"], "--path", "logs/[", ok=False), "invalid glob")


def test_a_restore_killed_after_its_records_is_counted_by_the_next(cli: Cli, lake, monkeypatch) -> None:
    """The counts come from the run's records, never by adding to the record: a restore that dies
    after moving objects back and writing their records, before the run's record is updated, is
    counted by the next restore, and the record never says more than it moved."""
    from lakegc.engine.recorder import Recorder

    old = lake["old"]
    swept = run(cli).json()
    real_update = Recorder.update

    def dies(self, run):  # type: ignore[no-untyped-def]
        raise RuntimeError("killed before the record was updated")

    monkeypatch.setattr(Recorder, "update", dies)
    assert cli("gc", "restore", REPO, swept["run_id"], "--path", "logs/**", ok=False).exit_code == 1
    monkeypatch.setattr(Recorder, "update", real_update)
    assert cli("gc", "show", REPO, swept["run_id"], "--json").json()["num_restored"] == 0  # not updated
    done = cli("gc", "restore", REPO, swept["run_id"], "--json").json()
    assert (done["num_restored"], done["num_already_restored"]) == (N, N)
    record = cli("gc", "show", REPO, swept["run_id"], "--json").json()
    assert (record["num_moved"], record["num_restored"]) == (len(old), len(old))
    assert record["bytes_restored"] == record["bytes_moved"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_runs_restores_purges_and_sweeps_keep_the_counts_equal_to_the_storage(cli: Cli, lake, seed: int) -> None:
    """Random sequences of gc run (windows of 0s, 1s and 1d, some stopped by a budget), gc sweep,
    gc restore (whole and by glob) and gc purge. After every step, for every run, the record's
    counts are what the storage holds: its quarantine folder holds num_in_window objects of
    bytes_in_window bytes, and across runs every garbage object is in exactly one place (back at
    its address, in one quarantine, or gone), gone ones as many as the records deleted and purged."""
    import random

    rng = random.Random(seed)
    ns, old = lake["ns"], lake["old"]
    sizes = {key(a): len(f"v1 {p}") for p, a in old.items()}
    globs = ["logs/**", "tables/**", "logs/day-1", "tables/orders/part-[0-2]"]

    def records() -> list[dict[str, Any]]:
        return cli("gc", "runs", REPO, "--json").json()

    def check(step: str) -> None:
        runs = records()
        placed = {k: 0 for k in sizes}
        gone_by_records = 0
        for r in runs:
            held = quarantined(ns, r["run_id"])
            in_window = r["num_moved"] - r["num_restored"] - r["num_purged"]
            assert len(held) == in_window, (step, r)
            assert sum(sizes[k] for k in held) == r["bytes_moved"] - r["bytes_restored"] - r["bytes_purged"], (step, r)
            for k in held:
                placed[k] += 1
            gone_by_records += r["num_deleted"] + r["num_purged"]
        at_address = data(ns)
        for k in sizes:
            placed[k] += k in at_address
        assert all(n <= 1 for n in placed.values()), (step, placed)
        assert sum(1 for n in placed.values() if n == 0) == gone_by_records, (step, runs)

    steps = []
    for _ in range(7):
        runs = records()
        sweeping = [r for r in runs if r["state"] == "sweeping"]
        restorable = [r for r in runs if r["quarantine_until"] and not r["purged_at"] and r["num_moved"]]
        choices = ["sweep"] if sweeping else ["run", "run"]
        choices += ["restore", "restore by glob"] if restorable else []
        choices += ["purge"] if restorable else []
        op = rng.choice(choices)
        if op == "run":
            window = rng.choice(["0s", "1s", "1d"])
            budget = ["--max-deletes", str(rng.randint(1, 8))] if rng.random() < 0.4 else []
            cli("gc", "run", REPO, "--min-age", "1h", "--quarantine", window, *budget, "--json")
            steps.append(f"run {window} {budget}")
        elif op == "sweep":
            cli("gc", "sweep", REPO, sweeping[0]["run_id"], "--json")
            steps.append("sweep")
        elif op.startswith("restore"):
            target = rng.choice(restorable)["run_id"]
            glob = ["--path", rng.choice(globs)] if op == "restore by glob" else []
            done = cli("gc", "restore", REPO, target, *glob, "--json", ok=None)
            assert done.exit_code in (0, 1), done.stderr  # 1: nothing matched the glob
            steps.append(f"restore {glob}")
        else:
            time.sleep(1.1)
            cli("gc", "purge", REPO, "--json")
            steps.append("purge")
        check(" -> ".join(steps))


@pytest.mark.parametrize(
    ("restores", "purged", "expected"),
    [
        ([], False, (10, 0, 0, 10)),  # moved, restored, purged, in the window
        ([6, 6], False, (10, 10, 0, 0)),  # restored twice over (0.5 counted again): at most what moved
        ([6], True, (10, 6, 4, 0)),  # a purged window: the rest went
    ],
)
def test_records_written_before_moves_were_counted_apart_read_as_moves(
    restores: list[int], purged: bool, expected: tuple[int, int, int, int]
) -> None:
    from lakegc.engine.runs import Run

    doc = {
        "run_id": "20261126T000000000Z-aaaaaa",
        "repository": "repo",
        "state": "swept",
        "dry_run": False,
        "started_at": "2026-11-26T00:00:00+00:00",
        "cutoff_time": "2026-11-25T00:00:00+00:00",
        "num_deleted": 10,
        "bytes_deleted": 1000,
        "quarantine_until": "2026-11-29T00:00:00+00:00",
        "purged_at": "2026-11-30T00:00:00+00:00" if purged else None,
        "restored": [{"at": "2026-11-27T00:00:00+00:00", "path": None, "num_restored": n} for n in restores],
    }
    run = Run.from_json(doc)
    assert (run.repo.num_moved, run.repo.num_restored, run.repo.num_purged, run.repo.num_in_window) == expected
    assert (run.num_deleted, run.bytes_deleted, run.repo.bytes_moved) == (0, 0, 1000)
    assert run.repo.bytes_in_window == (1000 if expected[3] else 0)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.pop("now"),
        lambda p: p.update(now="yesterday"),
        lambda p: p.update(cutoffs="main=1"),
        lambda p: p.update(quarantine_seconds="three days"),
    ],
    ids=["no mark time", "a bad mark time", "cutoffs not a list", "a bad window"],
)
def test_a_deferred_sweep_whose_recorded_plan_was_tampered_with_deletes_nothing(
    cli: Cli, lake, env: Env, damage
) -> None:
    """The sweep decides from the plan its mark kept (gc_runs.parameters): a row someone edited or
    a damaged one is one error line, the run stays marked, nothing is moved or deleted."""
    import sqlalchemy as sa

    ns = lake["ns"]
    marked = run(cli, "--mark-only").json()
    assert marked["state"] == "marked" and marked["num_candidates"] == len(lake["old"])
    engine = sa.create_engine(env.metastore)
    with engine.begin() as conn:
        params = json.loads(conn.execute(sa.text("SELECT parameters FROM gc_runs")).scalar_one())
        damage(params)
        conn.execute(sa.text("UPDATE gc_runs SET parameters = :p"), {"p": json.dumps(params)})
    engine.dispose()
    before = snapshot(ns)
    one_error(cli("gc", "sweep", REPO, marked["run_id"], ok=False), "recorded plan cannot be read", "nothing was swept")
    assert {k: v for k, v in snapshot(ns).items() if k.startswith("data/")} == {
        k: v for k, v in before.items() if k.startswith("data/")
    }
    assert quarantined(ns, marked["run_id"]) == set()
