"""The reference set a run keeps for the next one, so an incremental run costs what changed.

Every run writes, under `_lakegc/gc/<run>/refs/`:
- `ranges/`: every range of every tree in the repository, with `trees`, how many distinct *active*
  trees (metaranges of active commits) hold it;
- `addresses/`: every namespace address any range of any tree holds, with `n`, how many entries
  of active ranges hold it (0: only expired trees do), as Parquet files per *part*: the day of the
  address's slice (`data/<slice>/...`; see `part_of`). A part may have several files, *layers*,
  whose rows add up: an address's `n` is the sum of its rows;
- `manifest.json`: which trees were known and which active, and the files of both tables. A part's
  files may be earlier runs', carried forward unchanged.

A clean run reads every distinct range once to build the set. An incremental run starts from its
base run's set and applies the difference: the trees that became active (+1 to each of their
ranges), left the active set (-1), or are new; then only the ranges whose state changed (active
now and not then, or the reverse, or never seen) are read, each entry adding or taking 1 from its
address's `n`: that change is written as one more layer of the parts it reaches, and looked up
with the base layers part by part (`with_base_counts`). Because ranges are immutable
(their id is the hash of their content) and commits are never deleted, this is exactly the set a
clean run would build, which the property tests check table for table.

What the set decides (`mark`): an object is *referenced by a commit* when its `n` > 0, and when it
is a candidate its reason is `expired` when it has a row at all (only expired trees hold it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lakegc.engine.arrowio import Part, grouped_parts, groups_writer, parquet_writer, write_together, written_parts
from lakegc.errors import CorruptMetadata, LakegcError
from lakegc.repo.trees import tree_facts
from lakegc.repogc.outputs import MANIFEST
from lakegc.repogc.references import RANGES_DDL, entry_counts, weighted_ranges
from lakegc.repogc.trust import TRUST, RecordUnusable, TrustRecord, next_record, read_record, tree_keys, write_record
from lakegc.retention.paths import PathClasses
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


ADDRESSES_DDL = "address string, n long"
SLICE_OF_KEY = r"^data/([^/]+)/."  # the slice an address lies in ('' when none)
_SLICE_OF_KEY_NAMED = r"^data/(?P<slice>[^/]+)/."  # the same, for Arrow's regexes on the executors
PART_SECONDS = 86_400  # the addresses of a day of slices share their files (slices are hourly at most)
_FORMAT = 1
MAX_LAYERS = 8  # files per part before they are folded into one
_MAX_DIGITS = 18  # a slice name of more digits is no number of ours (nor fits a long): a part of its own
_NUMBERED = rf"^[0-9]{{1,{_MAX_DIGITS}}}$"


class StateUnusable(LakegcError):
    """A base run's reference set cannot be used (missing, unreadable, inconsistent): run clean."""


@dataclass(frozen=True)
class RefManifest:
    """What a run's reference set is made of (small: ids of trees and keys of files)."""

    metaranges: frozenset[str]  # every tree the run knew
    active: frozenset[str]  # the trees of its active commits
    ranges: tuple[str, ...]  # Parquet files of RANGES_DDL
    parts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # part (`part_of`) -> files of ADDRESSES_DDL
    digests: Mapping[str, str] = field(default_factory=dict)  # file -> SHA-256 of its bytes, checked on every read
    trust: str | None = None  # the run's record of verified tree files (`trust`); None: verify every one

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format": _FORMAT,
                "metaranges": sorted(self.metaranges),
                "active": sorted(self.active),
                "ranges": list(self.ranges),
                "parts": {s: list(k) for s, k in sorted(self.parts.items())},
                "digests": dict(sorted(self.digests.items())),
                "trust": self.trust,
            },
            indent=0,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RefManifest:
        try:
            doc = json.loads(data)
            if doc.get("format") != _FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {_FORMAT}")
            parts = {str(s): tuple(str(k) for k in keys) for s, keys in doc["parts"].items()}
            manifest = cls(
                frozenset(doc["metaranges"]),
                frozenset(doc["active"]),
                tuple(doc["ranges"]),
                parts,
                {str(k): str(v) for k, v in doc["digests"].items()},
                doc.get("trust"),
            )
            unsigned = set(manifest.files()) - manifest.digests.keys()
            if unsigned:
                raise ValueError(f"no digest for {min(unsigned)}")
            return manifest
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateUnusable(f"its reference manifest is unreadable ({exc})") from None

    def files(self) -> list[str]:
        return [
            *self.ranges,
            *(key for keys in self.parts.values() for key in keys),
            *([self.trust] if self.trust else []),
        ]

    def layer_files(self) -> dict[str, list[tuple[str, str]]]:
        """Part -> its files with their digests, for the tasks that read a part's layers."""
        return {part: [(key, self.digests[key]) for key in keys] for part, keys in self.parts.items()}

    def trust_record(self, storage: Storage) -> TrustRecord:
        """The run's record of verified tree files; RecordUnusable when there is none to believe."""
        if self.trust is None:
            raise RecordUnusable("it kept no record of the tree files it verified")
        return read_record(storage, self.trust, self.digests[self.trust])


