"""Bad input through the real CLI: every refusal is exit 1 with one `error: ` line and no traceback,
`--json` commands print nothing on stdout, and nothing changes (CLI-visible state, storage, and the
metastore's rows). Usage errors are exit 2. Plus ref ambiguity and a few real-process checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import heads, new_metastore, one_error, patch_short_lock_wait
from typer.testing import CliRunner

from lakegc.cli.main import app
from lakegc.repo.history import new_commit
from lakegc.timeutil import parse_date

REPO = "lakegc://repo"
MAIN = f"{REPO}/main"


# -- helpers -------------------------------------------------------------------------------------


class _Result:
    def __init__(self, exit_code: int, stdout: str, stderr: str):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr

    def json(self) -> Any:
        import json

        return json.loads(self.stdout)


class World:
    """One repository with history, tags, branches, staging and a collected object, built once for
    the whole bad-input table (every row must leave it exactly as it was)."""

    def __init__(self, root: Path, metastore: str):
        self.root = root
        self.home = root / "home"
        self.metastore = metastore
        self.ns = root / "ns"
        self.other_ns = root / "other-ns"
        self.outside = root / "outside.bin"
        self.runner = CliRunner()
        self.ids: dict[str, str] = {}

    def __call__(self, *args: str, input: bytes | str | None = None, ok: bool = True) -> _Result:
        env = {"LAKEGC_HOME": str(self.home), "LAKEGC_METASTORE": self.metastore}
        r = self.runner.invoke(app, list(args), input=input, env=env, catch_exceptions=False)
        out = _Result(r.exit_code, r.stdout, r.stderr)
        if ok:
            assert out.exit_code == 0, f"lakegc {' '.join(args)} -> {out.exit_code}: {out.stderr}"
        return out

    def build(self) -> None:
        run = self
        run("repo", "create", REPO, str(self.ns))
        run("repo", "create", "lakegc://other", str(self.other_ns))
        self.ids["initial"] = heads(run)["main"]
        for path, data in (("a.txt", b"a"), ("dir/b.txt", b"b"), ("both.txt", b"base"), ("gone.txt", b"g")):
            run("fs", "upload", f"{MAIN}/{path}", "--source", "-", input=data)
        self.ids["c1"] = run("commit", MAIN, "-m", "one").stdout.strip()
        run("tag", "create", f"{REPO}/v1", MAIN)
        for name in ("feature", "left", "right"):
            run("branch", "create", f"{REPO}/{name}", "--source", MAIN)
        run("fs", "upload", f"{REPO}/left/both.txt", "--source", "-", input=b"left")
        run("commit", f"{REPO}/left", "-m", "left")
        run("fs", "upload", f"{REPO}/right/both.txt", "--source", "-", input=b"right")
        run("commit", f"{REPO}/right", "-m", "right")
        run("fs", "upload", f"{REPO}/feature/staged.txt", "--source", "-", input=b"s")
        # the token secret exists before any row runs, as it does after a repository's first use
        run("fs", "get-address", f"{MAIN}/warmup", "--json")
        gone = run("fs", "stat", f"{MAIN}/gone.txt", "--json").json()["physical_address"]
        Path(gone.removeprefix("file://")).unlink()
        self.outside.write_bytes(b"outside")

    def snapshot(self) -> dict[str, Any]:
        """What a failed command must not change: every metastore row (branches, commits, tags,
        staging, tokens, ...), every file outside the metastore's home, and the CLI's branch list."""
        return {
            "metastore": dump_metastore(self.metastore),
            "files": sorted(
                str(p.relative_to(self.root))
                for p in self.root.rglob("*")
                if p.is_file() and self.home not in p.parents
            ),
            "branches": self("branch", "list", REPO, "--json").json(),
        }

    def cli_view(self) -> dict[str, Any]:
        """The CLI-visible state of every branch: log, ls and uncommitted changes."""
        view: dict[str, Any] = {"repos": self("repo", "list", "--json").json()}
        for repo in (REPO, "lakegc://other"):
            for b in self("branch", "list", repo, "--json").json():
                ref = f"{repo}/{b['id']}"
                view[ref] = (
                    self("log", ref, "--json").json(),
                    self("fs", "ls", ref + "/", "--json").json(),
                    self("diff", ref, "--json").json(),
                )
            view[repo + " tags"] = self("tag", "list", repo, "--json").json()
        return view


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Name exactly what a failed command changed: which tables (and rows), files or branches."""
    changed = {}
    for table in sorted(set(before["metastore"]) | set(after["metastore"])):
        old, new = set(before["metastore"].get(table, [])), set(after["metastore"].get(table, []))
        if old != new:
            changed[f"table {table}"] = {"removed": sorted(old - new), "added": sorted(new - old)}
    if before["files"] != after["files"]:
        changed["files"] = {
            "removed": sorted(set(before["files"]) - set(after["files"])),
            "added": sorted(set(after["files"]) - set(before["files"])),
        }
    if before["branches"] != after["branches"]:
        changed["branches"] = {"before": before["branches"], "after": after["branches"]}
    assert not changed, f"a failed command left partial state: {changed}"


