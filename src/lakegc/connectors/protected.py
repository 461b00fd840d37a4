"""What a connector run must never clean, whatever location it is given (the deletion guard's
list for `catalog gc`, `iceberg gc` and later connectors): its own run folder, the catalog's
database file, and everything the lakegc metastore protects (its database, lakegc's home and every
repository's namespace), when this machine has a lakegc metastore at all; for connectors that do
not read Iceberg themselves, also every table location of every catalog configured for pyiceberg."""

from __future__ import annotations

import os

from lakegc.engine.guard import Protected
from lakegc.metastore import default_url, sqlite_file
from lakegc.settings import lakegc_home


def connector_protected(
    metastore_url: str | None, runs_location: str, catalog_urls: tuple[str, ...] = ()
) -> list[Protected]:
    places = [Protected("the run folder", runs_location)]
    for url in catalog_urls:
        db = sqlite_file(url)
        if db is not None:
            places.append(Protected("the catalog database", db))
    url = metastore_url or default_url()
    db = sqlite_file(url)
    if db is not None and not os.path.exists(db):  # no metastore here (a plain IOx or Iceberg user): none created
        return places + [Protected("lakegc's home folder", str(lakegc_home().absolute()), inside_ok=True)]
    from lakegc.repo.repository import Lake

    return places + Lake(url).protected_places()  # lakegc's home, the metastore, every namespace


def iceberg_table_places() -> list[Protected]:
    """The location of every table of every catalog configured for pyiceberg (none configured:
    nothing). A configured catalog that cannot be read fails the run: safety can't be shown."""
    from lakegc.connectors.iceberg.catalogs import all_table_names, load_catalog, other_catalog_names
    from lakegc.errors import LakegcError, first_line

    places = []
    for name in other_catalog_names(""):
        catalog = load_catalog(name)
        try:
            for table in all_table_names(catalog):
                places.append(
                    Protected(f"table {table} of iceberg catalog {name!r}", catalog.load_table(table).location())
                )
        except Exception as exc:  # pyiceberg raises plain errors of many kinds
            raise LakegcError(
                f"iceberg catalog {name!r} cannot be read, so its tables' locations are unknown: {first_line(exc)}"
            ) from None
    return places
