"""What lakegc lets out (docs/safety.md): credentials in any URL form are masked (`***`) in
every output, log, report and run record; names with control characters are shown escaped on a
terminal; the files lakegc writes take the umask's mode; and an error, a Spark executor's or a dead
JVM's included, is one `error:` line naming its cause, exit 1, with the traceback only under
`--debug`. Through the real CLI (in-process, and as separate processes where the JVM's own output
matters), on real PostgreSQL and Spark; plus the tables of the two pure functions behind it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import PROGRESS, CliResult, Env, age_objects, one_error

from lakegc.engine.recorder import Recorder
from lakegc.engine.runs import MetastoreRunLog, Run, RunState
from lakegc.failures import cause, describe
from lakegc.metastore.sql import sql_url
from lakegc.redact import mask_secrets, printable
from lakegc.repogc.outputs import run_folder
from lakegc.storage import open_storage
from lakegc.timeutil import utcnow

Cli = Callable[..., CliResult]
REPO = "lakegc://repo"
MAIN = f"{REPO}/main"
SECRET = "hunter2"
# The JDK prints this when Spark's launcher adds jdk.incubator.vector: noise lakegc keeps from the user.
JVM_STARTUP = "WARNING: Using incubator modules"


# -- helpers -------------------------------------------------------------------------------------
def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_no_secret(*texts: str | bytes, where: dict[str, bytes] | None = None) -> None:
    for text in texts:
        assert (SECRET.encode() if isinstance(text, bytes) else SECRET) not in text, text
    for name, content in (where or {}).items():
        assert SECRET.encode() not in content, f"{name} holds the password"


def lakegc_process(env: Env, *args: str, umask: int = 0o022, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lakegc", *args],
        env={**os.environ, **env.environ()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        umask=umask,
        **popen,
    )


def lakegc_lines(stderr: str) -> list[str]:
    """stderr without the progress of the phases that ran; the JVM's startup notice never reaches it."""
    assert JVM_STARTUP not in stderr, stderr
    return [line for line in stderr.rstrip("\n").split("\n") if line and not PROGRESS.match(line)]


def create_catalog(url: str, *, with_to_delete: bool = True) -> None:
    columns = [sa.Column("object_store_id", sa.Text, nullable=False, unique=True)]
    if with_to_delete:
        columns.append(sa.Column("to_delete", sa.BigInteger, nullable=True))
    engine = sa.create_engine(sql_url(url), poolclass=sa.pool.NullPool)
    sa.Table("parquet_file", sa.MetaData(), *columns).create(engine)
    engine.dispose()


def old_store(root: Path) -> Path:
    """A store with one old object no catalog row names."""
    path = root / "store" / "1" / f"{uuid.uuid4()}.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"parquet bytes")
    when = (utcnow() - timedelta(days=30)).timestamp()
    os.utime(path, (when, when))
    return root / "store"


def marked_run(env: Env, cli: Cli, put) -> str:
    """A repository with one uncommitted leftover, marked (not swept): the run's id."""
    cli("repo", "create", REPO, str(env.namespace()))
    put(f"{MAIN}/draft.csv", b"a draft nobody committed")
    cli("branch", "reset", MAIN, "--yes")
    age_objects(env.namespace(), utcnow() - timedelta(days=3))
    run = cli("gc", "run", REPO, "--mark-only", "--json").json()
    assert run["num_candidates"] == 1
    return run["run_id"]


def damage_candidates(env: Env, run_id: str) -> None:
    """What the sweep reads on the executors is no Parquet any more."""
    parts = sorted((env.namespace() / "_lakegc" / "gc" / run_id / "candidates").glob("*.parquet"))
    assert parts
    for part in parts:
        part.write_bytes(b"not parquet at all")


