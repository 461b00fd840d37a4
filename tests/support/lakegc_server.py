"""`lakegc serve` as a real process on a free loopback port, with a user and its key pair (the
`server` fixture of tests/server, through its conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import urllib3

from lakegc.server.launch import serving


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT
    key: str
    secret: str
    env: Any  # conftest.Env

    @property
    def api(self) -> str:
        return self.url + "/api/v1"

    def request(self, method: str, path: str, *, auth: tuple[str, str] | None = None, **kw) -> urllib3.BaseHTTPResponse:
        """A raw request to /api/v1`path`, with the server's key pair unless `auth` says otherwise."""
        user, password = auth if auth is not None else (self.key, self.secret)
        given = kw.pop("headers", {})
        headers = (
            {}
            if any(h.lower() == "authorization" for h in given)
            else urllib3.make_headers(basic_auth=f"{user}:{password}")
        )
        headers.update(given)
        return urllib3.request(method, self.api + path, headers=headers, retries=False, **kw)


@contextmanager
def running_server(env, *options: str, user: str = "tester") -> Iterator[Server]:
    """`lakegc serve [options]` on a free loopback port of `env`'s metastore, with a new `user`;
    it must not have printed a traceback when it stops."""
    environ = {**os.environ, **env.environ()}
    made = subprocess.run(
        [sys.executable, "-m", "lakegc", "auth", "create-user", user, "--json"],
        env=environ, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    pair = json.loads(made.stdout)
    with serving(environ, *options) as served:
        yield Server(served.url, pair["access_key_id"], pair["secret_access_key"], env)
    err = served.process.stderr.read()
    assert "Traceback" not in err, err


@pytest.fixture
def server(env) -> Iterator[Server]:
    with running_server(env) as started:
        yield started


@pytest.fixture
def sdk(server: Server) -> Iterator[Any]:
    """A lakefs-sdk client of `server`, with a repository `repo` created through it."""
    import lakefs_sdk

    conf = lakefs_sdk.Configuration(host=server.api, username=server.key, password=server.secret)
    with lakefs_sdk.ApiClient(conf) as client:
        lakefs_sdk.RepositoriesApi(client).create_repository(
            lakefs_sdk.RepositoryCreation(name="repo", storage_namespace=f"local://{server.env.namespace()}")
        )
        yield client


def status_of(call: Any) -> int:
    """The HTTP status of the lakefs-sdk error `call()` raises (it must raise one)."""
    from lakefs_sdk.exceptions import ApiException

    with pytest.raises(ApiException) as raised:
        call()
    return raised.value.status
