"""Physical-address tokens: an HMAC over repository, branch, path and address that
`link` accepts once and only until it expires. GC never deletes an address whose token is live."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from lakegc.errors import InvalidToken


@dataclass(frozen=True, slots=True)
class TokenClaims:
    repository: str
    branch: str
    path: str
    address: str
    expires_at: datetime


def sign(secret: bytes, claims: TokenClaims) -> str:
    payload = json.dumps(
        [claims.repository, claims.branch, claims.path, claims.address, int(claims.expires_at.timestamp())],
        separators=(",", ":"),
    ).encode()
    body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    return f"{body}.{_mac(secret, body)}"


def verify(secret: bytes, token: str, *, now: datetime) -> TokenClaims:
    """The claims of a token we signed and that is still live; InvalidToken otherwise."""
    body, _, mac = token.partition(".")
    if not body or not token.isascii() or not hmac.compare_digest(mac, _mac(secret, body)):
        raise InvalidToken("invalid token: signature does not match")
    try:
        repo, branch, path, address, expires = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        claims = TokenClaims(repo, branch, path, address, datetime.fromtimestamp(expires, UTC))
    except (ValueError, TypeError):
        raise InvalidToken("invalid token: malformed") from None
    if claims.expires_at <= now:
        raise InvalidToken("invalid token: expired")
    return claims


def _mac(secret: bytes, body: str) -> str:
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
