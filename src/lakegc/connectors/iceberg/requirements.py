"""A commit requirement of ours, for expiry commits (imported only when one is made: it needs pyiceberg)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import ValidatableTableRequirement


class AssertRefsUnchanged(ValidatableTableRequirement):
    """The table's refs are exactly those the expiry was planned with. Removing a snapshot also
    drops every ref pointing at it, so a tag or branch created on an old snapshot meanwhile must
    fail the commit, and the spec's requirements can only name refs known in advance. Checked by
    the catalogs that validate requirements in this process (SQL, Hive, Glue, DynamoDB); a REST
    catalog validates on its server and is sent the spec's requirements only."""

    type: Literal["lakegc-assert-refs-unchanged"] = Field(default="lakegc-assert-refs-unchanged")
    refs: dict[str, int]
    retention: dict[str, list[str | int | None]] = Field(default_factory=dict)  # `retention_of` the planned table

    def validate(self, base_metadata: TableMetadata | None) -> None:
        now = {name: ref.snapshot_id for name, ref in base_metadata.refs.items()} if base_metadata else None
        if now != self.refs:
            raise CommitFailedException("Requirement failed: the table's refs changed since the expiry was planned")
        if base_metadata is not None and self.retention and retention_of(base_metadata) != self.retention:
            raise CommitFailedException(
                "Requirement failed: the table's retention settings changed since the expiry was planned"
            )


def retention_of(metadata: TableMetadata) -> dict[str, list[str | int | None]]:
    """What the plan's retention came from: each ref's own settings and the table's
    `history.expire.*` properties (a change to either makes another plan)."""
    settings: dict[str, list[str | int | None]] = {
        f"ref {name}": [ref.min_snapshots_to_keep, ref.max_snapshot_age_ms, ref.max_ref_age_ms]
        for name, ref in metadata.refs.items()
    }
    settings["table"] = [f"{k}={v}" for k, v in sorted(metadata.properties.items()) if k.startswith("history.expire.")]
    return settings
