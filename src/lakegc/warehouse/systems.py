"""The systems a warehouse run is told about, read before the run starts (the driver's I/O).

Each named system becomes its owners (`owners.Owner`: the folders it answers for) and what the
executors read later to learn what it references: every table of each Iceberg catalog, each Delta
table's log segment, each lakegc repository's trees, each lakeFS repository's metadata files. Any
of them that cannot be read fails here, before a run exists: a warehouse run that cannot show what
some system references deletes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from lakegc.errors import InvalidArgument, LakegcError, first_line
from lakegc.storage import Storage, real_location, within
from lakegc.warehouse.owners import Owner

if TYPE_CHECKING:
    from lakegc.connectors.delta.gc import DeltaPlan
    from lakegc.connectors.iceberg.catalogs import Loaded
    from lakegc.lakefs.trees import Trees


@dataclass(frozen=True)
class Root:
    """The warehouse location as it really is (canonical, symlinks resolved)."""

    real: str

    def prefix_of(self, location: str) -> str | None:
        """The key prefix (`a/b/`) of a folder under the root, "" for the root itself, None when it
        lies elsewhere or on a store lakegc cannot address (it may still reference files here).
        Compared as keys are listed: a local path's percent escapes decoded (`sales 2024/`)."""
        try:
            real, root = plain(real_location(written(location))), plain(self.real)
        except InvalidArgument:
            return None
        if not within(root, real):
            return None
        return "" if real == root else real[len(root) + 1 :].rstrip("/") + "/"


def written(uri: str) -> str:
    """A location with only its scheme normalised: `s3a`/`s3n` are `s3`, a bare path and `file:/x`
    and `file://localhost/x` are `file:///x`."""
    for alias in ("s3a://", "s3n://"):
        if uri.startswith(alias):
            return "s3://" + uri.removeprefix(alias)
    if uri.startswith("/"):
        return "file://" + uri
    if uri.startswith("file://localhost/"):
        return "file:///" + uri.removeprefix("file://localhost/")
    if uri.startswith("file:/") and not uri.startswith("file://"):
        return "file://" + uri.removeprefix("file:")
    return uri


def plain(location: str) -> str:
    """A canonical location with a local path's percent escapes decoded, as its keys are spelled."""
    if location.startswith("file://"):
        return "file://" + unquote(urlparse(location).path)
    return location


@dataclass(frozen=True)
class DeltaTable:
    location: str
    prefix: str | None
    plan: DeltaPlan


@dataclass(frozen=True)
class RepositoryTrees:
    """A lakegc repository: its namespace, the trees of all its commits, and the full addresses its
    staging names (an address outside its namespace may lie under the warehouse)."""

    name: str
    namespace: str
    storage: Storage
    trees: frozenset[str]
    staged: tuple[str, ...]


@dataclass(frozen=True)
class LakeFSTrees:
    """A lakeFS repository: where its metadata files are read, and which there are (every commit
    counts here, a superset of what its own GC keeps)."""

    name: str
    namespace: str
    trees: Trees
    files: frozenset[str]


@dataclass(frozen=True)
class Systems:
    owners: tuple[Owner, ...]
    iceberg: tuple[Loaded, ...] = ()
    catalogs: tuple[str, ...] = ()  # the Iceberg catalogs, read again before deleting
    delta: tuple[DeltaTable, ...] = ()
    repositories: tuple[RepositoryTrees, ...] = ()
    lakefs: tuple[LakeFSTrees, ...] = ()
    iox_catalog: str | None = None
    metastore: str | None = None  # where the repositories are read again
    files: tuple[str, ...] = ()  # files a system keeps that no table names (a SQL catalog's database)


