"""A plain MCP session (the SDK's: ``initialize`` on 2025-11-25, ``notifications/initialized``,
``tools/call``, ``DELETE``) is opened and ended by the instance endpoint itself, answered exactly as
the ``mcp`` package answers it (on either major), and handed to a package session made behind it
the moment a request needs one.

Each test speaks a session the endpoint holds beside one the package holds (its ``initialize``
carries a ``clientInfo.title``, which the endpoint leaves to the package) and compares what a
client sees of every answer: status, content type, session id and JSON body.
``fleet_local_mcp_endpoint_sessions_total`` on ``GET /metrics`` shows which sessions the endpoint
opened (``opened``) and which a request then needed the package's for (``handed_to_package``).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _http import metric_value
from _waits import wait_until_async
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import INTERNAL_ERROR

from fleet_local import LocalFleet
from fleet_local._app import create_app
from fleet_local._server import build_state
from fleet_local._state import LocalSettings
from fleet_sdk.types import env_instance as models

JSON_AND_SSE = "application/json, text/event-stream"
REVISION = "2025-11-25"


class Session:
    """One MCP session spoken by hand: ``plain`` opens it as the SDK does (the endpoint's),
    otherwise with a ``clientInfo.title`` (the package's)."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, plain: bool) -> None:
        self.http = http
        self.url = url
        self.plain = plain
        self.session_id: str | None = None
        self.revision: str | None = None
        self._ids = itertools.count(1)

    def headers(self, *, revision: bool = True) -> dict[str, str]:
        headers = {"accept": JSON_AND_SSE, "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.revision is not None and revision:
            headers["mcp-protocol-version"] = self.revision
        return headers

    async def initialize(self) -> httpx.Response:
        info = {"name": "t", "version": "0"} if self.plain else {"name": "t", "version": "0", "title": "T"}
        params = {"protocolVersion": REVISION, "capabilities": {}, "clientInfo": info}
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": "initialize", "params": params}
        response = await self.http.post(self.url, json=message, headers=self.headers())
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        self.revision = response.json()["result"]["protocolVersion"]
        return response

    async def initialized(self) -> httpx.Response:
        message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        return await self.http.post(self.url, json=message, headers=self.headers())

    async def request(self, method: str, params: dict[str, Any]) -> httpx.Response:
        message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        return await self.http.post(self.url, json=message, headers=self.headers())

    async def call(self, name: str, arguments: dict[str, Any]) -> httpx.Response:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def delete(self) -> httpx.Response:
        # As the SDK sends it: no protocol version header.
        return await self.http.delete(self.url, headers=self.headers(revision=False))


def seen(response: httpx.Response, session: Session) -> tuple[int, str, bool, Any]:
    """What a client sees of an answer; the session id only as "is this session's"."""
    body = response.json() if response.content else None
    return (
        response.status_code,
        response.headers.get("content-type", ""),
        response.headers.get("mcp-session-id") == session.session_id,
        body,
    )


async def endpoint_sessions(local: LocalFleet, outcome: str) -> float:
    return await metric_value(local, "fleet_local_mcp_endpoint_sessions_total", outcome=outcome)


async def open_sessions(local: LocalFleet) -> float:
    return await metric_value(local, "fleet_local_mcp_sessions", endpoint="instance")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def learned(http: httpx.AsyncClient, url: str) -> None:
    """One plain session opened and ended: the endpoint learns the package's ``initialize``
    result from the first plain one a server sees (answered by the package)."""
    first = Session(http, url, plain=True)
    await first.initialize()
    await first.delete()


READS = [
    ("get_order", {"order_id": 1012}),
    ("export_inventory_ledger", {}),
    ("get_order", {"order_id": 999999}),  # a tool error: isError
]


async def test_a_plain_session_is_opened_used_and_ended_by_the_endpoint(
    local: LocalFleet, instance: models.InstanceResponse, http: httpx.AsyncClient
) -> None:
    assert instance.urls is not None
    for url in (f"{instance.urls.root}mcp", f"{instance.urls.root}api/v1/mcp/"):
        await learned(http, url)
        opened, handed = (
            await endpoint_sessions(local, "opened"),
            await endpoint_sessions(local, "handed_to_package"),
        )
        ours, theirs = Session(http, url, plain=True), Session(http, url, plain=False)
        # The same ``initialize`` result (the endpoint's is the package's, learned).
        assert seen(await ours.initialize(), ours) == seen(await theirs.initialize(), theirs)
        assert ours.session_id != theirs.session_id and ours.session_id
        assert seen(await ours.initialized(), ours) == seen(await theirs.initialized(), theirs)
        for name, arguments in READS:
            assert seen(await ours.call(name, arguments), ours) == seen(
                await theirs.call(name, arguments), theirs
            )
        assert seen(await ours.delete(), ours) == seen(await theirs.delete(), theirs)
        # Ended: its id is unknown, as the package's is.
        after = [await s.call("get_order", {"order_id": 1012}) for s in (ours, theirs)]
        assert after[0].status_code == 404 and seen(after[0], ours)[::3] == seen(after[1], theirs)[::3]
        assert await endpoint_sessions(local, "opened") == opened + 1
        assert await endpoint_sessions(local, "handed_to_package") == handed, "no package session was made"


async def test_anything_else_goes_to_a_package_session_made_behind_it(
    local: LocalFleet, instance: models.InstanceResponse, http: httpx.AsyncClient
) -> None:
    assert instance.urls is not None
    url = f"{instance.urls.root}mcp"
    await learned(http, url)
    handed = await endpoint_sessions(local, "handed_to_package")
    ours, theirs = Session(http, url, plain=True), Session(http, url, plain=False)
    await ours.initialize()
    await theirs.initialize()
    # A call before ``notifications/initialized``: the package's answer (each major its own).
    early = [await s.call("get_order", {"order_id": 1012}) for s in (ours, theirs)]
    assert seen(early[0], ours) == seen(early[1], theirs)
    assert await endpoint_sessions(local, "handed_to_package") == handed + 1
    # The handed session goes on as the package's: initialized, listed, called, refused, ended.
    assert seen(await ours.initialized(), ours) == seen(await theirs.initialized(), theirs)
    listed = [await s.request("tools/list", {}) for s in (ours, theirs)]
    assert seen(listed[0], ours) == seen(listed[1], theirs) and listed[0].json()["result"]["tools"]
    for name, arguments in [*READS, ("no_such_tool", {})]:
        assert seen(await ours.call(name, arguments), ours) == seen(
            await theirs.call(name, arguments), theirs
        )
    assert seen(await ours.delete(), ours) == seen(await theirs.delete(), theirs)
    assert (await ours.call("get_order", {"order_id": 1012})).status_code == 404
    # A session first handed over by a ``tools/list`` after it was fully open.
    listing = Session(http, url, plain=True)
    await listing.initialize()
    assert (await listing.initialized()).status_code == 202
    assert (await listing.request("tools/list", {})).json()["result"]["tools"]
    assert await endpoint_sessions(local, "handed_to_package") == handed + 2
    assert (await listing.call("get_order", {"order_id": 1012})).json()["result"]["isError"] is False
    assert (await listing.delete()).status_code == 200
    assert (await listing.call("get_order", {"order_id": 1012})).status_code == 404


@asynccontextmanager
async def client_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


async def test_a_raw_mcp_client_session_is_served(
    local: LocalFleet, instance: models.InstanceResponse, http: httpx.AsyncClient
) -> None:
    """The ``mcp`` package's own client (whichever major is installed): whatever it sends on the
    session (its GET stream among them) is answered."""
    assert instance.urls is not None
    url = f"{instance.urls.root}mcp"
    await learned(http, url)
    for _ in range(2):
        async with client_session(url) as session:
            tools = await session.list_tools()
            assert any(tool.name == "get_order" for tool in tools.tools)
            result = await session.call_tool("get_order", {"order_id": 1012})
            wire = result.model_dump(by_alias=True)  # field names differ between the majors
            assert wire["isError"] is False and wire["structuredContent"]["id"] == 1012


async def test_sessions_end_when_idle_or_when_their_instance_ends() -> None:
    with LocalFleet(s3=False, mcp_session_idle_timeout=0.5) as local:
        fleet = local.fleet()
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                instance = fleet.api.control_plane.create_instance(
                    models.InstanceRequest(env_key="orderdesk")
                )
                assert instance.urls is not None
                url = f"{instance.urls.root}mcp"
                await learned(http, url)
                await wait_until_async(lambda: _none_open(local), "the learning session ends")
                # Idle: the endpoint's own session ends at the idle timeout, as the package's would.
                idle = Session(http, url, plain=True)
                await idle.initialize()
                await idle.initialized()
                assert (await idle.call("get_order", {"order_id": 1012})).status_code == 200
                assert await open_sessions(local) == 1
                await wait_until_async(lambda: _none_open(local), "the server ends the idle session")
                assert (await idle.call("get_order", {"order_id": 1012})).status_code == 404
                # A handed session: the package's timer ends it, and the endpoint's id with it.
                handed = Session(http, url, plain=True)
                await handed.initialize()
                await handed.initialized()
                assert (await handed.request("tools/list", {})).status_code == 200
                await wait_until_async(lambda: _none_open(local), "the server ends the handed session")
                assert (await handed.call("get_order", {"order_id": 1012})).status_code == 404
            # The instance ends: so do its sessions, held by the endpoint or handed.
            with LocalFleet(s3=False) as steady:
                steady_fleet = steady.fleet()
                try:
                    other = steady_fleet.api.control_plane.create_instance(
                        models.InstanceRequest(env_key="orderdesk")
                    )
                    assert other.urls is not None
                    async with httpx.AsyncClient(timeout=30) as http:
                        await learned(http, f"{other.urls.root}mcp")
                        sessions = [Session(http, f"{other.urls.root}mcp", plain=True) for _ in range(2)]
                        for session in sessions:
                            await session.initialize()
                            await session.initialized()
                        await sessions[1].request("tools/list", {})
                        assert await open_sessions(steady) == 2
                        steady_fleet.api.control_plane.delete_instance(other.instance_id)
                        await wait_until_async(lambda: _none_open(steady), "the instance's sessions end")
                finally:
                    steady_fleet.close()
        finally:
            fleet.close()


async def _none_open(local: LocalFleet) -> bool:
    return await open_sessions(local) == 0


async def test_the_sdks_episode_session_never_needs_the_packages(local: LocalFleet) -> None:
    """The SDK's session of an episode (open, tool calls, end) is the endpoint's from start to
    end, once the server has learned its ``initialize`` answer."""
    fleet = local.async_fleet()
    try:
        for episode in range(2):
            opened = await endpoint_sessions(local, "opened")
            handed = await endpoint_sessions(local, "handed_to_package")
            async with await fleet.make("orderdesk") as env:
                order = await env.call_tool("get_order", {"order_id": 1012})
                assert isinstance(order, dict) and order["id"] == 1012
                await env.call_tool("add_order_note", {"order_id": 1012, "body": f"episode {episode}"})
            # The first episode of a fleet also lists the tools (``ToolLists``), which the
            # package answers; and it may be the session the server learns from.
            if episode:
                assert await endpoint_sessions(local, "opened") == opened + 1
                assert await endpoint_sessions(local, "handed_to_package") == handed
    finally:
        await fleet.close()


async def test_the_session_limit_counts_the_endpoints_sessions(tmp_path: Path) -> None:
    """The package refuses a session beyond its ``max_sessions`` with 503; the endpoint's own
    sessions count toward it, whichever of the two would open the next one (in process, with
    the limit lowered)."""
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    manager: Any = state.mcp_sessions
    if getattr(manager, "max_sessions", None) is None:
        pytest.skip("this mcp release has no session limit")
    from mcp.server.streamable_http_manager import _error_response  # the package's own answer

    refusal = _error_response("Too many open sessions", 503, INTERNAL_ERROR)
    manager.max_sessions = 2
    app = create_app(state)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http,
    ):
        created = await http.post(
            "/v1/env/instances", json={"env_key": "orderdesk"}, headers={"authorization": "Bearer k"}
        )
        assert created.status_code == 200, created.text
        url = f"/instances/{created.json()['instance_id']}/mcp"
        await learned(http, url)
        ours, theirs = Session(http, url, plain=True), Session(http, url, plain=False)
        await ours.initialize()
        await theirs.initialize()
        for plain in (True, False):
            refused = await http.post(url, json=_opening(plain), headers={"accept": JSON_AND_SSE})
            assert (refused.status_code, refused.content) == (503, refusal.body)
            assert refused.headers["content-type"] == "application/json"
        assert (await ours.delete()).status_code == 200  # room again
        again = Session(http, url, plain=True)
        await again.initialize()
        await again.delete()
        await theirs.delete()


def _opening(plain: bool) -> dict[str, Any]:
    info = {"name": "t", "version": "0"} if plain else {"name": "t", "version": "0", "title": "T"}
    params = {"protocolVersion": REVISION, "capabilities": {}, "clientInfo": info}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
