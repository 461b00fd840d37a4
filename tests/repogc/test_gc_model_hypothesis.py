"""Randomized checks of GC against the reference model (tests/gc_model.py).

(a) The planner: random commit graphs (linear stretches, branches, merges, backdated and out-of-order
    dates, deleted and moved branches leaving dangling leaves, tags) and random rules or cutoffs;
    `active_commits` must equal the model's brute-force active set.
(b) End to end: random histories built through the real repository API (uploads, overwrites, rm,
    backdated commits, branches, merges, resets, branch deletes, shallow copies, tags, address tokens,
    stray files), rules stored with `set_rules` or Nessie cutoffs for the run, a real GC run on the
    shared local Spark; what it
    deletes must be exactly what the model expects, and everything still referenced must still read.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
import support.gc_model as model
from conftest import age_objects
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

import lakegc
from lakegc.errors import LakegcError
from lakegc.metastore import schema as t
from lakegc.repo.model import AddressKind
from lakegc.repo.repository import Lake, Repository
from lakegc.repogc.job import GcOptions, run_gc
from lakegc.retention.active import CommitNode, active_commits
from lakegc.retention.rules import (
    Cutoff,
    GcRules,
    KeepAll,
    KeepCount,
    KeepSince,
    policies_from_cutoffs,
    policies_from_rules,
)

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
NAMES = ["main", "dev", "dev2", "feat-a", "feat-b", "release", "x"]


# ================================================================================================
# (a) planner vs model
# ================================================================================================

# Quarter days from 2 days in the future to 40 days ago: whole days hit the thresholds of whole-day
# retentions exactly, so the strictly-after boundary gets exercised too.
days_ago = st.integers(-8, 160).map(lambda q: q / 4)


@dataclass
class Graph:
    commits: dict[str, tuple[tuple[str, ...], float]] = field(default_factory=dict)  # id -> (parents, days ago)
    branches: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)

    def add(self, parents: tuple[str, ...], age: float) -> str:
        cid = f"c{len(self.commits)}"
        self.commits[cid] = (parents, age)
        return cid


@st.composite
def graphs(draw) -> Graph:
    g = Graph()
    g.branches["main"] = g.add((), draw(days_ago))
    for _ in range(draw(st.integers(0, 30))):
        op = draw(st.sampled_from(["commit", "commit", "commit", "branch", "merge", "delete", "move", "tag", "orphan"]))
        names = sorted(g.branches)
        if op == "commit":
            branch = draw(st.sampled_from(names))
            g.branches[branch] = g.add((g.branches[branch],), draw(days_ago))
        elif op == "branch":
            name = draw(st.sampled_from(NAMES))
            if name not in g.branches:
                g.branches[name] = draw(st.sampled_from(sorted(g.commits)))
        elif op == "merge" and len(names) > 1:
            dest, src = draw(st.permutations(names))[:2]
            if g.branches[dest] != g.branches[src]:
                g.branches[dest] = g.add((g.branches[dest], g.branches[src]), draw(days_ago))
        elif op == "delete" and len(names) > 1:
            del g.branches[draw(st.sampled_from([n for n in names if n != "main"]))]
        elif op == "move":  # a reset to another commit: what was above the old HEAD may dangle
            g.branches[draw(st.sampled_from(names))] = draw(st.sampled_from(sorted(g.commits)))
        elif op == "tag":
            g.tags.append(draw(st.sampled_from(sorted(g.commits))))
        elif op == "orphan":  # a second root, as an import of unrelated history would leave
            g.add((), draw(days_ago))
    return g


# A policy drawn for the model, then translated for the planner.
model_policies = st.one_of(
    st.builds(model.Count, st.integers(1, 6)),
    st.builds(model.Since, days_ago.map(lambda d: NOW - timedelta(days=d))),
    st.just(model.All()),
)


def as_planner_policy(policy: model.Policy):
    if isinstance(policy, model.Count):
        return KeepCount(policy.n)
    if isinstance(policy, model.Since):
        return KeepSince(policy.threshold)
    return KeepAll()


@st.composite
def retentions(draw):
    """(the model's retention, the planner's policy_of, a description)."""
    kind = draw(st.sampled_from(["rules", "rules", "none", "cutoffs"]))
    if kind == "none":
        return model.retention_from_rules(None), policies_from_rules(None, NOW), "no rules"
    if kind == "rules":
        doc = {
            "default_retention_days": draw(st.integers(0, 30)),
            "branches": [
                {"branch_id": b, "retention_days": draw(st.integers(0, 30))}
                for b in draw(st.lists(st.sampled_from(NAMES + ["gone"]), unique=True, max_size=5))
            ],
        }
        return model.retention_from_rules(doc), policies_from_rules(GcRules.model_validate(doc), NOW), doc
    regexes = draw(st.lists(st.sampled_from(NAMES + ["dev.*", "feat-.", "(main|release)", ".*"]), max_size=4))
    cutoffs = [(regex, draw(model_policies)) for regex in regexes]
    default = draw(model_policies)

    def retention(branch: str | None) -> model.Policy:  # the spec: anchored, first match wins
        for regex, policy in cutoffs:
            if branch is not None and re.fullmatch(regex, branch):
                return policy
        return default

    planner = policies_from_cutoffs(
        [Cutoff(re.compile(r), as_planner_policy(p)) for r, p in cutoffs], as_planner_policy(default)
    )
    return retention, planner, (cutoffs, default)


def planner_active(g: Graph, policy_of, branches: dict[str, str] | None = None) -> set[str]:
    commits = {cid: CommitNode(parents, NOW - timedelta(days=age)) for cid, (parents, age) in g.commits.items()}
    return active_commits(commits, g.branches if branches is None else branches, policy_of, g.tags)


def model_active(g: Graph, retention) -> set[str]:
    commits = {cid: model.Commit(parents, NOW - timedelta(days=age)) for cid, (parents, age) in g.commits.items()}
    return model.active_set(commits, g.branches, retention, NOW, g.tags)


@settings(max_examples=200, deadline=None)
@given(graphs(), retentions())
def test_planner_matches_the_model(g: Graph, retention):
    model_retention, policy_of, described = retention
    note(f"graph={g}\nretention={described}")
    assert planner_active(g, policy_of) == model_active(g, model_retention)


@settings(max_examples=200, deadline=None)
@given(graphs(), st.data())
def test_planner_result_does_not_depend_on_branch_names(g: Graph, data):
    """Renaming branches (and their rules with them) must not change the active set, whatever order
    the new names sort in."""
    names = sorted(g.branches)
    new_names = data.draw(st.permutations([f"b{i}" for i in range(len(names))]))
    rename = dict(zip(names, new_names))
    days = {name: data.draw(st.integers(0, 30)) for name in names}
    default = data.draw(st.integers(0, 30))

    def rules(naming: dict[str, str]) -> GcRules:
        return GcRules.model_validate(
            {
                "default_retention_days": default,
                "branches": [{"branch_id": naming[n], "retention_days": d} for n, d in days.items()],
            }
        )

    before = planner_active(g, policies_from_rules(rules({n: n for n in names}), NOW))
    renamed = {rename[b]: head for b, head in g.branches.items()}
    assert planner_active(g, policies_from_rules(rules(rename), NOW), renamed) == before


# ================================================================================================
# (b) end to end through Spark
# ================================================================================================

PATHS = ["a", "b", "c", "dir/d", "dir/e"]
MAX_OBJECTS = 15
MAX_COMMITS = 10
AGED = timedelta(days=3)  # well before the default 24 h min-age cutoff

# One operation, with indexes into whatever exists when it runs (taken modulo), so that hypothesis
# can shrink a failing history freely.
idx = st.integers(0, 30)
days = st.sampled_from(range(21))  # near-uniform, where integers() would favour 0 (all commits recent)
ARGUMENTS = {
    "upload": st.tuples(idx, idx),  # branch, path
    # branch, path, days ago, and whether to commit the staging as it is (maybe nothing) or to write
    # the path first
    "commit": st.tuples(idx, idx, days, st.sampled_from([False, False, False, True])),
    "rm": st.tuples(idx, idx),  # branch, path
    "branch": st.tuples(idx, idx),  # new name, source commit
    "merge": st.tuples(idx, idx, days),  # source, dest, days ago
    "reset": st.tuples(idx),
    "delete": st.tuples(idx),
    "copy": st.tuples(idx, idx, idx, idx),  # source branch, source path, dest branch, dest path
    "tag": st.tuples(idx),
    "token": st.tuples(idx, idx, st.sampled_from(["link", "unlinked", "expired"])),  # see op_token
    "stray": st.tuples(idx),
}
KINDS = ["upload"] * 3 + ["commit"] * 4 + ["merge"] * 2 + sorted(set(ARGUMENTS) - {"upload", "commit", "merge"})
operations = st.sampled_from(KINDS).flatmap(lambda kind: ARGUMENTS[kind].map(lambda args: (kind, *args)))


class RandomOps:
    """What the random-history tests here and in test_gc_incremental.py share: picking a branch,
    recording a commit for the model, applying an op (a refused op is a no-op, logged), and the
    ops that need nothing but the repository. Subclasses give `repo`, `commits`, `log`, `paths`."""

    repo: Repository
    commits: dict[str, model.Commit]
    log: list[str]
    paths: ClassVar[list[str]]
    prefix: str = ""  # a history's own names start with it (test_many_histories.py: many to a repository)

    def branch(self, i: int) -> str:
        names = [b.name for b in self.repo.branches() if b.name.startswith(self.prefix)]
        return names[i % len(names)]

    def path(self, p: int) -> str:
        return self.prefix + self.paths[p % len(self.paths)]

    def record(self, commit) -> None:
        self.commits[commit.id] = model.Commit(tuple(commit.parents), commit.creation_date)

    def apply(self, op: tuple) -> None:
        kind, *args = op
        try:
            getattr(self, f"op_{kind}")(*args)
        except LakegcError as exc:  # conflicts, dirty branches, expired tokens...: the op is a no-op
            self.log.append(f"  ({kind} refused: {exc})")

    def op_reset(self, b: int) -> None:
        branch = self.branch(b)
        self.repo.reset_branch(branch)
        self.log.append(f"reset {branch}")

    def op_delete(self, b: int) -> None:
        branch = self.branch(b)
        if branch != self.prefix + "main":
            self.repo.delete_branch(branch)
            self.log.append(f"delete {branch}")

    def op_copy(self, sb: int, sp: int, db: int, dp: int) -> None:
        source, dest = self.branch(sb), self.branch(db)
        paths = [e.path for e in self.repo.list(source)]
        if paths:
            path, dest_path = paths[sp % len(paths)], self.path(dp)
            self.repo.copy(source, path, dest, dest_path)
            self.log.append(f"copy {source}:{path} -> {dest}:{dest_path}")


@dataclass
class History(RandomOps):
    """A repository built through the real API, and the record of what the test did to it."""

    paths: ClassVar[list[str]] = PATHS

    lake: Lake
    repo: Repository
    namespace: Path
    outside: Path
    start: datetime
    commits: dict[str, model.Commit] = field(default_factory=dict)
    objects: int = 0
    log: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)  # keys to leave younger than min-age

    def date(self, days: int) -> datetime:
        # half days: no commit date lies within hours of a whole-day threshold, whenever GC runs
        return self.start - timedelta(days=days + 0.5)

    def op_upload(self, b: int, p: int, branch: str | None = None) -> None:
        if self.objects >= MAX_OBJECTS:
            return
        branch, path = branch or self.branch(b), PATHS[p % len(PATHS)]
        entry = self.repo.upload(branch, path, f"{branch}/{path}/{self.objects}".encode())
        self.objects += 1
        self.log.append(f"upload {branch}:{path} -> {entry.address}")
        if self.objects % 7 == 0:
            self.fresh.append(entry.address)

    def op_commit(self, b: int, p: int, days: int, as_staged: bool) -> None:
        if len(self.commits) >= MAX_COMMITS:
            return
        branch = self.branch(b)
        if not as_staged:
            self.op_upload(0, p, branch)
        commit = self.repo.commit(branch, f"commit {len(self.commits)}", date=self.date(days), allow_empty=True)
        self.record(commit)
        self.log.append(f"commit {branch} {days}.5 days ago -> {commit.id[:8]}")

    def op_rm(self, b: int, p: int) -> None:
        branch = self.branch(b)
        paths = [e.path for e in self.repo.list(branch)]
        if paths:
            path = paths[p % len(paths)]
            self.repo.remove(branch, path)
            self.log.append(f"rm {branch}:{path}")

    def op_branch(self, n: int, c: int) -> None:
        name = NAMES[1:][n % (len(NAMES) - 1)]
        if name in {b.name for b in self.repo.branches()}:
            return
        source = sorted(self.commits)[c % len(self.commits)]
        self.repo.create_branch(name, source)
        self.log.append(f"branch {name} from {source[:8]}")

    def op_merge(self, s: int, d: int, days: int) -> None:
        source, dest = self.branch(s), self.branch(d)
        if source == dest or len(self.commits) >= MAX_COMMITS:
            return
        commit = self.repo.merge(
            source, dest, message=f"merge {len(self.commits)}", date=self.date(days), allow_empty=True
        )
        self.record(commit)
        self.log.append(f"merge {source} into {dest} {days}.5 days ago -> {commit.id[:8]}")

    def op_tag(self, c: int) -> None:
        commit = sorted(self.commits)[c % len(self.commits)]
        name = f"tag-{len(self.repo.tags())}"
        self.repo.create_tag(name, commit)
        self.log.append(f"tag {name} at {commit[:8]}")

    def op_token(self, b: int, p: int, how: str) -> None:
        """A client uploading straight to storage: an address and a token, the object written there,
        then linked (staged), left unlinked (live token) or left behind by an expired token."""
        if self.objects >= MAX_OBJECTS:
            return
        branch, path = self.branch(b), PATHS[p % len(PATHS)]
        ttl = timedelta(hours=-1) if how == "expired" else timedelta(hours=24)
        claims = self.repo.get_physical_address(branch, path, ttl=ttl)
        data = f"direct {self.objects}".encode()
        self.repo.storage.write(claims.address, data)
        self.objects += 1
        if how == "link":
            self.repo.link(
                branch, path, claims.address, len(data), hashlib.md5(data).hexdigest(), token=self.repo.sign(claims)
            )
        self.log.append(f"token {how} {branch}:{path} -> {claims.address}")

    def op_stray(self, n: int) -> None:
        """Files lying in the namespace root (listed without recursion), and one linked from outside
        the namespace (never collected)."""
        if self.objects >= MAX_OBJECTS:
            return
        self.repo.storage.write(f"stray-{n}", b"stray")
        outside = self.outside / f"ext-{n}"
        outside.write_bytes(b"external")
        self.repo.link("main", f"ext/{n}", outside.as_uri(), 8, "")
        self.objects += 1
        self.log.append(f"stray file stray-{n}, linked {outside}")


def namespace_files(root: Path) -> dict[str, datetime]:
    return {
        p.relative_to(root).as_posix(): datetime.fromtimestamp(p.stat().st_mtime, UTC)
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".lakegc-tmp-")
    }


def tree_keys(h: History, commit_id: str) -> set[str]:
    """Namespace keys a commit's tree references (addresses outside the namespace left out)."""
    return {key for _, key in tree_entries(h, commit_id)}


