"""Which snapshots and refs an Iceberg table expires: one pure function over its snapshots and refs,
deciding as Iceberg's own ExpireSnapshots (`RemoveSnapshots`) does.

The run's `--older-than` and `--retain-last` are the action's explicit `expireOlderThan` and
`retainLast`; like them, they take the place of the table's `history.expire.max-snapshot-age-ms`
and `history.expire.min-snapshots-to-keep`, which only give Iceberg's defaults when the action
sets none. The table's `history.expire.max-ref-age-ms` has no run option to override it, so it
stays the default for refs that set no `max-ref-age-ms` of their own. Then:

1. Refs first. `main` always stays. Any other ref (branch or tag) whose snapshot is older than its
   own `max-ref-age-ms` (else the table's default; else no limit) is removed. The ref, not its
   snapshot: that snapshot goes or stays by the rules below, now without the ref.
2. A kept ref's snapshot stays, however old (a tag pins its snapshot, a branch its head).
3. Each kept branch walks its history, head first, following parents, with its own
   `min-snapshots-to-keep` and `max-snapshot-age-ms` where it sets them, *instead of* the run's
   values (a branch may keep less than the run asks, as well as more). A snapshot stays while the
   walk has kept fewer than that many, or while it is no older than the branch's cutoff; the walk
   stops at the first snapshot that passes neither, and every older ancestor is left to the other
   branches' walks (it does not stay for being young: it is on a branch's history, and that
   branch let it go).
4. Snapshots on no kept branch's history and under no kept tag (left by a rollback, a staged
   commit, a removed ref) stay while they are no older than the run's cutoff.
Everything else is expired.

A ref whose snapshot no longer exists is left alone: Iceberg drops it, but pyiceberg's commit
cannot remove a ref whose snapshot it does not know, and such a ref keeps no snapshot either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

MAIN = "main"


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
    max_ref_age_ms: int | None = None


@dataclass(frozen=True)
class Expiry:
    """What an expiry commit removes: snapshot ids, and the names of the refs that aged off
    (sorted). A snapshot a removed ref pointed at is in `snapshots` only if nothing else keeps it."""

    snapshots: frozenset[int] = frozenset()
    refs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.snapshots or self.refs)


def expiry(
    snapshots: list[Snap],
    refs: list[Ref],
    now_ms: int,
    older_than_ms: int,
    retain_last: int,
    default_max_ref_age_ms: int | None = None,
) -> Expiry:
    """The snapshots and refs to expire (see the module). `default_max_ref_age_ms` is the table's
    `history.expire.max-ref-age-ms` (None: refs without their own limit never age off)."""
    by_id = {s.snapshot_id: s for s in snapshots}
    cutoff = now_ms - older_than_ms
    known = [r for r in refs if r.snapshot_id in by_id]  # a dangling ref is neither kept nor removed
    kept_refs = [r for r in known if _ref_stays(r, by_id[r.snapshot_id], now_ms, default_max_ref_age_ms)]
    kept = {r.snapshot_id for r in kept_refs}
    on_a_ref: set[int] = set()
    for ref in kept_refs:
        if not ref.branch:
            on_a_ref.add(ref.snapshot_id)
            continue
        history = list(_ancestors(ref.snapshot_id, by_id))
        on_a_ref.update(s.snapshot_id for s in history)
        keep_last = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain_last
        branch_cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else cutoff
        kept.update(_branch_keeps(history, keep_last, branch_cutoff))
    kept.update(s.snapshot_id for s in snapshots if s.snapshot_id not in on_a_ref and s.timestamp_ms >= cutoff)
    kept_names = {r.name for r in kept_refs}
    removed_refs = tuple(sorted(r.name for r in known if r.name not in kept_names))
    return Expiry(frozenset(s.snapshot_id for s in snapshots if s.snapshot_id not in kept), removed_refs)


def _ref_stays(ref: Ref, snapshot: Snap, now_ms: int, default_max_ref_age_ms: int | None) -> bool:
    """`main` always; another ref while its snapshot is no older than its max-ref-age."""
    max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_max_ref_age_ms
    return ref.name == MAIN or max_age is None or now_ms - snapshot.timestamp_ms <= max_age


def _ancestors(snapshot_id: int, by_id: dict[int, Snap]) -> Iterator[Snap]:
    """The snapshot and its ancestors, newest first, up to the first parent no longer known (one
    expired earlier ends the history, as in Iceberg's `SnapshotUtil.ancestorsOf`)."""
    seen: set[int] = set()
    current = by_id.get(snapshot_id)
    while current is not None and current.snapshot_id not in seen:  # `seen`: malformed metadata cannot loop
        seen.add(current.snapshot_id)
        yield current
        current = by_id.get(current.parent_id) if current.parent_id is not None else None


def _branch_keeps(history: list[Snap], keep_last: int, branch_cutoff: int) -> set[int]:
    """The snapshots a branch's walk keeps: the newest `keep_last`, then on while they are no older
    than the cutoff; the first that is neither ends the walk."""
    kept: set[int] = set()
    for snap in history:
        if len(kept) < keep_last or snap.timestamp_ms >= branch_cutoff:
            kept.add(snap.snapshot_id)
        else:
            break
    return kept