def dump_metastore(url: str) -> dict[str, list]:
    """Every row of every table: a failed command must leave no partial state in the metastore."""
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return {
                name: sorted(map(repr, conn.execute(sa.select(table)).all())) for name, table in meta.tables.items()
            }
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def world(tmp_path_factory, backend, request):
    with pytest.MonkeyPatch.context() as mp:
        patch_short_lock_wait(mp)
        root = tmp_path_factory.mktemp("errors-world")
        w = World(root, new_metastore(request, backend, root / "home"))
        w.build()
        w.initial_view = w.cli_view()
        yield w
        # after the whole table, what users see through the CLI is still exactly what it was
        assert w.cli_view() == w.initial_view


def _row(id_: str, *args: str, needles: tuple[str, ...] = (), stdin: bytes | None = None):
    return pytest.param(list(args), needles, stdin, id=id_)


BAD_INPUT = [
    # malformed URIs
    _row("uri-without-scheme", "fs", "cat", "repo/main/a.txt"),
    _row("uri-with-other-scheme", "fs", "cat", "s3://repo/main/a.txt"),
    _row("uri-with-lakefs-scheme", "log", "lakefs://repo/main", "--json"),
    _row("uri-single-slash", "log", "lakegc:/repo/main", "--json"),
    _row("uri-uppercase-repo", "fs", "cat", "lakegc://Repo/main/a.txt"),
    _row("uri-underscore-repo", "branch", "list", "lakegc://my_repo", "--json"),
    _row("uri-empty-repo", "fs", "cat", "lakegc:///main/a.txt"),
    _row("uri-ref-with-space", "fs", "cat", f"{REPO}/ma in/a.txt"),
    _row("uri-ref-with-dotdot", "log", f"{REPO}/a..b", "--json"),
    _row("uri-plain-word-as-merge-source", "merge", "feature", MAIN, "--json"),
    # paths
    _row("path-dotdot-cat", "fs", "cat", f"{MAIN}/../a.txt"),
    _row("path-dotdot-inner-stat", "fs", "stat", f"{MAIN}/dir/../a.txt", "--json"),
    _row("path-trailing-dotdot-rm", "fs", "rm", f"{MAIN}/dir/.."),
    _row("path-dot-upload", "fs", "upload", f"{MAIN}/./x.txt", "--source", "-", stdin=b"x"),
    _row("path-absolute-upload", "fs", "upload", f"{MAIN}//etc/passwd", "--source", "-", stdin=b"x"),
    _row("path-empty-component-upload", "fs", "upload", f"{MAIN}/a//b", "--source", "-", stdin=b"x"),
    _row("path-dotdot-cp-dest", "fs", "cp", f"{MAIN}/a.txt", f"{MAIN}/../x", "--json"),
    _row("path-dotdot-get-address", "fs", "get-address", f"{MAIN}/../x", "--json"),
    _row(
        "path-dotdot-link",
        "fs",
        "link",
        f"{MAIN}/../x",
        "--address",
        "OUTSIDE",
        "--size",
        "7",
        "--checksum",
        "c",
        "--json",
    ),
    _row("path-dotdot-ls-prefix", "fs", "ls", f"{MAIN}/../", "--json"),
    # unknown things
    _row("unknown-repo-cat", "fs", "cat", "lakegc://nope/main/a.txt", needles=("not found",)),
    _row("unknown-repo-log", "log", "lakegc://nope/main", "--json", needles=("not found",)),
    _row(
        "unknown-repo-upload",
        "fs",
        "upload",
        "lakegc://nope/main/a",
        "--source",
        "-",
        stdin=b"x",
        needles=("not found",),
    ),
    _row(
        "unknown-branch-upload", "fs", "upload", f"{REPO}/nope/a", "--source", "-", stdin=b"x", needles=("not found",)
    ),
    _row("unknown-ref-cat", "fs", "cat", f"{REPO}/nope/a.txt", needles=("not found",)),
    _row("unknown-commit-log", "log", f"{REPO}/0123456789abcdef", "--json", needles=("not found",)),
    _row("unknown-path-cat", "fs", "cat", f"{MAIN}/nope.txt", needles=("not found",)),
    _row("unknown-path-stat", "fs", "stat", f"{REPO}/v1/nope.txt", "--json", needles=("not found",)),
    _row("unknown-path-rm", "fs", "rm", f"{MAIN}/nope.txt", needles=("not found",)),
    _row("unknown-source-cp", "fs", "cp", f"{MAIN}/nope.txt", f"{MAIN}/x", "--json", needles=("not found",)),
    _row("unknown-branch-get-address", "fs", "get-address", f"{REPO}/nope/x", "--json", needles=("not found",)),
    _row("tag-as-branch-get-address", "fs", "get-address", f"{REPO}/v1/x", "--json"),
    _row("unknown-branch-reset", "branch", "reset", f"{REPO}/nope", "--yes", needles=("not found",)),
    _row("unknown-branch-delete", "branch", "delete", f"{REPO}/nope", "--yes", needles=("not found",)),
    _row("unknown-tag-delete", "tag", "delete", f"{REPO}/nope", needles=("not found",)),
    _row("unknown-repo-delete", "repo", "delete", "lakegc://nope", "--yes", needles=("not found",)),
    _row("unknown-source-merge", "merge", f"{REPO}/nope", MAIN, "--json", needles=("not found",)),
    _row("unknown-ref-diff", "diff", MAIN, f"{REPO}/nope", "--json", needles=("not found",)),
    _row("unknown-commit-revert", "branch", "revert", MAIN, "0123456789abcdef", needles=("not found",)),
    # a commit-id prefix must have at least 8 characters
    _row("commit-prefix-of-7-chars", "log", f"{REPO}/C1[:7]", "--json"),
    # refusals of the repository model
    _row("commit-nothing-staged", "commit", MAIN, "-m", "x", "--json", needles=("nothing",)),
    _row("commit-to-tag", "commit", f"{REPO}/v1", "-m", "x", "--allow-empty", "--json"),
    _row("commit-bad-date", "commit", f"{REPO}/feature", "-m", "x", "--date", "2026-02-30T00:00:00Z", "--json"),
    _row("merge-conflict", "merge", f"{REPO}/left", f"{REPO}/right", "--json", needles=("conflict", "both.txt")),
    _row("merge-into-dirty-branch", "merge", MAIN, f"{REPO}/feature", "--json", needles=("uncommitted",)),
    _row("merge-nothing-to-merge", "merge", f"{REPO}/v1", MAIN, "--json", needles=("nothing",)),
    _row("merge-bad-date", "merge", f"{REPO}/left", MAIN, "--date", "nope", "--json"),
    _row("merge-across-repositories", "merge", "lakegc://other/main", MAIN, "--json"),
    _row("revert-on-dirty-branch", "branch", "revert", f"{REPO}/feature", "C1"),
    _row("revert-initial-commit", "branch", "revert", MAIN, "INITIAL"),
    _row("revert-bad-date", "branch", "revert", MAIN, "C1", "--date", "nope"),
    _row("branch-create-existing", "branch", "create", f"{REPO}/feature", "--source", MAIN, needles=("exists",)),
    _row("branch-create-named-like-tag", "branch", "create", f"{REPO}/v1", "--source", MAIN, needles=("exists",)),
    _row("tag-create-named-like-branch", "tag", "create", f"{REPO}/feature", MAIN, needles=("exists",)),
    _row("tag-create-existing", "tag", "create", f"{REPO}/v1", MAIN, needles=("exists",)),
    _row("branch-delete-default", "branch", "delete", MAIN, "--yes", needles=("default",)),
    _row("branch-delete-without-yes", "branch", "delete", f"{REPO}/left", needles=("--yes",)),
    _row("branch-reset-without-yes", "branch", "reset", f"{REPO}/feature", needles=("--yes",)),
    _row("repo-delete-without-yes", "repo", "delete", REPO, needles=("--yes",)),
    _row("repo-create-existing-name", "repo", "create", REPO, "FRESH_NS", needles=("exists",)),
    _row("repo-create-used-namespace", "repo", "create", "lakegc://third", "NS", needles=("namespace",)),
    _row("repo-create-nested-namespace", "repo", "create", "lakegc://third", "NS/data", needles=("namespace",)),
    _row("repo-create-relative-namespace", "repo", "create", "lakegc://third", "rel/ns"),
    _row("upload-missing-source-file", "fs", "upload", f"{MAIN}/x", "--source", "/nonexistent/file", "--json"),
    _row("get-address-bad-ttl", "fs", "get-address", f"{MAIN}/x", "--ttl", "forever", "--json"),
    _row(
        "link-in-namespace-without-token",
        "fs",
        "link",
        f"{MAIN}/x",
        "--address",
        "NS_OBJECT",
        "--size",
        "1",
        "--checksum",
        "c",
        "--json",
        needles=("token",),
    ),
    _row(
        "link-in-namespace-with-bogus-token",
        "fs",
        "link",
        f"{MAIN}/x",
        "--address",
        "NS_OBJECT",
        "--size",
        "1",
        "--checksum",
        "c",
        "--token",
        "bogus.token",
        "--json",
        needles=("token",),
    ),
    _row("cp-across-repositories", "fs", "cp", f"{MAIN}/a.txt", "lakegc://other/main/a.txt", "--json"),
    _row("rm-on-tag", "fs", "rm", f"{REPO}/v1/a.txt"),
    _row("cat-collected-object", "fs", "cat", f"{MAIN}/gone.txt", needles=("gone (410)",)),
    _row("cat-collected-object-by-tag", "fs", "cat", f"{REPO}/v1/gone.txt", needles=("gone (410)",)),
]


