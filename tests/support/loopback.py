"""Ports on loopback for the servers the tests start (PostgreSQL, the S3-API server, Spark)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nobody listens on now (the OS picks it; a server started next takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
