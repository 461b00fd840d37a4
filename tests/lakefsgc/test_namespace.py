"""The decisions `lakefs gc` acts on, as pure functions: where a namespace is, how an entry's
address names an object in it, which commits' trees are kept, where lakeFS may put its files."""

from __future__ import annotations

import pytest

from lakegc.errors import InvalidArgument
from lakegc.lakefs.client import Connection, api_endpoint
from lakegc.lakefs.namespace import (
    NamespaceFileError,
    active_metaranges,
    check_file_id,
    check_run_id,
    key_of,
    listing_folders,
    namespace_location,
    namespace_prefixes,
    relative_address,
)

NS = "s3://bucket/repos/one"
PREFIX = NS + "/"
PREFIXES = (PREFIX,)
M1, M2 = "a" * 64, "b" * 64


@pytest.mark.parametrize(
    ("namespace", "local_path", "expected"),
    [
        ("s3://bucket/repos/one", None, "s3://bucket/repos/one"),
        ("s3://bucket/repos/one/", None, "s3://bucket/repos/one"),
        ("local://repo1", "/var/lakefs/data", "/var/lakefs/data/repo1"),
        ("local:///abs/repo1", None, "/abs/repo1"),
        ("local:///abs/repo1", "/var/lakefs", "/var/lakefs/abs/repo1"),
    ],
)
def test_a_namespace_is_opened_where_lakefs_keeps_it(namespace, local_path, expected):
    assert namespace_location(namespace, local_path) == expected


@pytest.mark.parametrize("namespace", ["local://repo1", "gs://bucket/x", "https://acct.blob.core.windows.net/c/x"])
def test_a_namespace_lakegc_cannot_place_is_refused(namespace):
    with pytest.raises(InvalidArgument):
        namespace_location(namespace, None)


@pytest.mark.parametrize(
    ("address", "address_type", "expected"),
    [
        ("data/gabc/cdef", 1, "data/gabc/cdef"),  # RELATIVE
        ("4e068d1a46734113abd2218e87aace4c", None, "4e068d1a46734113abd2218e87aace4c"),  # by prefix, old
        ("4e068d1a46734113abd2218e87aace4c", 0, "4e068d1a46734113abd2218e87aace4c"),
        (PREFIX + "data/gabc/cdef", 2, "data/gabc/cdef"),  # FULL, inside
        (PREFIX + "data/gabc/cdef", None, "data/gabc/cdef"),
        ("s3://bucket/repos/other/data/x", 2, None),  # FULL, another namespace of the bucket
        ("s3://bucket/repos/one-more/data/x", 2, None),  # a sibling whose name starts the same
        ("s3://oz-repo/imported/x.parquet", 2, None),  # an import elsewhere: never collected here
    ],
)
def test_an_address_names_an_object_of_the_namespace_or_none(address, address_type, expected):
    assert relative_address(address, address_type, PREFIXES) == expected


def test_the_active_commits_metaranges_are_kept_and_the_expired_left():
    csv = (
        "commit_id,expired,metarange_id\n"
        f"c1,false,{M1}\nc2,true,{M2}\nc3,false,{M1}\nc0,false,\n"  # c0: the first commit, no tree
    ).encode()
    assert active_metaranges(csv, "commits.csv") == [M1]
    assert active_metaranges(b"commit_id,expired,metarange_id\nc0,false,\n", "commits.csv") == []


@pytest.mark.parametrize(
    "content",
    [
        b"commit,gone,tree\nc1,false,x\n",  # another header
        b"commit_id,expired,metarange_id\nc1,maybe,x\n",  # neither true nor false
        b"\xff\xfe not text",
        b"",  # lakeFS always writes the header
        b"commit_id,expired,metarange_id\n",  # and at least every branch's head
    ],
)
def test_a_commits_file_lakegc_cannot_read_fails_the_run(content):
    with pytest.raises(NamespaceFileError, match="commits.csv"):
        active_metaranges(content, "commits.csv")


def test_lakefs_files_outside_the_namespace_are_refused():
    assert key_of(PREFIX + "_lakefs/retention/gc/commits/run_id=1/commits.csv", PREFIXES, "x") == (
        "_lakefs/retention/gc/commits/run_id=1/commits.csv"
    )
    assert key_of("_lakefs/" + M1, PREFIXES, "a metarange") == "_lakefs/" + M1  # relative to the namespace
    for location in [
        "s3://bucket/repos/other/_lakefs/x",
        "s3://bucket/repos/one-more/x",
        PREFIX,
        PREFIX + "a/../../b",
        "../x",
    ]:
        with pytest.raises(NamespaceFileError):
            key_of(location, PREFIXES, "the commits file")


def test_ids_that_would_become_keys_are_checked():
    assert check_file_id(M1, "range") == M1
    for bad in ["../../etc/passwd", "A" * 64, "a" * 63, ""]:
        with pytest.raises(NamespaceFileError):
            check_file_id(bad, "range")
    assert check_run_id("9f1c0b3a-2f4e-4c1e-9a57-1d2e3f4a5b6c") == "9f1c0b3a-2f4e-4c1e-9a57-1d2e3f4a5b6c"
    for bad in ["../x", "a/b", "", "x" * 200]:
        with pytest.raises(InvalidArgument):
            check_run_id(bad)


def test_a_local_namespace_is_also_named_by_the_folder_it_resolves_to():
    prefixes = namespace_prefixes("local://repo1", "/var/lakefs/repo1")
    assert prefixes == ("local://repo1/", "local:///var/lakefs/repo1/")
    assert key_of("local:///var/lakefs/repo1/_lakefs/" + M1, prefixes, "a metarange") == "_lakefs/" + M1
    assert relative_address("local:///var/lakefs/repo1/data/g/c", 2, prefixes) == "data/g/c"
    assert relative_address("local://repo1/data/g/c", 2, prefixes) == "data/g/c"
    assert relative_address("local:///var/lakefs/repo2/data/g/c", 2, prefixes) is None
    assert namespace_prefixes(NS, NS) == PREFIXES


def test_the_listing_covers_data_and_the_root_only():
    folders = listing_folders(["g2", "g1"])
    assert [(f.prefix, f.recursive) for f in folders] == [
        ("", False),
        ("data/", False),
        ("data/g1/", True),
        ("data/g2/", True),
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://lakefs:8000", "http://lakefs:8000/api/v1"),
        ("http://lakefs:8000/", "http://lakefs:8000/api/v1"),
        ("http://lakefs:8000/api/v1", "http://lakefs:8000/api/v1"),
        ("https://lakefs.example.com/api/v1/", "https://lakefs.example.com/api/v1"),
    ],
)
def test_the_endpoint_is_taken_with_or_without_its_api_path(given, expected):
    assert api_endpoint(given) == expected


def test_the_connection_falls_back_on_lakectls_variables(monkeypatch):
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", "http://lakefs:8000")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "secret")
    assert Connection.resolve(None, None, None) == Connection("http://lakefs:8000/api/v1", "AKIA", "secret")
    assert Connection.resolve("http://other", "K", "S") == Connection("http://other/api/v1", "K", "S")
    monkeypatch.delenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY")
    with pytest.raises(InvalidArgument, match="credentials"):
        Connection.resolve(None, None, None)
    with pytest.raises(InvalidArgument, match="http"):
        Connection.resolve("lakefs:8000", "K", "S")