def read_systems(root: Root, named: Named, now: datetime) -> Systems:
    """Every named system, read (see the module)."""
    from lakegc.connectors.iceberg.catalogs import other_catalog_names

    configured = [c for c in other_catalog_names("") if c.lower() not in {n.lower() for n in named.iceberg_catalogs}]
    iceberg, catalogs, databases = iceberg_tables([*named.iceberg_catalogs, *configured])
    delta = delta_tables(root, named.delta_locations)
    repos = repositories(named.metastore, now)  # named or not: what they link here is live either way
    lakefs = [lakefs_trees(name, named) for name in dict.fromkeys(named.lakefs_repos)]
    owners = [iceberg_owner(root, t, t.catalog in configured) for t in iceberg]
    owners += [Owner("delta", f"Delta table {d.location}", d.prefix, location=d.location) for d in delta]
    owners += [
        Owner("repository", f"repository {r.name}", _prefix(root, r.namespace), location=r.namespace) for r in repos
    ]
    owners += [
        Owner("lakefs", f"lakeFS repository {r.name}", _prefix(root, r.namespace), location=r.namespace) for r in lakefs
    ]
    if named.iox_catalog:
        from lakegc.connectors.catalog import ParquetFileCatalog

        ParquetFileCatalog(named.iox_catalog).check()
    return Systems(
        tuple(owners),
        tuple(iceberg),
        tuple(catalogs),
        tuple(delta),
        tuple(repos),
        tuple(lakefs),
        named.iox_catalog,
        named.metastore,
        tuple(databases),
    )


@dataclass(frozen=True)
class Named:
    """What the command line names (the Delta locations already found, see `delta_locations`)."""

    iceberg_catalogs: tuple[str, ...] = ()
    delta_locations: tuple[str, ...] = ()
    repositories: bool = False
    metastore: str | None = None
    lakefs_repos: tuple[str, ...] = ()
    lakefs_endpoint: str | None = None
    lakefs_access_key_id: str | None = None
    lakefs_secret_access_key: str | None = None
    lakefs_local_path: str | None = None
    iox_catalog: str | None = None


def iceberg_tables(names: Iterable[str]) -> tuple[list[Loaded], list[str], list[str]]:
    """Every table of every named catalog; a table reached twice (the same catalog under two names,
    a table registered twice), in the very same state, once. Also the catalogs' SQLite database
    files (pyiceberg's own guide keeps one in the warehouse folder: it is no stray file)."""
    from lakegc.connectors.iceberg.catalogs import load_catalog, load_tables
    from lakegc.metastore import sqlite_file

    seen: set[tuple[str, str]] = set()
    tables: list[Loaded] = []
    databases: list[str] = []
    catalogs = list(dict.fromkeys(names))
    for name in catalogs:
        catalog = load_catalog(name)
        uri = str(getattr(catalog, "properties", {}).get("uri", ""))
        db = sqlite_file(uri) if uri.startswith("sqlite") else None
        databases += [db + suffix for suffix in ("", "-wal", "-shm", "-journal")] if db else []
        for t in load_tables(catalog, name, [], other=True):
            if t.state not in seen:
                seen.add(t.state)
                tables.append(t)
    return tables, catalogs, databases


def iceberg_owner(root: Root, t: Loaded, unnamed: bool) -> Owner:
    """A table's owner: kept whole when its catalog was not named (configured for pyiceberg, so
    known, but not this run's to clean inside) or when it says `gc.enabled=false`."""
    from lakegc.connectors.iceberg.catalogs import gc_enabled

    fields = frozenset(f.name for spec in t.table.metadata.partition_specs for f in spec.fields)
    name = f"{t.name} (iceberg catalog {t.catalog}{', not named' if unnamed else ''})"
    location = t.table.location()
    whole = unnamed or not gc_enabled(t.table)
    return Owner("iceberg", name, _prefix(root, location), whole, fields, location)


