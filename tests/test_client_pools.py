"""A client's connection pools: ``with_options`` shares them, an async pool refuses a second event
loop, and a sync ``Fleet`` sends every call through the clients it was given."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest

from fleet_sdk import (
    InternalServerError,
)
from fleet_sdk._runtime._bridge import run_sync


def test_with_options_shares_settings_and_pool_and_overrides_policy() -> None:
    from fleet_sdk import AsyncFleet, Fleet, RetryPolicy

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"detail": "busy"})

    pool = httpx.Client(transport=httpx.MockTransport(handler))
    fleet = Fleet("sk-test-123456", base_url="http://orchestrator.test", http_client=pool)
    quick = fleet.with_options(retry=RetryPolicy(max_retries=0), deadline=5.0)
    assert isinstance(quick, Fleet)
    assert quick.config == fleet.config
    assert quick.http_client is fleet.http_client
    with pytest.raises(InternalServerError):
        quick.api.control_plane.list_envs()
    assert len(seen) == 1  # no retries on the copy
    assert repr(quick) == repr(fleet)
    assert isinstance(AsyncFleet("sk-test-123456").with_options(deadline=1.0), AsyncFleet)


def test_an_async_pool_used_from_two_running_loops_fails_clearly() -> None:
    """Regression: loop-bound objects used from a second loop failed with obscure RuntimeErrors."""
    from fleet_sdk import AsyncFleet, ConfigurationError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[])

    fleet = AsyncFleet(
        "sk-test-123456", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(fleet.list_envs()) == []
        # The bridge's loop is another loop: the same pool must not be used there.
        with pytest.raises(ConfigurationError, match=r"another \(still open\) event loop"):
            run_sync(fleet.list_envs())
    finally:
        first.close()
    # Once the first loop is closed the pool may move on (asyncio.run() twice, for example).
    assert run_sync(fleet.list_envs()) == []


class FakePlatform:
    """The wire shapes a sync ``Fleet`` meets in ``list_envs``, ``make``, a tool call, a trace job
    and closing an env: the control plane, one instance's two MCP endpoints and the traces host.
    Every request is recorded as ``(method, host, path, JSON-RPC method or None)``."""

    HOST = "fleet.invalid"  # a reserved name: a request that bypassed the transport cannot resolve

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, str | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        rpc = body.get("method") if isinstance(body, dict) else None
        self.requests.append((request.method, request.url.host, request.url.path, rpc))
        path = request.url.path
        if path == "/v1/env/":
            environment = {
                "env_key": "orderdesk",
                "name": "Order desk",
                "description": "Orders",
                "default_version": "v1.0.0",
                "versions": {"v1.0.0": "Order desk v1.0.0"},
            }
            return httpx.Response(200, json=[environment])
        if path == "/v1/env/instances" and request.method == "POST":
            return httpx.Response(200, json=self._instance("running"))
        if path == "/v1/env/instances/inst-1" and request.method == "DELETE":
            return httpx.Response(200, json=self._instance("terminated"))
        if path == "/v1/traces/jobs":
            return httpx.Response(200, json={"job_id": "job-1", "name": body["name"], "status": "active"})
        if path.endswith("/mcp"):
            return self._mcp(request, body)
        return httpx.Response(404, json={"detail": f"no route {request.method} {path}"})

    def _instance(self, status: str) -> dict[str, Any]:
        root = f"http://{self.HOST}/instances/inst-1/"
        manager = root + "api/v1/env"
        return {
            "instance_id": "inst-1",
            "env_key": "orderdesk",
            "version": "v1.0.0",
            "status": status,
            "subdomain": "inst-1",
            "created_at": "2025-01-01T00:00:00Z",
            "updated_at": "2025-01-01T00:00:00Z",
            "team_id": "team",
            "region": "local",
            "urls": {
                "root": root,
                "app": [root],
                "manager": {
                    "api": manager,
                    **{
                        name: f"{manager}/{path}"
                        for name, path in [
                            ("docs", "docs"),
                            ("reset", "reset"),
                            ("diff", "diff/structured"),
                            ("snapshot", "snapshot"),
                            ("execute_verifier_function", "execute_verifier_function"),
                            (
                                "execute_verifier_function_with_upload",
                                "execute_verifier_function_with_upload",
                            ),
                        ]
                    },
                },
            },
        }

    def _mcp(self, request: httpx.Request, body: Any) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200)
        method = body["method"]
        if method == "notifications/initialized":
            return httpx.Response(202)
        results: dict[str, Any] = {
            "initialize": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "fake"},
            },
            "tools/list": {"tools": [{"name": "count_orders", "inputSchema": {"type": "object"}}]},
            "tools/call": {"content": [{"type": "text", "text": "6"}], "isError": False},
        }
        return httpx.Response(
            200,
            json={"jsonrpc": "2.0", "id": body["id"], "result": results[method]},
            headers={"mcp-session-id": "s-1"} if method == "initialize" else None,
        )


def _sync_fleet_session(fleet: Any) -> None:
    assert [env.env_key for env in fleet.list_envs()] == ["orderdesk"]
    with fleet.make("orderdesk") as env:
        assert env.call_tool("count_orders", {}) == 6  # the text block, read as JSON
    assert fleet.traces.create_job("run") == "job-1"


def _expected_traffic(platform: FakePlatform) -> None:
    assert {host for _, host, _, _ in platform.requests} == {FakePlatform.HOST}
    paths = [(method, path, rpc) for method, _, path, rpc in platform.requests]
    assert paths[:2] == [("GET", "/v1/env/", None), ("POST", "/v1/env/instances", None)]
    rpcs = [rpc for _, _, rpc in paths if rpc]
    assert rpcs.count("initialize") == 2  # one session per MCP endpoint
    assert rpcs.count("tools/list") == 2 and rpcs.count("tools/call") == 1
    assert ("DELETE", "/v1/env/instances/inst-1", None) in paths
    assert paths[-1] == ("POST", "/v1/traces/jobs", None)


def test_a_sync_fleet_sends_every_call_through_its_http_client() -> None:
    """Regression: ``Fleet(http_client=...)`` reached only ``fleet.api``; ``list_envs``, ``make``,
    tool calls and traces went through a fresh ``httpx.AsyncClient`` to the real host."""
    from fleet_sdk import Fleet

    platform = FakePlatform()
    http = httpx.Client(transport=httpx.MockTransport(platform))
    base = f"http://{FakePlatform.HOST}"
    with Fleet("sk-test-123456", base_url=base, platform_url=base, http_client=http, environ={}) as fleet:
        _sync_fleet_session(fleet)
    _expected_traffic(platform)
    assert not http.is_closed  # the caller's client stays the caller's


def test_a_sync_fleet_sends_async_traffic_through_its_async_http_client() -> None:
    """``async_http_client`` carries what runs on the SDK's loop; ``fleet.api`` stays on ``http_client``."""
    from fleet_sdk import Fleet

    sync_side, async_side = FakePlatform(), FakePlatform()
    base = f"http://{FakePlatform.HOST}"
    with Fleet(
        "sk-test-123456",
        base_url=base,
        platform_url=base,
        http_client=httpx.Client(transport=httpx.MockTransport(sync_side)),
        async_http_client=httpx.AsyncClient(transport=httpx.MockTransport(async_side)),
        environ={},
    ) as fleet:
        _sync_fleet_session(fleet)
        assert not sync_side.requests
        fleet.api.control_plane.list_envs()
    _expected_traffic(async_side)
    assert [path for _, _, path, _ in sync_side.requests] == ["/v1/env/"]


