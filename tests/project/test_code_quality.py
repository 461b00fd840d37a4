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
    # a real lakeFS installation: a collector like the connectors', sharing their guard list and runs folder
    "lakefs": {"connectors.protected", "connectors.runs", "engine", "errors", "redact", "storage", "timeutil"},
    # a whole warehouse: every collector's way of reading what its system references, one live set
    "warehouse": {"connectors", "engine", "errors", "lakefs", "metastore", "repo", "storage", "timeutil"},
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The lakegc modules `path` imports when it runs, at the top or inside a function (imports
    under `if TYPE_CHECKING:` are for annotations only and are left out)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lakegc"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("lakegc")}
    return {name for name in found if name in modules}


def test_no_module_imports_itself_back_even_from_inside_a_function():
    """Each module's dependencies lead one way: no cycle of imports between modules, counting
    the imports made inside functions (a cycle hidden in a function is still a cycle a reader
    has to untangle, and an import order that breaks when the function moves)."""
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    edges = {name: _runtime_imports(path, set(paths)) - {name} for name, path in paths.items()}
    cycles = []
    for start in sorted(edges):
        stack, seen = [(start, (start,))], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    cycles.append(" -> ".join((*trail, start)))
                elif nxt not in seen and nxt > start:  # each cycle once, from its smallest module
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))
    assert cycles == []


# The modules and functions allowed past the limits below, each with its reason in docs/design.md
# ("What is allowed to be long").
LONG_MODULES: dict[str, int] = {}
LONG_FUNCTIONS: dict[str, int] = {}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def test_no_module_over_500_lines_and_no_function_over_60():
    """Small enough to read whole: a module a newcomer reads in one sitting, a function that fits
    on a screen. The few exceptions are listed above with the length they may not grow past."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name, text = _module_name(path), path.read_text()
        lines = len(text.splitlines())
        if lines > LONG_MODULES.get(name, MAX_MODULE_LINES):
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > LONG_FUNCTIONS.get(f"{name}.{node.name}", MAX_FUNCTION_LINES):
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []
