"""A namespace in a local folder. Writes are atomic (temp file + rename) so a crash leaves no torn object."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import stat
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from lakegc.errors import LakegcError, NamespaceError, ObjectNotFound, PathEscapesNamespace
from lakegc.storage.base import LISTING_BATCH, DeleteOutcome, ObjectInfo, check_key, object_columns

if TYPE_CHECKING:
    import pyarrow as pa

_TMP_PREFIX = ".lakegc-tmp-"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class LocalStorage:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.uri = self.root.as_uri()

    def prepare(self) -> None:
        """Make sure the folder exists and is a folder; writability shows on the first write."""
        if self.root.exists() and not self.root.is_dir():
            raise NamespaceError(f"namespace {self.uri} is not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise NamespaceError(f"namespace {self.uri} cannot be created: {exc.strerror}") from None

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def full_uri(self, key: str) -> str:
        return self._path(key).as_uri()

    def reached_directly(self, folder: str) -> bool:
        """No symlink lies between the root and `folder` (a key's folder, '' for the root), the
        folder itself included: what lakegc lists or looks up through one is not the namespace's."""
        if not folder:
            return True
        return os.path.realpath(self._path(folder)) == os.path.join(os.path.realpath(self.root), folder)

    def _folder(self, prefix: str) -> str:
        """The folder of a listing prefix, refused when a symlink lies on the way to it: a listing
        that followed one would offer another folder's files as this namespace's garbage."""
        folder = prefix.rstrip("/")
        if not folder:
            return str(self.root)
        path = self._path(folder)
        if not self.reached_directly(folder):
            raise PathEscapesNamespace(
                f"{self.full_uri(folder)} is reached through a symlink: lakegc never lists or deletes through one"
            )
        return str(path)

    def list(self, prefix: str = "", *, recursive: bool = True) -> Iterator[ObjectInfo]:
        """Files under `prefix` (a folder prefix, '' for the root), in key order."""
        folder = prefix.rstrip("/")
        yield from _walk(self._folder(folder), f"{folder}/" if folder else "", recursive)

    def list_batches(self, prefix: str = "", *, recursive: bool = True) -> Iterator[pa.RecordBatch]:
        folder = prefix.rstrip("/")
        yield from _scan(self._folder(folder), f"{folder}/" if folder else "", recursive)

    def facts(self, folder: str) -> dict[str, str]:
        """Size, mtime and ctime in nanoseconds, inode and device (`file_facts`) of each file
        directly in `folder`, through symlinks as a read goes: nobody can set a ctime back, and
        a file swapped in by a rename is another inode."""
        base, at = self._folder(folder), f"{folder.rstrip('/')}/"
        found: dict[str, str] = {}
        try:
            with os.scandir(base) as entries:
                for entry in entries:
                    if entry.name.startswith(_TMP_PREFIX):
                        continue
                    with contextlib.suppress(OSError):  # gone meanwhile, or a dangling link: no facts
                        st = os.stat(entry.path)
                        if stat.S_ISREG(st.st_mode):
                            found[at + entry.name] = file_facts(st)
        except (FileNotFoundError, NotADirectoryError):
            pass
        return found

    def read_with_facts(self, key: str) -> tuple[bytes, str | None]:
        with self.open_read(key) as f:
            before = file_facts(os.fstat(f.fileno()))
            data = f.read()
            after = file_facts(os.fstat(f.fileno()))
        return data, after if after == before else None

    def is_empty(self) -> bool:
        """Nothing at all in the folder: a symlink or a special file counts (listings skip them)."""
        try:
            with os.scandir(self.root) as found:
                return next(found, None) is None
        except FileNotFoundError:
            return True

    def list_dirs(self, prefix: str = "") -> list[str]:
        base = self._folder(prefix)
        try:
            return sorted(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read(self, key: str) -> bytes:
        with self.open_read(key) as f:
            return f.read()

    def open_read(self, key: str) -> BinaryIO:
        try:
            return open(self._path(key), "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(f"{self.full_uri(key)} does not exist") from None

    def write(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._folder(key.rpartition("/")[0])  # never write through a symlink into someone else's folder
        source = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
        digest = hashlib.md5(usedforsecurity=False)
        # Not mkstemp, whose files are 0600: an object gets the mode the umask gives any new file.
        tmp = str(path.parent / f"{_TMP_PREFIX}{os.urandom(8).hex()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        st = path.stat()
        return ObjectInfo(key, st.st_size, _mtime(st), digest.hexdigest())

    def delete_many(self, keys: Iterable[str]) -> list[DeleteOutcome]:
        """Unlink each key through descriptors opened folder by folder from the root, none of them
        following a symlink: a folder swapped for a symlink (before or during the run) makes its
        keys fail, never deletes where the link points. A missing object counts as deleted."""
        outcomes = []
        with _Folders(self.root) as folders:
            for key in keys:
                try:
                    folder, _, name = check_key(key).rpartition("/")
                    fd = folders.open(folder)
                    if fd is not None:
                        os.unlink(name, dir_fd=fd)
                    outcomes.append(DeleteOutcome(key, True))
                except FileNotFoundError:
                    outcomes.append(DeleteOutcome(key, True))
                except (OSError, LakegcError) as exc:  # a bad key fails alone, and is recorded
                    outcomes.append(DeleteOutcome(key, False, _delete_error(exc)))
        return outcomes

    def move_many(self, moves: Iterable[tuple[str, str]]) -> list[DeleteOutcome]:
        """Move each object from its key to a destination key of this namespace (a quarantine, or
        back from one): a hard link at the destination, then the source unlinked, both through
        folder descriptors that never follow a symlink. An object already at the destination is
        never replaced. One outcome per source key: ok when the source is gone and the object is
        at the destination (a move interrupted between link and unlink completes on a retry); a
        source missing and no destination either is ok too (nothing was there to move)."""
        outcomes = []
        with _Folders(self.root) as sources, _Folders(self.root, create=True) as targets:
            for key, destination in moves:
                try:
                    outcomes.append(_move(sources, targets, check_key(key), check_key(destination)))
                except (OSError, LakegcError) as exc:  # a bad key fails alone, and is recorded
                    outcomes.append(DeleteOutcome(key, False, _delete_error(exc)))
        return outcomes

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def stat(self, key: str) -> ObjectInfo | None:
        try:
            st = self._path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return ObjectInfo(key, st.st_size, _mtime(st)) if stat.S_ISREG(st.st_mode) else None


def _move(sources: _Folders, targets: _Folders, key: str, destination: str) -> DeleteOutcome:
    folder, _, name = key.rpartition("/")
    to_folder, _, to_name = destination.rpartition("/")
    src, dst = sources.open(folder), targets.open(to_folder)
    if dst is None:
        raise FileNotFoundError(errno.ENOENT, "the destination folder could not be made", to_folder)
    try:
        there = os.stat(to_name, dir_fd=dst, follow_symlinks=False)
    except FileNotFoundError:
        there = None
    try:
        here = None if src is None else os.stat(name, dir_fd=src, follow_symlinks=False)
    except FileNotFoundError:
        here = None
    if here is None:
        return DeleteOutcome(key, True)  # moved before (or never there): nothing left at the key
    if not stat.S_ISREG(here.st_mode):
        return DeleteOutcome(key, False, "refused: not a regular file (lakegc moves only objects)")
    if there is not None and (there.st_ino, there.st_dev) != (here.st_ino, here.st_dev):
        return DeleteOutcome(key, False, f"refused: {destination} already holds another object")
    if there is None:
        os.link(name, to_name, src_dir_fd=src, dst_dir_fd=dst, follow_symlinks=False)
    os.unlink(name, dir_fd=src)
    return DeleteOutcome(key, True)


class _Folders:
    """Directory descriptors for deleting and moving, opened component by component with
    O_NOFOLLOW (and made, with `create`, for a move's destination); the last folder stays open,
    since keys arrive grouped by folder."""

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def __init__(self, root: Path, *, create: bool = False):
        self.root = root
        self.create = create
        self.current: tuple[str, int | None] | None = None

    def __enter__(self) -> _Folders:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def open(self, folder: str) -> int | None:
        """A descriptor of `folder` (relative to the root), or None when it does not exist."""
        if self.current is not None and self.current[0] == folder:
            return self.current[1]
        self._close()
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            fd = None
        for part in folder.split("/") if folder and fd is not None else ():
            try:
                if self.create:
                    with contextlib.suppress(FileExistsError):  # a folder, or a symlink the open refuses
                        os.mkdir(part, dir_fd=fd)
                nxt = os.open(part, self._FLAGS, dir_fd=fd)
            except FileNotFoundError:
                nxt = None
            except OSError:
                os.close(fd)
                raise
            os.close(fd)
            fd = nxt
            if fd is None:
                break
        self.current = (folder, fd)
        return fd

    def _close(self) -> None:
        if self.current is not None and self.current[1] is not None:
            os.close(self.current[1])
        self.current = None


def _delete_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "refused: a folder on its path is a symlink or not a folder (lakegc never deletes through a symlink)"
    return str(exc)


def file_facts(st: os.stat_result) -> str:
    """What changes whenever a file's bytes can have: size, mtime and ctime (ns), inode, device."""
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


def _mtime(st: os.stat_result) -> datetime:
    """To the microsecond, truncated, exactly as `_scan` gives it."""
    return _EPOCH + timedelta(microseconds=st.st_mtime_ns // 1000)


def _walk(base: str, prefix: str, recursive: bool) -> Iterator[ObjectInfo]:
    """Files under the folder `base`, whose keys start with `prefix`, in key order. Keys are built
    as strings: GC lists millions of them, and path objects would triple the cost."""
    try:
        with os.scandir(base) as found:
            # Sort as full keys sort: a folder's name is followed by "/" inside its keys.
            entries = sorted(((e.name + "/" if e.is_dir(follow_symlinks=False) else e.name), e) for e in found)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name, entry in entries:
        if name.endswith("/"):
            if recursive:
                yield from _walk(entry.path, prefix + name, recursive)
        elif not name.startswith(_TMP_PREFIX):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                yield ObjectInfo(prefix + name, st.st_size, _mtime(st))


def _scan(base: str, prefix: str, recursive: bool) -> Iterator[pa.RecordBatch]:
    """The files of `_walk`, unsorted, gathered straight into columns (about twice as fast: no
    sorting, no object or datetime per file)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    folders = [(base, prefix)]
    while folders:
        folder, at = folders.pop()
        try:
            with os.scandir(folder) as found:
                for entry in found:
                    if entry.is_dir(follow_symlinks=False):
                        if recursive:
                            folders.append((entry.path, f"{at}{entry.name}/"))
                    elif not entry.name.startswith(_TMP_PREFIX):
                        st = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            keys.append(at + entry.name)
                            sizes.append(st.st_size)
                            mtimes.append(st.st_mtime_ns)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if len(keys) >= LISTING_BATCH or (not folders and keys):
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(keys, pa.string()),
                    pa.array(sizes, pa.int64()),
                    pc.cast(
                        pa.array(mtimes, pa.timestamp("ns", tz="UTC")), object_columns().field("mtime").type, safe=False
                    ),
                ],
                schema=object_columns(),
            )
            keys, sizes, mtimes = [], [], []
