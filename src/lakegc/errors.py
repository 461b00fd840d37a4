"""Typed errors. The CLI turns every `LakegcError` into one `error: ...` line and exit 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class LakegcError(Exception):
    """Base of every error a user can cause or fix; never a bug in lakegc."""


class InvalidArgument(LakegcError):
    """Malformed input: a URI, a path, a date, a duration, a name."""


class NotFound(LakegcError):
    """A repository, branch, tag, commit or path that does not exist."""


class RepoNotFound(NotFound):
    pass


class RefNotFound(NotFound):
    pass


class PathNotFound(NotFound):
    pass


class AlreadyExists(LakegcError):
    pass


class AmbiguousRef(LakegcError):
    pass


class NamespaceError(LakegcError):
    """A storage namespace that cannot be used: missing, not a folder, not writable, taken."""


class PathEscapesNamespace(InvalidArgument):
    """A key or address that would leave the storage namespace."""


class NothingToCommit(LakegcError):
    pass


class MergeConflict(LakegcError):
    def __init__(self, paths: list[str]):
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(f"merge conflict on {len(paths)} path(s): {shown}")
        self.paths = paths


class DirtyBranch(LakegcError):
    pass


class InvalidToken(LakegcError):
    pass


class PreconditionFailed(LakegcError):
    """A conditional write whose condition did not hold (HTTP's 412); nothing was staged."""


class ObjectGone(LakegcError):
    """The entry exists but its object was collected: HTTP's 410."""

    def __init__(self, what: str):
        super().__init__(f"{what}: object gone (410)")


class ObjectNotFound(LakegcError):
    """A storage key that does not exist (a storage-level fact, not a repository one)."""


class MetastoreError(LakegcError):
    pass


class ConcurrentUpdate(LakegcError):
    """Someone else moved the branch while we worked; the caller may retry."""


class UnsafeLocation(LakegcError):
    """A location a delete must not touch: the filesystem root, a home folder, or one that holds or
    lies inside a database, another repository's namespace or another table's location."""


class CorruptMetadata(LakegcError):
    """A range or metarange whose content does not hash to its id (tampered with, truncated,
    replaced, unreadable or missing). Nothing may trust it: a GC run fails rather than delete."""


def first_problem(exc: ValidationError, whole: str) -> str:
    """A pydantic validation error as one line for an `error:` message: the first problem, named
    by its field (`whole` when it concerns the whole document)."""
    first = exc.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc']) or whole}: {first['msg']}"


def first_line(exc: BaseException | str, limit: int = 300) -> str:
    """The first line of an error's text (of an exception without one, its type's name), cut at
    `limit`: what an `error:` line quotes of an error a library raised."""
    text = str(exc).strip() or (type(exc).__name__ if isinstance(exc, BaseException) else "")
    line = text.splitlines()[0].strip() if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
