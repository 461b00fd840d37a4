"""Retention rules: lakeFS's JSON per repository, and Nessie-style cutoff policies per run.

Both end up as one `Policy` per starting point of the commit walk (see `active.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from lakegc.errors import InvalidArgument, LakegcError, first_problem
from lakegc.retention.paths import PathClasses, glob_regex
from lakegc.timeutil import parse_date, parse_duration


class InvalidRules(LakegcError):
    pass


class BranchRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    branch_id: str = Field(min_length=1)
    retention_days: StrictInt = Field(ge=0)


class PathRule(BaseModel):
    """Entries whose path matches `glob` (gitignore-style, see `paths`) are retained
    `retention_days`, whatever their branch's retention."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    glob: str = Field(min_length=1)
    retention_days: StrictInt = Field(ge=0)

    @field_validator("glob")
    @classmethod
    def _is_a_glob(cls, glob: str) -> str:
        try:
            glob_regex(glob)
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from None
        return glob


class GcRules(BaseModel):
    """lakeFS-compatible: `{"default_retention_days": N, "branches": [{"branch_id", "retention_days"}]}`,
    and lakegc's `"path_rules": [{"glob", "retention_days"}]` (first match wins) and
    `"quarantine_days": N` (the restore window)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    default_retention_days: StrictInt = Field(ge=0)
    branches: list[BranchRule]
    path_rules: list[PathRule] = Field(default_factory=list)
    # the restore window: collected objects wait this long in the run's quarantine before a purge
    quarantine_days: StrictInt | None = Field(default=None, ge=0)

    def to_doc(self) -> dict:
        """The rules as JSON, as given: `path_rules` and `quarantine_days` only when set (rules
        without them read, and are described in run records, exactly as before they existed)."""
        doc = self.model_dump()
        if not self.path_rules:
            del doc["path_rules"]
        if self.quarantine_days is None:
            del doc["quarantine_days"]
        return doc

    def retention_days(self, branch: str | None) -> int:
        for rule in self.branches:
            if rule.branch_id == branch:
                return rule.retention_days
        return self.default_retention_days


def parse_rules(text: str | bytes) -> GcRules:
    """Validate rules; every problem becomes one InvalidRules line that names the field."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRules(f"invalid GC rules: not JSON ({exc})") from None
    try:
        rules = GcRules.model_validate(doc)
    except ValidationError as exc:
        raise InvalidRules(f"invalid GC rules: {first_problem(exc, 'rules')}") from None
    seen = [r.branch_id for r in rules.branches]
    if dupes := sorted({b for b in seen if seen.count(b) > 1}):
        raise InvalidRules(f"invalid GC rules: branch {dupes[0]!r} has more than one rule")
    return rules


# -- policies -----------------------------------------------------------------


@dataclass(frozen=True)
class KeepAll:
    """NONE: every commit of the history stays."""


@dataclass(frozen=True)
class KeepSince:
    """Keep what a retention reaching back to `threshold` keeps (lakeFS semantics). `retention` is
    the duration the threshold was computed from (None for a date): with it, how long a commit stays
    retained can be told (`explain`); it does not change what is kept."""

    threshold: datetime
    retention: timedelta | None = field(default=None, compare=False)


@dataclass(frozen=True)
class KeepCount:
    """Keep the newest `count` commits of the first-parent history, HEAD first."""

    count: int


Policy = KeepAll | KeepSince | KeepCount


def parse_policy(text: str, now: datetime) -> Policy:
    """`NONE`, a commit count (`10`), a duration (`7d`, `P7D`) or a date (ISO 8601)."""
    value = text.strip()
    if value.upper() == "NONE":
        return KeepAll()
    if re.fullmatch(r"[+-]?\d+", value):  # an integer is always a count (dates are ISO 8601 here)
        count = int(value)
        if count < 1:
            raise InvalidArgument(f"invalid cutoff policy {text!r}: a commit count must be at least 1")
        return KeepCount(count)
    try:
        retention = parse_duration(value)
        return KeepSince(now - retention, retention)
    except InvalidArgument:
        pass
    try:
        return KeepSince(parse_date(value))
    except InvalidArgument:
        raise InvalidArgument(
            f"invalid cutoff policy {text!r}: use a commit count, a duration (7d), a date (ISO 8601) or NONE"
        ) from None


