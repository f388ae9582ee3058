"""MCP over streamable HTTP on local instances, exercised with the real ``mcp`` client (1.x or 2.x).

Results are compared in their wire (camelCase) form, which both ``mcp`` majors produce.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fleet_local import LocalFleet
from fleet_sdk import __version__
from fleet_sdk.types import env_instance as models

ENV_KEY = "orderdesk"


@asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[ClientSession]:
    """An initialised MCP client session on ``url``."""
    # mcp 1.x yields (read, write, get_session_id); 2.x yields (read, write).
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


def wire(model: Any) -> Any:
    """An ``mcp`` model in its JSON wire form."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def endpoints(instance: models.InstanceResponse) -> list[str]:
    """Both MCP endpoints of an instance, as clients build them from ``urls.root``."""
    root = instance.urls.root
    assert root.endswith("/")
    return [f"{root}mcp", f"{root}api/v1/mcp"]


async def test_both_endpoints_list_the_environment_tools(
    local: LocalFleet, instance: models.InstanceResponse
) -> None:
    listings = []
    for url in [*endpoints(instance), *(u + "/" for u in endpoints(instance))]:
        async with mcp_session(url) as session:
            result = await session.list_tools()
        listings.append({tool.name: wire(tool) for tool in result.tools})
    names = set(listings[0])
    assert {"get_order", "list_orders", "add_order_note", "update_order_status"} <= names
    assert all(set(listing) == names for listing in listings)
    get_order = listings[0]["get_order"]
    assert get_order["inputSchema"]["type"] == "object"
    assert "order_id" in get_order["inputSchema"]["required"]
    assert get_order["annotations"]["readOnlyHint"] is True
    assert listings[0]["add_order_note"]["annotations"]["readOnlyHint"] is False


async def test_read_and_write_tools_act_on_the_instance_database(
    local: LocalFleet, instance: models.InstanceResponse
) -> None:
    note = "customer called about the delivery window"
    async with mcp_session(endpoints(instance)[0]) as session:
        read = wire(await session.call_tool("get_order", {"order_id": 1012}))
        assert read["isError"] is False
        assert len(read["content"]) == 1 and read["content"][0]["type"] == "text"
        order = json.loads(read["content"][0]["text"])
        assert order["id"] == 1012
        assert read["structuredContent"] == order
        written = wire(await session.call_tool("add_order_note", {"order_id": 1012, "body": note}))
        assert written["isError"] is False, written["content"]
    # The write is visible through the instance manager API on the `current` database.
    async with local.async_fleet() as fleet:
        manager = fleet.api.manager(instance.urls.manager.api)
        query = models.QueryRequest(query="SELECT body FROM order_notes WHERE order_id = ?", args=[1012])
        result = await manager.query_database("current", query)
        assert result.success
        assert [note] in (result.rows or [])
        seed = await manager.query_database("seed", query)
        assert [note] not in (seed.rows or [])
    # And through the aggregator endpoint, which serves the same tools on the same data.
    async with mcp_session(endpoints(instance)[1]) as session:
        again = wire(await session.call_tool("get_order", {"order_id": 1012}))
        assert not again["isError"]
        assert note in again["content"][0]["text"]


async def test_tool_errors_come_back_as_error_results(instance: models.InstanceResponse) -> None:
    async with mcp_session(endpoints(instance)[0]) as session:
        missing = wire(await session.call_tool("get_order", {"order_id": 999999}))
        assert missing["isError"] is True
        assert "999999" in missing["content"][0]["text"]
        bad = wire(await session.call_tool("get_order", {"order_id": "not-a-number"}))
        assert bad["isError"] is True
        assert "order_id" in bad["content"][0]["text"]
        # An unknown tool is a protocol error, JSON-RPC -32602 (the 2025-11-25 revision).
        with pytest.raises(Exception) as unknown:  # McpError on mcp 1.x, MCPError on 2.x
            await session.call_tool("no_such_tool", {})
        assert (unknown.value.error.code, unknown.value.error.message) == (
            -32602,
            "Unknown tool: no_such_tool",
        )
        # The session is still usable after errors.
        assert not wire(await session.call_tool("list_orders", {"status": "pending"}))["isError"]


async def test_unknown_and_terminated_instances_answer_404(local: LocalFleet) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with local.async_fleet() as fleet, httpx.AsyncClient(timeout=20) as http:
        response = await http.post(
            f"{local.base_url}/instances/inst_missing/mcp", json=initialize, headers=headers
        )
        assert response.status_code == 404
        assert response.json()["code"] == "instance_not_found"
        created = await fleet.api.control_plane.create_instance(models.InstanceRequest(env_key=ENV_KEY))
        # A live instance answers on both paths, with and without a trailing slash, without redirects.
        for url in [*endpoints(created), *(u + "/" for u in endpoints(created))]:
            live = await http.post(url, json=initialize, headers=headers)
            assert live.status_code == 200, (url, live.text)
            assert live.json()["result"]["serverInfo"]["name"]
        await fleet.api.control_plane.delete_instance(created.instance_id)
        for url in endpoints(created):
            gone = await http.post(url, json=initialize, headers=headers)
            assert gone.status_code == 404


async def test_requests_without_a_session_are_served(instance: models.InstanceResponse) -> None:
    """Regression: the public SDK's ``env.mcp.list_tools()`` posts a bare ``tools/list`` (no
    ``initialize``, no session id, ``Accept: */*``); the server answered 400 "Missing session ID"
    and the SDK returned no tools without a word."""

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}

    async with httpx.AsyncClient(timeout=20, headers={"Accept": "*/*"}) as http:
        for url in endpoints(instance):
            listed = await http.post(url, json=rpc("tools/list", {}))
            assert listed.status_code == 200 and "mcp-session-id" not in listed.headers
            names = {tool["name"] for tool in listed.json()["result"]["tools"]}
            assert {"get_order", "list_orders"} <= names
            called = (
                await http.post(
                    url, json=rpc("tools/call", {"name": "get_order", "arguments": {"order_id": 1012}})
                )
            ).json()
            assert called["id"] == 7 and called["result"]["structuredContent"]["id"] == 1012
            unknown = (
                await http.post(url, json=rpc("tools/call", {"name": "no_such_tool", "arguments": {}}))
            ).json()
            assert unknown["error"] == {"code": -32602, "message": "Unknown tool: no_such_tool"}
        # An initialize still opens a session, which announces the server's version.
        opened = await http.post(
            endpoints(instance)[0],
            json=rpc(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            ),
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert opened.headers.get("mcp-session-id")
        assert opened.json()["result"]["serverInfo"] == {
            "name": "fleet-local-instance",
            "version": __version__,
        }
