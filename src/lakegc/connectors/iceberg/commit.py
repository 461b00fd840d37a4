"""An Iceberg table's snapshot expiry, committed to its catalog: the table's snapshots, refs and
`history.expire.*` properties put in the terms `expire.expiry` decides on (`plan_expiry`), and the
one commit per table that removes what it decides (`commit_expiry`).

Apart from `expire`, which is the decision and pure, because this is I/O against a catalog other
writers commit to meanwhile. The commit asserts the table's refs are still those the plan saw, so a
ref moved, removed or created in between fails it, and the plan is made again from the table as it
then is (three attempts, then the run fails): a writer committing meanwhile costs the expiry another
attempt, never the writer a snapshot or a ref.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from lakegc.connectors.iceberg.expire import Expiry, Ref, Snap, expiry
from lakegc.errors import LakegcError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableUpdate

MAX_REF_AGE_PROPERTY = "history.expire.max-ref-age-ms"
MAX_SNAPSHOT_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_PROPERTY = "history.expire.min-snapshots-to-keep"
DEFAULT_OLDER_THAN_MS, DEFAULT_RETAIN_LAST = 5 * 86_400_000, 1  # Iceberg's own defaults
_COMMIT_ATTEMPTS = 3


class Retention(Protocol):
    """The run options an expiry is planned with (`gc.IcebergGcOptions`); None: the table's properties decide."""

    @property
    def older_than(self) -> timedelta | None: ...

    @property
    def retain_last(self) -> int | None: ...


def plan_expiry(table: Table, now_ms: int, options: Retention) -> Expiry:
    """The table's snapshots and refs as `expire.expiry` takes them. --older-than and
    --retain-last, when given, are explicit, as an Iceberg action's expireOlderThan and retainLast
    are; when not, the table's `history.expire.max-snapshot-age-ms` and
    `history.expire.min-snapshots-to-keep` apply, else Iceberg's defaults (5 days, 1), as Iceberg's
    procedure called without them does. Its `history.expire.max-ref-age-ms` applies to refs
    without their own (no run option replaces it)."""
    from pyiceberg.table.refs import SnapshotRefType

    md = table.metadata
    snaps = [Snap(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms) for s in md.snapshots]
    refs = [
        Ref(
            name,
            r.snapshot_id,
            r.snapshot_ref_type == SnapshotRefType.BRANCH,
            r.min_snapshots_to_keep,
            r.max_snapshot_age_ms,
            r.max_ref_age_ms,
        )
        for name, r in md.refs.items()
    ]
    older_than_ms = (
        int(options.older_than.total_seconds() * 1000)
        if options.older_than is not None
        else _table_number(table, MAX_SNAPSHOT_AGE_PROPERTY, DEFAULT_OLDER_THAN_MS)
    )
    retain_last = (
        options.retain_last
        if options.retain_last is not None
        else max(1, _table_number(table, MIN_SNAPSHOTS_PROPERTY, DEFAULT_RETAIN_LAST))
    )
    return expiry(snaps, refs, now_ms, older_than_ms, retain_last, _table_number(table, MAX_REF_AGE_PROPERTY, None))


def _table_number(table: Table, name: str, default: int | None) -> int | None:
    """A table property that is a whole number (`default` when unset; for max-ref-age, None: refs
    without their own never age off). Anything else fails the run before anything changes, as
    Iceberg's action fails on it."""
    value = table.metadata.properties.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise LakegcError(
            f"table {'.'.join(table.name())}: {name}={value!r} is not a whole number; nothing was expired"
        ) from None


def commit_expiry(table: Table, now_ms: int, options: Retention) -> tuple[Table, Expiry]:
    """Remove the planned refs and snapshots, and the expired snapshots' partition statistics, in
    one commit that asserts the refs are still those the plan saw (a ref the plan removes too: it
    must still point where it was judged old): a ref moved, removed or created meanwhile fails the
    commit, and the plan is made again from the table as it then is. Returns the table as
    committed and what the last plan removed (nothing, if there was nothing to do)."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    from lakegc.connectors.iceberg.requirements import AssertRefsUnchanged, retention_of

    for attempt in range(_COMMIT_ATTEMPTS):
        plan = plan_expiry(table, now_ms, options)
        if not plan:
            return table, plan
        refs = {name: ref.snapshot_id for name, ref in table.metadata.refs.items()}
        requirements = (
            AssertTableUUID(uuid=table.metadata.table_uuid),
            *(AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id) for name, snapshot_id in refs.items()),
            *(
                ()
                if isinstance(table.catalog, RestCatalog)
                else (AssertRefsUnchanged(refs=refs, retention=retention_of(table.metadata)),)
            ),
        )
        try:
            table.catalog.commit_table(table, requirements, expiry_updates(table, plan))
            return table.catalog.load_table(table.name()), plan
        except CommitFailedException:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise LakegcError(
                    f"table {'.'.join(table.name())}: expiring snapshots kept losing to concurrent "
                    "commits; nothing was deleted"
                ) from None
            table = table.catalog.load_table(table.name())
    return table, Expiry()


def expiry_updates(table: Table, plan: Expiry) -> tuple[TableUpdate, ...]:
    """The metadata updates of an expiry, in the order pyiceberg applies them: the aged-off refs
    first (pyiceberg removes a ref only while its snapshot exists), then the expired snapshots'
    partition statistics (pyiceberg's snapshot removal drops their table statistics but not these,
    where Iceberg's drops both), then the snapshots."""
    from pyiceberg.table.update import RemovePartitionStatisticsUpdate, RemoveSnapshotRefUpdate, RemoveSnapshotsUpdate

    partition_stats = sorted(
        {p.snapshot_id for p in table.metadata.partition_statistics if p.snapshot_id in plan.snapshots}
    )
    return (
        *(RemoveSnapshotRefUpdate(ref_name=name) for name in plan.refs),
        *(RemovePartitionStatisticsUpdate(snapshot_id=snapshot_id) for snapshot_id in partition_stats),
        *((RemoveSnapshotsUpdate(snapshot_ids=sorted(plan.snapshots)),) if plan.snapshots else ()),
    )
