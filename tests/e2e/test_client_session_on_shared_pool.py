"""``mcp.ClientSession`` over the benchmark's own transport on a shared ``httpx`` pool.

``benchmarks/bench_mcp.py`` measures this transport as the alternative to the SDK's own
MCP client (``fleet_sdk/mcp.py``); these tests show the arm measures a working thing: a real
session on the local server, every request on one pooled connection of the shared client,
and the SSE answers a server may give instead of JSON.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp import ClientSession

from benchmarks._pool_transport import pool_transport
from fleet_local import LocalFleet
from fleet_sdk._runtime._pool import async_pool_client


class Wire:
    """What the shared client sent to the MCP endpoint, and on which TCP connection."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.connections: list[Any] = []

    async def on_response(self, response: httpx.Response) -> None:
        request = response.request
        if "/mcp" not in request.url.path:
            return
        what = json.loads(request.content)["method"] if request.method == "POST" else request.method
        self.requests.append((what, dict(request.headers)))
        # The pooled connection's local address: one value per TCP connection in use.
        self.connections.append(response.extensions["network_stream"].get_extra_info("client_addr"))

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]


async def test_a_session_lists_and_calls_tools_on_one_pooled_connection(server: LocalFleet) -> None:
    wire = Wire()
    async with async_pool_client() as http:
        http.event_hooks["response"].append(wire.on_response)
        fleet = server.async_fleet(http_client=http)
        async with await fleet.make("orderdesk") as env:
            url = env.mcp.endpoints[0]
            async with pool_transport(url, http) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                assert "get_order" in {tool.name for tool in listed.tools}
                for order_id in (1012, 1013, 1012):
                    result = await session.call_tool("get_order", {"order_id": order_id})
                    assert json.loads(result.content[0].text)["id"] == order_id  # type: ignore[union-attr]
                with pytest.raises(Exception) as unknown:  # McpError on mcp 1.x, MCPError on 2.x
                    await session.call_tool("no_such_tool", {})
                assert unknown.value.error.code == -32602  # an unknown tool is a protocol error
        await fleet.close()
    methods = wire.methods()
    assert methods.count("initialize") == 1
    assert methods.count("notifications/initialized") == 1
    assert methods.count("tools/call") == 4
    # Sequential requests of one session reuse one pooled connection.
    assert len(wire.connections) >= 8
    assert len(set(wire.connections)) == 1
    # Every request after initialize names the session and the negotiated revision; the
    # transport's DELETE on exit ends that session.
    session_ids = {headers.get("mcp-session-id") for _, headers in wire.requests[1:]}
    versions = {
        headers.get("mcp-protocol-version") for method, headers in wire.requests[1:] if method != "DELETE"
    }
    assert len(session_ids) == 1 and None not in session_ids
    assert len(versions) == 1 and None not in versions
    assert methods.count("DELETE") == 1  # the env itself never opened an MCP session
    assert (methods[-1], wire.requests[-1][1]["mcp-session-id"]) == ("DELETE", next(iter(session_ids)))


def sse(*messages: dict[str, Any]) -> bytes:
    """An SSE body as the ``mcp`` server writes it (CRLF line ends, an id per event)."""
    events = [f"event: message\r\nid: {i}\r\ndata: {json.dumps(m)}\r\n\r\n" for i, m in enumerate(messages)]
    return ": a comment\r\n\r\n".join(events).encode()


class SSEServer:
    """Answers requests with SSE streams; a notification precedes each tool call's answer."""

    def __init__(self) -> None:
        self.ended = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200)
        message = json.loads(request.content)
        if "id" not in message:
            return httpx.Response(202)
        if self.ended:
            return httpx.Response(404, json={"detail": "no such session"})
        headers = {"content-type": "text/event-stream", "mcp-session-id": "s-1"}
        if message["method"] == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "sse", "version": "1"},
            }
            return httpx.Response(
                200, headers=headers, content=sse({"jsonrpc": "2.0", "id": message["id"], "result": result})
            )
        if message["method"] == "tools/list":
            tool = {"name": "echo", "inputSchema": {"type": "object"}}
            return httpx.Response(
                200,
                headers=headers,
                content=sse({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [tool]}}),
            )
        log = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "working"},
        }
        text = json.dumps(message["params"]["arguments"])
        answer = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]},
        }
        return httpx.Response(200, headers=headers, content=sse(log, answer))


async def test_sse_answers_deliver_notifications_then_the_result() -> None:
    server = SSEServer()
    logged: list[Any] = []

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(server)) as http,
        pool_transport("http://127.0.0.1/mcp", http) as (read, write),
        ClientSession(read, write, logging_callback=on_log) as session,
    ):
        await session.initialize()
        result = await session.call_tool("echo", {"said": "hi"})
        assert json.loads(result.content[0].text) == {"said": "hi"}  # type: ignore[union-attr]
        assert logged == ["working"]
        # A 404 on the session's id: the call fails at once (not after a read timeout).
        server.ended = True
        with pytest.raises(Exception, match="Session terminated"):
            await session.call_tool("echo", {})
