"""The files an Iceberg table still needs, read the way the table's readers read them.

Reachable are: the current metadata file and the ones its log keeps (and a Hadoop table's
version hint), the statistics and partition-statistics files of all but the snapshots the run
expires (the expiry commit removes those entries from the metadata), and for every retained
snapshot its manifest list, the manifests it lists (data and delete manifests alike) and the files
of their live entries (ADDED or EXISTING; an entry marked DELETED records a file the snapshot no
longer has).
The driver names only the first kind (a handful per snapshot); manifest lists and manifests are
read on the executors, each distinct manifest once, so no file set ever gathers on the driver.

The files of the snapshots a run expires are read the same way (`snapshot_files`), without the
table's metadata files: they are what tells an expired snapshot's file from a true orphan (one no
snapshot ever named), for the candidates' reason only, never for what is deleted.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakegc.connectors.iceberg.paths import parse_location

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyspark.sql import DataFrame, SparkSession

REACHABLE_DDL = "uri string, path string, scheme string, authority string"
MANIFESTS_DDL = (
    "io long, manifest_path string, manifest_length long, partition_spec_id long, content long, "
    "sequence_number long, min_sequence_number long, added_snapshot_id long"
)


@dataclass(frozen=True)
class TableFiles:
    """What the executors need to read one table's manifests: its FileIO settings, and which
    snapshots count (`retained`: the retained ones for what is reachable; for what an expiry let
    go, the expired ones, with the metadata that still named them)."""

    io_properties: dict[str, str]
    location: str
    metadata: TableMetadata
    metadata_location: str
    retained: frozenset[int]


def named_by_metadata(t: TableFiles) -> list[str]:
    """Files the table metadata names itself (pure): metadata files, the version hint, the retained
    snapshots' manifest lists, and the statistics and partition-statistics files the metadata keeps
    once the planned expiry is committed (`kept_statistics`)."""
    md = t.metadata
    files = [
        t.metadata_location,
        *(entry.metadata_file for entry in md.metadata_log),
        posixpath.join(posixpath.dirname(t.metadata_location), "version-hint.text"),
    ]
    files += [s.statistics_path for s in kept_statistics(t)]
    files += [s.manifest_list for s in md.snapshots if s.snapshot_id in t.retained and s.manifest_list]
    return files


def kept_statistics(t: TableFiles) -> list[Any]:
    """The statistics and partition-statistics entries an expiry leaves in the metadata: all but
    those of the snapshots it removes (the commit removes both kinds, as Iceberg's does), so a dry
    run and a run agree on the files of expired snapshots. An entry naming a snapshot the metadata
    does not know stays: nothing removes it, and it still names its file."""
    known = {s.snapshot_id for s in t.metadata.snapshots}
    return [
        s
        for s in [*t.metadata.statistics, *t.metadata.partition_statistics]
        if s.snapshot_id in t.retained or s.snapshot_id not in known
    ]


def named_by_snapshots(t: TableFiles) -> list[str]:
    """Files the table metadata names for the counted snapshots alone (pure): their manifest lists
    and their statistics and partition-statistics files; not the metadata files, which the table's
    current state names whatever its snapshots."""
    md = t.metadata
    files = [s.manifest_list for s in md.snapshots if s.snapshot_id in t.retained and s.manifest_list]
    files += [s.statistics_path for s in md.statistics if s.snapshot_id in t.retained]
    files += [s.statistics_path for s in md.partition_statistics if s.snapshot_id in t.retained]
    return files


def location_rows(uris: list[str]) -> pa.RecordBatch:
    parsed = [parse_location(uri) for uri in uris]
    return pa.RecordBatch.from_pydict(
        {
            "uri": uris,
            "path": [p.path for p in parsed],
            "scheme": [p.scheme for p in parsed],
            "authority": [p.authority for p in parsed],
        }
    )


def reachable_files(spark: SparkSession, tables: list[TableFiles]) -> DataFrame:
    """Every file the tables' retained state needs (REACHABLE_DDL rows, distinct)."""
    return _files(spark, tables, [uri for t in tables for uri in named_by_metadata(t)])


def snapshot_files(spark: SparkSession, tables: list[TableFiles]) -> DataFrame:
    """Every file the counted snapshots of the tables name, metadata files aside (REACHABLE_DDL
    rows, distinct): manifest lists, statistics, manifests and the files of their live entries."""
    return _files(spark, tables, [uri for t in tables for uri in named_by_snapshots(t)])


def _files(spark: SparkSession, tables: list[TableFiles], named_uris: list[str]) -> DataFrame:
    """`named_uris` (named on the driver), and the manifests and live files of the counted
    snapshots' manifest lists, read on the executors."""
    settings = [(t.io_properties, t.location) for t in tables]
    lists = _manifest_lists(tables)
    from lakegc.engine.tasks import parallelism

    slots = parallelism(spark)
    named = location_rows(named_uris).to_pylist()
    small = spark.createDataFrame([tuple(row.values()) for row in named], REACHABLE_DDL)
    list_df = spark.createDataFrame(lists or [(0, "")], "io long, manifest_list string")
    if not lists:
        list_df = list_df.limit(0)
    manifests = (
        list_df.repartition(max(1, min(len(lists), slots * 4)))
        .mapInArrow(_list_reader(settings), MANIFESTS_DDL)
        .dropDuplicates(["manifest_path"])
    )  # manifest lists are small: read again for each use
    manifest_files = manifests.select("manifest_path").mapInArrow(
        lambda batches: (location_rows(b.column(0).to_pylist()) for b in batches), REACHABLE_DDL
    )
    data_files = manifests.repartition(slots * 4).mapInArrow(_manifest_reader(settings), REACHABLE_DDL)
    return small.unionByName(manifest_files).unionByName(data_files).distinct()


def _manifest_lists(tables: list[TableFiles]) -> list[tuple[int, str]]:
    """(table index, manifest list) of every counted snapshot that has one (pure): what the
    executors read first."""
    return [
        (i, s.manifest_list)
        for i, t in enumerate(tables)
        for s in t.metadata.snapshots
        if s.snapshot_id in t.retained and s.manifest_list
    ]


def _list_reader(
    settings: list[tuple[dict[str, str], str]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' task from manifest lists (io, manifest_list) to the manifests they list
    (MANIFESTS_DDL rows), each table's FileIO made there from its `settings`."""

    def read_lists(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyiceberg.manifest import read_manifest_list

        ios = _FileIOs(settings)
        for batch in batches:
            for row in batch.to_pylist():
                found = list(read_manifest_list(ios[row["io"]].new_input(row["manifest_list"])))
                if found:
                    yield pa.RecordBatch.from_pylist(
                        [
                            {
                                "io": row["io"],
                                "manifest_path": m.manifest_path,
                                "manifest_length": m.manifest_length,
                                "partition_spec_id": m.partition_spec_id,
                                "content": int(m.content),
                                "sequence_number": m.sequence_number,
                                "min_sequence_number": m.min_sequence_number,
                                "added_snapshot_id": m.added_snapshot_id,
                            }
                            for m in found
                        ]
                    )

    return read_lists


def _manifest_reader(
    settings: list[tuple[dict[str, str], str]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' task from manifests (MANIFESTS_DDL rows) to the files of their live entries
    (REACHABLE_DDL rows): an entry marked DELETED records a file the snapshot no longer has."""

    def read_manifests(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyiceberg.manifest import ManifestContent, ManifestFile

        ios = _FileIOs(settings)
        for batch in batches:
            for row in batch.to_pylist():
                io = ios[row.pop("io")]
                manifest = ManifestFile.from_args(**{**row, "content": ManifestContent(row["content"])})
                live = [entry.data_file.file_path for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)]
                if live:
                    yield location_rows(live)

    return read_manifests


class _FileIOs:
    """One FileIO per table, made on first use in the executor that needs it."""

    def __init__(self, settings: list[tuple[dict[str, str], str]]):
        self.settings = settings
        self.made: dict[int, Any] = {}

    def __getitem__(self, index: int) -> Any:
        if index not in self.made:
            from pyiceberg.io import load_file_io

            properties, location = self.settings[index]
            self.made[index] = load_file_io(properties, location)
        return self.made[index]
