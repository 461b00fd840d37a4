"""`lakegc serve`: auth, the setup endpoints and repositories, through the real lakefs-sdk and raw HTTP."""

from __future__ import annotations

import json

import lakefs_sdk
import pytest
from support.lakegc_server import status_of


def client_of(server) -> lakefs_sdk.ApiClient:
    conf = lakefs_sdk.Configuration(host=server.api, username=server.key, password=server.secret)
    return lakefs_sdk.ApiClient(conf)


def test_the_setup_endpoints_answer_in_lakefs_shapes(server) -> None:
    with client_of(server) as client:
        config = lakefs_sdk.ConfigApi(client).get_config()
        assert config.storage_config.pre_sign_support is False
        assert tuple(int(p) for p in config.version_config.version.split(".")) >= (1, 3, 1)
        assert lakefs_sdk.InternalApi(client).get_storage_config().blockstore_type == "local"
        assert lakefs_sdk.AuthApi(client).get_current_user().user.id == "tester"


def test_repositories_through_lakefs_sdk(server) -> None:
    ns = server.env.namespace()
    with client_of(server) as client:
        repos = lakefs_sdk.RepositoriesApi(client)
        made = repos.create_repository(
            lakefs_sdk.RepositoryCreation(name="repo", storage_namespace=f"local://{ns}", default_branch="main")
        )
        assert (made.id, made.default_branch, made.storage_namespace) == ("repo", "main", f"local://{ns}")
        assert isinstance(made.creation_date, int)
        assert repos.get_repository("repo").id == "repo"
        assert repos.get_repository_metadata("repo") == {}
        # 409 for one that exists: the clients' `exist_ok` relies on it
        again = lakefs_sdk.RepositoryCreation(name="repo", storage_namespace=f"local://{ns}-2")
        assert status_of(lambda: repos.create_repository(again)) == 409
        for name in ("repo-b", "repo-c"):
            repos.create_repository(
                lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{server.env.namespace(name)}")
            )
        first = repos.list_repositories(amount=2)
        assert [r.id for r in first.results] == ["repo", "repo-b"]
        assert first.pagination.has_more and first.pagination.next_offset == "repo-b"
        rest = repos.list_repositories(after=first.pagination.next_offset, amount=2)
        assert [r.id for r in rest.results] == ["repo-c"]
        assert (rest.pagination.has_more, rest.pagination.next_offset) == (False, "")
        assert [r.id for r in repos.list_repositories(prefix="repo-").results] == ["repo-b", "repo-c"]
        repos.delete_repository("repo-c")
        assert status_of(lambda: repos.get_repository("repo-c")) == 404
        assert status_of(lambda: repos.delete_repository("repo-c")) == 404


@pytest.mark.parametrize(
    "auth",
    [
        pytest.param(None, id="none"),
        pytest.param(("AKIALGNOSUCHKEY00000", "secret"), id="unknown-key"),
        pytest.param("wrong-secret", id="wrong-secret"),
        pytest.param("malformed", id="malformed"),
    ],
)
def test_bad_credentials_are_a_401_with_a_json_body_and_change_nothing(server, auth) -> None:
    body = json.dumps({"name": "sneaky", "storage_namespace": f"local://{server.env.namespace('x')}"})
    if auth is None:
        import urllib3

        response = urllib3.request("POST", server.api + "/repositories", body=body, retries=False)
    elif auth == "wrong-secret":
        response = server.request("POST", "/repositories", auth=(server.key, server.secret + "x"), body=body)
    elif auth == "malformed":
        response = server.request("POST", "/repositories", headers={"Authorization": "Basic !!!"}, body=body)
    else:
        response = server.request("POST", "/repositories", auth=auth, body=body)
    assert response.status == 401
    assert "message" in json.loads(response.data)
    assert server.request("GET", "/repositories").json()["results"] == []
    assert not server.env.namespace("x").exists()


def test_bad_input_is_a_400_or_404_with_a_message_never_a_500(server) -> None:
    ns = server.env.namespace()
    cases = [
        ("POST", "/repositories", b"not json", 400),
        ("POST", "/repositories", json.dumps({"name": "Bad Name", "storage_namespace": f"local://{ns}"}), 400),
        ("POST", "/repositories", json.dumps({"name": "repo", "storage_namespace": "file:///../etc"}), 400),
        ("POST", "/repositories", json.dumps({"name": "repo", "storage_namespace": "local://relative"}), 400),
        ("POST", "/repositories", json.dumps({"name": "repo"}), 400),
        ("GET", "/repositories/no-such-repo", None, 404),
        ("GET", "/repositories/..%2F..%2Fetc", None, 404),
        ("GET", "/repositories?amount=many", None, 400),
        ("GET", "/no/such/route", None, 404),
    ]
    for method, path, body, status in cases:
        response = server.request(method, path, body=body, headers={"Content-Type": "application/json"})
        assert response.status == status, (method, path, body, response.data)
        assert json.loads(response.data)["message"], (method, path)
    assert server.request("GET", "/repositories").json()["results"] == []


def test_healthcheck_needs_no_credentials(server) -> None:
    import urllib3

    assert urllib3.request("GET", server.api + "/healthcheck", retries=False).status == 204
