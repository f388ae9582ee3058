"""Env and MCP facades under injected faults (docs/wire.md#instances, #mcp)."""

from __future__ import annotations

import logging

import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, EnvNotFoundError, Fleet, MCPError, RetryPolicy, ToolsUnavailableError
from fleet_sdk.mcp import MCPClient

FAST = RetryPolicy(max_retries=3, backoff_base=0.05, backoff_max=0.2)


async def test_a_503_on_instance_creation_is_retried(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet
) -> None:
    faulty_server.inject_fault("/v1/env/instances", method="POST", status=503, count=2)
    env = await faulty_afleet.make("orderdesk:1.0.0", retry=FAST)
    try:
        assert env.instance.status == "running"
        assert env.instance.version == "v1.0.0"
        assert faulty_server.fired_faults()[-2:] == [("POST", "/v1/env/instances", "status")] * 2
    finally:
        await env.close()


async def test_a_retryable_provisioning_failure_is_retried_by_make(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet, caplog: pytest.LogCaptureFixture
) -> None:
    faulty_server.inject_fault("/v1/env/instances", method="POST", status=500, count=1)
    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    env = await faulty_afleet.make("orderdesk", retry=FAST)
    await env.close()
    assert any("creating orderdesk failed" in r.getMessage() for r in caplog.records)


async def test_unknown_env_fails_at_once(faulty_afleet: AsyncFleet, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    with pytest.raises(EnvNotFoundError) as info:
        await faulty_afleet.make("no-such-env", retry=FAST)
    assert info.value.retryable is False
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


def test_make_parses_env_and_data_specs(faulty_fleet: Fleet) -> None:
    """Regression: data_key/data_version as separate arguments broke callers; "key:version" works."""
    with faulty_fleet.make("orderdesk:1.0.0", data_key="orderdesk:1.0.0") as env:
        assert env.instance.env_key == "orderdesk"
        assert env.instance.version == "v1.0.0"
        assert env.instance.data_key == "orderdesk"
        assert env.instance.data_version == "v1.0.0"


async def test_env_databases_tools_and_diff(faulty_afleet: AsyncFleet) -> None:
    async with await faulty_afleet.make("orderdesk") as env:
        names = {r.name for r in await env.resources()}
        assert {"seed", "current"} <= names
        tables = {t.name for t in (await env.db().describe()).tables}
        assert "orders" in tables
        before = await env.db().query("SELECT status FROM orders WHERE id = ?", [1001])
        tools = {t.name: t for t in await env.list_tools()}
        assert "cancel_order" in tools
        assert tools["cancel_order"].to_openai()["function"]["name"] == "cancel_order"
        pending = (await env.db().query("SELECT id FROM orders WHERE status = 'pending' LIMIT 1")).rows
        result = await env.call_tool("cancel_order", {"order_id": pending[0][0], "reason": "test"})
        assert isinstance(result, dict) and "error" not in result
        diff = await env.diff()
        assert diff.diff["orders"].total_changes >= 1
        await env.reset()
        assert (await env.diff()).diff.get("orders") is None or (await env.diff()).diff[
            "orders"
        ].total_changes == 0
        assert (await env.db().query("SELECT status FROM orders WHERE id = ?", [1001])).rows == before.rows


async def test_failing_mcp_endpoint_gives_the_union_and_a_warning(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed/fork: a partial tool list (1 of 157) went unnoticed; the union must say so."""
    async with await faulty_afleet.make("orderdesk") as env:
        root = env.instance.urls.root
        faulty_server.inject_fault(f"/instances/{env.instance_id}/api/v1/mcp*", status=503, count=1000)
        client = MCPClient([f"{root}mcp", f"{root}api/v1/mcp"], retry=FAST, list_deadline=10)
        caplog.set_level(logging.WARNING, logger="fleet_sdk")
        tools = await client.list_tools()
        assert {t.endpoint for t in tools} == {f"{root}mcp"}
        assert any("partial MCP tool list" in r.getMessage() for r in caplog.records)
        # Both failing: an empty union is an error, not an empty list.
        faulty_server.inject_fault(f"/instances/{env.instance_id}/mcp*", status=503, count=1000)
        with pytest.raises(ToolsUnavailableError):
            await client.list_tools(refresh=True)
        await client.aclose()


async def test_a_failing_tool_call_stops_at_its_deadline(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet
) -> None:
    """Fork: one dead call retried for 8.5 minutes against a 120 s budget."""
    async with await faulty_afleet.make("orderdesk") as env:
        root = env.instance.urls.root
        client = MCPClient(
            [f"{root}mcp"], retry=RetryPolicy(max_retries=100, backoff_base=0.2, backoff_max=0.5)
        )
        await client.list_tools()
        faulty_server.inject_fault(f"/instances/{env.instance_id}/mcp*", status=503, count=100000)
        before = len(faulty_server.fired_faults())
        with pytest.raises(MCPError, match=r"failed after|deadline"):
            await client.call_tool("list_orders", {}, deadline=2.0)
        # Counted in attempts, not seconds, so load cannot fail it: the 0.2-0.5 s backoffs fit
        # at most ~10 attempts in 2 s, while without the deadline all 101 would be made.
        attempts = len(faulty_server.fired_faults()) - before
        assert 1 <= attempts < 20
        await client.aclose()


async def test_a_missing_tool_is_never_retried(faulty_server: LocalFleet, faulty_afleet: AsyncFleet) -> None:
    from fleet_sdk import ToolNotFoundError

    async with await faulty_afleet.make("orderdesk") as env:
        await env.list_tools()
        # Any MCP request from here on would hit (and be recorded by) this fault.
        faulty_server.inject_fault(f"/instances/{env.instance_id}/*mcp*", status=503, count=1000)
        before = len(faulty_server.fired_faults())
        with pytest.raises(ToolNotFoundError, match="not_a_tool"):
            await env.call_tool("not_a_tool", {})
        assert len(faulty_server.fired_faults()) == before
