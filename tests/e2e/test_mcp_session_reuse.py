"""An env keeps one MCP session per endpoint, on the pool of the fleet that made it.

Every MCP request is observed through an event hook on the user's own ``httpx.AsyncClient``,
so these tests also show that the user's client carries the MCP traffic.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from _http import metric_value
from _waits import wait_until_async

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet


class MCPTraffic:
    """JSON-RPC methods (and HTTP statuses) of the MCP requests a client sent, in order."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.statuses: list[tuple[str, int]] = []

    async def on_request(self, request: httpx.Request) -> None:
        if "/mcp" in request.url.path and request.method == "POST":
            self.methods.append(json.loads(request.content)["method"])
        elif "/mcp" in request.url.path and request.method == "DELETE":
            self.methods.append(f"DELETE {request.headers.get('mcp-session-id')}")

    async def on_response(self, response: httpx.Response) -> None:
        request = response.request
        if "/mcp" in request.url.path and request.method == "POST":
            self.statuses.append((json.loads(request.content)["method"], response.status_code))

    def count(self) -> Counter[str]:
        return Counter(self.methods)


@pytest.fixture
def traffic() -> MCPTraffic:
    return MCPTraffic()


@pytest.fixture
async def user_fleet(server: LocalFleet, traffic: MCPTraffic) -> AsyncIterator[AsyncFleet]:
    """An ``AsyncFleet`` on an ``httpx.AsyncClient`` the user made (and closes)."""
    hooks = {"request": [traffic.on_request], "response": [traffic.on_response]}
    async with httpx.AsyncClient(event_hooks=hooks) as http:
        fleet = server.async_fleet(http_client=http)
        yield fleet
        await fleet.close()


async def test_the_users_http_client_carries_mcp_traffic(user_fleet: AsyncFleet, traffic: MCPTraffic) -> None:
    async with await user_fleet.make("orderdesk") as env:
        tools = await env.list_tools()
        assert "get_order" in {t.name for t in tools}
        assert (await env.call_tool("get_order", {"order_id": 1012}))["id"] == 1012
    # Every MCP request the env made went through the user's client and its hooks.
    assert traffic.count()["tools/call"] == 1
    assert traffic.count()["tools/list"] >= 1


def test_a_sync_fleets_http_client_carries_its_mcp_traffic(server: LocalFleet) -> None:
    """A sync ``Fleet`` given only an ``httpx.Client``: ``make`` and tool calls (async code on the
    SDK's loop) go through that client, its event hooks included."""
    sent: list[str] = []

    def on_request(request: httpx.Request) -> None:
        if "/mcp" in request.url.path and request.method == "POST":
            sent.append(json.loads(request.content)["method"])
        else:
            sent.append(f"{request.method} {request.url.path}")

    with httpx.Client(event_hooks={"request": [on_request]}) as http, server.fleet(http_client=http) as fleet:
        with fleet.make("orderdesk") as env:
            assert env.call_tool("get_order", {"order_id": 1012})["id"] == 1012
        assert "POST /v1/env/instances" in sent
        assert sent.count("tools/call") == 1 and "initialize" in sent


async def test_one_initialize_per_endpoint_and_no_tools_list_per_call(
    user_fleet: AsyncFleet, traffic: MCPTraffic
) -> None:
    async with await user_fleet.make("orderdesk") as env:
        endpoints = len(env.mcp.endpoints)
        await env.list_tools()
        after_listing = traffic.count()
        assert after_listing["initialize"] == endpoints
        assert after_listing["tools/list"] == endpoints
        for order_id in (1012, 1013, 1014) * 4:
            await env.call_tool("get_order", {"order_id": order_id})
        await env.call_tool("list_orders", {"status": "pending"})
        counts = traffic.count()
    assert counts["tools/call"] == 13
    # Thirteen calls later: no new session and no tools/list.
    assert counts["initialize"] == endpoints
    assert counts["notifications/initialized"] == endpoints
    assert counts["tools/list"] == endpoints
    assert env.mcp.initializations == endpoints


async def test_closing_the_env_ends_its_sessions(user_fleet: AsyncFleet, traffic: MCPTraffic) -> None:
    env = await user_fleet.make("orderdesk")
    await env.list_tools()
    await env.close()
    ended = [m for m in traffic.methods if m.startswith("DELETE ")]
    # One DELETE per session, each naming the session the server gave it.
    assert len(ended) == len(env.mcp.endpoints)
    assert all(m != "DELETE None" for m in ended)
    assert len(set(ended)) == len(ended)


async def test_concurrent_first_calls_share_one_session(user_fleet: AsyncFleet, traffic: MCPTraffic) -> None:
    async with await user_fleet.make("orderdesk") as env:
        await env.list_tools()
        # The server ends the sessions (as its idle timeout would); the next calls race to open
        # a new one. Closing the client is no way to do this: a closed client refuses every call.
        async with httpx.AsyncClient(timeout=30) as http:
            for session in env.mcp._sessions.values():
                assert session.session_id is not None
                ended = await http.delete(session.endpoint, headers={"mcp-session-id": session.session_id})
                assert ended.status_code < 300, ended.text
        before = traffic.count()["initialize"]
        async with anyio.create_task_group() as group:
            for order_id in (1012, 1013, 1014, 1015):
                group.start_soon(env.call_tool, "get_order", {"order_id": order_id})
        assert traffic.count()["initialize"] == before + 1


async def _instance_mcp_sessions(local: LocalFleet) -> float:
    """Stateful MCP sessions the server holds open on instance endpoints (``GET /metrics``)."""
    return await metric_value(local, "fleet_local_mcp_sessions", endpoint="instance")


async def _sessions_ended(local: LocalFleet) -> bool:
    return await _instance_mcp_sessions(local) == 0


async def test_a_session_ended_by_the_server_is_reestablished_once() -> None:
    traffic = MCPTraffic()
    hooks = {"request": [traffic.on_request], "response": [traffic.on_response]}
    with LocalFleet(s3=False, mcp_session_idle_timeout=0.5) as local:
        async with httpx.AsyncClient(event_hooks=hooks) as http:
            fleet = local.async_fleet(http_client=http)
            async with await fleet.make("orderdesk") as env:
                await env.call_tool("get_order", {"order_id": 1012})
                opened = env.mcp.initializations
                assert await _instance_mcp_sessions(local) > 0
                await wait_until_async(lambda: _sessions_ended(local), "the server ends the idle sessions")
                note = "written after the session expired"
                result = await env.call_tool("add_order_note", {"order_id": 1012, "body": note})
                assert not (isinstance(result, dict) and "error" in result), result
                # Exactly one new session, for the endpoint that owns the tool.
                assert env.mcp.initializations == opened + 1
                assert ("tools/call", 404) in traffic.statuses
                rows = await env.db().query("SELECT count(*) FROM order_notes WHERE body = ?", [note])
                assert rows.rows == [[1]]  # the write ran once: the 404 request was never run
                # Concurrent calls that all meet the ended session open one new session between them.
                await wait_until_async(lambda: _sessions_ended(local), "the server ends the idle sessions")
                reopened = env.mcp.initializations
                async with anyio.create_task_group() as group:
                    for order_id in (1012, 1013, 1014, 1015):
                        group.start_soon(env.call_tool, "get_order", {"order_id": order_id})
                assert env.mcp.initializations == reopened + 1
            await fleet.close()
