"""What a repository run decides with, kept with the run.

`gc run` writes its plan as the run's parameters (gc_runs.parameters) before it marks; the sweep,
at once or deferred (`gc sweep`, perhaps days later, perhaps in another process), reads it back
as this typed value: the policies are resolved again from the same cutoffs at the same mark time,
and the restore window is the one the run was started with. A plan that cannot be read is one
error and nothing is swept.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakegc.errors import LakegcError
from lakegc.retention.rules import Policies
from lakegc.retention.rules import resolve_policies as rules_policies

if TYPE_CHECKING:
    from lakegc.repo.gc_source import GcSource


def resolve_policies(source: GcSource, cutoffs: tuple[str, ...], default_cutoff: str | None, now: datetime) -> Policies:
    """The run's policies (see `rules.resolve_policies`) with the repository's stored rules."""
    return rules_policies(
        source.rules() if not (cutoffs or default_cutoff is not None) else None, cutoffs, default_cutoff, now
    )


@dataclass(frozen=True)
class RepositoryPlan:
    """What a repository run decides with, kept with the run (gc_runs.parameters): its sweep, at
    once or deferred (`gc sweep`), reads this, never a loose dict."""

    now: datetime
    cutoffs: tuple[str, ...]
    default_cutoff: str | None
    min_age: timedelta
    window: timedelta | None  # the restore window (None: collected objects are deleted at once)
    inventory: dict[str, str] | None = None  # the S3 Inventory the listing came from: {manifest, created}

    def policies(self, source: GcSource) -> Policies:
        return resolve_policies(source, self.cutoffs, self.default_cutoff, self.now)

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoffs": list(self.cutoffs),
            "default_cutoff": self.default_cutoff,
            "min_age_seconds": self.min_age.total_seconds(),
            "now": self.now.isoformat(),
            "inventory": self.inventory,
            "quarantine_seconds": self.window.total_seconds() if self.window else None,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any], run_id: str) -> RepositoryPlan:
        """The plan as the run kept it; a plan that cannot be read (a tampered or damaged row) is
        one error and nothing is swept: a sweep never guesses what its mark decided with."""
        try:
            window = doc.get("quarantine_seconds")
            cutoffs, default_cutoff = doc["cutoffs"], doc["default_cutoff"]
            if not (isinstance(cutoffs, list) and all(isinstance(c, str) for c in cutoffs)):
                raise TypeError("cutoffs are not a list of strings")
            if default_cutoff is not None and not isinstance(default_cutoff, str):
                raise TypeError("the default cutoff is not a string")
            return cls(
                datetime.fromisoformat(doc["now"]),
                tuple(cutoffs),
                default_cutoff,
                timedelta(seconds=float(doc.get("min_age_seconds") or 0)),
                timedelta(seconds=float(window)) if window else None,
                doc.get("inventory"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise LakegcError(
                f"run {run_id}'s recorded plan cannot be read ({exc}); nothing was swept: run `gc run` again"
            ) from None
