"""A Delta table's transaction log, as file names and the few strings inside actions (pure).

The log is `_delta_log/` under the table: one JSON file of actions per commit
(`00000000000000000012.json`) and, now and then, a checkpoint holding the whole state at a version
in Parquet (classic `N.checkpoint.parquet`, multi-part `N.checkpoint.0000000001.0000000003.parquet`,
or V2 `N.checkpoint.<uuid>.json|parquet`, whose `sidecar` actions name Parquet files in
`_delta_log/_sidecars/`). A table's state at version V is a *segment*: the newest complete
checkpoint at or before V, then every commit after it up to V. A segment with a hole (a commit
file missing, half of a multi-part checkpoint) is not a state anyone can read, and a run on it
deletes nothing.

Paths in add and remove actions are URIs relative to the table root, percent-encoded: the file
`part=a%20b/x.parquet` is written `part=a%2520b/x.parquet`. `table_key` turns one into the key a
listing of the table finds.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import unquote

from lakegc.connectors.iceberg.paths import parse_location, within
from lakegc.errors import LakegcError

LOG = "_delta_log/"
SIDECARS = LOG + "_sidecars/"
DEFAULT_RETENTION = timedelta(days=7)  # delta.deletedFileRetentionDuration unset

_COMMIT = re.compile(r"(\d{20})\.json")
_CLASSIC = re.compile(r"(\d{20})\.checkpoint\.parquet")
_MULTI = re.compile(r"(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet")
_V2 = re.compile(r"(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)")


class NotADeltaTable(LakegcError):
    """The location holds no Delta log."""


class BrokenLog(LakegcError):
    """The log cannot give a complete state: nothing is deleted."""


@dataclass(frozen=True)
class Checkpoint:
    version: int
    keys: tuple[str, ...]  # every part, in order (one file unless multi-part)


@dataclass(frozen=True)
class LogFiles:
    """What a listing of `_delta_log/` found, by kind (keys relative to the table root)."""

    commits: dict[int, str] = field(default_factory=dict)
    checkpoints: list[Checkpoint] = field(default_factory=list)  # complete ones only

    @property
    def latest(self) -> int | None:
        versions = [*self.commits, *(c.version for c in self.checkpoints)]
        return max(versions) if versions else None


@dataclass(frozen=True)
class Segment:
    """The files whose actions make the table's state at `version`: `checkpoint` parts (their
    actions count as of the checkpoint's version) then `commits` (version, key), oldest first."""

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[tuple[int, str], ...]


def log_files(names: Iterable[str]) -> LogFiles:
    """Sort the file names of `_delta_log/` (no folder) into commits and complete checkpoints;
    anything else there (`_last_checkpoint`, `.crc` files, log compactions) is ignored."""
    commits: dict[int, str] = {}
    multi: dict[tuple[int, int], dict[int, str]] = {}
    checkpoints: list[Checkpoint] = []
    for name in names:
        key = LOG + name
        if m := _COMMIT.fullmatch(name):
            commits[int(m.group(1))] = key
        elif (m := _CLASSIC.fullmatch(name)) or (m := _V2.fullmatch(name)):
            checkpoints.append(Checkpoint(int(m.group(1)), (key,)))
        elif m := _MULTI.fullmatch(name):
            multi.setdefault((int(m.group(1)), int(m.group(3))), {})[int(m.group(2))] = key
    for (version, parts), found in multi.items():
        if parts > 0 and sorted(found) == list(range(1, parts + 1)):
            checkpoints.append(Checkpoint(version, tuple(found[i] for i in range(1, parts + 1))))
    return LogFiles(commits, sorted(checkpoints, key=lambda c: (c.version, c.keys)))


def segment(files: LogFiles, version: int | None = None) -> Segment:
    """The segment of the table's state at `version` (default: the latest), or BrokenLog."""
    latest = files.latest
    if latest is None:
        raise NotADeltaTable("no Delta log: _delta_log/ holds no commit and no checkpoint")
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise BrokenLog(f"version {target} is not in the Delta log (its latest version is {latest})")
    usable = [c for c in files.checkpoints if c.version <= target]
    checkpoint = usable[-1] if usable else None
    start = checkpoint.version + 1 if checkpoint else 0
    missing = [v for v in range(start, target + 1) if v not in files.commits]
    if missing:
        where = f"after the checkpoint at version {checkpoint.version}" if checkpoint else "and no checkpoint covers it"
        raise BrokenLog(
            f"the Delta log is incomplete: commit {missing[0]} of version {target}'s state is missing ({where}); "
            "nothing was deleted"
        )
    return Segment(target, checkpoint, tuple((v, files.commits[v]) for v in range(start, target + 1)))


ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")