def delta_tables(root: Root, locations: Iterable[str]) -> list[DeltaTable]:
    """Each Delta table, its newest state read as `delta gc` reads it, at its own retention (a
    table at the same real place named twice: once)."""
    from lakegc.connectors.delta.gc import DeltaGcOptions, plan_table
    from lakegc.engine.collector import RunOptions
    from lakegc.engine.listing import open_location

    found: dict[str, DeltaTable] = {}
    for location in locations:
        real = real_location(location)
        if real in found:
            continue
        try:
            plan = plan_table(open_location(location, "Delta table"), DeltaGcOptions(), RunOptions(), "")
        except LakegcError as exc:
            raise LakegcError(f"Delta table {location}: {exc}") from None
        found[real] = DeltaTable(location, _prefix(root, location), plan)
    return list(found.values())


def repositories(metastore: str | None, now: datetime) -> list[RepositoryTrees]:
    """Every repository of the metastore (none when this machine has no metastore): its trees, and
    the full addresses its staging names."""
    from lakegc.metastore import default_url
    from lakegc.repo.repository import Lake

    if not namespaces(metastore):
        return []
    lake = Lake(metastore or default_url())
    found = []
    for info in lake.repositories():
        source = lake.repository(info.name).gc_source()
        staged = tuple(source.external_references(now))
        found.append(RepositoryTrees(info.name, source.namespace, source.storage, frozenset(source.trees()), staged))
    return found


def namespaces(metastore: str | None) -> list[tuple[str, str]]:
    """(name, namespace) of every repository of the metastore; none when this machine has none."""
    import os

    from lakegc.metastore import default_url, sqlite_file
    from lakegc.repo.repository import Lake

    url = metastore or default_url()
    db = sqlite_file(url)
    if db is not None and not os.path.exists(db):
        return []
    return [(r.name, r.storage_namespace) for r in Lake(url).repositories()]


def lakefs_trees(name: str, named: Named) -> LakeFSTrees:
    """A lakeFS repository's namespace, asked of lakeFS, and its metadata files."""
    from lakegc.engine.listing import open_location
    from lakegc.lakefs.client import Connection, LakeFS
    from lakegc.lakefs.namespace import namespace_location, namespace_prefixes
    from lakegc.lakefs.trees import Trees, metadata_files

    connection = Connection.resolve(named.lakefs_endpoint, named.lakefs_access_key_id, named.lakefs_secret_access_key)
    lakefs = LakeFS(connection, name)
    try:
        namespace = lakefs.storage_namespace()
    finally:
        lakefs.close()
    location = namespace_location(namespace, named.lakefs_local_path)
    storage = open_location(location, "lakeFS namespace")
    return LakeFSTrees(
        name, location, Trees(storage, namespace_prefixes(namespace, location)), frozenset(metadata_files(storage))
    )


def delta_locations(tables: Iterable[str], under: Iterable[str]) -> list[str]:
    """The Delta tables named one by one, and every folder holding a `_delta_log/` under each
    `--delta-under` location (found by listing it, on the driver: only the tables' folders are
    kept; a Delta table inside another is a table too)."""
    from lakegc.connectors.foreign import DELTA, marker_of
    from lakegc.engine.listing import open_location

    found = list(tables)
    for location in under:
        storage = open_location(location, "--delta-under location")
        folders: set[str] = set()
        try:
            for info in storage.list(""):
                marker = marker_of(info.key) if "_delta_log/" in info.key else None
                if marker is not None and marker[1] == DELTA:
                    folders.add(marker[0])
        except LakegcError:
            raise
        except Exception as exc:
            raise LakegcError(f"--delta-under {location} cannot be listed: {first_line(exc)}") from None
        found += [storage.uri.rstrip("/") + ("/" + f.rstrip("/") if f else "") for f in sorted(folders)]
    return list(dict.fromkeys(found))


def _prefix(root: Root, location: str) -> str | None:
    prefix = root.prefix_of(location)
    if prefix == "":
        raise LakegcError(
            f"{location} is the warehouse location itself: a table or namespace there is collected by its "
            "own GC; nothing was deleted"
        )
    return prefix