def part_of(slice_name: str) -> str:
    """The part whose files hold a slice's addresses: its day for a slice named as lakegc names
    them (an inverted timestamp), else the name itself. Parts keep files few and large while a
    change still rewrites little: slices close within the hour, so new writes reach new parts."""
    numbered = slice_name.isascii() and slice_name.isdigit() and len(slice_name) <= _MAX_DIGITS
    return f"d{int(slice_name) // PART_SECONDS}" if numbered else f"s:{slice_name}"


@dataclass(frozen=True)
class TreeChange:
    """How the set of trees moved between a base run and now: each tree's weight on its ranges'
    `trees` count (+1 became active, -1 left the active set, 0 new but not active)."""

    weights: dict[str, int]

    @classmethod
    def between(cls, base: RefManifest, all_now: set[str], active_now: set[str]) -> TreeChange:
        unknown = base.metaranges - all_now
        if unknown:
            raise StateUnusable(f"it knew {len(unknown)} tree(s) this repository no longer has (e.g. {min(unknown)})")
        weights = {mid: 0 for mid in all_now - base.metaranges}
        weights.update({mid: 1 for mid in active_now - base.active})
        weights.update({mid: -1 for mid in base.active - active_now})
        return cls(weights)


def load_manifest(storage: Storage, prefix: str, sha256: str | None) -> RefManifest:
    """A run's manifest, as its metastore record (`sha256`) says it wrote it, every file it names
    present; else StateUnusable saying what is wrong. The files' own digests are checked as they
    are read (`read_refs`): the set decides what is referenced, so it is trusted no more than a
    tree is."""
    if sha256 is None:
        raise StateUnusable("its run record holds no reference set")
    try:
        data = storage.read(prefix + MANIFEST)
    except (LakegcError, OSError) as exc:
        raise StateUnusable(f"its reference set is missing ({exc})") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise StateUnusable("its reference manifest is not the one its run recorded")
    manifest = RefManifest.from_json(data)
    try:
        missing = [key for key in manifest.files() if not storage.exists(key)]
    except LakegcError as exc:
        raise StateUnusable(f"its reference manifest names a file it cannot ({exc})") from None
    if missing:
        raise StateUnusable(f"{len(missing)} file(s) of its reference set are missing (e.g. {missing[0]})")
    return manifest


@dataclass
class RefSet:
    """A run's reference set while it marks: DataFrames, and the manifest that will describe it."""

    ranges: DataFrame  # RANGES_DDL: every range now
    addresses: DataFrame  # ADDRESSES_DDL + part: the rows this run writes (all, or its change's layers)
    manifest: RefManifest  # the trees it knows, and the parts carried from the base (none: a clean build)
    lost: DataFrame | None = None  # addresses whose n fell to 0 since the base (incremental only)
    cached: list[DataFrame] = field(default_factory=list)  # to unpersist when the mark is done
    named: DataFrame | None = None  # (address, path, rank) of addresses only expired trees hold, as read
    delta: DataFrame | None = None  # (address, dn): how each address's n moved since the base (incremental)

    def counted_now(self, storage: Storage, rows: DataFrame) -> DataFrame:
        """`rows` (with `address`) and each address's `n` now and whether the set has a row for it
        (`known`): the base run's layers, looked up by the tasks part by part
        (`with_base_counts`), plus this run's change. Nothing is read for parts no row lies in."""
        from pyspark.sql import functions as F

        assert self.delta is not None, "an incremental set"
        looked = with_base_counts(rows, storage, self.manifest).join(self.delta, "address", "left")
        return looked.select(
            *rows.columns,
            (F.coalesce("n0", F.lit(0)) + F.coalesce("dn", F.lit(0))).alias("n"),
            (F.col("n0").isNotNull() | F.col("dn").isNotNull()).alias("known"),
        )