def table_key(path: str, roots: tuple[str, ...], *, protects: bool = False) -> str | None:
    """The key under the table root of an add or remove path: relative paths are percent-decoded;
    an absolute URI (`scheme:/...`) counts only when it lies under the table's location as written
    or as it really is (`roots`, symlinks resolved), compared as Iceberg's orphan removal compares
    locations (`s3a://` and `s3n://` are `s3://`, `file:/` is `file:///`). An oddly spelled path
    (`a//b`, `./a`, `a/../b`) is never a file to delete: for a remove it is None; for a path that
    `protects` a file (an add, a deletion vector) it is the key it folds to, so the file it most
    likely names stays. None too for anything outside the table."""
    absolute = ABSOLUTE.match(path) is not None
    decoded = unquote(path) if absolute or "%" in path else path
    if absolute:
        where = parse_location(decoded)  # dot segments and // folded
        spelled = decoded.split("://", 1)[-1] if "://" in decoded else decoded.split(":", 1)[1]
        odd = "//" in spelled or any(part in (".", "..") for part in spelled.split("/"))
        for root in map(parse_location, roots):
            if within(where, root) and where.path != root.path and (protects or not odd):
                return where.path[len(root.path.rstrip("/")) + 1 :]
        return None
    if _plain(decoded):
        return decoded
    if not protects or decoded.startswith("/"):
        return None
    folded = posixpath.normpath(decoded)
    return None if folded in (".", "..") or folded.startswith("../") else folded


def _plain(key: str) -> bool:
    return not any(part in ("", ".", "..") for part in key.split("/"))


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


def z85_uuid(text: str) -> uuid.UUID:
    """The UUID a 20-character Z85 string encodes (Delta's deletion-vector file names)."""
    if len(text) != 20 or any(c not in _Z85_VALUE for c in text):
        raise ValueError(f"not a Z85-encoded UUID: {text!r}")
    raw = b""
    for i in range(0, 20, 5):
        n = 0
        for c in text[i : i + 5]:
            n = n * 85 + _Z85_VALUE[c]
        raw += n.to_bytes(4, "big")
    return uuid.UUID(bytes=raw)


def dv_key(storage_type: str | None, path_or_inline: str | None, roots: tuple[str, ...]) -> str | None:
    """The key of the file a deletion vector lives in, or None (inline, or outside the table).
    `u`: a random prefix then the file's UUID in Z85 -> `<prefix>/deletion_vector_<uuid>.bin`;
    `p`: an absolute path. A descriptor that cannot be decoded raises BrokenLog: a file the table
    needs could not be named, so none may be deleted."""
    if storage_type == "u" and path_or_inline:
        prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
        try:
            name = f"deletion_vector_{z85_uuid(encoded)}.bin"
        except ValueError:
            raise BrokenLog(f"a deletion vector names {path_or_inline!r}, which is not a valid descriptor") from None
        return f"{prefix}/{name}" if prefix else name
    if storage_type == "p" and path_or_inline:
        return table_key(path_or_inline, roots, protects=True)
    return None


def dv_id(storage_type: str | None, path_or_inline: str | None, offset: int | None) -> str:
    """A deletion vector's unique id, with the file path half of an add/remove's identity."""
    if not storage_type:
        return ""
    return f"{storage_type}{path_or_inline}" + (f"@{offset}" if offset is not None else "")


_INTERVAL = re.compile(r"\s*(?:interval\s+)?(\d+)\s*([a-z]+)\s*", re.IGNORECASE)
_MICROSECONDS = {  # per unit
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 604_800_000_000,
}
_LONGEST = timedelta(days=365 * 1000)  # longer is a typo, and `now - retention` could not be computed


def parse_interval(text: str) -> timedelta:
    """A Delta table property duration (`interval 7 days`, `interval 1 week`, `168 hours`);
    nanoseconds are rounded down to whole microseconds."""
    m = _INTERVAL.fullmatch(text or "")
    unit = m.group(2).lower().removesuffix("s") if m else ""
    if m and unit in (*_MICROSECONDS, "nanosecond"):
        micros = int(m.group(1)) // 1000 if unit == "nanosecond" else int(m.group(1)) * _MICROSECONDS[unit]
        if micros <= _LONGEST // timedelta(microseconds=1):
            return timedelta(microseconds=micros)
    raise BrokenLog(f"table property delta.deletedFileRetentionDuration={text!r} is not a duration lakegc can use")
