"""``Fleet`` and ``AsyncFleet``: one client object, one connection pool, every surface.

Each surface gets its own base URL and key from ``FleetConfig`` (PROTOCOL section 1);
the generated, typed operation clients hang off ``fleet.api``. The higher-level
facades (environments, tasks, traces) are built on these and never speak HTTP
themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from fleet_api.browser_lease.client import AsyncBrowserLeaseClient, BrowserLeaseClient
from fleet_api.env_instance.client import (
    AsyncControlPlaneClient,
    AsyncInstanceManagerClient,
    ControlPlaneClient,
    InstanceManagerClient,
)
from fleet_api.sessions_ingest.client import AsyncSessionsClient, SessionsClient
from fleet_api.traces_jobs.client import AsyncTracesJobsClient, TracesJobsClient

from ._runtime import AsyncHTTPClient, FleetConfig, HTTPClient, RetryPolicy, Surface, Timeout

__all__ = ["AsyncFleet", "AsyncFleetAPI", "Fleet", "FleetAPI"]

_POOL_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=64)


class FleetAPI:
    """The generated typed clients of every surface, sharing one pool (sync).

    Attributes:
        control_plane: Environments, instances, tasks, verifiers, jobs.
        sessions: Session ingest and read-back.
        traces: Trace jobs (platform host).
        browser: Browser leases (platform host, browser key chain).
    """

    def __init__(self, config: FleetConfig, pool: httpx.Client, **policy: Any) -> None:
        self._pool = pool
        self._policy = policy

        def http(surface: Surface) -> HTTPClient:
            return HTTPClient(config.url_for(surface), api_key=config.key_for(surface), http_client=pool, **policy)

        self.control_plane = ControlPlaneClient(http(Surface.CONTROL_PLANE))
        self.sessions = SessionsClient(http(Surface.SESSIONS))
        self.traces = TracesJobsClient(http(Surface.TRACES))
        self.browser = BrowserLeaseClient(http(Surface.BROWSER))

    def manager(self, manager_url: str, *, runner_token: str | None = None) -> InstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            manager_url: The instance's ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.
        """
        headers = {"X-Runner-Token": runner_token} if runner_token else None
        return InstanceManagerClient(
            HTTPClient(manager_url, api_key=None, default_headers=headers, http_client=self._pool, **self._policy)
        )


class AsyncFleetAPI:
    """The generated typed clients of every surface, sharing one pool (async)."""

    def __init__(self, config: FleetConfig, pool: httpx.AsyncClient, **policy: Any) -> None:
        self._pool = pool
        self._policy = policy

        def http(surface: Surface) -> AsyncHTTPClient:
            return AsyncHTTPClient(
                config.url_for(surface), api_key=config.key_for(surface), http_client=pool, **policy
            )

        self.control_plane = AsyncControlPlaneClient(http(Surface.CONTROL_PLANE))
        self.sessions = AsyncSessionsClient(http(Surface.SESSIONS))
        self.traces = AsyncTracesJobsClient(http(Surface.TRACES))
        self.browser = AsyncBrowserLeaseClient(http(Surface.BROWSER))

    def manager(self, manager_url: str, *, runner_token: str | None = None) -> AsyncInstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            manager_url: The instance's ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.
        """
        headers = {"X-Runner-Token": runner_token} if runner_token else None
        return AsyncInstanceManagerClient(
            AsyncHTTPClient(manager_url, api_key=None, default_headers=headers, http_client=self._pool, **self._policy)
        )


def _policy(timeout: Timeout | None, retry: RetryPolicy | None, deadline: float | None) -> dict[str, Any]:
    policy: dict[str, Any] = {"timeout": timeout, "retry": retry}
    if deadline is not None:
        policy["deadline"] = deadline
    return policy


class Fleet:
    """Synchronous Fleet client.

    Args:
        api_key: Fleet API key; else ``FLEET_API_KEY``.
        base_url: Orchestrator URL; else ``FLEET_BASE_URL``, else production.
        platform_url: Platform URL (traces, browser); else ``FLEET_PLATFORM_URL``.
        browser_url: Browser-lease URL; else ``BROWSER_API_BASE_URL``.
        browser_api_key: Browser key; else ``FLEET_TEAM_API_KEY``, ``BROWSER_API_TOKEN``, the API key.
        timeout: Per-attempt timeouts (default 60 s, connect 10 s).
        retry: Retry policy for safe calls.
        deadline: Overall seconds per call, retries included (default 180 s).
        http_client: An ``httpx.Client`` to use (custom transport, proxies); owned by the caller.
        environ: Environment to resolve settings from (default ``os.environ``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        platform_url: str | None = None,
        browser_url: str | None = None,
        browser_api_key: str | None = None,
        timeout: Timeout | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        http_client: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = FleetConfig.resolve(
            api_key=api_key,
            base_url=base_url,
            platform_url=platform_url,
            browser_url=browser_url,
            browser_api_key=browser_api_key,
            environ=environ,
        )
        self.config.require_key(Surface.CONTROL_PLANE)
        self._owns_pool = http_client is None
        self._pool = http_client or httpx.Client(limits=_POOL_LIMITS)
        self.api = FleetAPI(self.config, self._pool, **_policy(timeout, retry, deadline))

    def __repr__(self) -> str:
        return f"Fleet(base_url={self.config.base_url!r}, platform_url={self.config.platform_url!r})"

    def close(self) -> None:
        """Close the connection pool (if this client created it)."""
        if self._owns_pool:
            self._pool.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncFleet:
    """Asynchronous Fleet client; the same arguments as ``Fleet``.

    Args:
        api_key: Fleet API key; else ``FLEET_API_KEY``.
        base_url: Orchestrator URL; else ``FLEET_BASE_URL``, else production.
        platform_url: Platform URL (traces, browser); else ``FLEET_PLATFORM_URL``.
        browser_url: Browser-lease URL; else ``BROWSER_API_BASE_URL``.
        browser_api_key: Browser key; else ``FLEET_TEAM_API_KEY``, ``BROWSER_API_TOKEN``, the API key.
        timeout: Per-attempt timeouts (default 60 s, connect 10 s).
        retry: Retry policy for safe calls.
        deadline: Overall seconds per call, retries included (default 180 s).
        http_client: An ``httpx.AsyncClient`` to use; owned by the caller.
        environ: Environment to resolve settings from (default ``os.environ``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        platform_url: str | None = None,
        browser_url: str | None = None,
        browser_api_key: str | None = None,
        timeout: Timeout | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = FleetConfig.resolve(
            api_key=api_key,
            base_url=base_url,
            platform_url=platform_url,
            browser_url=browser_url,
            browser_api_key=browser_api_key,
            environ=environ,
        )
        self.config.require_key(Surface.CONTROL_PLANE)
        self._owns_pool = http_client is None
        self._pool = http_client or httpx.AsyncClient(limits=_POOL_LIMITS)
        self.api = AsyncFleetAPI(self.config, self._pool, **_policy(timeout, retry, deadline))

    def __repr__(self) -> str:
        return f"AsyncFleet(base_url={self.config.base_url!r}, platform_url={self.config.platform_url!r})"

    async def close(self) -> None:
        """Close the connection pool (if this client created it)."""
        if self._owns_pool:
            await self._pool.aclose()

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
