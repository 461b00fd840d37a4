"""Which snapshots an Iceberg table expires: one pure function over its snapshots and refs.

A snapshot goes when it is older than the cutoff and nothing keeps it:
- every ref's snapshot stays (a tag pins its snapshot, a branch its head);
- along each branch's history (head first, following parents) the newest `retain_last` stay, as
  Iceberg's retainLast does for the current branch: the one table state of a branch that was
  current at the cutoff must still be readable, whatever its age. A branch's own
  `min-snapshots-to-keep` and `max-snapshot-age-ms` keep more when they ask for more (we take the
  more careful of the branch's setting and the run's);
- snapshots on no branch's history (left by a rollback or a dropped branch) only have their age.
Refs are never removed, so nothing a reader named can disappear from under it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Snap:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int


@dataclass(frozen=True)
class Ref:
    name: str
    snapshot_id: int
    branch: bool
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None


def expired_snapshots(
    snapshots: list[Snap], refs: list[Ref], now_ms: int, older_than_ms: int, retain_last: int
) -> set[int]:
    """Ids of the snapshots to expire: older than `now_ms - older_than_ms` and kept by no ref."""
    by_id = {s.snapshot_id: s for s in snapshots}
    cutoff = now_ms - older_than_ms
    kept: set[int] = set()
    for ref in refs:
        kept.add(ref.snapshot_id)
        if not ref.branch:
            continue
        keep_last = max(retain_last, ref.min_snapshots_to_keep or 0)
        branch_cutoff = min(cutoff, now_ms - ref.max_snapshot_age_ms) if ref.max_snapshot_age_ms else cutoff
        current, depth = by_id.get(ref.snapshot_id), 0
        while current is not None:
            # the parent of a kept snapshot is kept while the walk is still inside the newest
            # `keep_last`, or while the snapshots are younger than the branch's cutoff
            if depth < keep_last or current.timestamp_ms >= branch_cutoff:
                kept.add(current.snapshot_id)
            current = by_id.get(current.parent_id) if current.parent_id is not None else None
            depth += 1
    return {s.snapshot_id for s in snapshots if s.snapshot_id not in kept and s.timestamp_ms < cutoff}