@pytest.mark.parametrize("args, needles, stdin", BAD_INPUT)
def test_bad_input_is_one_error_line_and_changes_nothing(world, args, needles, stdin):
    subst = {
        "OUTSIDE": world.outside.as_uri(),
        "NS": str(world.ns),
        "NS/data": str(world.ns / "data"),
        "FRESH_NS": str(world.root / "fresh-ns"),
        "C1": world.ids["c1"],
        "INITIAL": world.ids["initial"],
        "NS_OBJECT": (world.ns / "_lakegc" / "repository.json").as_uri(),
    }
    args = [subst.get(a, a).replace("C1[:7]", world.ids["c1"][:7]) for a in args]
    before = world.snapshot()
    result = world(*args, input=stdin, ok=False)
    one_error(result, *needles, json_cmd="--json" in args)
    assert_unchanged(before, world.snapshot())


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["fs", "cat"], id="missing-argument"),
        pytest.param(["fs", "cat", f"{MAIN}/a.txt", "extra"], id="extra-argument"),
        pytest.param(["log", MAIN, "--bogus"], id="unknown-option"),
        pytest.param(["commit", MAIN], id="commit-without-message"),
        pytest.param(["fs", "upload", f"{MAIN}/x"], id="upload-without-source"),
        pytest.param(["branch", "create", f"{REPO}/x"], id="branch-create-without-source"),
        pytest.param(["tag", "create", f"{REPO}/t"], id="tag-create-without-ref"),
        pytest.param(
            ["fs", "link", f"{MAIN}/x", "--address", "/tmp/x", "--size", "many", "--checksum", "c"],
            id="non-integer-size",
        ),
        pytest.param(["log", MAIN, "--amount", "lots"], id="non-integer-amount"),
    ],
)
def test_usage_errors_exit_2_and_change_nothing(world, args):
    before = world.snapshot()
    result = world(*args, ok=False)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr
    assert_unchanged(before, world.snapshot())