@dataclass(frozen=True)
class Cutoff:
    pattern: re.Pattern[str]
    policy: Policy


def parse_cutoff(text: str, now: datetime) -> Cutoff:
    """`REGEX=POLICY`; the regex is anchored (it must match the whole branch name)."""
    regex, sep, policy = text.rpartition("=")
    if not sep or not regex:
        raise InvalidArgument(f"invalid cutoff {text!r}: expected REGEX=POLICY")
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise InvalidArgument(f"invalid cutoff {text!r}: bad regex ({exc})") from None
    return Cutoff(pattern, parse_policy(policy, now))


# A branch name (None for a dangling commit) -> its policy.
PolicyOf = Callable[[str | None], Policy]


def policies_from_rules(rules: GcRules | None, now: datetime) -> PolicyOf:
    """Stored rules as policies; no rules at all keeps every commit."""
    if rules is None:
        return lambda _branch: KeepAll()
    return lambda branch: _retention(now, rules.retention_days(branch))


def _retention(now: datetime, days: int) -> Policy:
    """A retention reaching back before year 1 keeps everything (and must not overflow)."""
    if days >= (now - datetime.min.replace(tzinfo=now.tzinfo)).days:
        return KeepAll()
    return KeepSince(now - timedelta(days=days), timedelta(days=days))


def policies_from_cutoffs(cutoffs: list[Cutoff], default: Policy) -> PolicyOf:
    """First matching cutoff wins; branches nothing matches, and dangling commits, get the default."""

    def policy_of(branch: str | None) -> Policy:
        if branch is not None:
            for cutoff in cutoffs:
                if cutoff.pattern.fullmatch(branch):
                    return cutoff.policy
        return default

    return policy_of


@dataclass(frozen=True)
class Policies:
    """A run's policies: the one each branch gets (None: a dangling commit), and how to describe
    them in the run's record (a run is incremental only on a base described the same way).

    With path rules, an entry whose path matches a rule's glob is retained by that rule's policy
    instead (`classes()[k]` for the k-th rule, `path_class` says which): its commit must be active
    under that policy for the entry to keep its object. Class 0 is `policy_of`."""

    policy_of: PolicyOf
    described: str
    path_rules: tuple[PathRule, ...] = ()
    now: datetime | None = None

    @cached_property
    def paths(self) -> PathClasses:
        return PathClasses([rule.glob for rule in self.path_rules])

    def path_class(self, path: str) -> int:
        return self.paths.of(path) if self.path_rules else 0

    def classes(self) -> list[PolicyOf]:
        """The policy of each path class: the branches' own, then one per path rule."""
        assert self.now is not None or not self.path_rules
        return [self.policy_of] + [
            _same_for_all(_retention(self.now, rule.retention_days))
            for rule in self.path_rules  # type: ignore[arg-type]
        ]


def _same_for_all(policy: Policy) -> PolicyOf:
    return lambda _branch: policy


def resolve_policies(
    rules: GcRules | None, cutoffs: tuple[str, ...], default_cutoff: str | None, now: datetime
) -> Policies:
    """Cutoffs given for the run replace the stored rules (path rules too); otherwise the stored
    rules apply, and with none stored every commit stays."""
    if cutoffs or default_cutoff is not None:
        parsed = [parse_cutoff(c, now) for c in cutoffs]
        default = parse_policy(default_cutoff, now) if default_cutoff is not None else KeepAll()
        described = " ".join(f"--cutoff {c}" for c in cutoffs) + f" --default-cutoff {default_cutoff or 'NONE'}"
        return Policies(policies_from_cutoffs(parsed, default), described.strip())
    return Policies(
        policies_from_rules(rules, now),
        "rules " + json.dumps(rules.to_doc()) if rules else "no rules: keep every commit",
        tuple(rules.path_rules) if rules else (),
        now,
    )
