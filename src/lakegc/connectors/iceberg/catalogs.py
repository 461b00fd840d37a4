"""The tables an Iceberg GC run must know before it deletes anything: every table of the catalog it
collects, and every table of every other catalog configured for pyiceberg (`~/.pyiceberg.yaml`,
`PYICEBERG_CATALOG__NAME__*`).

Why the other catalogs: a table of another catalog may sit in a sub-folder of a collected location,
share it, hold it, or reference files under it (`add_files`, `register_table` of a copy), and
nothing in the collected catalog says so (Nessie's #12363 is that loss). So their tables protect
what they reference, as the collected catalog's own do, and their locations are left out of the
listing like any nested table's; a configured catalog that cannot be read fails the run, since
safety can no longer be proved. The same catalog configured under two names is recognised by
identical table states (UUID and metadata file), not read twice as a copy that would pin the
snapshots being expired. A copy registered elsewhere (`register_table`) in that very state is told
apart once the expiry commit moves the collected table: the sweep's re-read finds it changed and
keeps what it still references (a dry run's candidates may list those files).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from lakegc.connectors.iceberg.paths import Location, overlap, parse_location, symlink_conflict
from lakegc.connectors.iceberg.reachable import TableFiles
from lakegc.errors import LakegcError, first_line

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table


@dataclass
class Loaded:
    """A table as this run saw it."""

    name: str
    table: Table
    target: bool  # named on the command line: expired and collected; otherwise it only protects
    catalog: str = ""  # another configured catalog it belongs to; "" for the catalog collected
    expire: set[int] = field(default_factory=set)  # planned, not yet committed
    expire_refs: tuple[str, ...] = ()  # the refs that aged off (max-ref-age), planned likewise
    # the snapshots this run expires (or, dry, would), as the metadata named them before the expiry
    # commit removed them: what tells their files (reason `expired`) from true orphans
    expired: TableFiles | None = None

    @property
    def location(self) -> Location:
        return parse_location(self.table.location())

    @cached_property
    def real(self) -> Location:
        return real_location(self.location)

    @property
    def key(self) -> tuple[str, str]:
        return self.catalog, self.name

    @property
    def label(self) -> str:
        return f"{self.name} (catalog {self.catalog})" if self.catalog else self.name

    @property
    def state(self) -> tuple[str, str]:
        """What identifies a table's state whatever catalog name it is reached by."""
        return str(self.table.metadata.table_uuid), self.table.metadata_location

    def files(self) -> TableFiles:
        """The retained snapshots: all but those planned to expire."""
        return self.files_of(s.snapshot_id for s in self.table.metadata.snapshots if s.snapshot_id not in self.expire)

    def files_of(self, snapshot_ids: Iterable[int]) -> TableFiles:
        """These snapshots of the table as loaded now (the metadata is kept: an expiry commit later
        replaces `table`, not what this read)."""
        return TableFiles(
            dict(self.table.io.properties),
            self.table.location(),
            self.table.metadata,
            self.table.metadata_location,
            frozenset(snapshot_ids),
        )


def real_location(location: Location) -> Location:
    """A local location with its symlinks resolved (as far as it exists); other stores have none."""
    if location.scheme == "file" and not location.authority:
        return Location("file", "", os.path.realpath(location.path))
    return location


# -- catalogs --------------------------------------------------------------------------------------
def _config():  # type: ignore[no-untyped-def]
    """pyiceberg's configuration, read now: pyiceberg's own copy is read once, at import."""
    from pyiceberg.utils.config import Config

    try:
        return Config()
    except Exception as exc:  # a malformed .pyiceberg.yaml
        raise LakegcError(f"pyiceberg's configuration cannot be read: {first_line(exc)}") from None


def load_catalog(name: str) -> Catalog:
    """The catalog as pyiceberg's own configuration names it (~/.pyiceberg.yaml, PYICEBERG_* env)."""
    from pyiceberg.catalog import load_catalog as pyiceberg_load

    try:
        properties = _config().get_catalog_config(name)
    except LakegcError:
        raise
    except Exception as exc:
        raise LakegcError(f"pyiceberg's configuration cannot be read: {first_line(exc)}") from None
    if not properties:
        raise LakegcError(
            f"no iceberg catalog {name!r} in pyiceberg's configuration (.pyiceberg.yaml in "
            f"$PYICEBERG_HOME or ~, or PYICEBERG_CATALOG__{name.upper()}__* variables)"
        )
    try:
        return pyiceberg_load(name, **properties)
    except Exception as exc:  # pyiceberg raises plain ValueErrors, import and connection errors alike
        raise LakegcError(f"iceberg catalog {name!r}: {first_line(exc)}") from None


def other_catalog_names(collected: str) -> list[str]:
    """The catalogs configured for pyiceberg besides the one collected."""
    try:
        names = _config().get_known_catalogs()
    except LakegcError:
        raise
    except Exception as exc:
        raise LakegcError(f"pyiceberg's configuration cannot be read: {first_line(exc)}") from None
    return sorted(n for n in names if n.lower() != collected.lower())