# -- credentials ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u@127.0.0.1:1/db?password={SECRET}",
        f"postgresql://u@127.0.0.1:1/db?sslmode=disable&password={SECRET}",
        f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/db?password={SECRET}",
    ],
    ids=["query", "query-second-key", "userinfo-and-query"],
)
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_an_unreachable_metastore_s_password_is_masked_in_the_error(cli: Cli, url: str, debug: bool):
    result = cli(*(["--debug"] if debug else []), "--metastore", url, "repo", "list", "--json", ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.rstrip("\n").split("\n")[-1].startswith("error: metastore postgresql")
    assert "***@127.0.0.1:1" in result.stderr or "password=***" in result.stderr.lower()
    assert ("Traceback" in result.stderr) == debug
    if not debug:
        one_error(result, "connection", json_cmd=True)
    assert_no_secret(result.stdout, result.stderr)


@pytest.fixture
def pg_catalog(pg_url: str) -> str:
    """A PostgreSQL catalog (the test server trusts every local connection: the password given
    is never checked, only carried)."""
    create_catalog(pg_url)
    return pg_url.replace("://postgres@", f"://postgres:{SECRET}@") + f"?password={SECRET}"


def test_a_catalog_url_s_password_reaches_no_output_and_no_file_of_the_run(env: Env, cli: Cli, pg_catalog: str, spark):
    store, runs = old_store(env.root), env.root / "runs"
    base = ("catalog", "gc", "--catalog", pg_catalog, "--store", str(store), "--runs", str(runs))
    as_json = cli(*base, "--json")
    table = cli(*base, "--dry-run")
    doc = as_json.json()
    assert (doc["state"], doc["num_deleted"]) == ("swept", 1)
    assert doc["settings"]["catalog"] == pg_catalog.replace(SECRET, "***")
    assert "postgres:***@" in table.stdout and "password=***" in table.stdout
    written = files_under(runs)
    assert any(name.endswith("report.html") for name in written) and len(list(runs.iterdir())) == 2
    assert_no_secret(as_json.stdout, as_json.stderr, table.stdout, table.stderr, where=written)


def test_a_catalog_run_failing_on_an_executor_with_the_url_in_its_error_records_it_masked(
    env: Env, cli: Cli, pg_url: str, spark
):
    """The lookups run on the executors; a catalog whose table lacks to_delete fails each, and the
    error names the catalog by its URL."""
    create_catalog(pg_url, with_to_delete=False)
    url = pg_url + f"?password={SECRET}"
    store, runs = old_store(env.root), env.root / "runs"
    result = cli("catalog", "gc", "--catalog", url, "--store", str(store), "--runs", str(runs), "--json", ok=False)
    line = one_error(result, "failed", "to_delete", "password=***", "(on a Spark executor)", json_cmd=True)
    assert "An exception was thrown" not in line
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["state"] == "failed" and "password=***" in summary["error"]
    assert_no_secret(result.stderr, where=files_under(runs))


def test_run_records_and_outputs_mask_a_password_the_error_carries(env: Env, cli: Cli, repo_uri: str):
    """A repository run's row in the metastore, its summary.json and report.html, and what
    `gc runs` and `gc show` print, from a run whose error quotes a URL with its credentials."""
    lake = env.lake()
    store = MetastoreRunLog(lake.metastore, "repo")
    now = utcnow()
    summary = Run(
        "20261126T140638000Z-abcdef",
        "repository",
        "repo",
        RunState.MARKING,
        False,
        now.isoformat(),
        now.isoformat(),
        0.0,
        details={"policy": "no rules: keep every commit"},
    )
    storage = open_storage(str(env.namespace()))
    recorder = Recorder(store, run_folder(storage, summary.run_id))
    recorder.start(summary, {"cutoffs": [], "default_cutoff": None, "min_age_seconds": 0.0, "now": now.isoformat()})
    summary.error = f"OperationalError: cannot reach postgresql://u:{SECRET}@db/x?sslmode=a&password={SECRET}"
    recorder.transition(summary, RunState.FAILED)

    with lake.metastore.read() as conn:
        row = conn.execute(sa.text("SELECT parameters, counts, error FROM gc_runs")).one()
    assert row.error == "OperationalError: cannot reach postgresql://u:***@db/x?sslmode=a&password=***"
    shown = [
        cli("gc", "runs", REPO, "--json").stdout,
        cli("gc", "runs", REPO).stdout,
        cli("gc", "show", REPO, summary.run_id, "--json").stdout,
        cli("gc", "show", REPO, summary.run_id).stdout,
    ]
    assert "password=***" in shown[2]
    assert_no_secret(json.dumps(row.counts), *shown, where=files_under(env.namespace() / "_lakegc" / "gc"))


MASKED = [
    ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
    ("postgresql://u:p@ss@h/db", "postgresql://u:***@ss@h/db"),  # SQLAlchemy's password ends at the first @
    ("'postgresql://u:pa\"s@h/db'", "'postgresql://u:***@h/db'"),
    ("postgresql://u@h/db?password=pw", "postgresql://u@h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&Password=pw&x=1", "postgresql://u@h/db?sslmode=require&Password=***&x=1"),
    ("mysql://h/db?user=u&passwd=pw", "mysql://h/db?user=u&passwd=***"),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=ab&X-Amz-Security-Token=tt",
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***",
    ),
    (
        "http://h/api?access_key=a&secret_access_key=s&token=t&api-key=k",
        "http://h/api?access_key=***&secret_access_key=***&token=***&api-key=***",
    ),
    ("jdbc:sqlserver://h;user=u;password=pw", "jdbc:sqlserver://h;user=u;password=***"),
    ("host=h port=5432 password=pw dbname=d", "host=h port=5432 password=*** dbname=d"),
    ("host=h password='two words' user=u", "host=h password=*** user=u"),
    ("connect('host=h PASSWORD=pw')", "connect('host=h PASSWORD=***')"),
    ("spark.hadoop.fs.s3a.secret.key=abc", "spark.hadoop.fs.s3a.secret.key=***"),
    ("metastore postgresql://u@h/db?password=a:b: refused", "metastore postgresql://u@h/db?password=***: refused"),
    (
        "error: metastore postgresql://u:***@h/db?password=***: refused",
        "error: metastore postgresql://u:***@h/db?password=***: refused",
    ),
    # nothing to mask
    ("http://host:8080/path?page=2", "http://host:8080/path?page=2"),
    ("file:///lake/data/a@b.csv", "file:///lake/data/a@b.csv"),
    ("--cutoff token=7d", "--cutoff token=7d"),
    ("user@example.com wrote x=1", "user@example.com wrote x=1"),
]


