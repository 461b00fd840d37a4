"""A throwaway PostgreSQL server for tests: initdb into a temporary folder, start `postgres` on a free
port of 127.0.0.1 (trust authentication, no fsync), hand out fresh databases, stop it at the end.

The binaries come from Debian's postgresql package (/usr/lib/postgresql/<version>/bin) or PATH.
initdb and postgres refuse to run as root: as root, they run as the `postgres` system user.
The server is deliberately unlike SQLite where lakegc must not care: the default collation is
ICU's English, not byte order, and the session time zone is not UTC. Role PASSWORD_ROLE must give
a password (everyone else is trusted), for tests of a wrong one.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from support.loopback import free_port

START_TIMEOUT = 60.0
PASSWORD_ROLE = "lakegc_password"


def find_binaries() -> Path | None:
    """The folder of the newest installed initdb/postgres pair, or None."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return candidates[-1].parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


class PgServer:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="lakegc-pg-"))  # short: the socket path has a length limit
        self.data, self.log = self.root / "data", self.root / "server.log"
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._names = itertools.count()

    def _run_as(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if self.as_postgres else []

    def start(self) -> None:
        initdb = subprocess.run(
            [
                *self._run_as(),
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale-provider=icu",
                "--icu-locale=en-US",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
        )
        if initdb.returncode:
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}{initdb.stderr}")
        (self.data / "pg_hba.conf").write_text(
            f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\nlocal all all trust\n"
        )
        for _ in range(3):  # another process may take the free port before the server binds it
            self.port = free_port()
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    [
                        *self._run_as(),
                        str(self.bindir / "postgres"),
                        "-D",
                        str(self.data),
                        "-p",
                        str(self.port),
                        "-k",
                        str(self.root),
                        "-c",
                        "listen_addresses=127.0.0.1",
                        "-c",
                        "fsync=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        "full_page_writes=off",
                        "-c",
                        "max_connections=300",
                        "-c",
                        "timezone=America/New_York",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_ready():
                return
        raise RuntimeError(f"PostgreSQL did not start; its log ({self.log}):\n{self.log.read_text()[-4000:]}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        self.stop()
        return False

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of a database of this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        name = f"t_{next(self._names)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Immediate shutdown: the data is thrown away, so there is nothing to flush. Through pg_ctl
        (it signals the postmaster itself, not the runuser wrapper in between)."""
        if self.process is not None and self.process.poll() is None:
            subprocess.run(
                [*self._run_as(), str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w"],
                capture_output=True,
            )
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