def slice_of(addresses: pa.Array) -> pa.Array:
    """The slice each address lies in ('' when none), as `SLICE_OF_KEY` says, in Arrow."""
    import pyarrow.compute as pc

    matched = pc.fill_null(pc.match_substring_regex(addresses, _SLICE_OF_KEY_NAMED), False)
    # a struct field is not null where the regex did not match: only the struct's validity says so
    return pc.if_else(matched, pc.extract_regex(addresses, _SLICE_OF_KEY_NAMED).field("slice"), "")


def part_column() -> object:
    """`part_of` the address's slice, as a Spark column."""
    from pyspark.sql import functions as F

    name = F.regexp_extract("address", SLICE_OF_KEY, 1)
    return F.when(
        name.rlike(_NUMBERED), F.concat(F.lit("d"), F.floor(name.cast("long") / PART_SECONDS).cast("string"))
    ).otherwise(F.concat(F.lit("s:"), name))


def part_array(addresses: pa.Array) -> pa.Array:
    """`part_column` in Arrow, on the executors."""
    import pyarrow.compute as pc

    names = slice_of(addresses)
    digits = pc.fill_null(pc.match_substring_regex(names, _NUMBERED), False)
    days = pc.divide(pc.cast(pc.if_else(digits, names, "0"), pa.int64()), PART_SECONDS)  # integers: floored
    return pc.if_else(
        digits,
        pc.binary_join_element_wise("d", pc.cast(days, pa.string()), ""),
        pc.binary_join_element_wise("s:", names, ""),
    )