def tree_entries(h: History, commit_id: str) -> set[tuple[str, str]]:
    """(path, namespace key) of a commit's entries (addresses outside the namespace left out)."""
    entries = set()
    namespace_uri = h.repo.info.storage_namespace
    for entry in h.repo.list(commit_id):
        if entry.address_kind is AddressKind.RELATIVE:
            entries.add((entry.path, entry.address))
        elif entry.address.startswith(namespace_uri + "/"):
            entries.add((entry.path, entry.address[len(namespace_uri) + 1 :]))
    return entries


def uncommitted_references(h: History) -> tuple[set[str], list[tuple[str, datetime]], dict[str, datetime]]:
    """(staged addresses, (address, when copied) of the copy records, token address -> expiry), read
    from the metastore."""
    with h.repo.ms.read() as conn:
        staged = set(
            conn.execute(
                sa.select(t.staged_entries.c.address).where(
                    t.staged_entries.c.repository == h.repo.name,
                    t.staged_entries.c.tombstone.is_(False),
                    t.staged_entries.c.address_kind == "relative",
                )
            ).scalars()
        )
        copies = [
            tuple(row)
            for row in conn.execute(
                sa.select(t.copy_records.c.address, t.copy_records.c.created_at).where(
                    t.copy_records.c.repository == h.repo.name
                )
            )
        ]
        tokens = dict(
            conn.execute(
                sa.select(t.address_tokens.c.address, t.address_tokens.c.expires_at).where(
                    t.address_tokens.c.repository == h.repo.name
                )
            ).all()
        )
    return staged, copies, tokens


