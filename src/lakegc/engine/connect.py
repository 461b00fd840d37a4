"""The Spark Connect channel: a session on a Connect server, set as lakegc's own sessions are, that
fails instead of waiting when the server does not answer, and on loopback carries a token only to a
listener of this user's (the warm engine's, `engine.warm`).

A module of its own, apart from choosing which Spark a command runs on (`engine.spark`): what it
takes to reach a Connect server safely (the address, the token, the retries, the first answer) is
one concern, and it needs the warm engine's record, never the other way round.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from lakegc.engine import warm
from lakegc.engine.classic import SESSION_SQL

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def connect_session(address: str, conf: dict[str, str], first_answer: float | None = None) -> SparkSession:
    """A Spark Connect session at `address`, set as lakegc's own sessions are (the user's `conf`
    on top). A server that does not take a connection at once is an error, never a wait: Connect's
    client would retry for minutes; with `first_answer`, neither is a server that takes the
    connection and then does not answer. The warm engine's own address, given without a token, is
    reached with the token its record holds, and only if the engine is ours (`warm.answers`)."""
    fork_safe_grpc()  # first: the channel builders below load gRPC
    from pyspark.errors import PySparkException

    from lakegc.errors import InvalidArgument, LakegcError, first_line

    found = re.fullmatch(r"sc://([^:/;]+):(\d+)/?(;.*)?", address)
    if found is None:
        raise InvalidArgument(f"{_shown(address)!r} is not a Spark Connect address: sc://HOST:PORT")
    host, port, params = found.group(1), int(found.group(2)), found.group(3) or ""
    shown = f"sc://{host}:{port}"  # never the token
    try:
        with socket.create_connection((host, port), timeout=5):
            pass
    except OSError as exc:
        raise LakegcError(f"no Spark Connect server answers at {shown}: {exc.strerror or exc}") from None
    token = re.search(r";token=([^;]*)", params)
    if host in ("127.0.0.1", "localhost") and token is None:
        engine = _engine_at(port)
        builder = _loopback(port, engine.token) if engine is not None else _default(address)
    elif host in ("127.0.0.1", "localhost") and "use_ssl=true" not in params:
        builder = _loopback(port, token.group(1))  # type: ignore[union-attr]
    else:
        builder = _default(address)
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")  # the error that follows says it
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    _forget(ConnectSession)  # a new session for this address and token, never one made earlier for another
    spark = ConnectSession.builder.channelBuilder(builder).create()
    spark.client.set_retry_policies([_connect_retries(port if host in ("127.0.0.1", "localhost") else None)])
    try:
        try:
            _within(first_answer, lambda: spark.version)  # the first call: is the session taken?
        except PySparkException as exc:
            refused = first_line(exc, 300)
            raise LakegcError(f"the Spark Connect server at {shown} refused the session: {refused}") from None
        except TimeoutError:
            raise LakegcError(
                f"the Spark Connect server at {shown} did not answer within {first_answer:.0f} s"
            ) from None
        for key, value in {**SESSION_SQL, **conf}.items():
            try:
                spark.conf.set(key, value)
            except PySparkException as exc:
                refused = exc.getCondition() or first_line(exc, 200)
                raise InvalidArgument(f"--conf {key}: the Spark Connect session refuses it ({refused})") from None
    except LakegcError:
        _forget(ConnectSession)  # a command that goes on with a session of its own must not find this one
        raise
    # What SparkSession.builder.remote() sets: PySpark's functions build Connect columns from now on.
    # Only once the session is taken, so a command that falls back to its own session stays classic.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return spark  # type: ignore[return-value]


def _forget(session_class: type) -> None:
    """Drop a Connect session from what PySpark hands out as the default and active one (its
    fields; PySpark has no call for it short of stopping, which waits on the server): one never
    taken, or one made earlier, which `getOrCreate` would hand back whatever address was asked."""
    session_class._default_session = None  # type: ignore[attr-defined]
    session_class._active_session.session = None  # type: ignore[attr-defined]


def _within(seconds: float | None, call: Callable[[], object]) -> object:
    """`call()`, raising TimeoutError if it has not returned after `seconds` (None: no limit). The
    call goes on in a daemon thread: what it waits on is a server that may never answer."""
    if seconds is None:
        return call()
    answer: Future = Future()

    def run() -> None:
        try:
            answer.set_result(call())
        except BaseException as exc:
            answer.set_exception(exc)

    threading.Thread(target=run, name="lakegc-connect-first-call", daemon=True).start()
    return answer.result(timeout=seconds)


def _loopback(port: int, token: str) -> object:
    """A channel to 127.0.0.1:`port` carrying `token` over gRPC's local credentials. PySpark uses
    those for the name `localhost` only, and then connects to whatever it resolves to first, [::1]
    on many machines, where another user's listener may wait: the address is pinned here."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class Loopback(DefaultChannelBuilder):
        @property
        def endpoint(self) -> str:
            return f"127.0.0.1:{port}"

    return Loopback(f"sc://localhost:{port}/;token={token}")


def _default(address: str) -> object:
    from pyspark.sql.connect.client import DefaultChannelBuilder

    return DefaultChannelBuilder(address)


def _connect_retries(loopback_port: int | None = None) -> object:
    """How long a Connect client keeps retrying a server that went away: about 15 s (five retries,
    backing off to 5 s), not Connect's default of ten minutes, so a run whose engine died fails
    (and is recorded failed) instead of hanging. On loopback, a retry goes only to a listener that
    is still this user's: after the engine's JVM dies its port is anyone's, and a resent plan
    carries the run's storage settings."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class Retries(DefaultPolicy):
        def can_retry(self, exception: BaseException) -> bool:
            ours = loopback_port is None or warm.listener_is_ours(loopback_port)
            return ours and super().can_retry(exception)

    return Retries(max_retries=5, max_backoff=5000)


def _engine_at(port: int) -> warm.Engine | None:
    """The warm engine recorded under `LAKEGC_HOME`, when it listens on `port` and is ours; an
    engine there that is not fit for this command (`warm.unfit`) is an error."""
    from lakegc.errors import LakegcError
    from lakegc.settings import lakegc_home

    engine, why = warm.find(lakegc_home(), port)
    if engine is not None and why is not None:
        raise LakegcError(f"the warm engine at {engine.url} is not used: {why}")
    return engine


def _shown(address: str) -> str:
    return address.split(";", 1)[0]


def fork_safe_grpc() -> None:
    """Turn off gRPC's fork handlers before gRPC loads: it reads the setting as it loads, so later
    is too late (a user's own setting stands). A command whose engine never answered falls back to
    a JVM of its own, launched by a fork while the stuck first call still holds gRPC in another
    thread; the handlers then ran in the child and could abort it ("Java gateway process exited").
    Nothing of ours uses gRPC in a forked child."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
