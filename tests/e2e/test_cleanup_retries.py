"""Regressions the cancellation and fault sweeps found (``test_cancel_and_fault_sweeps.py``), kept
as quick tests of their own."""

from __future__ import annotations

import httpx
import pytest
from _chaos import ChaosTransport
from _waits import wait_until_async

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, MCPError, RetryPolicy
from fleet_sdk.mcp import MCPClient


async def test_closing_an_env_retries_a_delete_the_server_failed(
    faulty_afleet: AsyncFleet, faulty_server: LocalFleet
) -> None:
    """Regression: a 500 on the instance's DELETE was not retried (only 502-504 are, for a plain
    call), so closing the env raised and the instance stayed until its TTL."""
    env = await faulty_afleet.make("orderdesk")
    faulty_server.inject_fault(f"/v1/env/instances/{env.instance_id}", method="DELETE", status=500)
    await env.close()
    assert (await faulty_afleet.api.control_plane.get_instance(env.instance_id)).status == "terminated"
    assert ("DELETE", f"/v1/env/instances/{env.instance_id}", "status") in faulty_server.fired_faults()


async def test_a_session_whose_setup_failed_is_ended_on_the_server(
    faulty_afleet: AsyncFleet, faulty_server: LocalFleet
) -> None:
    """Regression: when ``notifications/initialized`` failed after ``initialize`` opened a
    session, the client forgot the session's id and the server kept the session until its idle
    timeout (30 minutes by default)."""
    env = await faulty_afleet.make("orderdesk")
    before = set(faulty_server.live_objects()["mcp_sessions"])
    transport = ChaosTransport("refused", at=2)  # 1: initialize, 2: notifications/initialized
    pool = httpx.AsyncClient(transport=transport)
    mcp = MCPClient([env.mcp.endpoints[0]], http_client=pool, retry=RetryPolicy(max_retries=0))
    try:
        with pytest.raises(MCPError):
            await mcp.list_tools()
        path = httpx.URL(env.mcp.endpoints[0]).path
        assert transport.sent == [f"POST {path}", f"POST {path}", f"DELETE {path}"]

        async def ended() -> bool:
            return not set(faulty_server.live_objects()["mcp_sessions"]) - before

        await wait_until_async(ended, "the half-open session is ended")
    finally:
        await mcp.aclose()
        await pool.aclose()
        await env.close()
