"""Physical-address tokens, CLI dates and durations, and `lakegc://` URIs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegc.errors import InvalidArgument, InvalidToken, LakegcError, PathEscapesNamespace
from lakegc.repo.tokens import TokenClaims, sign, verify
from lakegc.timeutil import as_utc, epoch_seconds, parse_date, parse_duration
from lakegc.uri import LakeUri, parse_uri, validate_path

# ---------------------------------------------------------------------------------------------
# tokens
# ---------------------------------------------------------------------------------------------

SECRET = b"s3cret-key-for-tests"
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
CLAIMS = TokenClaims("repo", "main", "dir/file.csv", "data/slice/obj-1", NOW + timedelta(hours=24))


def _body(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def _signed(body: str, secret: bytes = SECRET) -> str:
    return f"{body}.{hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()}"


def test_token_round_trip_returns_the_signed_claims() -> None:
    assert verify(SECRET, sign(SECRET, CLAIMS), now=NOW) == CLAIMS


def test_token_is_valid_until_just_before_it_expires() -> None:
    token = sign(SECRET, CLAIMS)
    assert verify(SECRET, token, now=CLAIMS.expires_at - timedelta(seconds=1)) == CLAIMS


@pytest.mark.parametrize(
    "now",
    [CLAIMS.expires_at, CLAIMS.expires_at + timedelta(seconds=1), CLAIMS.expires_at + timedelta(days=400)],
    ids=["at-expiry", "a-second-after", "long-after"],
)
def test_expired_token_is_refused(now: datetime) -> None:
    with pytest.raises(InvalidToken, match="expired"):
        verify(SECRET, sign(SECRET, CLAIMS), now=now)


def _flip(s: str, i: int) -> str:
    c = s[i]
    return s[:i] + ("A" if c != "A" else "B") + s[i + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: _flip(t, 0),
        lambda t: _flip(t, t.index(".") - 1),
        lambda t: _flip(t, len(t) - 1),
        lambda t: t.split(".")[0],  # mac dropped
        lambda t: t.split(".")[0] + ".",  # mac empty
        lambda t: "." + t.split(".")[1],  # body dropped
        lambda t: t + "00",  # mac extended
        lambda t: _body(["repo", "main", "dir/other.csv", "data/slice/obj-1", 9999999999]) + "." + t.split(".")[1],
        lambda t: "",
        lambda t: "not-a-token",
    ],
    ids=[
        "body-first-char",
        "body-last-char",
        "mac-last-char",
        "mac-missing",
        "mac-empty",
        "body-missing",
        "mac-extended",
        "claims-swapped-keeping-mac",
        "empty",
        "garbage",
    ],
)
def test_tampered_token_is_refused(tamper) -> None:
    token = tamper(sign(SECRET, CLAIMS))
    with pytest.raises(InvalidToken):
        verify(SECRET, token, now=NOW)


def test_token_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(InvalidToken, match="signature"):
        verify(SECRET, sign(b"another-secret", CLAIMS), now=NOW)


@pytest.mark.parametrize(
    "token",
    ["abc.é", "abc.\u00ff" * 2, "é.é", "a\u2603b.c"],
    ids=["non-ascii-mac", "latin1-mac", "non-ascii-both", "non-ascii-body"],
)
def test_token_with_non_ascii_text_is_refused_as_invalid_not_crashing(token: str) -> None:
    # Tokens come from users (`fs link`); anything unreadable must be InvalidToken, not a TypeError.
    with pytest.raises(InvalidToken):
        verify(SECRET, token, now=NOW)


@pytest.mark.parametrize(
    "payload",
    [
        ["repo", "main", "p"],  # too few claims
        {"repository": "repo"},  # not a list
        ["repo", "main", "p", "a", "tomorrow"],  # expiry not a number
        42,
    ],
    ids=["too-few-claims", "object-not-list", "expiry-not-a-number", "a-number"],
)
def test_validly_signed_but_malformed_token_is_refused(payload: object) -> None:
    with pytest.raises(InvalidToken, match="malformed"):
        verify(SECRET, _signed(_body(payload)), now=NOW)


def test_validly_signed_body_that_is_not_json_is_refused() -> None:
    body = base64.urlsafe_b64encode(b"\xff\xfe not json").decode().rstrip("=")
    with pytest.raises(InvalidToken):
        verify(SECRET, _signed(body), now=NOW)


@settings(max_examples=50, deadline=None)
@given(
    repo=st.text(max_size=20),
    branch=st.text(max_size=20),
    path=st.text(max_size=40),
    address=st.text(max_size=40),
    secs=st.integers(1, 10**8),
)
def test_any_claims_round_trip(repo: str, branch: str, path: str, address: str, secs: int) -> None:
    claims = TokenClaims(repo, branch, path, address, NOW + timedelta(seconds=secs))
    token = sign(SECRET, claims)
    assert token.isascii()
    assert verify(SECRET, token, now=NOW) == claims


# ---------------------------------------------------------------------------------------------
# durations and dates
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("6h", timedelta(hours=6)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("0s", timedelta(0)),
        (" 7d ", timedelta(days=7)),
        ("P7D", timedelta(days=7)),
        ("PT2H", timedelta(hours=2)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("PT30M", timedelta(minutes=30)),
        ("PT1.5S", timedelta(seconds=1.5)),
        ("P1W", timedelta(weeks=1)),
        ("P1DT2H3M4S", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("p7d", timedelta(days=7)),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else "",
)
def test_parse_duration_accepts_simple_and_iso_forms(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "7",
        "d",
        "-5s",
        "1.5h",
        "7D",
        "7 d",
        "7days",
        "1y",
        "P",
        "PT",
        "P1H",
        "PT1D",
        "P1.5D",
        "1d2h",
        "P1DT",  # ISO 8601: a 'T' must be followed by at least one time element
        "P-1D",
        "nonsense",
        "99999999999999d",
        "P99999999999999D",  # beyond timedelta's range: a user error, not an OverflowError
    ],
)
def test_parse_duration_refuses_malformed_text(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_duration(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05+00:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T05:04:05+02:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-01T22:04:05-05:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05.250Z", datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)),
        ("2026-01-02", datetime(2026, 1, 2, tzinfo=UTC)),
        ("2026-01-02 03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("0", datetime(1970, 1, 1, tzinfo=UTC)),
        ("1767323045", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        (" 1767323045 ", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("-86400", datetime(1969, 12, 31, tzinfo=UTC)),
    ],
    ids=[
        "iso-z",
        "iso-utc-offset",
        "iso-plus-2h",
        "iso-minus-5h",
        "iso-naive-is-utc",
        "iso-fraction",
        "date-only",
        "space-separator",
        "unix-zero",
        "unix-seconds",
        "unix-with-spaces",
        "unix-negative",
    ],
)
def test_parse_date_accepts_iso_and_unix_seconds_and_returns_utc(text: str, expected: datetime) -> None:
    got = parse_date(text)
    assert got == expected
    assert got.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2026-13-01",
        "2026-01-32",
        "2026-01-02T25:00:00Z",
        "1.5",
        "12abc",
        "99999999999999999999",  # Unix seconds far beyond datetime's range
        "-99999999999999999999",
    ],
    ids=[
        "empty",
        "word",
        "month-13",
        "day-32",
        "hour-25",
        "fractional-seconds",
        "digits-and-letters",
        "huge-unix-seconds",
        "huge-negative-unix-seconds",
    ],
)
def test_parse_date_refuses_malformed_text_with_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_date(text)


def test_as_utc_treats_naive_as_utc_and_converts_aware() -> None:
    assert as_utc(datetime(2026, 1, 2, 3)) == datetime(2026, 1, 2, 3, tzinfo=UTC)
    plus2 = timezone(timedelta(hours=2))
    assert as_utc(datetime(2026, 1, 2, 5, tzinfo=plus2)).tzinfo == UTC
    assert epoch_seconds(datetime(1970, 1, 2)) == 86400


# ---------------------------------------------------------------------------------------------
# lakegc:// URIs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kwargs, expected",
    [
        ("lakegc://repo", {}, LakeUri("repo")),
        ("lakegc://repo/", {}, LakeUri("repo")),
        ("lakegc://repo/main", {}, LakeUri("repo", "main")),
        ("lakegc://repo/main/", {}, LakeUri("repo", "main", "")),
        ("lakegc://repo/main/a.csv", {}, LakeUri("repo", "main", "a.csv")),
        ("lakegc://repo/main/dir/sub/a.csv", {"need_path": True}, LakeUri("repo", "main", "dir/sub/a.csv")),
        ("lakegc://repo/main/dir/", {}, LakeUri("repo", "main", "dir/")),
        ("lakegc://repo/feature-1.x/p", {}, LakeUri("repo", "feature-1.x", "p")),
        ("lakegc://my-repo-2/0123abcd/p", {}, LakeUri("my-repo-2", "0123abcd", "p")),
        ("lakegc://repo/main/...", {}, LakeUri("repo", "main", "...")),
        ("lakegc://repo/main/..a/b..", {}, LakeUri("repo", "main", "..a/b..")),
        ("lakegc://repo/main/a b/ü.csv", {}, LakeUri("repo", "main", "a b/ü.csv")),
        ("lakegc://repo/main", {"allow_path": False}, LakeUri("repo", "main")),
        ("lakegc://repo/main/", {"allow_path": False}, LakeUri("repo", "main", "")),
    ],
    ids=[
        "repo-only",
        "repo-trailing-slash",
        "repo-and-ref",
        "root-prefix",
        "file",
        "nested-path-required",
        "trailing-slash-prefix",
        "ref-with-dash-and-dot",
        "commit-prefix-ref",
        "dots-name",
        "dots-inside-names",
        "spaces-and-unicode",
        "no-path-allowed",
        "empty-path-allowed-without-path",
    ],
)
def test_parse_uri_splits_repo_ref_and_path(text: str, kwargs: dict, expected: LakeUri) -> None:
    assert parse_uri(text, **kwargs) == expected


@pytest.mark.parametrize(
    "text, kwargs, error",
    [
        ("repo/main/p", {}, InvalidArgument),
        ("s3://repo/main/p", {}, InvalidArgument),
        ("lakegc:/repo/main", {}, InvalidArgument),
        ("lakegc://", {}, InvalidArgument),
        ("lakegc:///main/p", {}, InvalidArgument),
        ("lakegc://Repo/main", {}, InvalidArgument),
        ("lakegc://r/main", {}, InvalidArgument),
        ("lakegc://-repo/main", {}, InvalidArgument),
        ("lakegc://re_po/main", {}, InvalidArgument),
        ("lakegc://" + "r" * 64 + "/main", {}, InvalidArgument),
        ("lakegc://repo/../p", {}, InvalidArgument),
        ("lakegc://repo/a..b/p", {}, InvalidArgument),
        ("lakegc://repo/.hidden/p", {}, InvalidArgument),
        ("lakegc://repo/-x/p", {}, InvalidArgument),
        ("lakegc://repo/ma in/p", {}, InvalidArgument),
        ("lakegc://repo/main/../secret", {}, PathEscapesNamespace),
        ("lakegc://repo/main/a/../../b", {}, PathEscapesNamespace),
        ("lakegc://repo/main/a/..", {}, PathEscapesNamespace),
        ("lakegc://repo/main/./a", {}, PathEscapesNamespace),
        ("lakegc://repo/main//etc/passwd", {}, PathEscapesNamespace),
        ("lakegc://repo/main/a//b", {}, InvalidArgument),
        ("lakegc://repo/main/a\x00b", {}, InvalidArgument),
        ("lakegc://repo/main/dir/", {"need_path": True}, InvalidArgument),
        ("lakegc://repo/main/", {"need_path": True}, InvalidArgument),
        ("lakegc://repo/main", {"need_path": True}, InvalidArgument),
        ("lakegc://repo", {"need_ref": True}, InvalidArgument),
        ("lakegc://repo/", {"need_ref": True}, InvalidArgument),
        ("lakegc://repo/main/p", {"allow_path": False}, InvalidArgument),
    ],
    ids=[
        "no-scheme",
        "wrong-scheme",
        "one-slash-scheme",
        "nothing-after-scheme",
        "empty-repo",
        "uppercase-repo",
        "one-char-repo",
        "repo-starts-with-dash",
        "underscore-in-repo",
        "64-char-repo",
        "dotdot-ref",
        "dotdot-inside-ref",
        "ref-starts-with-dot",
        "ref-starts-with-dash",
        "space-in-ref",
        "dotdot-path",
        "climbing-path",
        "trailing-dotdot",
        "dot-part",
        "absolute-path",
        "empty-component",
        "nul-in-path",
        "prefix-where-object-needed",
        "root-where-object-needed",
        "path-missing",
        "ref-missing",
        "ref-missing-after-slash",
        "path-not-allowed",
    ],
)
def test_parse_uri_refuses_malformed_uris(text: str, kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_uri(text, **kwargs)


def test_path_escapes_are_invalid_arguments_and_lakegc_errors() -> None:
    assert issubclass(PathEscapesNamespace, InvalidArgument)
    assert issubclass(InvalidArgument, LakegcError)


@pytest.mark.parametrize(
    "path, allow_prefix, ok",
    [
        ("a", False, True),
        ("a/b/c.txt", False, True),
        ("a/", True, True),
        ("", True, True),
        ("a/", False, False),
        ("", False, False),
        ("/a", True, False),
        ("a//", True, False),
        ("./a", True, False),
    ],
    ids=[
        "file",
        "nested",
        "prefix-allowed",
        "root-prefix",
        "prefix-not-allowed",
        "empty-path",
        "absolute",
        "double-trailing-slash",
        "dot",
    ],
)
def test_validate_path_table(path: str, allow_prefix: bool, ok: bool) -> None:
    if ok:
        assert validate_path(path, allow_prefix=allow_prefix) == path
    else:
        with pytest.raises(InvalidArgument):
            validate_path(path, allow_prefix=allow_prefix)


@pytest.mark.parametrize(
    "uri", ["lakegc://repo", "lakegc://repo/main", "lakegc://repo/main/a/b.csv", "lakegc://repo/main/dir/"]
)
def test_uri_string_round_trips(uri: str) -> None:
    assert str(parse_uri(uri)) == uri
