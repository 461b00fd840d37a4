"""The code stays clean, formatted, layered as docs/design.md draws it, and self-contained."""

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGETS = [p for p in ("src", "tests", "benchmarks") if (ROOT / p).exists()]
PACKAGE = ROOT / "src" / "lakegc"


def test_ruff_finds_nothing_in_src_tests_and_benchmarks():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", *TARGETS], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_would_change_nothing():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *TARGETS], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# package -> the lakegc packages it may import (itself always): dependencies go one way, downwards.
LAYERS = {
    "storage": {"errors", "timeutil"},
    "metastore": {"errors", "redact", "settings", "timeutil"},
    "retention": {"errors", "timeutil"},
    "engine": {"errors", "failures", "metastore", "redact", "settings", "storage", "timeutil"},
    "repo": {"engine.guard", "errors", "metastore", "retention", "settings", "storage", "timeutil", "uri"},
    "repogc": {"engine", "errors", "failures", "metastore", "repo", "retention", "storage", "timeutil"},
    "connectors": {"engine", "errors", "failures", "metastore", "redact", "repo", "settings", "storage", "timeutil"},
}


def _lakegc_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        found |= {n.removeprefix("lakegc.") for n in names if n.startswith("lakegc.")}
    return found


def test_each_package_imports_only_the_layers_below_it():
    """engine knows no repository, table or catalog; repo knows no GC; GC reads the repository
    through its GcSource and never through the metastore's tables; nothing imports the CLI."""
    wrong = []
    for package, allowed in LAYERS.items():
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for name in _lakegc_imports(path):
                if name.split(".")[0] == package:
                    continue
                if not any(name == a or name.startswith(a + ".") for a in allowed):
                    wrong.append(f"{path.relative_to(ROOT)} imports lakegc.{name}")
    assert wrong == []


GC_TABLES = {"gc_leases", "gc_runs"}  # GC's own; every other table is the repository's


def test_gc_does_not_query_the_repositorys_tables():
    """The one interface between GC and the repository is `repo.gc_source.GcSource`: GC touches
    only its own tables (the lease, the run log)."""
    offenders = {
        f"{path.relative_to(ROOT)}: {table}"
        for path in sorted((PACKAGE / "repogc").rglob("*.py"))
        for table in re.findall(r"\bt\.(\w+)\b", path.read_text())
        if table not in GC_TABLES
    }
    assert offenders == set()


OUTSIDE = re.compile(r"DESIGN\.md|CLI\.md|STYLE\.md|\bseeds?/|\bseed ?0\d\d|/work/shared")


def test_no_docstring_or_document_sends_a_reader_outside_the_repository():
    files = [
        path for target in TARGETS for path in sorted((ROOT / target).rglob("*.py")) if path != Path(__file__).resolve()
    ]
    files += sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == []


def test_the_pipeline_is_dataframes_only():
    """Spark Connect sessions have no SparkContext, RDDs, accumulators or broadcasts: the code runs
    on Connect only if it names none of them (`engine.tasks.classic_context` is the one way to the
    few things only a classic engine has: job counts, the log level, the JVM it started)."""
    banned = re.compile(r"\bsparkContext\b|\.rdd\b|\.accumulator\(|\.broadcast\(")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if banned.search(line)
    ]
    assert not found, "\n".join(found)
