"""IOx-style catalog GC (`lakegc catalog gc`) through the CLI, on Spark: every combination
of catalog row {none, live, soft-deleted, soft-deleted past the parquetfile cutoff} and store object
{absent, newer than the objectstore cutoff, older}, plus the file-name classes, on SQLite and
PostgreSQL catalogs and a local folder and the S3-API store; then bad input and catalog failures,
which must delete nothing and change no row.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import sqlalchemy as sa
from conftest import Bucket, CliResult, Env, one_error

from lakegc.connectors.catalog import classify, epoch_ns
from lakegc.engine.collector import RunOptions
from lakegc.metastore.sql import sql_url
from lakegc.timeutil import utcnow

Cli = Callable[..., CliResult]
NOW = utcnow()
OLD, NEW = timedelta(days=20), timedelta(days=1)  # object ages against the default 14d cutoffs
ROW = {"none": None, "live": "live", "soft": NOW - timedelta(days=1), "expired": NOW - timedelta(days=20)}

# (catalog row, store object) -> object deleted?, row deleted?   The whole table of IOx's rules:
# an old object goes unless a row names it (soft-deleted rows too, until they are hard-deleted);
# a row goes once soft-deleted for longer than the parquetfile cutoff.
CASES = {
    (row, obj): (obj == "old" and row in ("none", "expired"), row == "expired")
    for row in ROW
    for obj in ("absent", "new", "old")
}

# file names -> reason an OLD copy is deleted for (None: kept), and the row (if any) naming the file
_U = [str(uuid.UUID(int=i + 1)) for i in range(8)]
NAMES = {
    "notes.txt": ("unexpected", None),
    f"{_U[0]}.parquet.crc": ("unexpected", None),
    f"{_U[0]}.PARQUET": ("unexpected", None),
    "not-a-uuid.parquet": ("invalid", None),
    ".parquet": ("invalid", None),
    f"{_U[1].upper()}.parquet": (None, _U[1]),  # the catalog spells the id in lower case
    f"{_U[2].replace('-', '')}.parquet": (None, _U[2]),  # no hyphens in the name
    f"{_U[3]}.parquet": ("unreferenced", None),
    f"{_U[4]}.parquet": (None, _U[4].upper()),  # the catalog spells the id in upper case
    f"{_U[5]}.parquet": (None, _U[5].replace("-", "")),  # and without hyphens
}


@dataclass
class World:
    """A catalog database and an object store, built by the test and read back by it."""

    url: str
    store: str
    put: Callable[[str, timedelta], None]  # key, age
    keys: Callable[[], set[str]]
    runs: Path

    def add_row(self, object_store_id: str, to_delete: datetime | None) -> None:
        with _engine(self.url).begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO parquet_file (namespace_id, table_id, partition_id, object_store_id, "
                    "to_delete, file_size_bytes) VALUES (1, 2, 3, :id, :td, 10)"
                ),
                {"id": object_store_id, "td": epoch_ns(to_delete) if to_delete else None},
            )

    def rows(self) -> dict[str, int | None]:
        with _engine(self.url).connect() as conn:
            return dict(conn.execute(sa.text("SELECT object_store_id, to_delete FROM parquet_file")).all())


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(sql_url(url), poolclass=sa.pool.NullPool)


def create_catalog(url: str, *, with_to_delete: bool = True) -> None:
    """IOx's parquet_file, as much of it as matters (and columns GC must ignore)."""
    columns = [
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("namespace_id", sa.BigInteger, nullable=False),
        sa.Column("table_id", sa.BigInteger, nullable=False),
        sa.Column("partition_id", sa.BigInteger, nullable=False),
        sa.Column("object_store_id", sa.Text, nullable=False, unique=True),
        sa.Column("file_size_bytes", sa.BigInteger),
    ]
    if with_to_delete:
        columns.append(sa.Column("to_delete", sa.BigInteger, nullable=True))
    sa.Table("parquet_file", sa.MetaData(), *columns).create(_engine(url))