def test_the_threaded_async_client_decodes_the_body_once() -> None:
    """A gzip body the caller's sync client received reaches the async client decoded, once."""
    from fleet_sdk._runtime._threaded import async_client_over

    payload = json.dumps({"ok": True}).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["x-from-sync-client"] == "yes"  # the caller's default headers
        return httpx.Response(200, content=gzip.compress(payload), headers={"content-encoding": "gzip"})

    http = httpx.Client(transport=httpx.MockTransport(handler), headers={"x-from-sync-client": "yes"})
    client = async_client_over(http)
    response = run_sync(client.post("http://fleet.invalid/x", content=b"{}"))
    assert response.json() == {"ok": True}
    run_sync(client.aclose())
    assert not http.is_closed


def test_the_manager_api_takes_an_instance_and_refuses_one_without_urls() -> None:
    """``fleet.api.manager(instance.urls.manager.api)`` fails strict typing (``urls`` is optional
    while an instance is pending): the instance itself is taken, and one without URLs is named."""
    from fleet_sdk import Fleet, FleetError
    from fleet_sdk.types import env_instance

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"success": True, "message": "reset"})

    instance = {
        "instance_id": "i-1",
        "env_key": "orderdesk",
        "version": "v1",
        "status": "running",
        "subdomain": "i-1",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "team_id": "t",
        "region": "local",
        "urls": {
            "root": "http://i-1.test/",
            "app": [],
            "manager": {
                name: f"http://i-1.test/api/v1/env{path}"
                for name, path in (
                    ("api", ""),
                    ("docs", "/docs"),
                    ("reset", "/reset"),
                    ("diff", "/diff/structured"),
                    ("snapshot", "/snapshot"),
                    ("execute_verifier_function", "/execute_verifier_function"),
                    ("execute_verifier_function_with_upload", "/execute_verifier_function_with_upload"),
                )
            },
        },
    }
    running = env_instance.InstanceResponse.model_validate(instance)
    pending = env_instance.InstanceResponse.model_validate({**instance, "status": "pending", "urls": None})
    with Fleet("sk-test-123456", http_client=httpx.Client(transport=httpx.MockTransport(handler))) as fleet:
        assert fleet.api.manager(running).reset_instance().success
        assert seen == ["http://i-1.test/api/v1/env/reset"]
        with pytest.raises(FleetError, match="instance 'i-1' has no URLs yet"):
            fleet.api.manager(pending)
