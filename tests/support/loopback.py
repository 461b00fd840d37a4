"""Ports on loopback for the servers the tests start (PostgreSQL, the S3-API server, Spark,
`lakegc serve`): the product's own helper, which `lakegc.server.launch` starts servers with."""

from __future__ import annotations

from lakegc.server.launch import free_port

__all__ = ["free_port"]
