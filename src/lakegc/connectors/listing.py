"""Listing a location we do not own, spread over the executors folder by folder."""

from __future__ import annotations

from lakegc.errors import NamespaceError
from lakegc.gc.listing import Folder
from lakegc.storage import LocalStorage, Storage, open_storage


def location_folders(storage: Storage, label: str = "", depth: int = 2) -> list[Folder]:
    """Listing tasks (labelled `label`) that cover every object under the storage's root exactly
    once: the folders `depth` levels down are listed with everything below them, the ones above
    only for their own objects (Iceberg: `data/<partition>/`, `metadata/`; IOx: `<namespace>/<table>/`)."""
    tasks = [Folder("", False, label)]
    level = [""]
    for down in range(1, depth + 1):
        level = [f"{prefix}{name}/" for prefix in level for name in storage.list_dirs(prefix)]
        tasks += [Folder(prefix, down == depth, label) for prefix in level]
    return tasks


def open_location(location: str, what: str) -> Storage:
    """The storage at `location`, which must already exist: GC never creates what it cleans."""
    storage = open_storage(location)
    if isinstance(storage, LocalStorage):
        if not storage.root.is_dir():
            raise NamespaceError(f"{what} {storage.uri} does not exist or is not a folder")
    else:
        storage.prepare()  # the bucket must answer
    return storage
