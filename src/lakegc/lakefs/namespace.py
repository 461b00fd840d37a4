"""A lakeFS storage namespace as lakeFS's GC sees it: where it is, what in it may be collected, and
how an entry's address names an object in it. Pure functions: the decisions `lakefs.gc` acts on.

- `local://PATH` is lakeFS's local blockstore: PATH under its `blockstore.local.path`
  (`--local-path`), or an absolute PATH when that is not given; `s3://bucket/prefix` is itself.
- Objects live under `data/` (the newer layout) or as files directly in the namespace's root (the
  older one). `_lakefs/` (lakeFS's metadata, its GC's own files) is never listed, nor the `dummy`
  file lakeFS writes at the root when it checks it may write there.
- An entry's address is relative to the namespace (address type RELATIVE), a full URI (FULL), or, in
  entries written before address types existed, relative unless it starts with the namespace's
  scheme. A full URI inside the namespace names the object at the rest of it; one elsewhere is
  outside what GC may delete, and is left out (lakeFS's client does the same).
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import PurePosixPath

from lakegc.engine.listing import Folder
from lakegc.errors import InvalidArgument, LakegcError

DATA = "data/"
METADATA = "_lakefs/"
DUMMY = "dummy"
RELATIVE = 1  # catalog.Entry.AddressType.RELATIVE; 0 (by prefix, deprecated) and 2 (FULL) are told by the address
FILE_ID = re.compile(r"[0-9a-f]{64}")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class NamespaceFileError(LakegcError):
    """A file lakeFS wrote for its GC that cannot be read as lakeFS writes it."""


def namespace_location(storage_namespace: str, local_path: str | None) -> str:
    """Where lakegc opens the namespace: an s3:// URI, or a folder for lakeFS's local blockstore
    (never outside `local_path`, which is taken absolute, as lakeFS's answers name it)."""
    if storage_namespace.startswith("s3://"):
        return storage_namespace.rstrip("/")
    if storage_namespace.startswith("local://"):
        path = storage_namespace.removeprefix("local://").rstrip("/")
        if ".." in path.split("/"):
            raise InvalidArgument(f"storage namespace {storage_namespace} climbs out of its blockstore")
        if local_path:
            return str(PurePosixPath(os.path.abspath(local_path)) / path.lstrip("/"))
        if not path.startswith("/"):
            raise InvalidArgument(
                f"storage namespace {storage_namespace} is under lakeFS's blockstore.local.path: give --local-path DIR"
            )
        return path
    raise InvalidArgument(f"storage namespace {storage_namespace}: lakegc collects s3:// and local:// namespaces")


def namespace_prefixes(storage_namespace: str, location: str) -> tuple[str, ...]:
    """How a full address or a location lakeFS answers may start when it is inside the namespace
    (with one trailing slash): the namespace as the repository names it, and, for the local
    blockstore, `local://` and the folder it resolves to (lakeFS answers its locations so)."""
    prefixes = [storage_namespace.rstrip("/") + "/"]
    if storage_namespace.startswith("local://"):
        prefixes.append("local://" + location.rstrip("/") + "/")
    return tuple(dict.fromkeys(prefixes))


def relative_address(address: str, address_type: int | None, prefixes: tuple[str, ...]) -> str | None:
    """The object an entry names, relative to the namespace (`namespace_prefixes`); None for a full
    address elsewhere (never collected here)."""
    if address_type == RELATIVE:
        return address
    for prefix in prefixes:
        if address.startswith(prefix):
            return address[len(prefix) :]
    return None if "://" in address else address


def key_of(location: str, prefixes: tuple[str, ...], what: str) -> str:
    """A location lakeFS answered (its GC files, a metarange) as a key in the namespace: a full URI
    inside it, or a path relative to it (lakeFS answers a tree's location so); anything elsewhere
    is refused, since lakegc reads nothing outside what it was pointed at."""
    prefix = "" if "://" not in location else next((p for p in prefixes if location.startswith(p)), None)
    if prefix is None:
        raise NamespaceFileError(f"lakeFS put {what} at {location}, outside the namespace {prefixes[0]}")
    key = location[len(prefix) :].strip("/")
    if not key or ".." in key.split("/"):
        raise NamespaceFileError(f"lakeFS put {what} at {location}: not a file of the namespace")
    return key


def metadata_key(file_id: str) -> str:
    return METADATA + file_id


def listing_folders(data_dirs: list[str]) -> list[Folder]:
    """One listing task per `data/` slice folder (with all below it), one for the files directly in
    `data/`, one for the files directly in the root (the older layout); nothing else."""
    return [
        Folder("", False, "root"),
        Folder(DATA, False, "data"),
        *(Folder(f"{DATA}{name}/", True, "data") for name in sorted(data_dirs)),
    ]


COLLECTABLE = r"^(data/[^/].*|[^/]+)$"  # under data/, or a file directly in the root (gc._collectable)


def active_metaranges(content: bytes, name: str) -> list[str]:
    """The metaranges of the active commits in lakeFS's `commits.csv` (header
    `commit_id,expired,metarange_id`), distinct and sorted: the trees GC must keep."""
    try:
        reader = csv.DictReader(io.StringIO(content.decode("utf-8")))
        rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise NamespaceFileError(f"lakeFS commits file {name}: {exc}") from None
    if not {"commit_id", "expired", "metarange_id"} <= set(reader.fieldnames or ()):
        raise NamespaceFileError(f"lakeFS commits file {name}: no commit_id,expired,metarange_id header")
    if not rows:  # every branch's head is active: lakeFS always lists some
        raise NamespaceFileError(f"lakeFS commits file {name} lists no commit (a truncated file?)")
    active = set()
    for number, row in enumerate(rows, start=2):
        expired, metarange = (row.get("expired") or "").strip().lower(), (row.get("metarange_id") or "").strip()
        if expired not in ("true", "false"):
            raise NamespaceFileError(f"lakeFS commits file {name}: line {number} is not a commit row")
        if expired == "false" and metarange:  # a commit with no metarange (the first) has no tree
            active.add(metarange)
    return sorted(active)


def check_file_id(file_id: str, what: str) -> str:
    """A metarange or range id, before it becomes a key: lakeFS's ids are SHA-256 hex."""
    if not FILE_ID.fullmatch(file_id):
        raise NamespaceFileError(f"lakeFS {what} id {file_id[:80]!r} is not a lakeFS file id")
    return file_id


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(f"invalid lakeFS GC run id {run_id[:80]!r}")
    return run_id
