"""A fleet lists an environment version's tools once: later episodes open one MCP session.

The tool list is the union over an instance's two MCP endpoints, so listing it opens a session
on each. Instances of one environment version (same image flavour and variables) serve the same
tools, so ``AsyncFleet.make`` shares the first complete listing with the fleet's later envs of
that version: they list nothing and open a session only on the endpoint that owns a tool they
call. Sessions are counted by the server (``fleet_local_mcp_sessions_opened_total`` on
``GET /metrics``), requests by an event hook on the user's ``httpx`` client.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, RetryPolicy, TaskEnv, ToolNotFoundError
from fleet_sdk.tasks import Task

FAST = RetryPolicy(max_retries=1, backoff_base=0.05, backoff_max=0.1)


class Traffic:
    """The JSON-RPC methods of the MCP requests a client sent, by endpoint path."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def on_request(self, request: httpx.Request) -> None:
        path = request.url.path
        if "/mcp" not in path:
            return
        endpoint = "api/v1/mcp" if "/api/v1/mcp" in path else "mcp"
        method = json.loads(request.content)["method"] if request.method == "POST" else request.method
        self.sent.append((endpoint, method))

    def count(self) -> Counter[tuple[str, str]]:
        return Counter(self.sent)


async def samples(local: LocalFleet, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` of the server's ``GET /metrics``, read by Prometheus's parser."""
    headers = {"Authorization": f"Bearer {local.api_key}"}
    async with httpx.AsyncClient(timeout=30) as http:
        page = await http.get(f"{local.base_url}/metrics", headers=headers)
    page.raise_for_status()
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(page.text)
        for sample in family.samples
        if sample.name == name
    ]


async def sessions_opened(local: LocalFleet) -> dict[str, float]:
    """``fleet_local_mcp_sessions_opened_total`` by endpoint path, as the server counts it."""
    return {
        labels["path"]: value
        for labels, value in await samples(local, "fleet_local_mcp_sessions_opened_total")
    }


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {path: after.get(path, 0.0) - before.get(path, 0.0) for path in ("mcp", "api/v1/mcp")}


@pytest.fixture
async def watched(server: LocalFleet) -> AsyncIterator[tuple[AsyncFleet, Traffic]]:
    """A fleet of its own (so no other test's listing is shared with it) on a watched client."""
    traffic = Traffic()
    async with httpx.AsyncClient(event_hooks={"request": [traffic.on_request]}, timeout=60) as http:
        fleet = server.async_fleet(http_client=http)
        yield fleet, traffic
        await fleet.close()


async def play(fleet: AsyncFleet, task: Task) -> tuple[float | None, list[str]]:
    """One scripted episode (the task's reference solution): its reward and the tools offered."""
    async with TaskEnv(task, fleet=fleet) as env:
        await env.reset_async()
        offered = [tool.name for tool in env.tools]
        for step in task.metadata["reference_solution"]:
            _, _, done, _ = await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
            if done:
                break
        if not env.done:
            await env.step_async({"done": True})
        return env.final_reward, offered


async def test_after_the_first_episode_each_opens_one_session(
    server: LocalFleet, watched: tuple[AsyncFleet, Traffic], bundled_tasks: list[Task]
) -> None:
    fleet, traffic = watched
    task = next(t for t in bundled_tasks if t.task_key == "orderdesk-refund-late-order")
    start = await sessions_opened(server)
    reward, first_tools = await play(fleet, task)
    assert reward == 1.0
    after_first = await sessions_opened(server)
    # The first episode lists the union: a session on each endpoint.
    assert delta(after_first, start) == {"mcp": 1, "api/v1/mcp": 1}
    listed = traffic.count()
    assert listed[("mcp", "tools/list")] == listed[("api/v1/mcp", "tools/list")] == 1
    for _ in range(3):
        reward, tools = await play(fleet, task)
        assert reward == 1.0
        assert tools == first_tools  # the same tools offered, in the same order
    # Three more episodes: one session each, on the endpoint owning the tools, and no listing.
    assert delta(await sessions_opened(server), after_first) == {"mcp": 3, "api/v1/mcp": 0}
    counts = traffic.count()
    assert counts[("mcp", "tools/list")] == counts[("api/v1/mcp", "tools/list")] == 1
    assert counts[("mcp", "initialize")] == counts[("mcp", "DELETE")] == 4
    assert counts[("api/v1/mcp", "initialize")] == counts[("api/v1/mcp", "DELETE")] == 1
    assert await _open_sessions(server) == 0  # every session opened was ended


async def _open_sessions(local: LocalFleet) -> float:
    found = await samples(local, "fleet_local_mcp_sessions")
    return sum(value for labels, value in found if labels.get("endpoint") == "instance")


async def test_refresh_and_other_variables_list_the_endpoints_again(
    watched: tuple[AsyncFleet, Traffic],
) -> None:
    fleet, traffic = watched
    async with await fleet.make("orderdesk") as first:
        listed = [t.name for t in await first.list_tools()]
    async with await fleet.make("orderdesk") as second:
        assert [t.name for t in await second.list_tools()] == listed
        assert traffic.count()[("mcp", "tools/list")] == 1
        # ``refresh`` asks both endpoints again.
        assert [t.name for t in await second.list_tools(refresh=True)] == listed
        assert traffic.count()[("mcp", "tools/list")] == traffic.count()[("api/v1/mcp", "tools/list")] == 2
    # Other variables may mean other tools: that instance lists its own.
    async with await fleet.make("orderdesk", env_variables={"CURRENT_DATE": "2025-01-01"}) as third:
        await third.list_tools()
        assert traffic.count()[("api/v1/mcp", "tools/list")] == 3


async def test_a_partial_listing_is_not_shared(faulty_server: LocalFleet) -> None:
    """An endpoint that failed may serve tools the others lack: the next instance lists again."""
    traffic = Traffic()
    async with httpx.AsyncClient(event_hooks={"request": [traffic.on_request]}, timeout=60) as http:
        fleet = faulty_server.async_fleet(http_client=http, retry=FAST)
        try:
            async with await fleet.make("orderdesk") as first:
                assert first.instance.urls is not None
                root = first.instance.urls.root
                faulty_server.inject_fault(
                    f"/instances/{first.instance_id}/api/v1/mcp*", status=503, count=100
                )
                partial = await first.list_tools()
                assert {t.endpoint for t in partial} == {f"{root}mcp"}
            faulty_server.clear_faults()
            async with await fleet.make("orderdesk") as second:
                await second.list_tools()
            counts = traffic.count()
            assert counts[("mcp", "tools/list")] == 2  # the second instance was listed too
        finally:
            faulty_server.clear_faults()
            await fleet.close()


async def test_a_tool_the_server_does_not_know_drops_the_shared_list(
    watched: tuple[AsyncFleet, Traffic],
) -> None:
    fleet, traffic = watched
    async with await fleet.make("orderdesk") as first:
        await first.list_tools()
        assert first.mcp._shared_tools is not None
        memo, key = first.mcp._shared_tools
    # What another instance listed no longer matches the server: a tool it has not got.
    lists = memo.get(key)
    assert lists is not None
    lists[0].append({"name": "ghost_tool", "description": "", "inputSchema": {"type": "object"}})
    memo.put(key, lists)
    async with await fleet.make("orderdesk") as second:
        assert "ghost_tool" in {t.name for t in await second.list_tools()}
        with pytest.raises(ToolNotFoundError):
            await second.call_tool("ghost_tool", {})
        assert memo.get(key) is None
        # This env and the next list what the server really has.
        assert "ghost_tool" not in {t.name for t in await second.list_tools()}
    async with await fleet.make("orderdesk") as third:
        assert "ghost_tool" not in {t.name for t in await third.list_tools()}
    assert traffic.count()[("mcp", "tools/list")] == 2