@pytest.mark.parametrize("text, expected", MASKED, ids=[t for t, _ in MASKED])
def test_mask_secrets(text: str, expected: str):
    assert mask_secrets(text) == expected


# -- control characters --------------------------------------------------------------------------
EVIL = "evil\x1b[31mred\rback\x07\tx\n.csv"
EVIL_SHOWN = "evil\\x1b[31mred\\rback\\x07\\tx\\n.csv"


def test_names_with_control_characters_are_shown_escaped_and_content_stays_raw(env: Env, cli: Cli, repo_uri: str):
    uploaded = cli("fs", "upload", f"{MAIN}/{EVIL}", "--source", "-", input=b"\x1b[2Jraw content")
    listed = cli("fs", "ls", f"{MAIN}/")
    for out in (uploaded.stdout, listed.stdout):
        assert not any(c in out for c in "\x1b\r\x07\t"), repr(out)
    assert uploaded.stdout.startswith(f"{MAIN}/{EVIL_SHOWN}: 15 bytes staged at ") and uploaded.stdout.count("\n") == 1
    assert any(line.startswith(EVIL_SHOWN + " ") for line in listed.stdout.split("\n")), listed.stdout
    assert [d["path"] for d in cli("fs", "ls", f"{MAIN}/", "--json").json()] == [EVIL]  # JSON: valid, exact
    assert cli("fs", "cat", f"{MAIN}/{EVIL}").stdout == "\x1b[2Jraw content"  # content is not a name

    address = cli("fs", "stat", f"{MAIN}/{EVIL}", "--json").json()["physical_address"]
    Path(address.removeprefix("file://")).unlink()
    line = one_error(cli("fs", "cat", f"{MAIN}/{EVIL}", ok=False), "gone (410)")
    assert line == f"error: {MAIN}/{EVIL_SHOWN}: object gone (410)"


def test_printable_escapes_what_a_terminal_would_obey():
    assert (
        printable("a\x1b[2Jb\r\n\t\x00\x7f\x9b\u202egnp.exe\u2028")
        == "a\\x1b[2Jb\\r\\n\\t\\x00\\x7f\\x9b\\u202egnp.exe\\u2028"
    )
    assert printable("plain é 名前 [bold]") == "plain é 名前 [bold]"


