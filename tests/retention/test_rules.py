"""Retention rules: lakeFS JSON rules and Nessie-style
cutoff policies, and how both become one policy per branch."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from lakegc.errors import InvalidArgument
from lakegc.retention.rules import (
    BranchRule,
    GcRules,
    InvalidRules,
    KeepAll,
    KeepCount,
    KeepSince,
    parse_cutoff,
    parse_policy,
    parse_rules,
    policies_from_cutoffs,
    policies_from_rules,
)

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def rules_json(default=21, branches=None, **extra) -> str:
    doc = {
        "default_retention_days": default,
        "branches": [{"branch_id": "main", "retention_days": 28}] if branches is None else branches,
    }
    return json.dumps({**doc, **extra})


# -- lakeFS JSON rules: accepted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, default, per_branch",
    [
        pytest.param(rules_json(), 21, {"main": 28}, id="lakefs-docs-example"),
        pytest.param(
            rules_json(21, [{"branch_id": "main", "retention_days": 28}, {"branch_id": "dev", "retention_days": 7}]),
            21,
            {"main": 28, "dev": 7},
            id="two-branches",
        ),
        pytest.param(rules_json(5, []), 5, {}, id="empty-branch-list"),
        pytest.param(rules_json(0, [{"branch_id": "main", "retention_days": 0}]), 0, {"main": 0}, id="zero-days"),
        pytest.param(
            rules_json(3, [{"branch_id": "not-created-yet", "retention_days": 9}]),
            3,
            {"not-created-yet": 9},
            id="unknown-branch-allowed",
        ),
        pytest.param(
            rules_json(3, [{"retention_days": 9, "branch_id": "feature/x"}]),
            3,
            {"feature/x": 9},
            id="keys-in-any-order",
        ),
        pytest.param('  {"branches": [], "default_retention_days": 1}\n', 1, {}, id="whitespace-around"),
        pytest.param(rules_json(7, []).encode(), 7, {}, id="bytes"),
    ],
)
def test_valid_rules(text, default, per_branch):
    rules = parse_rules(text)
    assert rules.default_retention_days == default
    assert {r.branch_id: r.retention_days for r in rules.branches} == per_branch
    for branch, days in per_branch.items():
        assert rules.retention_days(branch) == days
    assert rules.retention_days("some-other-branch") == default
    assert rules.retention_days(None) == default


# -- lakeFS JSON rules: refused with one clear line ------------------------------------------------


@pytest.mark.parametrize(
    "text, needles",
    [
        pytest.param("not json", ["not json"], id="not-json"),
        pytest.param("", ["not json"], id="empty-input"),
        pytest.param(b"\xff\xfe", ["not json"], id="not-utf8"),
        pytest.param('{"default_retention_days": 7, "branches": [', ["not json"], id="truncated-json"),
        pytest.param("[]", ["rules"], id="a-list-not-an-object"),
        pytest.param("7", ["rules"], id="a-number-not-an-object"),
        pytest.param("{}", ["default_retention_days", "required"], id="empty-object"),
        pytest.param('{"branches": []}', ["default_retention_days", "required"], id="missing-default"),
        pytest.param('{"default_retention_days": 7}', ["branches", "required"], id="missing-branches"),
        pytest.param(rules_json(-1), ["default_retention_days", "greater than or equal to 0"], id="negative-default"),
        pytest.param(rules_json(1.5), ["default_retention_days", "integer"], id="fractional-default"),
        pytest.param(rules_json("7"), ["default_retention_days", "integer"], id="string-default"),
        pytest.param(rules_json(True), ["default_retention_days", "integer"], id="bool-default"),
        pytest.param(rules_json(None), ["default_retention_days"], id="null-default"),
        pytest.param('{"default_retention_days": 7, "branches": null}', ["branches", "list"], id="null-branches"),
        pytest.param(rules_json(7, {"main": 3}), ["branches", "list"], id="branches-as-a-map"),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": -3}]),
            ["branches.0.retention_days", "greater than or equal to 0"],
            id="negative-branch-days",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": 2.5}]),
            ["branches.0.retention_days", "integer"],
            id="fractional-branch-days",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": "3"}]),
            ["branches.0.retention_days", "integer"],
            id="string-branch-days",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": False}]),
            ["branches.0.retention_days", "integer"],
            id="bool-branch-days",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": None}]),
            ["branches.0.retention_days"],
            id="null-branch-days",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main"}]), ["branches.0.retention_days", "required"], id="missing-branch-days"
        ),
        pytest.param(
            rules_json(7, [{"retention_days": 3}]), ["branches.0.branch_id", "required"], id="missing-branch-id"
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "", "retention_days": 3}]), ["branches.0.branch_id"], id="empty-branch-id"
        ),
        pytest.param(
            rules_json(7, [{"branch_id": 5, "retention_days": 3}]),
            ["branches.0.branch_id", "string"],
            id="numeric-branch-id",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "main", "retention_days": 3, "note": "x"}]),
            ["branches.0.note", "extra"],
            id="extra-key-in-branch-rule",
        ),
        pytest.param(rules_json(7, [], extra_field=1), ["extra_field", "extra"], id="extra-top-level-key"),
        pytest.param(
            rules_json(
                7,
                [
                    {"branch_id": "main", "retention_days": 3},
                    {"branch_id": "dev", "retention_days": 1},
                    {"branch_id": "main", "retention_days": 5},
                ],
            ),
            ["'main'", "more than one rule"],
            id="duplicate-branch-rules",
        ),
        pytest.param(
            rules_json(7, [{"branch_id": "dev", "retention_days": 3}, {"branch_id": "dev", "retention_days": 3}]),
            ["'dev'", "more than one rule"],
            id="duplicate-identical-branch-rules",
        ),
    ],
)
def test_invalid_rules_are_refused_with_one_clear_line(text, needles):
    with pytest.raises(InvalidRules) as raised:
        parse_rules(text)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("invalid GC rules")
    for needle in needles:
        assert needle.lower() in message.lower(), f"{needle!r} not in {message!r}"


def test_duplicate_rules_name_the_first_duplicate_branch_alphabetically():
    text = rules_json(1, [{"branch_id": b, "retention_days": 1} for b in ("zeta", "alpha", "zeta", "alpha")])
    with pytest.raises(InvalidRules, match="'alpha'"):
        parse_rules(text)


@pytest.mark.parametrize("days", [10**6, 10**12])
def test_rules_the_parser_accepts_give_a_usable_policy(days):
    """Rules either are refused up front or can be applied: a retention longer than the calendar
    reaches (about 2,700 years and more) must not crash a GC run halfway through its mark."""
    try:
        rules = parse_rules(rules_json(days, [{"branch_id": "main", "retention_days": days}]))
    except InvalidRules as exc:
        assert "\n" not in str(exc)
        return
    policy_of = policies_from_rules(rules, NOW)
    for branch in ("main", "dev", None):
        policy = policy_of(branch)  # today: OverflowError ("date value out of range")
        assert isinstance(policy, (KeepAll, KeepSince))


# -- rules as policies -----------------------------------------------------------------------------


def test_rules_become_a_threshold_per_branch():
    rules = GcRules(
        default_retention_days=21,
        branches=[BranchRule(branch_id="main", retention_days=28), BranchRule(branch_id="dev", retention_days=0)],
    )
    policy_of = policies_from_rules(rules, NOW)
    assert policy_of("main") == KeepSince(NOW - timedelta(days=28))
    assert policy_of("dev") == KeepSince(NOW)
    assert policy_of("feature") == KeepSince(NOW - timedelta(days=21))
    assert policy_of(None) == KeepSince(NOW - timedelta(days=21))  # dangling commits


def test_no_rules_keep_every_commit():
    policy_of = policies_from_rules(None, NOW)
    assert policy_of("main") == KeepAll()
    assert policy_of(None) == KeepAll()


def test_rules_are_stored_per_repository(env):

    lake = env.lake()
    lake.create_repository("one", str(env.namespace("one")))
    lake.create_repository("two", str(env.namespace("two")))
    one, two = lake.repository("one"), lake.repository("two")
    assert one.gc_rules() is None
    rules = parse_rules(rules_json(21, [{"branch_id": "main", "retention_days": 28}]))
    one.set_gc_rules(rules)
    assert one.gc_rules() == rules
    assert two.gc_rules() is None
    replaced = parse_rules(rules_json(3, []))
    one.set_gc_rules(replaced)
    assert one.gc_rules() == replaced
    assert one.delete_gc_rules() is True
    assert one.gc_rules() is None
    assert one.delete_gc_rules() is False


# -- Nessie-style policies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1", KeepCount(1)),
        ("10", KeepCount(10)),
        (" 3 ", KeepCount(3)),
        ("NONE", KeepAll()),
        ("none", KeepAll()),
        ("None", KeepAll()),
        ("90s", KeepSince(NOW - timedelta(seconds=90))),
        ("30m", KeepSince(NOW - timedelta(minutes=30))),
        ("6h", KeepSince(NOW - timedelta(hours=6))),
        ("7d", KeepSince(NOW - timedelta(days=7))),
        ("0d", KeepSince(NOW)),
        ("P7D", KeepSince(NOW - timedelta(days=7))),
        ("PT2H", KeepSince(NOW - timedelta(hours=2))),
        ("P1DT12H", KeepSince(NOW - timedelta(days=1, hours=12))),
        ("2024-05-01T00:00:00Z", KeepSince(datetime(2024, 5, 1, tzinfo=UTC))),
        ("2024-05-01T02:00:00+02:00", KeepSince(datetime(2024, 5, 1, tzinfo=UTC))),
        ("2024-05-01", KeepSince(datetime(2024, 5, 1, tzinfo=UTC))),
    ],
)
def test_policies(text, expected):
    assert parse_policy(text, NOW) == expected


@pytest.mark.parametrize(
    "text, needles",
    [
        pytest.param("0", ["'0'", "at least 1"], id="zero-commits"),
        pytest.param("", ["''"], id="empty"),
        pytest.param("garbage", ["'garbage'", "commit count", "duration", "date", "NONE"], id="garbage"),
        pytest.param("1.5", ["'1.5'"], id="fractional-count"),
        pytest.param("7 days", ["'7 days'"], id="words"),
        pytest.param("P", ["'P'"], id="empty-iso-duration"),
        pytest.param("2024-13-01", ["'2024-13-01'"], id="impossible-date"),
        pytest.param("NONE please", ["'NONE please'"], id="none-with-trailing-words"),
    ],
)
def test_unparsable_policies_are_refused_naming_the_policy(text, needles):
    with pytest.raises(InvalidArgument) as raised:
        parse_policy(text, NOW)
    message = str(raised.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


@pytest.mark.parametrize("text", ["-1", "-30"])
def test_a_negative_integer_policy_is_a_bad_commit_count_not_a_date_before_1970(text):
    """The contract: "POLICY: an integer N keeps the newest N commits". An integer is a count, so `-1` is an
    invalid count; read as Unix seconds it becomes 1969-12-31T23:59:59Z, a threshold that silently
    keeps every commit (today's behaviour)."""
    with pytest.raises(InvalidArgument, match=re.escape(repr(text))):
        parse_policy(text, NOW)


@pytest.mark.parametrize(
    "text, regex, policy",
    [
        ("main=10", "main", KeepCount(10)),
        ("dev.*=7d", "dev.*", KeepSince(NOW - timedelta(days=7))),
        ("release/.+=NONE", "release/.+", KeepAll()),
        ("a=b=3", "a=b", KeepCount(3)),  # the policy is after the last '='
        ("(dev|test)-[0-9]+=P1D", "(dev|test)-[0-9]+", KeepSince(NOW - timedelta(days=1))),
    ],
)
def test_cutoffs(text, regex, policy):
    cutoff = parse_cutoff(text, NOW)
    assert cutoff.pattern.pattern == regex
    assert cutoff.policy == policy


@pytest.mark.parametrize(
    "text, needles",
    [
        pytest.param("main", ["'main'", "REGEX=POLICY"], id="no-equals"),
        pytest.param("=3", ["'=3'", "REGEX=POLICY"], id="no-regex"),
        pytest.param("main=", ["policy ''"], id="no-policy"),
        pytest.param("dev[=3", ["'dev[=3'", "bad regex"], id="bad-regex-set"),
        pytest.param("(dev=3", ["'(dev=3'", "bad regex"], id="bad-regex-group"),
        pytest.param("*=3", ["'*=3'", "bad regex"], id="bad-regex-repeat"),
        pytest.param("main=forever", ["'forever'"], id="bad-policy"),
        pytest.param("main=0", ["'0'", "at least 1"], id="zero-count"),
    ],
)
def test_bad_cutoffs_are_refused(text, needles):
    with pytest.raises(InvalidArgument) as raised:
        parse_cutoff(text, NOW)
    message = str(raised.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


def policy_of(*cutoffs: str, default=KeepAll()):
    return policies_from_cutoffs([parse_cutoff(c, NOW) for c in cutoffs], default)


@pytest.mark.parametrize(
    "cutoffs, branch, expected",
    [
        pytest.param(["dev=3"], "dev", KeepCount(3), id="exact-name"),
        pytest.param(["dev=3"], "dev2", KeepAll(), id="anchored-at-the-end"),
        pytest.param(["dev=3"], "my-dev", KeepAll(), id="anchored-at-the-start"),
        pytest.param(["dev.*=3"], "dev2", KeepCount(3), id="wildcard-matches-longer-names"),
        pytest.param(["dev.*=3"], "dev", KeepCount(3), id="wildcard-matches-the-bare-name"),
        pytest.param(["dev|main=3"], "main", KeepCount(3), id="alternation-right"),
        pytest.param(["dev|main=3"], "dev2", KeepAll(), id="alternation-anchored-as-a-whole"),
        pytest.param(["dev|main=3"], "xmain", KeepAll(), id="alternation-anchored-at-the-start"),
        pytest.param(["ma.*=1", "main=NONE"], "main", KeepCount(1), id="first-match-wins"),
        pytest.param(["main=NONE", "ma.*=1"], "main", KeepAll(), id="first-match-wins-other-order"),
        pytest.param(["main=NONE", "ma.*=1"], "mast", KeepCount(1), id="later-cutoff-for-other-names"),
        pytest.param(["feature/.*=2"], "feature/a/b", KeepCount(2), id="slashes-in-names"),
        pytest.param(["Main=2"], "main", KeepAll(), id="case-sensitive"),
    ],
)
def test_cutoff_matching(cutoffs, branch, expected):
    assert policy_of(*cutoffs)(branch) == expected


def test_unmatched_branches_and_dangling_commits_get_the_default_cutoff():
    of = policy_of("main=NONE", ".*=5", default=KeepCount(2))
    assert of("main") == KeepAll()
    assert of("anything") == KeepCount(5)
    assert of(None) == KeepCount(2)  # dangling commits: no regex applies, even `.*`


def test_no_cutoffs_gives_the_default_to_everyone():
    of = policy_of(default=KeepSince(NOW))
    assert of("main") == KeepSince(NOW)
    assert of(None) == KeepSince(NOW)


def test_cutoff_regex_is_not_searched_inside_names():
    """Anchoring means the regex must match the whole name: `re.search` semantics would be wrong."""
    cutoff = parse_cutoff("dev=1", NOW)
    assert re.search(cutoff.pattern, "dev2") is not None  # the plain regex would find it...
    assert policy_of("dev=1")("dev2") == KeepAll()  # ...the cutoff does not
