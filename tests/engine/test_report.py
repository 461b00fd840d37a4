"""report.html as a pure function of a run's summary: what it says, where the cutoff is drawn, and
that nothing from the lake can inject markup."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lakegc.engine.ages import BUCKETS_DAYS, NO_SLICE, bucket_label
from lakegc.engine.arrowio import sum_tallies
from lakegc.engine.report import _position, render_report
from lakegc.engine.runs import Run, RunState
from lakegc.repo.slices import SLICE_EPOCH_END
from lakegc.repogc.slice_ages import CANDIDATE_TALLY_KEYS, candidate_ages, candidate_tally


def summary(**changes) -> Run:
    s = Run(
        "20261122T100000000Z-0928bb",
        "repository",
        "repo",
        RunState.SWEPT,
        False,
        "2026-11-22T10:00:00+00:00",
        "2026-11-21T10:00:00+00:00",
        86400.0,
        finished_at="2026-11-22T10:01:00+00:00",
        num_listed=10,
        num_candidates=3,
        bytes_candidates=3072,
        candidates_by_reason={"expired": 2, "uncommitted": 1},
        num_deleted=3,
        bytes_deleted=3072,
        phases={"listing the namespace": 1.5, "reading committed trees": 0.5},
        object_ages=[
            {"bucket": 0, "label": "0-1d", "count": 4, "bytes": 40},
            {"bucket": 5, "label": "21-30d", "count": 6, "bytes": 60},
        ],
        details={
            "policy": "no rules: keep every commit",
            "candidate_ages": [
                {"bucket": 5, "label": "21-30d", "reason": "expired", "count": 2, "bytes": 2048},
                {
                    "bucket": NO_SLICE,
                    "label": bucket_label(NO_SLICE),
                    "reason": "uncommitted",
                    "count": 1,
                    "bytes": 1024,
                },
            ],
        },
    )
    for key, value in changes.items():
        setattr(s.repo if hasattr(s.repo, key) else s, key, value)
    return s


def test_bucket_labels_cover_every_age():
    assert [bucket_label(i) for i in range(len(BUCKETS_DAYS))][:3] == ["0-1d", "1-2d", "2-7d"]
    assert bucket_label(len(BUCKETS_DAYS) - 1) == "365d+"


@pytest.mark.parametrize("days, position", [(0, 0.0), (0.5, 0.5), (1, 1.0), (3, 2 + 1 / 5), (21, 5.0), (400, 10.0)])
def test_the_cutoff_line_sits_where_the_min_age_falls_on_the_bucket_axis(days, position):
    assert _position(days) == pytest.approx(position)


def test_report_shows_what_was_reclaimed_and_every_section():
    page = render_report(summary())
    assert "3.0 KiB reclaimed: 3 objects deleted" in page
    assert "<td>expired</td><td class=n>2</td>" in page and "<td>uncommitted</td><td class=n>1</td>" in page
    assert "<td>21-30d</td><td>expired</td><td class=n>2</td><td class=n>2.0 KiB</td>" in page
    assert "no slice (namespace root)" in page
    assert "min-age cutoff (1d)" in page and page.count("<svg") == 3


def test_a_dry_run_reports_what_would_be_reclaimed():
    page = render_report(summary(dry_run=True, state=RunState.MARKED, num_deleted=0, bytes_deleted=0))
    assert "3.0 KiB would be reclaimed by 3 candidates (nothing deleted yet)" in page


def test_a_failed_run_still_renders_with_its_error_escaped():
    page = render_report(
        summary(
            state=RunState.FAILED,
            error="<script>alert(1)</script> in s3://b/<x>",
            target="<b>repo</b>",
            object_ages=[],
            candidate_ages=[],
            phases={},
        )
    )
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;repo&lt;/b&gt;" in page
    assert '<span class="state failed">' in page and "no objects listed" in page


def test_names_from_the_lake_in_the_top_lists_and_the_curve_are_escaped():
    """Paths, branch names and retentions come from users: none of them can add markup."""
    evil = '<img src=x onerror="alert(1)">'
    page = render_report(
        summary(
            top={
                "prefixes": [{"name": f"{evil}/", "candidates": 2, "bytes": 2048}],
                "branches": [{"name": evil, "candidates": 2, "bytes": 2048}],
                "commits": [
                    {
                        "name": "c" * 64,
                        "candidates": 2,
                        "bytes": 2048,
                        "branch": evil,
                        "created": "2026-11-01T00:00:00Z",
                    }
                ],
            },
            retention_curve=[
                {"retention": evil, "seconds": 86400.0, "num_candidates": 3, "bytes": 3072},
                {"retention": "7d", "seconds": 604800.0, "num_candidates": 1, "bytes": 1024},
            ],
        )
    )
    assert "<img" not in page and page.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 5
    assert "<h2>Commits whose expiry freed the most</h2>" in page and 'aria-label="retention curve"' in page
    assert "c" * 64 in page and "2.0 KiB" in page


def test_candidates_are_tallied_by_their_slices_age_and_reason_as_they_are_written():
    """What the writing tasks count (`candidate_tally`, summed by `write_parquet`): the slice's age
    at the run's time decides the bucket; the root, a folder that is not a slice and a name too
    long to be one count as no slice; a slice from the future counts as 0 days old."""
    now = datetime(2026, 11, 25, tzinfo=UTC)

    def key(days: float) -> str:
        return f"data/{SLICE_EPOCH_END - int(now.timestamp() - days * 86400):010d}/object"

    batch = pa.RecordBatch.from_pydict(
        {
            "address": [
                "at-root",
                key(0.5),
                key(-2),
                key(3),
                key(3),
                key(400),
                "data/notaslice/x",
                "data/" + "9" * 20 + "/x",
            ],
            "size": [1, 2, 4, 8, 16, None, 64, 128],
            "reason": [
                "uncommitted",
                "uncommitted",
                "uncommitted",
                "expired",
                "expired",
                "expired",
                "uncommitted",
                "uncommitted",
            ],
        }
    )
    tally = candidate_tally(now)
    summed = sum_tallies([tally(batch.slice(0, 4)), tally(batch.slice(4))], CANDIDATE_TALLY_KEYS)
    assert [(b["label"], b["reason"], b["count"], b["bytes"]) for b in candidate_ages(summed)] == [
        (bucket_label(NO_SLICE), "uncommitted", 3, 1 + 64 + 128),
        ("0-1d", "uncommitted", 2, 2 + 4),
        ("2-7d", "expired", 2, 8 + 16),
        (f"{BUCKETS_DAYS[-1]}d+", "expired", 1, 0),
    ]
    assert candidate_ages(None) == []