def run_output(namespace: Path, run_id: str, name: str) -> list[dict]:
    """The rows of a run's Parquet output (`candidates`, `deleted`)."""
    parts = sorted((namespace / "_lakegc" / "gc" / run_id / name).rglob("*.parquet"))
    return [row for part in parts for row in pq.read_table(part).to_pylist()]


def build_history(root: Path, ops: list[tuple]) -> History:
    lake = Lake(f"sqlite:///{root / 'lakegc.db'}")
    namespace = root / "ns"
    (root / "outside").mkdir()
    lake.create_repository("repo", str(namespace))
    repo = lake.repository("repo")
    h = History(lake, repo, namespace, root / "outside", datetime.now(UTC))
    initial = repo.resolve("main")[0]
    h.record(initial)
    for op in ops:
        h.apply(op)
    return h


lakefs_rules = st.fixed_dictionaries(
    {
        "default_retention_days": st.sampled_from(range(10)),
        "branches": st.lists(
            st.fixed_dictionaries({"branch_id": st.sampled_from(NAMES), "retention_days": st.sampled_from(range(16))}),
            max_size=4,
            unique_by=lambda r: r["branch_id"],
        ),
    }
)
# Path rules over PATHS (a, b, c, dir/d, dir/e): folders, `**`, `?`, sets, unanchored names.
GLOBS = ["dir/**", "dir/", "d?r/e", "**/d", "[ab]", "[!a]", "c", "*", "/a", "dir/*"]
path_rules = st.lists(
    st.fixed_dictionaries({"glob": st.sampled_from(GLOBS), "retention_days": st.sampled_from(range(16))}),
    min_size=1,
    max_size=3,
)
lakefs_rules_with_paths = st.tuples(lakefs_rules, st.one_of(st.none(), path_rules)).map(
    lambda pair: pair[0] if pair[1] is None else {**pair[0], "path_rules": pair[1]}
)
rules_docs = st.sampled_from([None, "rules", "rules", "rules"]).flatmap(  # no rules a quarter of the time
    lambda kind: st.none() if kind is None else lakefs_rules_with_paths
)