# Each store and each catalog database in the default run; their two other pairings under `slow`.
@pytest.fixture(
    params=[
        ("local", "sqlite"),
        ("s3", "postgresql"),
        pytest.param(("local", "postgresql"), marks=pytest.mark.slow),
        pytest.param(("s3", "sqlite"), marks=pytest.mark.slow),
    ],
    ids="-".join,
)
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    store, database = request.param
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}" if database == "sqlite" else request.getfixturevalue("pg_url")
    create_catalog(catalog_url)
    if store == "local":
        root = tmp_path / "store"
        root.mkdir()

        def put(key: str, age: timedelta) -> None:
            path = root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"parquet bytes")
            when = (NOW - age).timestamp()
            os.utime(path, (when, when))

        def keys() -> set[str]:
            return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

        return World(catalog_url, str(root), put, keys, tmp_path / "runs")

    bucket: Bucket = request.getfixturevalue("bucket")

    def put_s3(key: str, age: timedelta) -> None:
        bucket.put(f"iox/{key}", b"parquet bytes")
        bucket.faults.backdate[f"iox/{key}"] = (NOW - age).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def keys_s3() -> set[str]:
        return {k.removeprefix("iox/") for k in bucket.keys("iox/")}

    bucket.put("elsewhere/old.txt")  # beside the store, never listed
    bucket.faults.backdate["elsewhere/old.txt"] = "2020-01-01T00:00:00.000Z"
    return World(catalog_url, f"s3://{bucket.name}/iox", put_s3, keys_s3, tmp_path / "runs")


def build(world: World) -> tuple[dict[str, bool], dict[str, bool], dict[str, str]]:
    """Every case of CASES and NAMES in one store and catalog: (object key -> deleted?, row id ->
    deleted?, object key -> reason of a deleted one)."""
    objects, rows, reasons = {}, {}, {}
    for i, ((row, obj), (object_gone, row_gone)) in enumerate(sorted(CASES.items())):
        oid = str(uuid.uuid4())
        if ROW[row] is not None:
            world.add_row(oid, None if ROW[row] == "live" else ROW[row])  # type: ignore[arg-type]
            rows[oid] = row_gone
        if obj != "absent":
            key = f"1/{i}/{i % 3}/{oid}.parquet"
            world.put(key, OLD if obj == "old" else NEW)
            objects[key] = object_gone
            if object_gone:
                reasons[key] = "unreferenced"
    for name, (reason, named_by) in NAMES.items():
        if named_by:
            world.add_row(named_by, None)
            rows[named_by] = False
        for age, label in ((OLD, "old"), (NEW, "new")):
            key = f"7/8/{label}/{name}"
            world.put(key, age)
            objects[key] = age == OLD and reason is not None
            if objects[key]:
                reasons[key] = reason  # type: ignore[assignment]
    for key, age in ((f"{uuid.uuid4()}.parquet", OLD), (f"a/b/c/d/e/{uuid.uuid4()}.parquet", OLD)):
        world.put(key, age)  # at the root, and deeper than the folders listed one by one
        objects[key], reasons[key] = True, "unreferenced"
    return objects, rows, reasons


def candidates_of(run: dict) -> dict[str, str]:
    """A run's candidates/ (Parquet in its run folder): key -> reason."""
    folder = Path(run["location"].removeprefix("file://")) / "candidates"
    table = ds.dataset(folder, format="parquet").to_table() if folder.exists() else None
    if table is None or table.num_rows == 0:
        return {}
    return dict(zip(table.column("address").to_pylist(), table.column("reason").to_pylist()))


def test_every_row_and_object_combination_dry_run_then_collect(world: World, cli: Cli, spark):
    objects, rows, reasons = build(world)
    before_keys, before_rows = world.keys(), world.rows()
    assert before_keys == set(objects)
    args = ["catalog", "gc", "--catalog", world.url, "--store", world.store, "--runs", str(world.runs), "--json"]

    dry = cli(*args, "--dry-run").json()
    assert (dry["state"], dry["dry_run"], dry["num_deleted"]) == ("marked", True, 0)
    assert world.keys() == before_keys and world.rows() == before_rows  # nothing deleted, no row changed
    assert candidates_of(dry) == reasons
    assert dry["num_listed"] == len(objects)
    assert dry["num_candidates"] == len(reasons)
    assert dry["candidates_by_reason"] == {r: list(reasons.values()).count(r) for r in set(reasons.values())}
    assert dry["details"]["catalog rows past the parquetfile cutoff"] == sum(rows.values())

    run = cli(*args).json()
    assert (run["state"], run["num_deleted"], run["num_failed"]) == ("swept", len(reasons), 0)
    assert run["bytes_deleted"] == len(reasons) * len(b"parquet bytes")
    assert world.keys() == {k for k, gone in objects.items() if not gone}
    assert set(world.rows()) == {r for r, gone in rows.items() if not gone}
    assert run["details"]["catalog rows deleted"] == sum(rows.values())

    again = cli(*args).json()  # one run left the store as it should be
    assert (again["num_candidates"], again["details"]["catalog rows deleted"]) == (0, 0)
    assert_the_runs_are_recorded_like_repository_runs(cli, world.runs, [again, run, dry], reasons)


