"""`lakegc auth create-user`: a key pair, its secret shown once and stored only as a hash."""

from __future__ import annotations

import sqlalchemy as sa

from lakegc.metastore import Metastore, schema
from lakegc.server.users import Authenticator, create_user


def test_a_key_pair_authenticates_and_nothing_else_does(env) -> None:
    ms = Metastore(env.metastore)
    pair = create_user(ms, "alice")
    auth = Authenticator(ms)
    assert auth.user(pair.access_key_id, pair.secret_access_key).name == "alice"
    assert auth.user(pair.access_key_id, pair.secret_access_key + "x") is None
    assert auth.user(pair.access_key_id, "") is None
    assert auth.user("AKIALGNOSUCHKEY00000", pair.secret_access_key) is None
    with ms.read() as conn:
        stored = conn.execute(sa.select(schema.access_keys.c.secret_hash)).scalar_one()
    assert pair.secret_access_key not in stored and stored.startswith("scrypt$")


def test_a_damaged_hash_accepts_nothing(env) -> None:
    ms = Metastore(env.metastore)
    pair = create_user(ms, "bob")
    with ms.write() as conn:
        conn.execute(schema.access_keys.update().values(secret_hash="scrypt$x$y"))
    assert Authenticator(ms).user(pair.access_key_id, pair.secret_access_key) is None


def test_the_cli_shows_the_secret_once_and_refuses_bad_or_taken_names(cli) -> None:
    made = cli("auth", "create-user", "carol", "--json").json()
    assert set(made) == {"access_key_id", "secret_access_key"}
    assert made["access_key_id"].startswith("AKIA") and len(made["secret_access_key"]) >= 32
    taken = cli("auth", "create-user", "carol", ok=False)
    assert taken.exit_code == 1 and "already exists" in taken.stderr and "Traceback" not in taken.stderr
    bad = cli("auth", "create-user", "no spaces/please", ok=False)
    assert bad.exit_code == 1 and "invalid user name" in bad.stderr