# Nessie-style `--cutoff REGEX=POLICY` and `--default-cutoff POLICY` for the run (they override the
# stored rules), with the policy each one means in the model.
CUTOFF_POLICIES = {
    "1": model.Count(1),
    "2": model.Count(2),
    "3": model.Count(3),
    "4d": model.Days(4),
    "P9D": model.Days(9),
    "NONE": model.All(),
}
cutoff_lists = st.tuples(
    st.lists(
        st.tuples(
            st.sampled_from(NAMES + ["dev.*", "feat-.", "main|release"]), st.sampled_from(sorted(CUTOFF_POLICIES))
        ),
        max_size=3,
    ),
    st.sampled_from(sorted(CUTOFF_POLICIES)),
)
cutoff_sets = st.sampled_from([None, None, "cutoffs"]).flatmap(  # cutoffs a third of the time
    lambda kind: st.none() if kind is None else cutoff_lists
)


def cutoff_retention(cutoffs: list[tuple[str, str]], default: str) -> model.Retention:
    """The spec: the regex must match the whole branch name, the first match wins, and branches no
    regex matches (and dangling commits) get the default."""

    def retention(branch: str | None) -> model.Policy:
        for regex, policy in cutoffs:
            if branch is not None and re.fullmatch(regex, branch):
                return CUTOFF_POLICIES[policy]
        return CUTOFF_POLICIES[default]

    return retention


def backdate_copy_records(h: History, age: timedelta) -> None:
    """As if every shallow copy had been made `age` ago."""
    with h.repo.ms.write() as conn:
        conn.execute(
            t.copy_records.update().where(t.copy_records.c.repository == h.repo.name).values(created_at=h.start - age)
        )


SIMULATED = ["9d", "1d", "4d", "P2DT12H"]  # the retention curve checked in every history


def holding_commits(key: str, entries: dict, active_by_class: list[set[str]], globs: list[str]) -> set[str]:
    """The commits with an entry naming `key` that is live: its commit active under its path's rule."""
    return {
        commit
        for commit, pairs in entries.items()
        if any(k == key and commit in active_by_class[model.path_rule_index(p, globs)] for p, k in pairs)
    }


def explain(h: History, key: str, options: GcOptions):
    return lakegc.explain(
        "repo",
        address=key,
        metastore=h.lake,
        min_age=options.min_age,
        cutoffs=options.cutoffs,
        default_cutoff=options.default_cutoff,
    )


def check_gc_against_the_model(
    spark,
    ops: list[tuple],
    rules: dict | None,
    cutoffs: tuple[list[tuple[str, str]], str] | None = None,
    old_copies: bool = False,
) -> None:
    root = Path(tempfile.mkdtemp(prefix="lakegc-hyp-"))
    try:
        h = build_history(root, ops)
        note("\n".join(h.log) + f"\nrules={rules}\ncutoffs={cutoffs}")
        if cutoffs is None:
            options, retention = GcOptions(), model.retention_from_rules(rules)
        else:
            options = GcOptions(
                cutoffs=tuple(f"{regex}={policy}" for regex, policy in cutoffs[0]), default_cutoff=cutoffs[1]
            )
            retention = cutoff_retention(*cutoffs)
        if rules is not None:
            h.repo.set_gc_rules(GcRules.model_validate(rules))
        age_objects(h.namespace, h.start - AGED)
        for key in [k for k in namespace_files(h.namespace) if "/" not in k]:  # stray root files
            os.utime(h.namespace / key, ((h.start - AGED).timestamp(),) * 2)
        for key in h.fresh:
            os.utime(h.namespace / key)  # written just now: younger than the min-age
        if old_copies:
            backdate_copy_records(h, AGED)

        before = namespace_files(h.namespace)
        sizes = {key: (h.namespace / key).stat().st_size for key in before}
        branches = {b.name: b.head for b in h.repo.branches()}
        tags = [tag.commit_id for tag in h.repo.tags()]
        staged, copies, tokens = uncommitted_references(h)
        entries = {cid: tree_entries(h, cid) for cid in h.commits}
        trees = {cid: {key for _, key in pairs} for cid, pairs in entries.items()}
        branch_reads = {(b, e.path): h.repo.read(b, e.path) for b in branches for e in h.repo.list(b)}
        outside_before = sorted(p.name for p in h.outside.iterdir())
        source = h.repo.gc_source()
        for key in before:  # the commits holding each object, from the recorded tree changes: what the trees say
            true = {cid: sorted(p for p, k in pairs if k == key) for cid, pairs in entries.items()}
            assert source.references_to(h.start, key).holders == {cid: ps for cid, ps in true.items() if ps}, key
        explained = {key: explain(h, key, options) for key in before}  # what a run now would do, object by object
        curve = lakegc.simulate("repo", SIMULATED, metastore=h.lake, min_age=options.min_age, spark=spark)
        for point in curve.points:  # each point: what a dry run with that default cutoff would collect
            days_kept = model.retention_from_rules({"default_retention_days": point.seconds / 86_400, "branches": []})
            kept = model.active_set(h.commits, branches, days_kept, curve.now, tags)
            would = model.expected_deletions(before, curve.now, options.min_age, kept, trees, staged, copies, tokens)
            assert (point.num_candidates, point.bytes) == (len(would), sum(sizes[k] for k in would)), point

        summary = run_gc(h.lake, "repo", options, spark=spark)
        now = datetime.fromisoformat(summary.started_at)
        globs = [r["glob"] for r in (rules or {}).get("path_rules", [])] if cutoffs is None else []
        classes = [retention, *(model.retention_from_rules({"default_retention_days": d, "branches": []}) for d in (
            r["retention_days"] for r in (rules or {}).get("path_rules", []) if cutoffs is None))]  # fmt: skip
        active_by_class = [model.active_set(h.commits, branches, of, now, tags) for of in classes]
        active = active_by_class[0]
        committed = model.committed_keys(entries, active_by_class, globs)
        expected = model.expected_deletions(
            before, now, options.min_age, active, trees, staged, copies, tokens, committed=committed
        )
        note(f"active={sorted(c[:8] for c in active)}\nexpected deletions={sorted(expected)}")
        event(f"commits: {len(h.commits)}, expired: {len(h.commits) - len(active)}")
        event(f"deletions: {min(len(expected), 3)}{'+' if len(expected) >= 3 else ''}")
        event(f"path rules: {len(globs)}")

        after = namespace_files(h.namespace)
        vanished = set(before) - set(after)
        assert summary.state == "swept", summary.error
        assert vanished == expected
        deleted = run_output(h.namespace, summary.run_id, "deleted")
        assert all(row["deleted"] and row["error"] is None for row in deleted), deleted
        assert sorted(row["address"] for row in deleted) == sorted(expected)
        assert summary.num_candidates == summary.num_deleted == len(expected)
        assert summary.bytes_deleted == sum(sizes[key] for key in expected)
        assert summary.repo.active_commits == len(active)
        # each candidate's reason: `expired` when a commit (an expired one) still holds it, else `uncommitted`
        in_trees = {key for keys in trees.values() for key in keys}
        reasons = {row["address"]: row["reason"] for row in run_output(h.namespace, summary.run_id, "candidates")}
        assert reasons == {key: "expired" if key in in_trees else "uncommitted" for key in expected}
        event(f"committed garbage deleted: {bool(expected & in_trees)}")
        event(f"object of a copy record deleted: {bool(expected & {a for a, _ in copies})}")

        # `gc explain` before the run said exactly what the run did, object by object, and why
        verdicts = {key: str(found.verdict) for key, found in explained.items()}
        assert {k for k, v in verdicts.items() if v == "collect"} == vanished
        assert {k for k, v in verdicts.items() if v == "keep"} == {k for k in before if model.listed(k)} - vanished
        assert {k for k, v in verdicts.items() if v == "outside"} == {k for k in before if not model.listed(k)}
        for key, found in explained.items():
            kinds = {r.kind for r in found.reasons}
            if found.verdict == "collect":
                assert kinds == ({"expired"} if key in in_trees else {"unreferenced"}), (key, found)
            if found.verdict == "keep":
                assert ("young" in kinds) == (before[key] >= now - options.min_age), (key, found)
                assert ("staged" in kinds) == (key in staged), (key, found)
                held = {r.commit for r in found.reasons if r.kind in ("commit", "tag")}
                assert held == holding_commits(key, entries, active_by_class, globs), (key, found)
        for key in sorted(vanished)[:3]:
            gone = explain(h, key, options)
            assert (gone.verdict, gone.deleted_by) == ("deleted", summary.run_id)

        # Safety: everything still referenced still reads, and GC touched nothing else.
        for cid in h.commits:
            for entry in h.repo.list(cid):
                if cid in active_by_class[model.path_rule_index(entry.path, globs)]:
                    h.repo.read(cid, entry.path)
        for (branch, path), content in branch_reads.items():
            assert h.repo.read(branch, path) == content
        recent_copies = {a for a, copied in copies if copied > now - model.COPY_RECORD_WINDOW}
        for key in (recent_copies | {a for a, exp in tokens.items() if exp > now}) & set(before):
            assert key in after, key
        assert {k for k in before if k.startswith("_lakegc/")} <= set(after)
        assert {k for k, mtime in before.items() if mtime >= now - options.min_age} <= set(after)
        assert sorted(p.name for p in h.outside.iterdir()) == outside_before
    finally:
        shutil.rmtree(root, ignore_errors=True)


