"""Tables of the metastore (docs/design.md), in SQLAlchemy Core so one definition serves SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator

from lakegc.timeutil import as_utc


class UtcDateTime(TypeDecorator):
    """Timestamps always come back timezone-aware UTC, whatever the database keeps."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def _string(length: int) -> sa.types.TypeEngine:
    """A string that sorts by bytes on every database, as on SQLite: names, paths and ids are
    listed in that order, while PostgreSQL would otherwise follow the database's locale (which may
    put "a" before "B", or ignore punctuation such as "/" and ".")."""
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


metadata = sa.MetaData()
NAME = _string(255)
ID = _string(64)
TEXT = sa.Text()
PATH = _string(1024)
LOCATION = _string(2048)

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", UtcDateTime, nullable=False),
)

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", NAME, primary_key=True),
    sa.Column("value", TEXT, nullable=False),
)

repositories = sa.Table(
    "repositories",
    metadata,
    sa.Column("name", NAME, primary_key=True),
    sa.Column("storage_namespace", LOCATION, nullable=False, unique=True),
    sa.Column("default_branch", NAME, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    # Bumped by every write that stages an entry or records a copy, which carry the new value (`version`):
    # a GC sweep re-checks only what was staged after its mark.
    sa.Column("staging_version", sa.BigInteger, nullable=False, server_default="0"),
)


def _repo_fk() -> sa.ForeignKey:
    return sa.ForeignKey("repositories.name", ondelete="CASCADE")


branches = sa.Table(
    "branches",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("name", NAME, primary_key=True),
    sa.Column("head", ID, nullable=False),
)

commits = sa.Table(
    "commits",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("id", ID, primary_key=True),
    sa.Column("parents", sa.JSON, nullable=False),  # ordered: first parent first
    sa.Column("metarange_id", ID, nullable=False),
    sa.Column("message", TEXT, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("creation_date", UtcDateTime, nullable=False),
    # True when the commit's changes to its first parent's tree are in tree_changes (NULL: a commit
    # from before schema v5, which `gc explain` answers by reading the trees instead).
    sa.Column("changes_recorded", sa.Boolean),
)

# What each commit changed against its first parent's tree, written with the commit: path -> the
# address it now holds (NULL: removed). A commit's tree is its first parent's with these applied,
# so they tell which commits hold an object without reading a tree (`gc explain`).
tree_changes = sa.Table(
    "tree_changes",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("commit_id", ID, primary_key=True),
    sa.Column("path", PATH, primary_key=True),
    sa.Column("address", LOCATION),
    sa.Column("address_kind", sa.String(16)),
    sa.Index("ix_tree_changes_address", "repository", "address_kind", "address"),
    sa.Index("ix_tree_changes_path", "repository", "path"),
)

tags = sa.Table(
    "tags",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("name", NAME, primary_key=True),
    sa.Column("commit_id", ID, nullable=False),
)

staged_entries = sa.Table(
    "staged_entries",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("branch", NAME, primary_key=True),
    sa.Column("path", PATH, primary_key=True),
    sa.Column("address", LOCATION),  # NULL for a tombstone
    sa.Column("address_kind", sa.String(16)),
    sa.Column("size", sa.BigInteger),
    sa.Column("checksum", sa.String(128)),
    sa.Column("mtime", UtcDateTime),
    sa.Column("metadata", TEXT),
    sa.Column("tombstone", sa.Boolean, nullable=False, default=False),
    sa.Column("version", sa.BigInteger),  # repositories.staging_version when staged (NULL: before schema v4)
    sa.Index("ix_staged_entries_address", "repository", "address_kind", "address"),  # gc explain's look-up
)

slices = sa.Table(
    "slices",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("name", NAME, primary_key=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("objects", sa.Integer, nullable=False),
    # The latest time an object may still land in the slice: the last upload's, or the expiry of the
    # last address token handed out in it. NULL (slices from schema v1): unknown, never settled.
    sa.Column("writable_until", UtcDateTime),
)

copy_records = sa.Table(
    "copy_records",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("repository", NAME, _repo_fk(), nullable=False, index=True),
    sa.Column("address", LOCATION, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("version", sa.BigInteger),  # repositories.staging_version when copied (NULL: before schema v4)
    sa.Index("ix_copy_records_address", "repository", "address"),  # gc explain's look-up
)

address_tokens = sa.Table(
    "address_tokens",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("address", LOCATION, primary_key=True),
    sa.Column("branch", NAME, nullable=False),
    sa.Column("path", PATH, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
)

gc_rules = sa.Table(
    "gc_rules",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("rules", sa.JSON, nullable=False),
)

gc_runs = sa.Table(
    "gc_runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("repository", NAME, _repo_fk(), nullable=False, index=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=False),
    sa.Column("finished_at", UtcDateTime),
    sa.Column("parameters", sa.JSON, nullable=False),
    sa.Column("counts", sa.JSON, nullable=False),
    sa.Column("error", TEXT),
)

gc_leases = sa.Table(
    "gc_leases",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("run_id", ID, nullable=False),
    sa.Column("host", NAME, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("acquired_at", UtcDateTime, nullable=False),
    sa.Column("renewed_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    # The last delete deadline the holder handed to a Spark Connect server, whose jobs outlive the
    # holder's process: while it may still be going, a dead holder's lease is not taken over early.
    sa.Column("work_until", UtcDateTime),
)

# A sweep's fence (repo.fence): while a sweep deletes, the commits whose objects it may delete, which
# writers must not bring back (a ref onto them, a merge, revert or copy out of them).
gc_fences = sa.Table(
    "gc_fences",
    metadata,
    sa.Column("repository", NAME, _repo_fk(), primary_key=True),
    sa.Column("run_id", ID, nullable=False),
    sa.Column("expired", sa.JSON, nullable=False),  # commit ids
    sa.Column("parameters", sa.JSON, nullable=False),  # the run's cutoffs, default cutoff and "now"
    sa.Column("raised_at", UtcDateTime, nullable=False),
)


# Users of `lakegc serve` and their key pairs (lakeFS's basic auth). The secret is kept only as a
# salted scrypt hash: it is shown once, when `lakegc auth create-user` makes it.
users = sa.Table(
    "users",
    metadata,
    sa.Column("name", NAME, primary_key=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

access_keys = sa.Table(
    "access_keys",
    metadata,
    sa.Column("access_key_id", NAME, primary_key=True),
    sa.Column("user", NAME, sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("secret_hash", sa.String(512), nullable=False),  # scrypt$n$r$p$salt-hex$hash-hex
    sa.Column("created_at", UtcDateTime, nullable=False),
)
