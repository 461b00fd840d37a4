"""Listing a repository's namespace by slice, in parallel on the executors.

`data/<slice>/` folders are listed one task per slice; the namespace root is listed without
recursion (objects written before slices existed). `_lakegc/` is never listed: GC metadata is not
garbage.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lakegc.engine.listing import Folder, list_folders
from lakegc.repo.slices import DATA_PREFIX
from lakegc.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROOT = ""  # the pseudo-slice standing for the namespace root's own files


def is_listed(key: str) -> bool:
    """Whether a run lists the namespace key: a file of a slice (`data/<slice>/...`, any depth) or
    of the namespace root itself. Nothing else is ever a candidate (`_lakegc/` above all)."""
    return "/" not in key or (key.startswith(DATA_PREFIX) and "/" in key[len(DATA_PREFIX) :])


def slices(storage: Storage) -> list[str]:
    """Slice names, newest first (their names sort that way)."""
    return storage.list_dirs(DATA_PREFIX)


def list_namespace(spark: SparkSession, storage: Storage, slice_names: list[str], older_than: datetime) -> DataFrame:
    """Objects of the given slices (and the root); `young` marks those modified at or after
    `older_than` (never candidates, and they keep their slice from settling)."""
    folders = [Folder("", False, ROOT), *(Folder(f"{DATA_PREFIX}{name}/", True, name) for name in slice_names)]
    return list_folders(spark, storage, folders, older_than)
