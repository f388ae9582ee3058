"""``with_options`` shares the connection pools; an async pool refuses a second event loop."""

from __future__ import annotations

import asyncio

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
    assert quick._pool is fleet._pool
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