def with_base_counts(rows: DataFrame, storage: Storage, base: RefManifest) -> DataFrame:
    """`rows` (with `address`) and `n0`, the address's n in the base set (null: no row there).
    Rows are grouped by part; each task reads the files of the parts its rows lie in (each checked
    against its digest) and nothing else: what a run reads of the base set follows its change."""
    files = base.layer_files()
    columns = rows.columns
    schema = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in rows.schema.fields) + ", n0 long"

    def look(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        current, counts = None, None
        for batch in batches:
            parts = part_array(batch.column("address"))
            for part in pc.unique(parts).to_pylist():
                if part != current:  # rows come sorted by part: one part's counts held at a time
                    current, counts = part, _summed(storage, files.get(part, []), "n0")
                chosen = pa.Table.from_batches([batch.filter(pc.equal(parts, part))])
                yield from chosen.join(counts, "address", join_type="left outer").select([*columns, "n0"]).to_batches()

    from lakegc.engine.tasks import parallelism

    tasks = parallelism(rows.sparkSession) * 2
    grouped = rows.withColumn("_part", part_column()).repartition(tasks, "_part").sortWithinPartitions("_part")
    return grouped.drop("_part").mapInArrow(look, schema)


def _summed(storage: Storage, files: list[tuple[str, str]], name: str, more: list[pa.Table] = ()) -> pa.Table:
    """(address, `name`): a part's layers (each file checked against its digest) and `more` rows of
    the same shape, summed by address."""
    tables = [*(_read_checked(storage, key, digest) for key, digest in files), *more]
    if not tables:
        return pa.table({"address": pa.array([], pa.string()), name: pa.array([], pa.int64())})
    summed = (
        pa.concat_tables([table.select(["address", "n"]) for table in tables])
        .group_by("address")
        .aggregate([("n", "sum")])
    )
    return summed.select(["address", "n_sum"]).rename_columns(["address", name])


def _read_checked(storage: Storage, key: str, digest: str) -> pa.Table:
    data = storage.read(key)
    if hashlib.sha256(data).hexdigest() != digest:
        raise CorruptMetadata(f"reference set file {key} was changed since its run wrote it: run `gc run --clean`")
    return pq.ParquetFile(pa.BufferReader(data)).read()


def layers_writer(addresses: DataFrame, storage: Storage, prefix: str, base: RefManifest) -> DataFrame:
    """The rows (ADDRESSES_DDL + part) written as one file per part and task, a new *layer* on top of
    the part's files in `base`; a part that would then have more than MAX_LAYERS files is folded
    into one file instead (its base files read and summed in the same task: `layers_to_fold`
    decides, as the driver does when it writes the manifest)."""
    files = base.layer_files()

    def prepare(part: str, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        if len(files.get(part, ())) + 1 <= MAX_LAYERS:
            return batches
        folded = _summed(storage, files[part], "n", [pa.Table.from_batches(batches)])
        return folded.to_batches()

    return groups_writer(addresses, storage, lambda _: f"{prefix}refs/addresses", "part", prepare)


def build_clean(
    spark: SparkSession,
    storage: Storage,
    metaranges: Mapping[str, str],
    active: set[str],
    by_path_rule: Sequence[set[str]] = (),
    paths: PathClasses | None = None,
    ranks: Mapping[str, int] | None = None,
    trusted: Mapping[str, str] | None = None,
) -> RefSet:
    """From every tree: each distinct range read once. `metaranges` maps commit -> tree. With path
    rules, `by_path_rule[k]` are the commits active under the k-th rule, and an entry counts when
    its commit is active under the rule its path falls under (`paths`; `active` for no rule).
    `ranks` (tree -> the rank of its newest commit) name what only expired trees hold (`named`).
    Tree files whose facts are in `trusted` are not verified again (`trust`)."""
    from pyspark.sql import functions as F

    trees = set(metaranges.values())
    classes = [{metaranges[c] for c in commits if c in metaranges} for commits in (active, *by_path_rule)]
    active_trees = classes[0]
    columns = ["trees", *(f"trees_{k}" for k in range(1, len(classes))), "rank"]
    ranks = ranks or {}
    weights = {mid: (*(int(mid in c) for c in classes), ranks.get(mid, 0)) for mid in trees}
    ranges = weighted_ranges(spark, storage, weights, columns, maxed=frozenset({"rank"}), trusted=trusted)
    ranges = ranges.persist()  # read twice: entries below, and written
    flags = [F.when(F.col(name) > 0, 1).otherwise(0) for name in columns[:-1]]
    weighted = ranges.select(
        "range_id",
        "min_path",
        (F.array(*flags) if paths is not None else flags[0]).alias("weights" if paths is not None else "weight"),
        F.lit(0).alias("fresh"),
        "rank",
    )
    counted = entry_counts(
        spark, storage, weighted, paths, named=True, trusted=trusted
    ).persist()  # written, then joined
    return RefSet(
        ranges.select("range_id", "min_path", "trees"),
        counted.select("address", "n").withColumn("part", part_column()),
        RefManifest(frozenset(trees), frozenset(active_trees), ()),
        cached=[ranges, counted],
        named=counted.where(F.col("n") == 0).select("address", "path", "rank"),
    )


def build_incremental(
    spark: SparkSession,
    storage: Storage,
    base: RefManifest,
    metaranges: Mapping[str, str],
    active: set[str],
    ranks: Mapping[str, int] | None = None,
    trusted: Mapping[str, str] | None = None,
) -> RefSet:
    """The base run's set moved to now, reading only the trees and ranges that changed (its
    `addresses` are the change, `delta`, written as layers of the parts it moves). What it reads is named
    (`named`): the addresses of ranges that left the active set, which is where new candidates of
    committed garbage come from."""
    from pyspark.sql import functions as F

    trees = set(metaranges.values())
    active_trees = {metaranges[c] for c in active if c in metaranges}
    change = TreeChange.between(base, trees, active_trees)
    ranks = ranks or {}
    moved = weighted_ranges(
        spark,
        storage,
        {mid: (w, ranks.get(mid, 0)) for mid, w in change.weights.items()},
        ["d", "rank"],
        maxed=frozenset({"rank"}),
        trusted=trusted,
    ).withColumnRenamed("min_path", "new_min_path")
    before = read_refs(spark, storage, base, base.ranges, RANGES_DDL).withColumnRenamed("trees", "t0")
    joined = (
        before.join(moved, "range_id", "full_outer").select(
            "range_id",
            F.coalesce("min_path", "new_min_path").alias("min_path"),
            F.col("t0"),
            (F.coalesce("t0", F.lit(0)) + F.coalesce("d", F.lit(0))).alias("trees"),
            F.coalesce("rank", F.lit(0)).alias("rank"),
        )
    ).persist()
    read = entry_counts(spark, storage, _ranges_to_read(joined), named=True, trusted=trusted).persist()
    delta = read.where((F.col("n") != 0) | (F.col("fresh") > 0)).select("address", F.col("n").alias("dn"))
    fell = delta.where(F.col("dn") < 0)
    lost = with_base_counts(fell, storage, base).where(F.col("n0") + F.col("dn") == 0).select("address")
    return RefSet(
        joined.select("range_id", "min_path", "trees"),
        delta.select("address", F.col("dn").alias("n"), part_column().alias("part")),
        RefManifest(frozenset(trees), frozenset(active_trees), (), base.parts, base.digests),
        lost,
        cached=[joined, read],
        named=read.where(F.col("n") <= 0).select("address", "path", "rank"),
        delta=delta,
    )


def _ranges_to_read(joined: DataFrame) -> DataFrame:
    """Of the ranges with their `trees` at the base (`t0`, null: never seen) and now, the ones an
    incremental run reads, weighted for `entry_counts`: +1/-1 on each entry of a range that became
    active or stopped being. An address whose n does not move needs a row only when no range held
    it before: it is then only in first-seen ranges no active tree holds (`fresh`); one that a
    first-seen active range holds has moved, or a range that left the active set (and so was
    known) held it too."""
    from pyspark.sql import functions as F

    was, now, first_seen = F.coalesce(F.col("t0"), F.lit(0)) > 0, F.col("trees") > 0, F.col("t0").isNull()
    return joined.where((was != now) | first_seen).select(
        "range_id",
        "min_path",
        F.when(now & ~was, 1).when(was & ~now, -1).otherwise(0).alias("weight"),
        F.when(first_seen & ~now, 1).otherwise(0).alias("fresh"),
        "rank",
    )


def layers_to_fold(base: RefManifest, touched: set[str]) -> set[str]:
    """The parts whose files are folded into one this run: a moved part gets its change as one
    more file (a layer) unless it would then have more than MAX_LAYERS; reading a part sums its
    layers, so folding bounds what a read costs."""
    return {name for name in touched if len(base.parts.get(name, ())) + 1 > MAX_LAYERS}


def persist(storage: Storage, prefix: str, refs: RefSet, before: Mapping[str, str]) -> tuple[RefManifest, str]:
    """Write the ranges and this run's address layers, then the record of the tree files they
    were read from (`trust`: `before` are their facts before the run read any), then the manifest
    naming them all (last: a run killed before it leaves no manifest, and the next run goes
    clean). Returns the manifest and its SHA-256, for the run's metastore record."""
    ranges_rows, parts_rows = write_together(*refset_writers(storage, prefix, refs))
    return finish_refset(storage, prefix, refs, ranges_rows, parts_rows, before)


def refset_writers(storage: Storage, prefix: str, refs: RefSet) -> list[DataFrame]:
    """What writes the set (run them with `write_together`, then `finish_refset`): the ranges, one
    file per partition, and the address rows as layers of their parts."""
    return [
        parquet_writer(refs.ranges, storage, f"{prefix}refs/ranges"),
        layers_writer(refs.addresses, storage, prefix, refs.manifest),
    ]


def finish_refset(
    storage: Storage, prefix: str, refs: RefSet, ranges_rows: list, parts_rows: list, before: Mapping[str, str]
) -> tuple[RefManifest, str]:
    """After `refset_writers` ran: the record of verified tree files, then the manifest (`persist`)."""
    ranges, by_part = written_parts(ranges_rows).parts, grouped_parts(parts_rows)
    fold = layers_to_fold(refs.manifest, set(by_part))  # folded by the writing tasks: their base files are not carried
    parts = {name: keys for name, keys in refs.manifest.parts.items() if name not in fold}
    digests = {key: refs.manifest.digests[key] for keys in parts.values() for key in keys}
    for name, written in by_part.items():  # a new layer on top of what was carried, or the part anew
        parts[name] = (*parts.get(name, ()), *(part.key for part in written))
        digests.update((part.key, part.sha256) for part in written)
    digests.update((part.key, part.sha256) for part in ranges)
    after = tree_facts(storage)  # every tree file this run reads has been read
    known = tree_keys(refs.manifest.metaranges, _range_ids(storage, ranges))
    digests[prefix + TRUST] = write_record(storage, prefix + TRUST, next_record(known, before, after))
    manifest = RefManifest(
        refs.manifest.metaranges,
        refs.manifest.active,
        tuple(part.key for part in ranges),
        parts,
        digests,
        prefix + TRUST,
    )
    data = manifest.to_json()
    storage.write(prefix + MANIFEST, data)
    return manifest, hashlib.sha256(data).hexdigest()


def _range_ids(storage: Storage, written: Sequence[Part]) -> list[str]:
    """The range ids of the ranges table just written (a few thousand: one per distinct range),
    each file read back as its task wrote it."""
    return [rid for part in written for rid in _read_checked(storage, part.key, part.sha256)["range_id"].to_pylist()]


def read_refs(
    spark: SparkSession, storage: Storage, manifest: RefManifest, keys: Iterable[str], schema: str
) -> DataFrame:
    """Files of a reference set, each checked against its digest in the manifest as it is read on
    an executor: a file changed since it was written fails the run (CorruptMetadata), before
    anything is deleted."""
    from lakegc.engine.tasks import parallelism, work_items

    digests = {key: manifest.digests[key] for key in keys}
    files = sorted(digests)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                key = files[index]
                yield from _read_checked(storage, key, digests[key]).to_batches(max_chunksize=65_536)

    return work_items(spark, len(files), parallelism(spark) * 2).mapInArrow(read, schema)