# -- ambiguity -----------------------------------------------------------------------------------
def _colliding_dates(parent: str, tree: str, message: str) -> tuple[int, int]:
    """Two commit dates that give sibling commits ids sharing their first 8 hex digits (a birthday
    search over the implementation's own id function; ~65k tries on average)."""
    seen: dict[str, int] = {}
    for n in range(1_600_000_000, 1_600_000_000 + 1_500_000):
        prefix = new_commit((parent,), tree, message, parse_date(str(n)), {}).id[:8]
        if prefix in seen:
            return seen[prefix], n
        seen[prefix] = n
    raise AssertionError("no shared 8-character prefix in 1.5M tries (odds of that are ~1e-7)")


def test_commit_prefix_shared_by_two_commits_is_ambiguous_and_longer_prefix_resolves(cli, repo_uri):
    head = cli("log", MAIN, "--json").json()[0]
    d1, d2 = _colliding_dates(head["id"], head["metarange_id"], "twin")
    cli("branch", "create", f"{REPO}/b1", "--source", MAIN)
    cli("branch", "create", f"{REPO}/b2", "--source", MAIN)
    c1 = cli("commit", f"{REPO}/b1", "-m", "twin", "--allow-empty", "--date", str(d1), "--json").json()["id"]
    c2 = cli("commit", f"{REPO}/b2", "-m", "twin", "--allow-empty", "--date", str(d2), "--json").json()["id"]
    assert c1[:8] == c2[:8], "commit ids are computed by _new_commit from parents, tree, message and date"
    shared = c1[:8]
    before = heads(cli)
    one_error(cli("log", f"{REPO}/{shared}", "--json", ok=False), "ambiguous", json_cmd=True)
    one_error(cli("fs", "ls", f"{REPO}/{shared}/", "--json", ok=False), "ambiguous", json_cmd=True)
    one_error(cli("branch", "create", f"{REPO}/x", "--source", f"{REPO}/{shared}", ok=False), "ambiguous")
    one_error(cli("tag", "create", f"{REPO}/t", f"{REPO}/{shared}", ok=False), "ambiguous")
    one_error(cli("merge", f"{REPO}/{shared}", MAIN, "--json", "--allow-empty", ok=False), "ambiguous", json_cmd=True)
    assert heads(cli) == before
    assert cli("tag", "list", REPO, "--json").json() == []
    # a prefix long enough to tell them apart names exactly one commit
    n = next(i for i in range(9, 65) if c1[:i] != c2[:i])
    assert cli("log", f"{REPO}/{c1[:n]}", "--json").json()[0]["id"] == c1
    assert cli("log", f"{REPO}/{c2[:n]}", "--json").json()[0]["id"] == c2


