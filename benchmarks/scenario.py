"""Scenario S1: lakeFS's design target for GC (20M objects, 1K branches, 30K commits, 5M uncommitted,
1M stale) at 1/20, shrunk or grown by `scale`; and the tiny lake, the README demo's size."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

HISTORY = timedelta(days=60)  # commits are backdated over this span
RETENTION_DAYS = 21  # every branch keeps 21 days (lakeFS's worked example)
NEWEST = timedelta(hours=26)  # nothing is younger than this, so the default 24 h min-age sees it all


@dataclass(frozen=True)
class Scenario:
    objects: int  # in the namespace, before any GC
    branches: int  # main included
    commits: int  # merges included
    uncommitted: int  # staged entries (uncommitted references)
    stale: int  # garbage: objects only expired commits hold, plus objects nothing references

    @classmethod
    def s1(cls, scale: float = 1.0) -> Scenario:
        if scale <= 0:
            raise ValueError("--scale must be positive")
        branches = max(3, round(100 * scale))
        return cls(
            objects=max(200, round(1_000_000 * scale)),
            branches=branches,
            commits=max(6 * branches, round(3_000 * scale)),
            uncommitted=max(20, round(250_000 * scale)),
            stale=max(20, round(50_000 * scale)),
        )

    @classmethod
    def tiny(cls) -> Scenario:
        """A lake the size of the README's demo (src/lakegc/demo.py: 20 objects, a dozen commits, three
        branches, a few staged and stale objects), built the S1 way: what a first `gc run` costs
        when there is next to nothing to collect. `s1` never goes below 200 objects."""
        return cls(objects=20, branches=3, commits=10, uncommitted=4, stale=4)

    @property
    def committed(self) -> int:
        """Objects added by commits: the live ones plus those only expired commits still hold."""
        return self.objects - self.uncommitted - self.stale + self.stale_expired

    @property
    def stale_expired(self) -> int:
        return self.stale // 2

    @property
    def merges(self) -> int:
        return (self.branches - 1) * 3 // 5  # three features in five end merged into main
