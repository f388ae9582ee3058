"""The SDK's own pool planning (``fleet_sdk/_runtime/_pool.py``) against a real loopback server.

The server is a few lines of HTTP/1.1 keep-alive over asyncio, so the tests can count the TCP
connections the client opens, hold requests open, and close idle sockets from the server side.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager

import httpcore
import httpx
import pytest
from _waits import wait_until_async

from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk._runtime import _pool
from fleet_sdk._runtime._pool import async_pool_client, pool_client


class KeepAliveServer:
    """HTTP/1.1 on 127.0.0.1: ``GET /wait/<ms>`` answers after ``ms``; counts connections."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self.most_open = 0
        self._idle: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._idle):
            writer.close()
        await self._server.wait_closed()

    def close_idle(self) -> int:
        """Close every connection between requests, as a server's idle timeout does."""
        closed = len(self._idle)
        for writer in list(self._idle):
            writer.close()
        return closed

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                self._idle.add(writer)
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self._idle.discard(writer)
                path = head.split(b" ", 2)[1].decode()
                if path.startswith("/wait/"):
                    await asyncio.sleep(int(path.rsplit("/", 1)[1]) / 1000)
                body = b"ok"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        finally:
            self._idle.discard(writer)
            self.open -= 1
            writer.close()


@asynccontextmanager
async def serving() -> AsyncIterator[KeepAliveServer]:
    server = KeepAliveServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@contextmanager
def serving_in_thread() -> Iterator[KeepAliveServer]:
    """The same server on its own loop in a thread, for the blocking client."""
    server = KeepAliveServer()
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _pool_of(client: httpx.AsyncClient | httpx.Client) -> object:
    return client._transport._pool  # type: ignore[attr-defined]


def test_the_fleets_own_clients_get_the_linear_pass_and_a_users_client_is_left_alone() -> None:
    assert type(_pool_of(AsyncFleet("sk-test-123456").http_client)) is _pool._AsyncPool
    assert type(_pool_of(Fleet("sk-test-123456").http_client)) is _pool._Pool
    mine = httpx.AsyncClient()
    assert AsyncFleet("sk-test-123456", http_client=mine).http_client is mine
    assert type(_pool_of(mine)) is httpcore.AsyncConnectionPool
    # HTTP/2 connections multiplex, which the pass does not model: httpcore keeps its own.
    http2 = httpx.AsyncClient()
    _pool_of(http2)._http2 = True  # type: ignore[attr-defined]  # as http2=True sets it (h2 not needed here)
    _pool._install(http2._transport)
    assert type(_pool_of(http2)) is httpcore.AsyncConnectionPool


async def test_sequential_requests_share_one_connection() -> None:
    async with serving() as server, async_pool_client() as client:
        for _ in range(20):
            assert (await client.get(f"{server.url}/")).text == "ok"
        assert server.accepted == 1


async def test_concurrent_requests_open_a_connection_each_and_reuse_them() -> None:
    async with serving() as server, async_pool_client() as client:
        for _ in range(3):
            replies = await asyncio.gather(*(client.get(f"{server.url}/wait/50") for _ in range(32)))
            assert [r.text for r in replies] == ["ok"] * 32
        assert server.accepted == 32  # the second and third waves reused the first's


async def test_max_connections_bounds_the_pool_and_every_queued_request_completes() -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    async with serving() as server, async_pool_client(limits) as client:
        replies = await asyncio.gather(*(client.get(f"{server.url}/wait/10") for _ in range(40)))
        assert [r.text for r in replies] == ["ok"] * 40
        assert server.most_open <= 4
        assert server.accepted == 4


async def test_a_queued_request_is_planned_twice_not_once_per_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: httpcore hands a freed connection to every queued request; all but one retry.

    With one connection and 30 requests queued, that costs a planning pass per waiting request
    each time a connection frees up (quadratic). Here each request is planned about twice: when
    it arrives and when the request before it releases the connection.
    """
    passes = 0

    def counting(pool: object) -> list[object]:
        nonlocal passes
        passes += 1
        return _pool.assign_linear(pool)

    monkeypatch.setattr(_pool._AsyncPool, "_assign_requests_to_connections", counting)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with serving() as server, async_pool_client(limits) as client:
        replies = await asyncio.gather(*(client.get(f"{server.url}/wait/1") for _ in range(30)))
        assert [r.text for r in replies] == ["ok"] * 30
        assert server.accepted == 1
    assert passes <= 2 * 30 + 2


async def test_idle_connections_beyond_keepalive_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "SWEEP_INTERVAL", 0.0)  # every pass sweeps
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=3)
    async with serving() as server, async_pool_client(limits) as client:
        await asyncio.gather(*(client.get(f"{server.url}/wait/30") for _ in range(12)))
        assert server.accepted == 12
        await client.get(f"{server.url}/")  # a pass after they all went idle
        pool = _pool_of(client)
        assert len(pool.connections) <= 3  # type: ignore[attr-defined]
        # the surplus sockets are closed, not only forgotten
        await wait_until_async(lambda: server.open <= 3, "the server saw the surplus sockets close")


async def test_a_connection_the_server_closed_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The socket is probed before reuse even when no periodic sweep is due."""
    monkeypatch.setattr(_pool, "SWEEP_INTERVAL", 3600.0)
    async with serving() as server, async_pool_client() as client:
        await asyncio.gather(*(client.get(f"{server.url}/wait/20") for _ in range(4)))
        assert server.close_idle() == 4
        await wait_until_async(lambda: server.open == 0, "the server closed its side of every socket")
        for _ in range(4):
            assert (await client.get(f"{server.url}/")).text == "ok"
        assert server.accepted == 5


async def test_a_connection_past_its_keepalive_expiry_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "SWEEP_INTERVAL", 3600.0)
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=8, keepalive_expiry=0.05)
    async with serving() as server, async_pool_client(limits) as client:
        await client.get(f"{server.url}/")
        await asyncio.sleep(0.1)
        await client.get(f"{server.url}/")
        assert server.accepted == 2


def test_the_blocking_pool_plans_the_same_way_across_threads() -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    with serving_in_thread() as server, pool_client(limits) as client:
        for _ in range(10):
            assert client.get(f"{server.url}/").text == "ok"
        assert server.accepted == 1
        with ThreadPoolExecutor(16) as threads:
            texts = list(threads.map(lambda _: client.get(f"{server.url}/wait/10").text, range(48)))
        assert texts == ["ok"] * 48
        assert server.most_open <= 4
        assert server.accepted <= 4
