"""The code stays free of unused imports, undefined names and common bug patterns."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_in_src_and_tests():
    targets = [p for p in ("src", "tests", "benchmarks") if (ROOT / p).exists()]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", *targets], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