def assert_the_runs_are_recorded_like_repository_runs(cli: Cli, runs: Path, made: list[dict], reasons: dict) -> None:
    """`catalog runs|show|candidates`: the same record the runs printed, newest first, a unique id
    prefix selects a run, and another connector's runs command does not list them."""
    where = ("--runs", str(runs))
    listed = cli("catalog", "runs", *where, "--json").json()
    assert [r["run_id"] for r in listed] == [r["run_id"] for r in made]
    assert listed == made
    assert all(r["kind"] == r["connector"] == "catalog" for r in listed)
    shown = cli("catalog", "show", made[1]["run_id"][:-3], *where, "--json").json()  # a prefix only it has
    assert shown == made[1]
    marked = cli("catalog", "candidates", made[2]["run_id"], *where, "--json").json()
    assert {c["address"]: c["reason"] for c in marked} == reasons
    assert cli("iceberg", "runs", *where, "--json").json() == []
    assert "report.html" in cli("catalog", "show", made[0]["run_id"], *where, "--html").stdout


SPELLINGS = (
    "0F2C2A9E-3C55-4F7A-9A57-2D1C0C3C4A11",
    "0F2C2A9E3C554F7A9A572D1C0C3C4A11",
    "0f2c2a9e-3c55-4f7a-9a57-2d1c0c3c4a11",
    "0f2c2a9e3c554f7a9a572d1c0c3c4a11",
)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("0f2c2a9e-3c55-4f7a-9a57-2d1c0c3c4a11.parquet", (None, SPELLINGS)),
        ("0F2C2A9E3C554F7A9A572D1C0C3C4A11.parquet", (None, SPELLINGS)),
        ("0f2c2a9e-3c55-4f7a-9a57-2d1c0c3c4a1.parquet", ("invalid", ())),
        ("x.parquet", ("invalid", ())),
        ("0f2c2a9e-3c55-4f7a-9a57-2d1c0c3c4a11.json", ("unexpected", ())),
        ("parquet", ("unexpected", ())),
        ("", ("unexpected", ())),
    ],
)
def test_file_names_are_classified_like_iox(name: str, expected: tuple):
    assert classify(name) == expected


def test_to_delete_is_in_nanoseconds_since_the_epoch():
    assert epoch_ns(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == 10**9
    assert epoch_ns(datetime(2026, 1, 1, tzinfo=UTC)) == 1_767_225_600 * 10**9


def test_a_row_written_during_the_run_protects_its_object(small, tmp_path: Path, spark):
    """Candidates are judged again just before anything is deleted: an object a row names since
    the mark (a write that committed late) stays."""
    from lakegc.connectors.catalog import CatalogGcOptions, run_catalog_gc

    url, store, orphan = small
    world = World(url, str(store), lambda *_: None, lambda: set(), tmp_path / "runs")

    def phase(name: str, detail: str = "") -> None:
        if name == "re-checking the candidates":
            world.add_row(orphan, None)

    run = run_catalog_gc(
        url, str(store), CatalogGcOptions(), RunOptions(runs_location=str(tmp_path / "runs")), phase, spark
    )
    assert run.num_candidates == 1 and run.num_deleted == 0
    assert (store / "1" / "2" / f"{orphan}.parquet").exists()


# -- bad input and failures: one error line, nothing deleted, no row changed ------------------------
@pytest.fixture
def small(env: Env, tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    """A SQLite catalog naming one of two old objects, and a soft-deleted expired row."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    create_catalog(url)
    store = tmp_path / "store"
    named, orphan = str(uuid.uuid4()), str(uuid.uuid4())
    world = World(url, str(store), lambda *_: None, lambda: set(), tmp_path / "runs")
    world.add_row(named, None)
    world.add_row(str(uuid.uuid4()), NOW - timedelta(days=30))
    for oid in (named, orphan):
        path = store / "1" / "2" / f"{oid}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        when = (NOW - OLD).timestamp()
        os.utime(path, (when, when))
    yield url, store, orphan


def _unchanged(url: str, store: Path) -> tuple[set[str], dict]:
    return (
        {p.name for p in store.rglob("*.parquet")},
        World(url, str(store), lambda *_: None, lambda: set(), store).rows(),
    )


@pytest.mark.parametrize(
    "option, value, needle",
    [
        ("--objectstore-cutoff", "2h", "under the minimum of 3h"),
        ("--parquetfile-cutoff", "179m", "under the minimum of 3h"),
        ("--objectstore-cutoff", "soon", "invalid duration"),
    ],
)
def test_bad_cutoffs_are_refused(small, cli: Cli, option: str, value: str, needle: str):
    url, store, _ = small
    before = _unchanged(url, store)
    one_error(cli("catalog", "gc", "--catalog", url, "--store", str(store), option, value, ok=False), needle)
    assert _unchanged(url, store) == before


def test_cutoffs_of_exactly_three_hours_are_accepted(small, cli: Cli, spark):
    url, store, orphan = small
    run = cli(
        "catalog",
        "gc",
        "--catalog",
        url,
        "--store",
        str(store),
        "--objectstore-cutoff",
        "3h",
        "--parquetfile-cutoff",
        "PT3H",
        "--json",
    ).json()
    assert run["num_deleted"] == 1 and not (store / "1" / "2" / f"{orphan}.parquet").exists()


def test_unusable_catalogs_and_stores_are_refused(small, cli: Cli, tmp_path: Path):
    url, store, _ = small
    before = _unchanged(url, store)
    no_table = f"sqlite:///{tmp_path / 'empty.db'}"
    _engine(no_table).connect().close()
    cases = [
        ((f"sqlite:///{tmp_path / 'missing.db'}", str(store)), "no such database file"),
        ((no_table, str(store)), "no parquet_file table"),
        (("postgresql://u:secret@127.0.0.1:1/x", str(store)), "catalog postgresql://u:***@127.0.0.1:1/x"),
        (("not a url", str(store)), "invalid catalog url"),
        ((url, str(tmp_path / "no-such-store")), "does not exist"),
        ((url, "relative/store"), "invalid location"),
    ]
    for (catalog, location), needle in cases:
        message = one_error(
            cli("catalog", "gc", "--catalog", catalog, "--store", location, "--json", ok=False), needle, json_cmd=True
        )
        assert "secret" not in message
    assert _unchanged(url, store) == before


def test_a_catalog_error_while_marking_deletes_nothing_and_changes_no_row(small, cli: Cli, tmp_path: Path, spark):
    """The lookups run on the executors; a catalog whose table cannot answer them fails the run."""
    _, store, _ = small
    broken = f"sqlite:///{tmp_path / 'broken.db'}"
    create_catalog(broken, with_to_delete=False)  # every lookup's WHERE names a missing column
    before = {p.name for p in store.rglob("*.parquet")}
    one_error(
        cli(
            "catalog",
            "gc",
            "--catalog",
            broken,
            "--store",
            str(store),
            "--runs",
            str(tmp_path / "runs"),
            "--json",
            ok=False,
        ),
        "failed",
        "to_delete",
        json_cmd=True,
    )
    assert {p.name for p in store.rglob("*.parquet")} == before
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert '"state": "failed"' in (run_dir / "summary.json").read_text()
    assert (run_dir / "report.html").read_text().count("failed") >= 1


def test_a_delete_budget_holds_for_catalog_runs_too(small, tmp_path: Path, spark) -> None:
    """The budget every collector's sweep is held to: --max-deletes 2 of five orphans deletes two
    and says three are left (swept, the error names the budget); the object a row names is never
    among them; the expired row is hard-deleted as without a budget; the next run takes the rest."""
    from lakegc import api

    url, store, orphan = small
    folder = store / "1" / "2"
    more = [str(uuid.uuid4()) for _ in range(4)]
    for oid in more:
        (folder / f"{oid}.parquet").write_bytes(b"x")
        os.utime(folder / f"{oid}.parquet", ((NOW - OLD).timestamp(),) * 2)
    orphans = {f"{oid}.parquet" for oid in [orphan, *more]}
    named = {p.name for p in folder.iterdir()} - orphans
    runs = str(tmp_path / "runs")
    first = api.catalog_gc(url, str(store), max_deletes=2, runs_location=runs, spark=spark)
    assert (first.state, first.num_candidates, first.num_deleted, first.num_stopped) == ("swept", 5, 2, 3)
    assert "--max-deletes" in first.error and "lakegc catalog gc" in first.error
    left = {p.name for p in folder.iterdir()}
    assert named <= left and len(left & orphans) == 3 and first.details["catalog rows deleted"] == 1
    rest = api.catalog_gc(url, str(store), runs_location=runs, spark=spark)
    assert (rest.num_deleted, rest.num_stopped, rest.error) == (3, 0, None)
    assert {p.name for p in folder.iterdir()} == named
