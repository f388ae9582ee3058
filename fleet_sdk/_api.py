"""``fleet.api``: the generated typed clients of every surface, on one connection pool.

``FleetAPI`` (sync) and ``AsyncFleetAPI`` give each surface its base URL and key from
``FleetConfig``; the facades (environments, tasks, traces) reach the platform only through
them. ``AsyncAPIOwner`` is what those facades need of a client: its ``api``. They are typed
with it rather than with ``AsyncFleet``, so ``_client`` (which builds them) is imported by none.
"""

from __future__ import annotations

from typing import Protocol

import httpx
from fleet_generated.browser_lease.client import AsyncBrowserLeaseClient, BrowserLeaseClient
from fleet_generated.env_instance.client import (
    AsyncControlPlaneClient,
    AsyncInstanceManagerClient,
    ControlPlaneClient,
    InstanceManagerClient,
)
from fleet_generated.evaluation_reports.client import AsyncEvaluationReportsClient, EvaluationReportsClient
from fleet_generated.sessions_ingest.client import AsyncSessionsClient, SessionsClient
from fleet_generated.traces_jobs.client import AsyncTracesJobsClient, TracesJobsClient

from ._runtime import AsyncHTTPClient, CallPolicy, FleetConfig, HTTPClient, Surface

__all__ = ["AsyncAPIOwner", "AsyncFleetAPI", "FleetAPI", "SyncAPIOwner"]


class FleetAPI:
    """The generated typed clients of every surface, sharing one pool (sync).

    Attributes:
        control_plane: Environments, instances, tasks, verifiers, jobs.
        sessions: Session ingest and read-back.
        traces: Trace jobs (platform host).
        browser: Browser leases (platform host, browser key chain).
        evaluation_reports: Evaluation report import/export (platform host).
    """

    def __init__(self, config: FleetConfig, pool: httpx.Client, policy: CallPolicy) -> None:
        self._pool = pool
        self._policy = policy

        def http(surface: Surface) -> HTTPClient:
            return HTTPClient(
                config.url_for(surface), api_key=config.key_for(surface), policy=policy, http_client=pool
            )

        self.control_plane = ControlPlaneClient(http(Surface.CONTROL_PLANE))
        self.sessions = SessionsClient(http(Surface.SESSIONS))
        self.traces = TracesJobsClient(http(Surface.TRACES))
        self.browser = BrowserLeaseClient(http(Surface.BROWSER))
        self.evaluation_reports = EvaluationReportsClient(http(Surface.TRACES))

    @property
    def http_client(self) -> httpx.Client:
        """The connection pool every surface shares."""
        return self._pool

    @property
    def call_policy(self) -> CallPolicy:
        """Timeouts, retries and the per-call deadline of every surface's calls."""
        return self._policy

    def manager(self, manager_url: str, *, runner_token: str | None = None) -> InstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            manager_url: The instance's ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.
        """
        headers = {"X-Runner-Token": runner_token} if runner_token else None
        return InstanceManagerClient(
            HTTPClient(
                manager_url,
                api_key=None,
                policy=self._policy,
                default_headers=headers,
                http_client=self._pool,
            )
        )


class AsyncFleetAPI:
    """The generated typed clients of every surface, sharing one pool (async)."""

    def __init__(self, config: FleetConfig, pool: httpx.AsyncClient, policy: CallPolicy) -> None:
        self._pool = pool
        self._policy = policy

        def http(surface: Surface) -> AsyncHTTPClient:
            return AsyncHTTPClient(
                config.url_for(surface), api_key=config.key_for(surface), policy=policy, http_client=pool
            )

        self.control_plane = AsyncControlPlaneClient(http(Surface.CONTROL_PLANE))
        self.sessions = AsyncSessionsClient(http(Surface.SESSIONS))
        self.traces = AsyncTracesJobsClient(http(Surface.TRACES))
        self.browser = AsyncBrowserLeaseClient(http(Surface.BROWSER))
        self.evaluation_reports = AsyncEvaluationReportsClient(http(Surface.TRACES))

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The connection pool every surface shares; an env's MCP client rides it too."""
        return self._pool

    @property
    def call_policy(self) -> CallPolicy:
        """Timeouts, retries and the per-call deadline of every surface's calls."""
        return self._policy

    def manager(self, manager_url: str, *, runner_token: str | None = None) -> AsyncInstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            manager_url: The instance's ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.
        """
        headers = {"X-Runner-Token": runner_token} if runner_token else None
        return AsyncInstanceManagerClient(
            AsyncHTTPClient(
                manager_url,
                api_key=None,
                policy=self._policy,
                default_headers=headers,
                http_client=self._pool,
            )
        )


class AsyncAPIOwner(Protocol):
    """What the async facades need of a client (``AsyncFleet`` is one)."""

    @property
    def api(self) -> AsyncFleetAPI:
        """The typed clients."""
        ...


class SyncAPIOwner(Protocol):
    """What the sync facades need of a client (``Fleet`` is one): the async client they drive."""

    @property
    def async_fleet(self) -> AsyncAPIOwner:
        """The async client the sync facades run on."""
        ...