# -- file modes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)], ids=["022", "027", "077"])
def test_uploaded_objects_take_the_mode_the_umask_gives(env: Env, cli: Cli, repo_uri: str, umask: int, mode: int):
    old = os.umask(umask)
    try:
        address = cli("fs", "upload", f"{MAIN}/a.csv", "--source", "-", "--json", input=b"x").json()["physical_address"]
    finally:
        os.umask(old)
    assert os.stat(address.removeprefix("file://")).st_mode & 0o777 == mode


def test_a_gc_run_s_files_take_the_umask_of_its_process(env: Env, cli: Cli, put, spark):
    """In a process of its own (its Spark workers inherit its umask): every file of the run's
    folder, Parquet parts written on the executors included."""
    cli("repo", "create", REPO, str(env.namespace()))
    put(f"{MAIN}/draft.csv", b"a draft")
    cli("branch", "reset", MAIN, "--yes")
    age_objects(env.namespace(), utcnow() - timedelta(days=3))
    proc = lakegc_process(env, "gc", "run", REPO, "--mark-only", "--json", umask=0o027)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    run_dir = env.namespace() / "_lakegc" / "gc" / json.loads(out)["run_id"]
    modes = {p.relative_to(run_dir).as_posix(): p.stat().st_mode & 0o777 for p in run_dir.rglob("*") if p.is_file()}
    assert {"summary.json", "report.html"} <= set(modes) and any(k.endswith(".parquet") for k in modes)
    assert set(modes.values()) == {0o640}, modes


# -- errors: one line naming the cause -----------------------------------------------------------
def test_a_sweep_failing_on_an_executor_is_one_error_line_naming_the_cause(env: Env, cli: Cli, put, spark):
    """In a process of its own, so that whatever the JVM prints is seen too."""
    run_id = marked_run(env, cli, put)
    damage_candidates(env, run_id)
    before = files_under(env.namespace() / "data")
    proc = lakegc_process(env, "gc", "sweep", REPO, run_id, "--json")
    out, err = proc.communicate(timeout=600)
    assert (proc.returncode, out) == (1, ""), err
    lines = lakegc_lines(err)
    assert len(lines) == 1, err  # nothing else: no worker traceback, no Spark log line
    line = lines[0]
    assert line.startswith(f"error: GC run {run_id} failed: ArrowInvalid: ") and line.endswith(
        "Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file. "
        "(on a Spark executor)"
    ), line
    (run,) = cli("gc", "runs", REPO, "--json").json()
    assert run["state"] == "failed" and run["error"].startswith("ArrowInvalid: ") and run["num_deleted"] == 0
    assert files_under(env.namespace() / "data") == before


def test_debug_prints_the_traceback_then_the_error_line(env: Env, cli: Cli, put, spark):
    run_id = marked_run(env, cli, put)
    damage_candidates(env, run_id)
    plain = cli("gc", "sweep", REPO, run_id, "--json", ok=False)
    one_error(plain, "ArrowInvalid", "(on a Spark executor)", json_cmd=True)

    run_id = cli("gc", "run", REPO, "--mark-only", "--clean", "--json").json()["run_id"]
    damage_candidates(env, run_id)
    debug = cli("--debug", "gc", "sweep", REPO, run_id, "--json", ok=False)
    assert (debug.exit_code, debug.stdout) == (1, "")
    lines = debug.stderr.rstrip("\n").split("\n")
    assert "Traceback (most recent call last):" in debug.stderr and "pyarrow.lib.ArrowInvalid" in debug.stderr
    assert lines[-1].startswith(f"error: GC run {run_id} failed: ArrowInvalid: ")
    assert [line for line in lines if line.startswith("error:")] == lines[-1:]


