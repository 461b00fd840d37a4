"""Three-way merge as a pure decision over two sets of changes from a common base."""

from __future__ import annotations

from lakegc.repo.model import Changes, Entry


def three_way(ours: Changes, theirs: Changes) -> tuple[Changes, list[str]]:
    """Edits to apply on top of `ours` to bring in `theirs`, and the conflicting paths.

    Both are changes from the same base. A path changed on both sides is a conflict unless both
    sides made the very same change (then there is nothing to apply).
    """
    to_apply: Changes = {}
    conflicts: list[str] = []
    for path, change in theirs.items():
        if path in ours:
            if _content(ours[path]) != _content(change):
                conflicts.append(path)
            continue
        to_apply[path] = change
    return to_apply, sorted(conflicts)


def _content(entry: Entry | None) -> tuple[int, str, str | None] | None:
    """What makes two changes "the same": the content (size, checksum, metadata), as in lakeFS, not
    where or when it was written."""
    return None if entry is None else (entry.size, entry.checksum, entry.metadata)
