"""Shared fixtures: every test gets its own SQLite metastore and folders, and drives the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from lakegc.cli.main import app
from lakegc.repo.repository import Lake


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Env:
    """One isolated lakegc world: a metastore URL, a home, and a place for namespaces."""

    home: Path
    metastore: str
    root: Path

    def namespace(self, name: str = "ns") -> Path:
        return self.root / name

    def lake(self) -> Lake:
        return Lake(self.metastore)

    def environ(self) -> dict[str, str]:
        return {"LAKEGC_HOME": str(self.home), "LAKEGC_METASTORE": self.metastore}


@pytest.fixture
def env(tmp_path: Path) -> Env:
    home = tmp_path / "home"
    return Env(home, f"sqlite:///{home / 'lakegc.db'}", tmp_path)


@pytest.fixture
def cli(env: Env) -> Callable[..., CliResult]:
    """Run the real CLI in-process: `cli("fs", "cat", uri)`; `ok=True` asserts exit 0."""
    runner = CliRunner()

    def run(*args: str, input: bytes | str | None = None, ok: bool = True) -> CliResult:
        result = runner.invoke(app, list(args), input=input, env=env.environ(), catch_exceptions=False)
        out = CliResult(result.exit_code, result.stdout, result.stderr)
        if ok:
            assert out.exit_code == 0, f"lakegc {' '.join(args)} -> {out.exit_code}: {out.stderr}"
        return out

    return run


@pytest.fixture
def sh(env: Env) -> Callable[..., CliResult]:
    """Run `lakegc` as a separate process, as users and scripts do."""

    def run(*args: str, input: bytes | None = None) -> CliResult:
        proc = subprocess.run([sys.executable, "-m", "lakegc", *args], input=input, capture_output=True,
                              env={**os.environ, **env.environ()}, timeout=120)
        return CliResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


@pytest.fixture
def repo_uri(env: Env, cli: Callable[..., CliResult]) -> str:
    """A fresh repository `lakegc://repo` with default branch main."""
    cli("repo", "create", "lakegc://repo", str(env.namespace()))
    return "lakegc://repo"


@pytest.fixture
def put(env: Env, cli: Callable[..., CliResult]) -> Callable[[str, bytes | str], dict[str, Any]]:
    """Upload content through the CLI: `put("lakegc://repo/main/a.txt", b"data")` -> stat JSON."""

    def upload(uri: str, content: bytes | str) -> dict[str, Any]:
        return cli("fs", "upload", uri, "--source", "-", "--json", input=content).json()

    return upload