histories = st.lists(operations, min_size=10, max_size=30)


# Histories that always run, besides the random ones.
# main: a1 (15.5 days ago) <- a2 (10.5) <- b (8.5) <- a3 (1.5); with 5 days, a1 is committed garbage.
OVERWRITTEN_ON_MAIN = [
    ("commit", 0, 0, 15, False),
    ("commit", 0, 0, 10, False),
    ("commit", 0, 1, 8, False),
    ("commit", 0, 0, 1, False),
]
# main commits a; dev commits c 9.5 days ago and is deleted (a dangling commit: c is committed
# garbage); b is staged on main, copied to dev, then both are reset: only the copy record holds b.
COPIED_RESET_AND_DELETED = [
    ("commit", 0, 0, 12, False),
    ("branch", 0, 0),
    ("commit", 0, 2, 9, False),
    ("upload", 1, 1),
    ("copy", 1, 1, 0, 3),
    ("reset", 1),
    ("reset", 0),
    ("delete", 0),
]


@pytest.mark.slow  # 65 s of histories through the real pipeline: the second CI step
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(ops=histories, rules=rules_docs, cutoffs=cutoff_sets, old_copies=st.booleans())
@example(ops=OVERWRITTEN_ON_MAIN, rules={"default_retention_days": 5, "branches": []}, cutoffs=None, old_copies=False)
@example(
    ops=COPIED_RESET_AND_DELETED, rules={"default_retention_days": 3, "branches": []}, cutoffs=None, old_copies=False
)
@example(
    ops=COPIED_RESET_AND_DELETED, rules={"default_retention_days": 3, "branches": []}, cutoffs=None, old_copies=True
)
def test_gc_deletes_exactly_what_the_model_expects(spark, ops, rules, cutoffs, old_copies):
    check_gc_against_the_model(spark, ops, rules, cutoffs, old_copies)


@pytest.mark.soak
def test_gc_deletes_exactly_what_the_model_expects_many_histories(spark):
    """The same property on 150 histories (about 9 minutes on 2 cores), on demand: `./dev test -m soak`."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        ops=st.lists(operations, min_size=8, max_size=40),
        rules=rules_docs,
        cutoffs=cutoff_sets,
        old_copies=st.booleans(),
    )
    def check(ops, rules, cutoffs, old_copies):
        check_gc_against_the_model(spark, ops, rules, cutoffs, old_copies)

    check()