def _children(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            for child in (task / "children").read_text().split():
                found.append(int(child))
                todo.append(int(child))
    return found


def test_a_jvm_killed_during_a_run_fails_it_with_one_error_line(env: Env, cli: Cli, put, spark):
    """The run's Spark driver JVM is killed as soon as the run starts marking: the run is recorded
    failed and the error line says the JVM is gone."""
    cli("repo", "create", REPO, str(env.namespace()))
    put(f"{MAIN}/a.csv", b"a")
    proc = lakegc_process(env, "gc", "run", REPO, "--min-age", "0s")
    first_phase = proc.stderr.readline()
    assert first_phase.startswith("GC repo: "), first_phase  # the JVM's startup notice is not shown
    jvms = [
        pid
        for pid in _children(proc.pid)
        if b"org.apache.spark.deploy.SparkSubmit" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(jvms) == 1
    os.kill(jvms[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, (out, err)
    errors = [line for line in err.split("\n") if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err and err.rstrip("\n").split("\n")[-1] == errors[0]
    assert errors[0].startswith("error: GC run ") and "failed: Spark's JVM is gone (" in errors[0]
    (run,) = cli("gc", "runs", REPO, "--json").json()
    assert run["state"] == "failed" and run["error"].startswith("Spark's JVM is gone")


# -- the cause of a failure, from real exception texts (captured from Spark 4 in local mode) ---------
PYTHON_EXCEPTION = (
    "pyspark.errors.exceptions.captured.PythonException",
    "pyspark.errors.exceptions.captured.CapturedException",
    "pyspark.errors.exceptions.base.PythonException",
    "pyspark.errors.exceptions.base.PySparkException",
    "builtins.Exception",
)
PY4J_JAVA_ERROR = ("py4j.protocol.Py4JJavaError", "py4j.protocol.Py4JError", "builtins.Exception")
WORKER = "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
CRASH = (
    "An error occurred while calling o155.collectToPython.\n: org.apache.spark.SparkException: Job aborted due to "
    "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 3) "
    "(192.0.2.2 executor driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
    "Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler."
    "enabled' configuration to 'true' for the better Python traceback.\n\tat org.apache.spark.api.python.BasePython"
    "Runner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:1136)\n\tat scala.runtime.AbstractPartial"
    "Function.apply(AbstractPartialFunction.scala:35)\nCaused by: java.io.EOFException\n\tat java.base/java.io."
    "DataInputStream.readInt(DataInputStream.java:386)\n\t... 21 more\n\nDriver stacktrace:\n\tat org.apache.spark."
    "scheduler.DAGScheduler.$anonfun$abortStage$3(DAGScheduler.scala:4568)\n"
)
CAUSES = {
    "executor ValueError": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture.py", line 14, in boom\n    raise '
        'ValueError("bad thing")\nValueError: bad thing',
        False,
        "ValueError: bad thing (on a Spark executor)",
    ),
    "executor lakegc error: its message": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture.py", line 24, in lk\n    raise ObjectNotFound("file:///x/y '
        'does not exist")\nlakegc.errors.ObjectNotFound: file:///x/y does not exist',
        False,
        "file:///x/y does not exist (on a Spark executor)",
    ),
    "executor ArrowInvalid, a frame line reading `except ImportError:`": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture3.py", line 38, in arrow\n    pq.read_table(io.BytesIO(b"n'
        'ot parquet at all"))\n  File "/work/main/.venv/lib/python3.11/site-packages/pyarrow/parquet/core.py", line '
        '1936, in read_table\n    except ImportError:\n  File "/work/main/.venv/lib/python3.11/site-packages/pyarrow/'
        'parquet/core.py", line 1480, in __init__\n    [fragment], schema=schema or fragment.physical_schema,\n       '
        '                          ^^^^^^^^^^^^^^^^^^^^^^^^\n  File "pyarrow/error.pxi", line 92, in pyarrow.lib.chec'
        "k_status\npyarrow.lib.ArrowInvalid: Could not open Parquet input source '<Buffer>': Parquet magic bytes not "
        "found in footer. Either the file is corrupted or this is not a parquet file.",
        False,
        "ArrowInvalid: Could not open Parquet input source '<Buffer>': Parquet magic bytes not found in footer. Either "
        "the file is corrupted or this is not a parquet file. (on a Spark executor)",
    ),
    "executor FileNotFoundError": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture.py", line 33, in oserr\n    open("/nonexistent/zzz")\n'
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/zzz'",
        False,
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/zzz' (on a Spark executor)",
    ),
    "executor AssertionError without a message": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture3.py", line 41, in assertion\n    assert False\nAssertionError',
        False,
        "AssertionError (on a Spark executor)",
    ),
    "executor error with a two-line message": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/tmp/cap/capture3.py", line 44, in multiline\n    raise ValueError("first '
        'line\\nsecond line")\nValueError: first line\nsecond line',
        False,
        "ValueError: first line second line (on a Spark executor)",
    ),
    "executor chained errors: the last one": (
        PYTHON_EXCEPTION,
        WORKER + '  File "w.py", line 3, in f\n    {}["k"]\nKeyError: \'k\'\n\nThe above exception '
        'was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File "w.py", line '
        '5, in f\n    raise RuntimeError("could not read range abc") from e\nRuntimeError: could not read range abc',
        False,
        "RuntimeError: could not read range abc (on a Spark executor)",
    ),
    "RDD API worker error": (
        PYTHON_EXCEPTION,
        WORKER + '  File "/work/main/.venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.'
        'zip/pyspark/worker.py", line 4327, in invoke_udf\n    run_process()\n  File "/tmp/cap/capture3.py", line 50, '
        'in rdd_fail\n    raise ValueError("rdd side")\nValueError: rdd side',
        False,
        "ValueError: rdd side (on a Spark executor)",
    ),
    "worker traceback inside the JVM's text, then its stack": (
        PY4J_JAVA_ERROR,
        "An error occurred while calling o42.collectToPython.\n: org.apache.spark.SparkException: Job "
        "aborted due to stage failure: Task 0 in stage 0.0 failed 1 times, most recent failure: Lost task 0.0 in stage "
        "0.0 (TID 0) (192.0.2.2 executor driver): org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An "
        'exception was thrown from the Python worker: Traceback (most recent call last):\n  File "/tmp/cap/capture.py'
        '", line 14, in boom\n    raise ValueError("bad thing")\nValueError: bad thing\n SQLSTATE: 38000\n\tat '
        "org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1097)\n",
        False,
        "ValueError: bad thing (on a Spark executor)",
    ),
    "Python worker crashed": (
        PY4J_JAVA_ERROR,
        CRASH,
        False,
        "SparkException: Python worker exited unexpectedly (crashed). Consider setting "
        "'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker."
        "faulthandler.enabled' configuration to 'true' for the better Python traceback. "
        "(on a Spark executor)",
    ),
    "executor lost": (
        PY4J_JAVA_ERROR,
        CRASH.replace(
            "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed).",
            "ExecutorLostFailure (executor 2 exited caused by one of the running tasks) Reason: Remote RPC client "
            "disassociated.",
        ).replace("(192.0.2.2 executor driver)", "(10.0.0.5 executor 2)"),
        False,
        "ExecutorLostFailure (executor 2 exited caused by one of the running tasks) Reason: Remote RPC client "
        "disassociated. Consider setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python."
        "worker.faulthandler.enabled' configuration to 'true' for the better Python traceback. (on a Spark executor)",
    ),
    "Java exception of a JVM call": (
        PY4J_JAVA_ERROR,
        "An error occurred while calling o87.parquet.\n: java.lang.OutOfMemoryError: Java heap space\n"
        "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n",
        False,
        "OutOfMemoryError: Java heap space",
    ),
    "captured AnalysisException": (
        (
            "pyspark.errors.exceptions.captured.AnalysisException",
            "pyspark.errors.exceptions.captured.CapturedException",
            "pyspark.errors.exceptions.base.AnalysisException",
            "pyspark.errors.exceptions.base.PySparkException",
        ),
        "[PATH_NOT_FOUND] Path does not exist: file:/nonexistent/path/zz. SQLSTATE: 42K03",
        False,
        "AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:/nonexistent/path/zz. SQLSTATE: 42K03",
    ),
    "captured ArithmeticException with its SQL context": (
        (
            "pyspark.errors.exceptions.captured.ArithmeticException",
            "pyspark.errors.exceptions.captured.CapturedException",
        ),
        "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n== SQL (line 1, position 8) ==\n"
        "SELECT 1/0 AS x\n       ^^^\n",
        False,
        "ArithmeticException: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012",
    ),
    "Py4JError of a missing JVM method": (
        ("py4j.protocol.Py4JError", "builtins.Exception"),
        "java.lang.Integer.noSuchMethod does not exist in the JVM",
        False,
        "Py4JError: java.lang.Integer.noSuchMethod does not exist in the JVM",
    ),
    "JVM that never started": (
        ("pyspark.errors.exceptions.base.PySparkRuntimeError", "pyspark.errors.exceptions.base.PySparkException"),
        "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.",
        False,
        "PySparkRuntimeError: [JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.",
    ),
    "JVM killed mid-job: Py4J's reconnect is refused": (
        ("builtins.ConnectionRefusedError", "builtins.ConnectionError", "builtins.OSError"),
        "[Errno 111] Connection refused",
        True,
        "Spark's JVM is gone (ConnectionRefusedError: [Errno 111] Connection refused)",
    ),
    "JVM killed: Py4J logged the broken connection, then failed a lookup": (
        ("py4j.protocol.Py4JError", "builtins.Exception"),
        "org.apache.spark.sql.classic.SparkSession does not exist in the JVM",
        True,
        "Spark's JVM is gone (Py4JError: org.apache.spark.sql.classic.SparkSession does not exist in the JVM)",
    ),
    "JVM gone: Py4JNetworkError": (
        ("py4j.protocol.Py4JNetworkError", "py4j.protocol.Py4JError"),
        "Answer from Java side is empty",
        False,
        "Spark's JVM is gone (Py4JNetworkError: Answer from Java side is empty)",
    ),
    "Spark Connect server gone (an engine killed mid-run)": (
        (
            "pyspark.errors.exceptions.connect.SparkConnectGrpcException",
            "pyspark.errors.exceptions.base.PySparkException",
        ),
        "<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:15002: '
        'Failed to connect to remote host: Connection refused"\n>',
        False,
        "the Spark Connect server went away (StatusCode.UNAVAILABLE): a stopped or crashed engine, or the network",
    ),
    "on Spark Connect, an executor's own refused connection is the executor's error, not the server's": (
        ("pyspark.errors.exceptions.connect.PythonException", "pyspark.errors.exceptions.base.PySparkException"),
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "/x/lakegc/storage/s3.py", line 9, in delete\n'
        "ConnectionRefusedError: [Errno 111] Connection refused (StatusCode.UNAVAILABLE in a message)",
        False,
        "ConnectionRefusedError: [Errno 111] Connection refused (StatusCode.UNAVAILABLE in a message)"
        " (on a Spark executor)",
    ),
    "an error of our own, on the driver": (
        ("lakegc.errors.CorruptMetadata", "lakegc.errors.LakegcError"),
        "range abc: its content does not match its id",
        False,
        "range abc: its content does not match its id",
    ),
    "a bug's error": (("builtins.KeyError", "builtins.LookupError"), "'missing'", False, "KeyError: 'missing'"),
}


