"""Path rules: gitignore-style globs in the rules JSON, first match wins.

A table of cases (nested globs, `**`, `?`, sets, anchoring, folders, first match), the same globs
in Python and in Arrow's RE2 (the executors classify paths with the latter), a randomized check
against the reference model's own matcher (written from the spec, segment by segment), and the
rules file: validated, stored, shown, and meaning exactly what it meant before when it has none.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import support.gc_model as model
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegc.errors import InvalidArgument
from lakegc.retention.paths import PathClasses, glob_regex
from lakegc.retention.rules import InvalidRules, parse_rules, resolve_policies
from lakegc.timeutil import utcnow

# (glob, path, matches)
CASES = [
    ("logs/**", "logs/a.json", True),
    ("logs/**", "logs/2026/01/a.json", True),
    ("logs/**", "logs", False),  # the folder's contents, not a file named so
    ("logs/**", "x/logs/a.json", False),  # a `/` in the middle anchors it at the root
    ("logs/", "logs/a.json", True),
    ("logs/", "x/logs/a.json", True),  # only a trailing `/`: any depth
    ("logs", "x/logs/deep/a.json", True),  # a folder's glob matches what is in it
    ("logs", "logs.json", False),
    ("*.tmp", "a.tmp", True),
    ("*.tmp", "x/y/a.tmp", True),
    ("*.tmp", "a.tmp/inner", True),
    ("*.tmp", "a.tmpx", False),
    ("/a.tmp", "x/a.tmp", False),  # a leading `/`: the root only
    ("/a.tmp", "a.tmp", True),
    ("data/*/part-?.parquet", "data/2026/part-1.parquet", True),
    ("data/*/part-?.parquet", "data/2026/part-12.parquet", False),
    ("data/*/part-?.parquet", "data/2026/01/part-1.parquet", False),  # `*` stays within a segment
    ("data/**/part-?.parquet", "data/2026/01/part-1.parquet", True),
    ("data/**/part-?.parquet", "data/part-1.parquet", True),  # `**/` may be no folder at all
    ("**/_delta_log/**", "t/_delta_log/0.json", True),
    ("**/_delta_log/**", "_delta_log/0.json", True),
    ("**/_delta_log/**", "t/_delta_log_x/0.json", False),
    ("tables/**/checkpoints", "tables/a/b/checkpoints/c1", True),
    ("[ab]/*", "a/x", True),
    ("[ab]/*", "c/x", False),
    ("[!ab]/*", "c/x", True),
    ("[!ab]/*", "a/x", False),
    ("[a-c]?", "bz", True),
    ("file.txt", "dir/file.txt", True),
    ("dir/file.txt", "dir/file.txt", True),
    ("dir/file.txt", "other/dir/file.txt", False),
    ("**", "anything/at/all", True),
    ("a+b(c)", "a+b(c)", True),  # regex characters are literal
    ("a.b", "aXb", False),
    ("é/*", "é/ü", True),
    ("*", "line\nbreak", True),  # `.` must cross a newline in both engines
]


@pytest.mark.parametrize(("glob", "path", "matches"), CASES)
def test_glob_table(glob: str, path: str, matches: bool) -> None:
    classes = PathClasses([glob])
    assert (classes.of(path) == 1) is matches
    assert (classes.of_array(pa.array([path])).to_pylist() == [1]) is matches  # Arrow's RE2, as on the executors
    assert (model.path_rule_index(path, [glob]) == 1) is matches  # the spec's own matcher agrees


def test_first_match_wins() -> None:
    classes = PathClasses(["logs/debug/**", "logs/**", "*.json"])
    paths = ["logs/debug/x.json", "logs/info/x.json", "a/x.json", "a/x.csv"]
    assert [classes.of(p) for p in paths] == [1, 2, 3, 0]
    assert classes.of_array(pa.array(paths)).to_pylist() == [1, 2, 3, 0]


@pytest.mark.parametrize(
    ("glob", "problem"),
    [
        ("", "matches no path"),
        ("/", "matches no path"),
        ("!logs/**", "negation"),
        ("a**", "whole path segment"),
        ("**b/c", "whole path segment"),
        ("[abc", "[ without ]"),
        ("[a/b]", "other than /"),
    ],
)
def test_bad_globs_are_refused(glob: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem.replace("[", r"\[")):
        glob_regex(glob)
    doc = {"default_retention_days": 1, "branches": [], "path_rules": [{"glob": glob, "retention_days": 1}]}
    with pytest.raises(InvalidRules, match="path_rules"):
        parse_rules(json.dumps(doc))


SEGMENTS = st.sampled_from(["a", "b", "logs", "x.json", "x.tmp", "ab", "2026"])
GLOB_SEGMENTS = st.sampled_from(["a", "b", "logs", "*", "?", "*.json", "[ab]", "[!a]*", "**", "a?", "x.*"])


@settings(max_examples=400, deadline=None)
@given(
    glob=st.tuples(st.booleans(), st.lists(GLOB_SEGMENTS, min_size=1, max_size=4), st.booleans()),
    path=st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join),
)
def test_globs_match_as_the_spec_says(glob, path: str) -> None:
    leading, segments, trailing = glob
    text = ("/" if leading else "") + "/".join(segments) + ("/" if trailing else "")
    try:
        classes = PathClasses([text])
    except InvalidArgument:
        return  # e.g. only slashes
    expected = model.path_rule_index(path, [text])
    assert classes.of(path) == expected, (text, path)
    assert classes.of_array(pa.array([path])).to_pylist() == [expected], (text, path)


def test_rules_without_path_rules_mean_what_they_meant() -> None:
    plain = {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 10}]}
    rules = parse_rules(json.dumps(plain))
    assert rules.to_doc() == plain  # stored, shown and described exactly as before
    now = utcnow()
    policies = resolve_policies(rules, (), None, now)
    assert policies.described == "rules " + json.dumps(plain)
    assert len(policies.classes()) == 1 and policies.path_class("logs/a") == 0


def test_path_rules_replace_the_branch_retention_for_their_entries() -> None:
    doc = {
        "default_retention_days": 7,
        "branches": [{"branch_id": "main", "retention_days": 10}],
        "path_rules": [{"glob": "logs/**", "retention_days": 2}, {"glob": "*.tmp", "retention_days": 0}],
    }
    rules = parse_rules(json.dumps(doc))
    assert rules.to_doc() == doc
    now = utcnow()
    policies = resolve_policies(rules, (), None, now)
    of_logs, of_tmp = policies.classes()[1:]
    assert of_logs("main").threshold == of_logs(None).threshold == of_logs("dev").threshold  # whatever the branch
    assert (now - of_logs("main").threshold).days == 2 and of_tmp("main").threshold == now
    assert [policies.path_class(p) for p in ["logs/a.tmp", "a.tmp", "data/a"]] == [1, 2, 0]
    # cutoffs given for a run replace the stored rules, path rules included
    assert len(resolve_policies(rules, (), "3d", now).classes()) == 1


def test_bad_path_rules_in_a_rules_file(cli, repo_uri) -> None:
    for doc, needle in [
        ({"path_rules": [{"glob": "a", "retention_days": -1}]}, "retention_days"),
        ({"path_rules": [{"glob": "a"}]}, "retention_days"),
        ({"path_rules": [{"glob": "a", "retention_days": 1, "branch": "x"}]}, "branch"),
        ({"path_rules": {"glob": "a"}}, "path_rules"),
        ({"path_rules": [{"glob": "!a", "retention_days": 1}]}, "negation"),
    ]:
        text = json.dumps({"default_retention_days": 1, "branches": [], **doc})
        result = cli("gc", "set-config", repo_uri, "-f", "-", input=text, ok=False)
        assert result.exit_code == 1 and needle in result.stderr and "Traceback" not in result.stderr, result
    good = {"default_retention_days": 1, "branches": [], "path_rules": [{"glob": "logs/**", "retention_days": 3}]}
    cli("gc", "set-config", repo_uri, "-f", "-", input=json.dumps(good))
    assert cli("gc", "get-config", repo_uri, "--json").json() == good
    assert "path logs/**  3" in cli("gc", "get-config", repo_uri).stdout
