"""Candidates by the age of their slice and by reason, for a repository run's report: counted in
Arrow by the tasks that write the candidates, so the candidates are never read back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakegc.engine.ages import BUCKETS_DAYS, NO_SLICE, bucket_label
from lakegc.repo.slices import SLICE_EPOCH_END

if TYPE_CHECKING:
    import pyarrow as pa

CANDIDATE_TALLY_KEYS = ["bucket", "reason"]


def candidate_tally(now: datetime) -> Callable[[pa.RecordBatch], pa.Table]:
    """What one batch of candidates adds to `candidate_ages`: rows of (bucket, reason, count,
    bytes), for `arrowio.write_parquet`'s tally. A candidate's bucket is the age of its slice
    (`slices.slice_created`) at `now`; the root's objects, outside any slice, have NO_SLICE."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakegc.repogc.refset import slice_of

    edges = np.array(BUCKETS_DAYS, dtype=np.float64)
    now_s = now.timestamp()

    def tally(batch: pa.RecordBatch) -> pa.Table:
        names = slice_of(batch.column("address"))
        matched = pc.match_substring_regex(names, r"^\d{1,18}$")  # lakegc's slice names: an inverted timestamp
        in_slice = matched.to_numpy(zero_copy_only=False)
        created = SLICE_EPOCH_END - pc.cast(pc.if_else(matched, names, "0"), pa.int64()).to_numpy(zero_copy_only=False)
        age_days = (now_s - created.astype(np.float64)) / 86400
        buckets = np.maximum(np.searchsorted(edges, age_days, side="right") - 1, 0)
        buckets = np.where(in_slice, buckets, NO_SLICE)
        return pa.table(
            {
                "bucket": pa.array(buckets, pa.int64()),
                "reason": batch.column("reason"),
                "count": pa.repeat(pa.scalar(1, pa.int64()), batch.num_rows),
                "bytes": pc.fill_null(batch.column("size"), 0),
            }
        )

    return tally


def candidate_ages(tallied: pa.Table | None) -> list[dict[str, Any]]:
    """[{bucket, label, reason, count, bytes}] from the tally (`candidate_tally`), by bucket then reason."""
    rows = tallied.to_pylist() if tallied is not None else []
    out = [
        {
            "bucket": int(r["bucket"]),
            "label": bucket_label(int(r["bucket"])),
            "reason": r["reason"],
            "count": int(r["count"]),
            "bytes": int(r["bytes"] or 0),
        }
        for r in rows
    ]
    return sorted(out, key=lambda b: (b["bucket"], b["reason"]))