@pytest.mark.parametrize("classes, text, jvm_gone, expected", CAUSES.values(), ids=CAUSES.keys())
def test_describe_names_the_real_cause(classes: tuple[str, ...], text: str, jvm_gone: bool, expected: str):
    assert describe(classes, text, jvm_gone=jvm_gone) == expected


def test_cause_of_a_real_py4j_failure_against_no_jvm_says_the_jvm_is_gone():
    from py4j.clientserver import ClientServer, JavaParameters, PythonParameters
    from py4j.java_gateway import GatewayParameters, JavaGateway
    from support.loopback import free_port

    gateways = [
        ClientServer(java_parameters=JavaParameters(port=free_port()), python_parameters=PythonParameters(port=0)),
        JavaGateway(gateway_parameters=GatewayParameters(port=free_port())),
    ]
    for gateway in gateways:
        try:
            gateway.jvm.java.lang.System.currentTimeMillis()
        except Exception as exc:  # noqa: BLE001 - whatever Py4J raises is the subject
            assert cause(exc).startswith("Spark's JVM is gone ("), cause(exc)
        else:
            pytest.fail("a call into no JVM succeeded")
        finally:
            gateway.shutdown()
    assert cause(ValueError(f"see postgresql://u:{SECRET}@h/db")) == "ValueError: see postgresql://u:***@h/db"
