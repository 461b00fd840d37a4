"""Users of `lakegc serve` and their key pairs: lakeFS's basic auth (access key id : secret).

The secret is generated here, shown once, and stored only as a salted scrypt hash. Checking one
costs tens of milliseconds by design, and clients send it on every request, so a checked pair is
remembered (as a hash) for the life of the server process.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from lakegc.errors import AlreadyExists, InvalidArgument
from lakegc.metastore import Metastore
from lakegc.metastore import schema as t
from lakegc.timeutil import utcnow

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,254}")
_KEY_CHARS = string.ascii_uppercase + string.digits
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


@dataclass(frozen=True)
class KeyPair:
    user: str
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class User:
    name: str
    created_at: datetime


def create_user(metastore: Metastore, name: str) -> KeyPair:
    """A new user with its first key pair; the secret is in the answer and nowhere else."""
    if not _NAME.fullmatch(name):
        raise InvalidArgument(
            f"invalid user name {name!r}: letters, digits and . _ @ + -, starting with a letter or digit"
        )
    pair = KeyPair(name, "AKIALG" + "".join(secrets.choice(_KEY_CHARS) for _ in range(14)), secrets.token_urlsafe(30))
    now = utcnow()
    with metastore.write() as conn:
        if conn.execute(sa.select(t.users.c.name).where(t.users.c.name == name)).first():
            raise AlreadyExists(f"user {name!r} already exists")
        conn.execute(t.users.insert().values(name=name, created_at=now))
        conn.execute(
            t.access_keys.insert().values(
                access_key_id=pair.access_key_id, user=name, secret_hash=_hash(pair.secret_access_key), created_at=now
            )
        )
    return pair


class Authenticator:
    """Checks key pairs against the metastore, remembering the pairs it accepted."""

    def __init__(self, metastore: Metastore):
        self.metastore = metastore
        self._accepted: dict[tuple[str, bytes], User] = {}

    def user(self, access_key_id: str, secret: str) -> User | None:
        """The user owning the pair, or None when the key is unknown or the secret wrong."""
        remembered = (access_key_id, hashlib.sha256(secret.encode()).digest())
        if remembered in self._accepted:
            return self._accepted[remembered]
        with self.metastore.read() as conn:
            row = conn.execute(
                sa.select(t.access_keys.c.secret_hash, t.users.c.name, t.users.c.created_at)
                .join(t.users, t.users.c.name == t.access_keys.c.user)
                .where(t.access_keys.c.access_key_id == access_key_id)
            ).first()
        if row is None or not _matches(secret, row.secret_hash):
            return None
        found = User(row.name, row.created_at)
        self._accepted[remembered] = found
        return found


def _hash(secret: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


def _matches(secret: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        computed = hashlib.scrypt(secret.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p))
    except ValueError:  # a damaged row accepts nothing
        return False
    return hmac.compare_digest(computed.hex(), digest)