def all_table_names(catalog: Catalog) -> list[str]:
    """Every table of every namespace (nested ones too)."""
    names: list[str] = []
    pending: list[tuple[str, ...]] = list(catalog.list_namespaces())
    while pending:
        namespace = pending.pop()
        names += [".".join(identifier) for identifier in catalog.list_tables(namespace)]
        pending += [child for child in catalog.list_namespaces(namespace) if child != namespace]
    return sorted(set(names))


def load_tables(catalog: Catalog, catalog_name: str, targets: list[str], other: bool = False) -> list[Loaded]:
    """The named tables, then every other table of the catalog (they protect what they reference).
    `other`: a catalog besides the one collected (its tables are never targets)."""
    from pyiceberg.exceptions import NoSuchTableError

    wanted = list(dict.fromkeys(targets))
    loaded = []
    for name in wanted:
        try:
            loaded.append(Loaded(name, catalog.load_table(name), True))
        except NoSuchTableError:
            raise LakegcError(f"table {name!r} not found in iceberg catalog {catalog_name!r}") from None
        except Exception as exc:
            raise LakegcError(f"table {name!r} of iceberg catalog {catalog_name!r}: {first_line(exc)}") from None
    try:
        others = [n for n in all_table_names(catalog) if n not in wanted]
    except Exception as exc:
        raise LakegcError(f"iceberg catalog {catalog_name!r}: cannot list its tables: {first_line(exc)}") from None
    for name in others:
        try:
            loaded.append(Loaded(name, catalog.load_table(name), False, catalog_name if other else ""))
        except Exception as exc:
            raise LakegcError(
                f"table {name!r} of iceberg catalog {catalog_name!r} cannot be loaded, so what it "
                f"references is unknown; nothing was collected: {first_line(exc)}"
            ) from None
    return loaded


def other_catalogs_tables(collected: str, own: list[Loaded]) -> tuple[list[Loaded], list[str]]:
    """Every table of the other configured catalogs (protecting only), and those catalogs' names.
    A table in the very state of one already loaded is the same table reached by another name."""
    seen = {t.state for t in own}
    found: list[Loaded] = []
    names = other_catalog_names(collected)
    for name in names:
        try:
            tables = load_tables(load_catalog(name), name, [], other=True)
        except LakegcError as exc:
            raise LakegcError(
                f"another catalog configured for pyiceberg cannot be read, so what its tables hold "
                f"under the locations collected is unknown; nothing was collected: {exc}"
            ) from None
        for t in tables:
            if t.state not in seen:
                seen.add(t.state)
                found.append(t)
    return found, names


def reload_all(catalog: Catalog, catalog_name: str) -> list[Loaded]:
    """Every table of every configured catalog as it is now (none of them a target)."""
    own = load_tables(catalog, catalog_name, [])
    return own + other_catalogs_tables(catalog_name, own)[0]


# -- refusals --------------------------------------------------------------------------------------
def gc_enabled(table: Table) -> bool:
    """`gc.enabled`, true unless set; a value that is no boolean counts as false, as in Iceberg's
    Java library (which only reads "true" as true)."""
    return table.metadata.properties.get("gc.enabled", "true").lower() == "true"


def check_collectable(tables: list[Loaded]) -> None:
    """Refuse tables that say their files are not theirs to delete, and tables sharing a location
    with one that says so (real locations: a symlink does not hide the overlap)."""
    for t in tables:
        if t.target and not gc_enabled(t.table):
            raise LakegcError(
                f"table {t.name!r} has gc.enabled={t.table.metadata.properties['gc.enabled']}: its files "
                "may belong to other tables"
            )
    for t in tables:
        if not t.target and not gc_enabled(t.table):
            for target in tables:
                if target.target and overlap(t.real, target.real):
                    raise LakegcError(
                        f"table {target.name!r} shares its location with {t.label!r}, which has "
                        f"gc.enabled={t.table.metadata.properties['gc.enabled']}"
                    )


def check_symlinks(targets: list[Loaded], tables: list[Loaded]) -> None:
    """Refuse a collected table whose location is, or is reached through, a symlink into another
    table's location, or that another table's location reaches so (`paths.symlink_conflict`)."""
    for t in targets:
        for o in tables:
            if o.key != t.key and symlink_conflict(t.location, t.real, o.location, o.real):
                raise LakegcError(
                    f"table {t.label!r} at {t.table.location()} and table {o.label!r} at "
                    f"{o.table.location()} overlap through a symlink (real paths {t.real.path} and "
                    f"{o.real.path}); nothing was collected"
                )


def changed_since(seen: list[Loaded], now: list[Loaded]) -> list[Loaded]:
    """Tables whose metadata moved since they were loaded, and tables the run had not seen, as they
    are now."""
    before = {t.key: t.table.metadata_location for t in seen}
    return [t for t in now if before.get(t.key) != t.table.metadata_location]
