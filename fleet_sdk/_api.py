"""``fleet.api``: the generated typed clients of every surface, on one connection pool.

``FleetAPI`` (sync) and ``AsyncFleetAPI`` give each surface its base URL and key from
``FleetConfig``; the facades (environments, tasks, traces) reach the platform only through
them. ``AsyncAPIOwner`` is what those facades need of a client: its ``api``. They are typed
with it rather than with ``AsyncFleet``, so ``_client`` (which builds them) is imported by none.

Each surface's client (and its generated models) is imported and built on first use: a trainer
that never reads a browser lease never loads that surface's models (``benchmarks/bench_startup.py``
measures what importing the SDK costs).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ._exceptions import FleetError
from ._runtime import Surface

if TYPE_CHECKING:
    import httpx
    from fleet_generated.browser_lease.client import AsyncBrowserLeaseClient, BrowserLeaseClient
    from fleet_generated.env_instance.client import (
        AsyncControlPlaneClient,
        AsyncInstanceManagerClient,
        ControlPlaneClient,
        InstanceManagerClient,
    )
    from fleet_generated.env_instance.models import InstanceResponse
    from fleet_generated.evaluation_reports.client import (
        AsyncEvaluationReportsClient,
        EvaluationReportsClient,
    )
    from fleet_generated.sessions_ingest.client import AsyncSessionsClient, SessionsClient
    from fleet_generated.traces_jobs.client import AsyncTracesJobsClient, TracesJobsClient

    from ._runtime import AsyncHTTPClient, CallPolicy, FleetConfig, HTTPClient

__all__ = ["AsyncAPIOwner", "AsyncFleetAPI", "FleetAPI", "SyncAPIOwner"]

_Pool = TypeVar("_Pool")  # httpx.Client / httpx.AsyncClient
_HTTP = TypeVar("_HTTP")  # HTTPClient / AsyncHTTPClient


def _manager_url(instance: InstanceResponse | str) -> str:
    """The instance manager API's URL of an instance (``urls.manager.api``), or the URL itself.

    Args:
        instance: The instance as the control plane described it, or its manager URL.

    Raises:
        FleetError: The instance has no URLs yet (the schema lets a not-yet-provisioned
            instance come back without them).
    """
    if isinstance(instance, str):
        return instance
    if instance.urls is None:
        raise FleetError(
            f"instance {instance.instance_id!r} has no URLs yet (status {instance.status!r}); "
            "wait until it is running"
        )
    return instance.urls.manager.api


class _BaseFleetAPI(Generic[_Pool, _HTTP]):
    """What ``FleetAPI`` and ``AsyncFleetAPI`` share, none of it I/O (as httpx's ``BaseClient``).

    The settings, pool and call policy the typed clients are built on, and which base URL, key
    and headers each gets; a subclass names only its HTTP client (``_runtime``) and the
    generated classes (sync or async) of each surface.

    Args:
        config: Base URL and key of every surface.
        pool: The connection pool every surface shares.
        policy: Timeouts, retries and the per-call deadline of every call.
    """

    def __init__(self, config: FleetConfig, pool: _Pool, policy: CallPolicy) -> None:
        self._config = config
        self._pool = pool
        self._policy = policy

    def _runtime(
        self, base_url: str, *, api_key: str | None, default_headers: dict[str, str] | None
    ) -> _HTTP:
        """The HTTP client (sync or async) of one surface, on the shared pool and policy."""
        raise NotImplementedError

    def _http(self, surface: Surface) -> _HTTP:
        config = self._config
        return self._runtime(config.url_for(surface), api_key=config.key_for(surface), default_headers=None)

    def _manager_http(self, instance: InstanceResponse | str, runner_token: str | None) -> _HTTP:
        """The HTTP client of one instance's manager API: no API key, the runner token if any."""
        headers = {"X-Runner-Token": runner_token} if runner_token else None
        return self._runtime(_manager_url(instance), api_key=None, default_headers=headers)

    @property
    def call_policy(self) -> CallPolicy:
        """Timeouts, retries and the per-call deadline of every surface's calls."""
        return self._policy


class FleetAPI(_BaseFleetAPI["httpx.Client", "HTTPClient"]):
    """The generated typed clients of every surface, sharing one pool (sync).

    Each surface's client is built on first use.

    Attributes:
        control_plane: Environments, instances, tasks, verifiers, jobs.
        sessions: Session ingest and read-back.
        traces: Trace jobs (platform host).
        browser: Browser leases (platform host, browser key chain).
        evaluation_reports: Evaluation report import/export (platform host).
    """

    def __init__(self, config: FleetConfig, pool: httpx.Client, policy: CallPolicy) -> None:
        super().__init__(config, pool, policy)

    def _runtime(
        self, base_url: str, *, api_key: str | None, default_headers: dict[str, str] | None
    ) -> HTTPClient:
        from ._runtime import HTTPClient

        return HTTPClient(
            base_url,
            api_key=api_key,
            policy=self._policy,
            default_headers=default_headers,
            http_client=self._pool,
        )

    @cached_property
    def control_plane(self) -> ControlPlaneClient:
        """Environments, instances, tasks, verifiers, jobs."""
        from fleet_generated.env_instance.client import ControlPlaneClient

        return ControlPlaneClient(self._http(Surface.CONTROL_PLANE))

    @cached_property
    def sessions(self) -> SessionsClient:
        """Session ingest and read-back."""
        from fleet_generated.sessions_ingest.client import SessionsClient

        return SessionsClient(self._http(Surface.SESSIONS))

    @cached_property
    def traces(self) -> TracesJobsClient:
        """Trace jobs (platform host)."""
        from fleet_generated.traces_jobs.client import TracesJobsClient

        return TracesJobsClient(self._http(Surface.TRACES))

    @cached_property
    def browser(self) -> BrowserLeaseClient:
        """Browser leases (platform host, browser key chain)."""
        from fleet_generated.browser_lease.client import BrowserLeaseClient

        return BrowserLeaseClient(self._http(Surface.BROWSER))

    @cached_property
    def evaluation_reports(self) -> EvaluationReportsClient:
        """Evaluation report import/export (platform host)."""
        from fleet_generated.evaluation_reports.client import EvaluationReportsClient

        return EvaluationReportsClient(self._http(Surface.TRACES))

    @property
    def http_client(self) -> httpx.Client:
        """The connection pool every surface shares."""
        return self._pool

    def manager(
        self, instance: InstanceResponse | str, *, runner_token: str | None = None
    ) -> InstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            instance: The instance (``create_instance``'s answer) or its ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.

        Raises:
            FleetError: The instance has no URLs yet.
        """
        from fleet_generated.env_instance.client import InstanceManagerClient

        return InstanceManagerClient(self._manager_http(instance, runner_token))


class AsyncFleetAPI(_BaseFleetAPI["httpx.AsyncClient", "AsyncHTTPClient"]):
    """The generated typed clients of every surface, sharing one pool (async).

    Each surface's client is built on first use.

    Attributes:
        control_plane: Environments, instances, tasks, verifiers, jobs.
        sessions: Session ingest and read-back.
        traces: Trace jobs (platform host).
        browser: Browser leases (platform host, browser key chain).
        evaluation_reports: Evaluation report import/export (platform host).
    """

    def __init__(self, config: FleetConfig, pool: httpx.AsyncClient, policy: CallPolicy) -> None:
        super().__init__(config, pool, policy)

    def _runtime(
        self, base_url: str, *, api_key: str | None, default_headers: dict[str, str] | None
    ) -> AsyncHTTPClient:
        from ._runtime import AsyncHTTPClient

        return AsyncHTTPClient(
            base_url,
            api_key=api_key,
            policy=self._policy,
            default_headers=default_headers,
            http_client=self._pool,
        )

    @cached_property
    def control_plane(self) -> AsyncControlPlaneClient:
        """Environments, instances, tasks, verifiers, jobs."""
        from fleet_generated.env_instance.client import AsyncControlPlaneClient

        return AsyncControlPlaneClient(self._http(Surface.CONTROL_PLANE))

    @cached_property
    def sessions(self) -> AsyncSessionsClient:
        """Session ingest and read-back."""
        from fleet_generated.sessions_ingest.client import AsyncSessionsClient

        return AsyncSessionsClient(self._http(Surface.SESSIONS))

    @cached_property
    def traces(self) -> AsyncTracesJobsClient:
        """Trace jobs (platform host)."""
        from fleet_generated.traces_jobs.client import AsyncTracesJobsClient

        return AsyncTracesJobsClient(self._http(Surface.TRACES))

    @cached_property
    def browser(self) -> AsyncBrowserLeaseClient:
        """Browser leases (platform host, browser key chain)."""
        from fleet_generated.browser_lease.client import AsyncBrowserLeaseClient

        return AsyncBrowserLeaseClient(self._http(Surface.BROWSER))

    @cached_property
    def evaluation_reports(self) -> AsyncEvaluationReportsClient:
        """Evaluation report import/export (platform host)."""
        from fleet_generated.evaluation_reports.client import AsyncEvaluationReportsClient

        return AsyncEvaluationReportsClient(self._http(Surface.TRACES))

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The connection pool every surface shares; an env's MCP client rides it too."""
        return self._pool

    def manager(
        self, instance: InstanceResponse | str, *, runner_token: str | None = None
    ) -> AsyncInstanceManagerClient:
        """The instance manager API of one instance.

        Args:
            instance: The instance (``create_instance``'s answer) or its ``urls.manager.api``.
            runner_token: Optional ``X-Runner-Token``; the manager takes no API key.

        Raises:
            FleetError: The instance has no URLs yet.
        """
        from fleet_generated.env_instance.client import AsyncInstanceManagerClient

        return AsyncInstanceManagerClient(self._manager_http(instance, runner_token))


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
