"""The connection pool a ``Fleet`` / ``AsyncFleet`` creates when the user brings no client.

Every surface and every env's MCP session share it, so at trainer concurrency (hundreds of
episodes, one pooled connection each) it holds hundreds of connections. httpcore 1.0's pool
re-plans every connection and every queued request on each request start and end:
``_assign_requests_to_connections`` counts idle connections once per idle connection
(quadratic in the pool's size) and probes every idle socket with a ``poll`` syscall. At 64
concurrent episodes that was most of the client's CPU (benchmarks/README.md).

:func:`async_pool_client` and :func:`pool_client` build the ordinary httpx clients, then give
their default transport's pool a linear pass (:func:`assign_linear`): a pass with no queued
request does nothing until the next periodic sweep; idle connections are counted once; a
connection already handed to a request that has not started on it is not handed out or closed
again (httpcore gives the same idle connection to every queued request and lets the losers
retry); and the socket probe runs on the connection about to be reused, plus every idle one at
most once per :data:`SWEEP_INTERVAL`. The pool's limits, proxies from the environment, TLS and
timeouts are httpx's own; only the planning differs.

The pass replaces a private httpcore method, so it is installed only on the exact httpcore
classes of the 1.0 line, HTTP/1.1 only (an HTTP/2 connection serves several requests at once,
which the pass does not model); anything else keeps httpcore's pass. A client the user passes
in is never changed.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import httpcore
import httpx

__all__ = [
    "POOL_LIMITS",
    "SWEEP_INTERVAL",
    "assign_linear",
    "async_pool_client",
    "pool_client",
]

POOL_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=256, keepalive_expiry=4.0)
"""Idle connections are kept for as many concurrent episodes as the pool serves (no reconnect
churn), and dropped before common server idle timeouts (uvicorn's is 5 s) so a request is
never sent on a socket the server is closing at that moment (seen as ReadError at 256
concurrent episodes)."""

SWEEP_INTERVAL = 0.5
"""Seconds between two probes of every idle connection for keep-alive expiry and server
disconnects. A connection about to be reused is always probed first, so this only bounds how
long a dead idle socket stays open."""


class _Connection(Protocol):
    def can_handle_request(self, origin: httpcore.Origin) -> bool: ...
    def has_expired(self) -> bool: ...
    def is_idle(self) -> bool: ...
    def is_closed(self) -> bool: ...


def assign_linear(pool: Any) -> list[Any]:
    """One planning pass of an httpcore 1.0 pool (sync or async): its ``_assign_requests_to_connections``.

    Args:
        pool: An ``httpcore.ConnectionPool`` or ``httpcore.AsyncConnectionPool``, called under
            its own lock as httpcore does.

    Returns:
        The connections taken out of the pool, for the caller to close outside the lock.
    """
    requests = pool._requests
    queued = [request for request in requests if request.connection is None]
    now = time.monotonic()
    sweep = now >= getattr(pool, "_fleet_sweep_at", 0.0)
    if not queued and not sweep:
        return []  # nothing waits: closed or surplus connections can go at the next sweep
    if sweep:
        pool._fleet_sweep_at = now + SWEEP_INTERVAL

    # A connection a request holds (busy, or handed over but not started yet) is spoken for.
    held = {id(request.connection) for request in requests if request.connection is not None}
    kept: list[_Connection] = []
    idle: list[_Connection] = []
    closing: list[Any] = []
    for connection in pool._connections:
        if connection.is_closed():
            continue
        if id(connection) not in held and connection.is_idle():
            if sweep and connection.has_expired():
                closing.append(connection)
                continue
            idle.append(connection)
        kept.append(connection)

    surplus = len(idle) - pool._max_keepalive_connections
    if surplus > 0:  # the oldest idle ones go, as in httpcore
        dropped = {id(connection) for connection in idle[:surplus]}
        closing += idle[:surplus]
        idle = idle[surplus:]
        kept = [connection for connection in kept if id(connection) not in dropped]

    for request in queued:
        origin = request.request.url.origin
        connection = _take_idle(idle, origin, closing, kept, probe=not sweep)
        if connection is None:
            if len(kept) >= pool._max_connections:
                if not idle:
                    break  # the pool is full of busy connections: every queued request waits
                victim = idle.pop(0)  # make room: an idle connection to another origin goes
                kept.remove(victim)
                closing.append(victim)
            connection = pool.create_connection(origin)
            kept.append(connection)
        request.assign_to_connection(connection)

    pool._connections = kept
    return closing


def _take_idle(
    idle: list[_Connection],
    origin: httpcore.Origin,
    closing: list[Any],
    kept: list[_Connection],
    *,
    probe: bool,
) -> _Connection | None:
    """The oldest idle connection to ``origin`` that is still usable, removed from ``idle``."""
    index = 0
    while index < len(idle):
        connection = idle[index]
        if not connection.can_handle_request(origin):
            index += 1
            continue
        del idle[index]
        if probe and connection.has_expired():  # expired, or the server closed it while idle
            kept.remove(connection)
            closing.append(connection)
            continue
        return connection
    return None


class _AsyncPool(httpcore.AsyncConnectionPool):
    _assign_requests_to_connections = assign_linear


class _Pool(httpcore.ConnectionPool):
    _assign_requests_to_connections = assign_linear


def _install(transport: object) -> None:
    """Give an httpx default transport's pool the linear pass, where it is safe to."""
    if not httpcore.__version__.startswith("1.0."):
        return
    pool = getattr(transport, "_pool", None)
    if type(pool) is httpcore.AsyncConnectionPool and not pool._http2:
        pool.__class__ = _AsyncPool
    elif type(pool) is httpcore.ConnectionPool and not pool._http2:
        pool.__class__ = _Pool


def async_pool_client(limits: httpx.Limits = POOL_LIMITS) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose default transport plans its pool in linear time.

    Args:
        limits: The pool's limits (default :data:`POOL_LIMITS`).
    """
    client = httpx.AsyncClient(limits=limits)
    _install(client._transport)
    return client


def pool_client(limits: httpx.Limits = POOL_LIMITS) -> httpx.Client:
    """Blocking twin of :func:`async_pool_client`.

    Args:
        limits: The pool's limits (default :data:`POOL_LIMITS`).
    """
    client = httpx.Client(limits=limits)
    _install(client._transport)
    return client
