"""A tool call is repeated only when that cannot run the tool twice.

Faults are injected by the local server (a dropped connection after the request was sent)
or by a transport that refuses the first connection (a request that was never sent).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, MCPError, RetryPolicy, ToolNotFoundError
from fleet_sdk.env import AsyncEnv
from fleet_sdk.mcp import MCPClient, MCPTransportError, may_retry_tool_call

FAST = RetryPolicy(max_retries=3, backoff_base=0.05, backoff_max=0.2)


class RefuseFirstConnection(httpx.AsyncBaseTransport):
    """The real transport, except that the first request fails to connect (so is never sent)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.refused == 0:
            self.refused += 1
            raise httpx.ConnectError("connection refused", request=request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class RetiredTool(httpx.AsyncBaseTransport):
    """The real transport, except that every ``tools/call`` names a tool the server does not have,
    as a call made from a tool list the server has changed since would."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.methods: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content) if request.content else None
        if isinstance(message, dict) and "method" in message:
            self.methods.append(message["method"])
            if message["method"] == "tools/call":
                message["params"]["name"] = "retired_tool"
                headers = [(k, v) for k, v in request.headers.items() if k != "content-length"]
                request = httpx.Request(request.method, request.url, headers=headers, json=message)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
async def env(faulty_afleet: AsyncFleet) -> AsyncIterator[AsyncEnv]:
    async with await faulty_afleet.make("orderdesk") as made:
        yield made


async def notes(env: AsyncEnv, body: str) -> int:
    result = await env.db().query("SELECT count(*) FROM order_notes WHERE body = ?", [body])
    assert result.rows is not None
    return int(result.rows[0][0])


def fired(faulty_server: LocalFleet) -> int:
    return len(faulty_server.fired_faults())


async def test_a_write_that_failed_after_sending_is_not_replayed(
    faulty_server: LocalFleet, env: AsyncEnv
) -> None:
    async with httpx.AsyncClient() as http:
        client = MCPClient(env.mcp.endpoints, http_client=http, retry=FAST)
        await client.list_tools()
        before = fired(faulty_server)
        faulty_server.inject_fault(f"/instances/{env.instance_id}/mcp", method="POST", mode="drop", count=5)
        with pytest.raises(MCPTransportError, match="not repeated") as failed:
            await client.call_tool("add_order_note", {"order_id": 1012, "body": "dropped once"}, deadline=10)
        assert failed.value.sent is True
        assert fired(faulty_server) == before + 1  # one attempt reached the server; none followed
        await client.aclose()


async def test_a_read_only_tool_is_retried_after_a_dropped_connection(
    faulty_server: LocalFleet, env: AsyncEnv
) -> None:
    async with httpx.AsyncClient() as http:
        client = MCPClient(env.mcp.endpoints, http_client=http, retry=FAST)
        await client.list_tools()
        before = fired(faulty_server)
        faulty_server.inject_fault(f"/instances/{env.instance_id}/mcp", method="POST", mode="drop", count=1)
        order = await client.call_tool("get_order", {"order_id": 1012}, deadline=10)
        assert order["id"] == 1012
        assert fired(faulty_server) == before + 1
        await client.aclose()


async def test_a_write_that_was_never_sent_is_retried_and_runs_once(env: AsyncEnv) -> None:
    transport = RefuseFirstConnection()
    async with httpx.AsyncClient(transport=transport) as http:
        client = MCPClient(env.mcp.endpoints, http_client=http, retry=FAST)
        await client.list_tools()  # the refused connection here is retried: listing is read-only
        transport.refused = 0
        body = "sent on the second connection"
        result = await client.call_tool("add_order_note", {"order_id": 1012, "body": body}, deadline=10)
        assert not (isinstance(result, dict) and "error" in result), result
        assert transport.refused == 1
        await client.aclose()
    assert await notes(env, body) == 1


async def test_a_tool_the_server_does_not_know_is_not_found_and_never_retried(env: AsyncEnv) -> None:
    """The server answers an unknown tool with JSON-RPC -32602: ``ToolNotFoundError``, sent once,
    and the tool list is asked again on the next call since it no longer matches the server."""
    transport = RetiredTool()
    async with httpx.AsyncClient(transport=transport) as http:
        client = MCPClient(env.mcp.endpoints, http_client=http, retry=FAST)
        await client.list_tools()
        listed = transport.methods.count("tools/list")
        with pytest.raises(ToolNotFoundError, match="Unknown tool: retired_tool"):
            await client.call_tool("get_order", {"order_id": 1012}, deadline=10)
        assert transport.methods.count("tools/call") == 1
        with pytest.raises(ToolNotFoundError):
            await client.call_tool("get_order", {"order_id": 1012}, deadline=10)
        assert transport.methods.count("tools/list") == 2 * listed  # listed anew before the call
        await client.aclose()


def test_the_retry_decision() -> None:
    never_sent = MCPTransportError("connect refused", sent=False)
    sent = MCPTransportError("connection reset", sent=True)
    assert may_retry_tool_call(never_sent, None)
    assert may_retry_tool_call(never_sent, {"destructiveHint": True})
    assert not may_retry_tool_call(sent, None)
    assert not may_retry_tool_call(sent, {"readOnlyHint": False, "destructiveHint": True})
    assert may_retry_tool_call(sent, {"readOnlyHint": True})
    assert may_retry_tool_call(sent, {"idempotentHint": True})
    # An answer is never repeated: a 4xx, or a JSON-RPC error.
    read_only = {"readOnlyHint": True}
    assert not may_retry_tool_call(MCPTransportError("bad", sent=True, status_code=400), read_only)
    assert may_retry_tool_call(MCPTransportError("busy", sent=True, status_code=503), read_only)
    assert not may_retry_tool_call(MCPTransportError("busy", sent=True, status_code=503), None)
    assert not may_retry_tool_call(MCPError("refused"), {"readOnlyHint": True})