def test_branch_named_like_a_commit_prefix_is_ambiguous(cli, repo_uri, put):
    initial = heads(cli)["main"]
    put(f"{MAIN}/a.txt", b"a")
    c = cli("commit", MAIN, "-m", "x", "--json").json()["id"]
    prefix = c[:8]
    # the branch points elsewhere than the commit its name is a prefix of: two different answers
    created = cli("branch", "create", f"{REPO}/{prefix}", "--source", f"{REPO}/{initial}", ok=False)
    if created.exit_code != 0:  # refusing such a name up front is just as good
        one_error(created)
        return
    one_error(cli("log", f"{REPO}/{prefix}", "--json", ok=False), "ambiguous", json_cmd=True)
    # the full id is no prefix of anything else and resolves to the commit
    assert cli("log", f"{REPO}/{c}", "--json").json()[0]["id"] == c


def test_unique_commit_prefix_of_8_chars_resolves_but_7_does_not(cli, repo_uri, put):
    put(f"{MAIN}/a.txt", b"a")
    c = cli("commit", MAIN, "-m", "x", "--json").json()["id"]
    assert cli("fs", "cat", f"{REPO}/{c[:8]}/a.txt").stdout == "a"
    one_error(cli("fs", "cat", f"{REPO}/{c[:7]}/a.txt", ok=False))


# -- conventions: metastore selection ------------------------------------------------------------
def test_global_metastore_option_overrides_the_environment(env, cli):
    other = f"sqlite:///{env.root / 'elsewhere.db'}"
    cli("--metastore", other, "repo", "create", REPO, str(env.namespace()))
    assert [r["id"] for r in cli("--metastore", other, "repo", "list", "--json").json()] == ["repo"]
    one_error(cli("repo", "list", "--json", ok=False), "no metastore at", json_cmd=True)  # the env's: never made


