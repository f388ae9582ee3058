"""MCP requests find a live instance's environment without the store, and never outlive it.

``_live.LiveInstances`` remembers the environment of each instance an MCP request found live;
these tests pin that a deleted instance is not served from that memory.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from fleet_local import LocalFleet
from fleet_local._live import LiveInstances
from fleet_sdk.types import env_instance as models

_HEADERS = {"Accept": "application/json, text/event-stream"}
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def test_a_deleted_instances_session_is_refused_after_calls_cached_it(
    local: LocalFleet,
) -> None:
    """The session's own tool calls put the instance in the server's memory of live instances;
    once the instance is deleted, the same session's next call must answer 404, not run."""
    async with local.async_fleet() as fleet, httpx.AsyncClient(timeout=20) as http:
        created = await fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
        url = f"{created.urls.root}mcp"
        opened = await http.post(url, json=_INITIALIZE, headers=_HEADERS)
        assert opened.status_code == 200
        headers = {**_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "get_order", "arguments": {"order_id": 1008}}
        for _ in range(2):
            served = await http.post(url, json=call, headers=headers)
            assert served.status_code == 200 and served.json()["result"]["isError"] is False
        await fleet.api.control_plane.delete_instance(created.instance_id)
        refused = await http.post(url, json=call, headers=headers)
        assert refused.status_code == 404
        assert refused.json()["code"] == "instance_not_found"


def test_a_remembered_instance_whose_folder_is_gone_is_not_trusted(tmp_path: Path) -> None:
    """A delete removes the folder before its end hooks run: a lookup in between must fall back
    to the store (None), and forget the instance."""
    live = LiveInstances()
    folder = tmp_path / "inst_1"
    folder.mkdir()
    live.remember("inst_1", "orderdesk")
    assert live.env_key("inst_1", folder) == "orderdesk"
    folder.rmdir()
    assert live.env_key("inst_1", folder) is None
    folder.mkdir()  # even were it back, the memory was dropped: the store decides again
    assert live.env_key("inst_1", folder) is None
    live.remember("inst_1", "orderdesk")
    live.forget("inst_1")
    assert live.env_key("inst_1", folder) is None and len(live) == 0
