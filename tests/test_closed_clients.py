"""A closed client refuses further use with one error, ``ClientClosedError``, and sends nothing,
the way an ``httpx`` client does once closed; so do the env, MCP client and browser lease it made."""

# Each use is a lambda on purpose: reading ``fleet.api`` itself must raise inside ``pytest.raises``.
# ruff: noqa: PLW0108

from __future__ import annotations

import httpx
import pytest

from fleet_sdk import AsyncFleet, ClientClosedError, Fleet
from fleet_sdk.browser import BrowserSession
from fleet_sdk.mcp import MCPClient

KEY = "sk-test-123456"


class _CountingAsyncClient(httpx.AsyncClient):
    created = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        type(self).created += 1
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def _answering(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[])

    return httpx.MockTransport(handler)


def test_a_closed_sync_fleet_refuses_and_builds_no_new_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: after ``Fleet.close()`` the facade calls silently built a new async pool (which
    then leaked) while ``fleet.api`` raised httpx's RuntimeError."""
    monkeypatch.setattr(httpx, "AsyncClient", _CountingAsyncClient)
    fleet = Fleet(KEY, base_url="http://127.0.0.1:9")
    assert fleet.async_fleet is not None
    fleet.close()
    built = _CountingAsyncClient.created
    for use in (
        lambda: fleet.make("orderdesk"),
        lambda: fleet.list_envs(),
        lambda: fleet.api.control_plane.list_envs(),
        lambda: fleet.tasks.list(),
        lambda: fleet.async_fleet,
        lambda: fleet.with_options(deadline=1.0),
    ):
        with pytest.raises(ClientClosedError, match="Fleet is closed"):
            use()
    assert _CountingAsyncClient.created == built
    assert fleet.closed
    fleet.close()  # idempotent


async def test_a_closed_async_fleet_refuses_every_surface() -> None:
    fleet = AsyncFleet(KEY, base_url="http://fleet.test")
    await fleet.close()
    for use in (
        lambda: fleet.list_envs(),
        lambda: fleet.make("orderdesk"),
        lambda: fleet.instances(),
        lambda: fleet.tasks.list(),
        lambda: fleet.traces.create_job("j"),
    ):
        with pytest.raises(ClientClosedError, match="AsyncFleet is closed"):
            await use()
    with pytest.raises(ClientClosedError):
        fleet.api  # noqa: B018


async def test_calls_on_a_closed_pool_raise_the_typed_error_even_through_a_copy() -> None:
    """A ``with_options`` copy shares the pool: once its parent closed it, the copy refuses too
    (not httpx's ``RuntimeError``)."""
    fleet = AsyncFleet(KEY, base_url="http://fleet.test")
    copy = fleet.with_options(deadline=5.0)
    await fleet.close()
    with pytest.raises(ClientClosedError, match="connection pool is closed"):
        await copy.list_envs()
    await copy.close()
    with pytest.raises(ClientClosedError, match="AsyncFleet is closed"):
        await copy.list_envs()


async def test_a_closed_mcp_client_refuses_and_ends_its_sessions_once() -> None:
    seen: list[httpx.Request] = []
    pool = httpx.AsyncClient(transport=_answering(seen))
    mcp = MCPClient(["http://instance.test/mcp"], http_client=pool)
    await mcp.aclose()
    assert mcp.closed
    with pytest.raises(ClientClosedError, match="MCP client"):
        await mcp.list_tools()
    with pytest.raises(ClientClosedError, match="MCP client"):
        await mcp.call_tool("anything", {})
    assert not seen  # refused before anything was sent
    await pool.aclose()


async def test_a_closed_browser_lease_refuses_its_tool() -> None:
    seen: list[httpx.Request] = []
    pool = httpx.AsyncClient(transport=_answering(seen))
    fleet = AsyncFleet(KEY, base_url="http://fleet.test", http_client=pool)
    lease = BrowserSession(
        fleet, "lease-1", MCPClient(["http://lease.test/mcp"], http_client=pool), "http://ui"
    )
    await lease.close()
    assert [(r.method, r.url.path) for r in seen] == [("DELETE", "/v1/browser/lease-1")]
    with pytest.raises(ClientClosedError, match="lease-1 is closed"):
        await lease.call_tool("computer", {"action": "screenshot"})
    await lease.close()  # idempotent: nothing more sent
    assert len(seen) == 1
    await fleet.close()
    await pool.aclose()