def test_a_metastore_that_does_not_exist_is_an_error_not_an_empty_lake(env, cli, tmp_path):
    """The review's typo: a SQLite path that does not exist. Every command but the ones that
    create a metastore says so, naming the URL and how to create one, and creates nothing."""
    typo = tmp_path / "no" / "such" / "dir" / "x.db"
    url = f"sqlite:///{typo}"
    for args in (
        ["repo", "list"],
        ["log", "lakegc://repo/main"],
        ["gc", "runs", "lakegc://repo"],
        ["branch", "list", "lakegc://repo"],
        ["fs", "ls", "lakegc://repo/main/"],
    ):
        result = cli("--metastore", url, *args, ok=False)
        one_error(result, "no metastore at", "db init", "repo create")
        assert url in result.stderr
    assert not (tmp_path / "no").exists()
    assert cli("--metastore", url, "db", "schema").stdout.startswith("CREATE TABLE")  # needs no database
    assert not (tmp_path / "no").exists()
    assert "metastore ready" in cli("--metastore", url, "db", "init").stdout
    assert cli("--metastore", url, "repo", "list", "--json").json() == []
    fresh = f"sqlite:///{tmp_path / 'fresh' / 'y.db'}"
    cli("--metastore", fresh, "repo", "create", REPO, str(env.namespace()))
    assert [r["id"] for r in cli("--metastore", fresh, "repo", "list", "--json").json()] == ["repo"]


def test_invalid_metastore_url_is_one_error_line(cli):
    one_error(cli("--metastore", "notadb://x", "repo", "list", "--json", ok=False), json_cmd=True)


@pytest.mark.parametrize(
    "url",
    [
        "mysql://admin:hunter2@db.example/lake",
        "mysql+pymysql://admin:hunter2@db/lake",
        "mssql+pyodbc://admin:hunter2@db/lake",
        "oracle://admin:hunter2@db/lake",
    ],
)
def test_a_database_the_metastore_does_not_run_on_is_named_with_what_it_runs_on(cli, url: str):
    """Not the missing driver's ImportError: which database it is, and the two it can be."""
    result = cli("--metastore", url, "repo", "list", "--json", ok=False)
    one_error(result, json_cmd=True)
    backend = url.split(":")[0].split("+")[0]
    assert f"unsupported database {backend!r}" in result.stderr
    assert "SQLite" in result.stderr and "PostgreSQL" in result.stderr and "hunter2" not in result.stderr


# -- real processes ------------------------------------------------------------------------------
def test_process_malformed_uri_exits_1_with_one_line(sh):
    result = sh("log", "lakegc://Bad_Repo/main", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: ")


def test_process_nothing_to_commit_exits_1_with_empty_stdout(sh, cli, repo_uri):
    result = sh("commit", MAIN, "-m", "x", "--json")
    assert (result.exit_code, result.stdout) == (1, "")
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr


def test_process_version_is_the_package_metadatas_one_version_string(sh):
    """`lakegc --version` and `lakegc.__version__` both say what the installed package's metadata
    (pyproject.toml) says, and nothing else needs a metastore for it."""
    from importlib.metadata import version

    import lakegc

    result = sh("--metastore", "notadb://x", "--version")
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"lakegc {version('lakegc')}\n", "")
    assert lakegc.__version__ == version("lakegc")
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'version = "{lakegc.__version__}"' in pyproject


def test_process_usage_error_exits_2(sh):
    result = sh("fs", "cat")
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


def test_process_unreachable_postgresql_metastore_is_one_line_without_the_password(tmp_path):
    url = "postgresql+psycopg://x:secret@127.0.0.1:1/db"
    proc = subprocess.run(
        [sys.executable, "-m", "lakegc", "--metastore", url, "repo", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LAKEGC_HOME": str(tmp_path)},
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.rstrip("\n").split("\n") == [
        "error: metastore postgresql+psycopg://x:***@127.0.0.1:1/db: connection failed: connection to server at "
        '"127.0.0.1", port 1 failed: Connection refused'
    ]


def test_console_script_entry_point_runs_and_reports_errors(env, sh):
    script = Path(sys.executable).parent / "lakegc"
    assert script.exists(), "the package's console script is installed with it"
    sh("db", "init")
    proc = subprocess.run(
        [str(script), "fs", "cat", "lakegc://missing/main/a.txt"],
        capture_output=True,
        env={**os.environ, **env.environ()},
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.decode().rstrip("\n").split("\n") == ["error: repository 'missing' not found"]
