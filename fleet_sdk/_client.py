"""``Fleet`` and ``AsyncFleet``: one client object, one connection pool, every surface.

Each surface gets its own base URL and key from ``FleetConfig`` (docs/wire.md#hosts);
the generated, typed operation clients hang off ``fleet.api``. The higher-level
facades (environments, tasks, traces) are built on these and never speak HTTP
themselves.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar

import anyio

from ._api import AsyncFleetAPI, FleetAPI
from ._exceptions import ClientClosedError, FleetError
from ._provisioning import (
    PROVISIONING_RETRY,
    create_instance,
    delete_instance,
    is_transient_provisioning_error,
)
from ._refs import parse_ref
from ._runtime import (
    NOT_GIVEN,
    CallPolicy,
    Deadline,
    FleetConfig,
    NotGiven,
    RetryPolicy,
    Surface,
    Timeout,
    within,
)
from ._runtime._bridge import run_sync
from ._runtime._cleanup import CLEANUP_DEADLINE, run_cleanup
from ._tasks_resource import AsyncTasks, Tasks
from ._twin import sync_method
from .env import AsyncEnv, Env
from .traces import AsyncTraces, ScreenshotSink, Traces

if TYPE_CHECKING:
    import httpx
    from fleet_generated.env_instance import models

    from .mcp import ToolLists

__all__ = [
    "AsyncFleet",
    "AsyncFleetAPI",
    "Fleet",
    "FleetAPI",
    "async_fleet_of",
    "is_transient_provisioning_error",
]

log = logging.getLogger("fleet_sdk.fleet")

InstanceStatus = Literal["pending", "running", "stopped", "terminated", "error"]


_Pool = TypeVar("_Pool", "httpx.Client", "httpx.AsyncClient")
_API = TypeVar("_API", FleetAPI, AsyncFleetAPI)


class _FleetBase(Generic[_Pool, _API]):
    """What ``Fleet`` and ``AsyncFleet`` share, none of it I/O (as httpx's ``BaseClient``): the
    settings (arguments, environment, production), the call policy, the pool and ``api``.

    Args:
        api_key, base_url, platform_url, browser_url, browser_api_key, environ: The settings
            (``FleetConfig.resolve``); the control plane's key is required.
        timeout, retry, deadline: The call policy (``NOT_GIVEN``: the default; None: off).
        http_client: The caller's pool, or None for one made by ``new_pool`` and owned here.
        new_pool: Makes the client's own pool.
        api: The typed clients' class (``FleetAPI`` / ``AsyncFleetAPI``).
    """

    traces: Traces | AsyncTraces
    _closed: bool = False

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str | None,
        platform_url: str | None,
        browser_url: str | None,
        browser_api_key: str | None,
        timeout: Timeout | NotGiven | None,
        retry: RetryPolicy | NotGiven | None,
        deadline: float | NotGiven | None,
        environ: Mapping[str, str] | None,
        http_client: _Pool | None,
        new_pool: Callable[[], _Pool],
        api: Callable[[FleetConfig, _Pool, CallPolicy], _API],
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
        self._policy = CallPolicy().updated(timeout=timeout, retry=retry, deadline=deadline)
        self._owns_pool = http_client is None
        self._pool: _Pool = new_pool() if http_client is None else http_client
        self._api: _API = api(self.config, self._pool, self._policy)

    @property
    def api(self) -> _API:
        """The generated typed clients of every surface, on this client's pool.

        Raises:
            ClientClosedError: The client is closed.
        """
        self._require_open()
        return self._api

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called: every further use raises ``ClientClosedError``."""
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"this {type(self).__name__} is closed; make a new client")

    @property
    def call_policy(self) -> CallPolicy:
        """Timeouts, retries and the per-call deadline every call of this client carries."""
        return self._policy

    @property
    def screenshot_store(self) -> ScreenshotSink | None:
        """The store ``traces`` uploads screenshots to, when one was set or built (None: the default,
        not built yet)."""
        return self.traces.configured_store

    def _settings(self, policy: CallPolicy | None = None) -> dict[str, Any]:
        """Constructor arguments that rebuild this client's configuration (with ``policy``)."""
        policy = policy or self._policy
        # A policy field of None is the default, which the constructors spell NOT_GIVEN (None: off).
        return {
            "api_key": self.config.api_key,
            "base_url": self.config.base_url,
            "platform_url": self.config.platform_url,
            "browser_url": self.config.browser_url,
            "browser_api_key": self.config.browser_api_key,
            "screenshot_store": self.screenshot_store,
            "timeout": NOT_GIVEN if policy.timeout is None else policy.timeout,
            "retry": NOT_GIVEN if policy.retry is None else policy.retry,
            "deadline": policy.deadline,
        }

    def _shared_clients(self) -> dict[str, Any]:
        """The ``http_client`` arguments that make a copy share this client's pools."""
        raise NotImplementedError

    def with_options(
        self,
        *,
        timeout: Timeout | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven | None = NOT_GIVEN,
        deadline: float | NotGiven | None = NOT_GIVEN,
    ) -> Self:
        """A client with another call policy, sharing this one's settings and connection pools.

        ``fleet.with_options(retry=None).api.control_plane.get_job(job_id)`` (no retries)

        Args:
            timeout: Per-attempt timeouts (not given: this client's; None: none, only the
                deadline bounds a call).
            retry: Retry policy (not given: this client's; None: no retries).
            deadline: Overall seconds per call (not given: this client's; None: none).

        Raises:
            ClientClosedError: This client is closed.
        """
        self._require_open()
        policy = self._policy.updated(timeout=timeout, retry=retry, deadline=deadline)
        cls: Any = type(self)  # Fleet or AsyncFleet: the same keyword arguments
        copy: Self = cls(**self._settings(policy), **self._shared_clients())
        return copy

    def __repr__(self) -> str:
        config = self.config
        return f"{type(self).__name__}(base_url={config.base_url!r}, platform_url={config.platform_url!r})"


class AsyncFleet(_FleetBase["httpx.AsyncClient", AsyncFleetAPI]):
    """Asynchronous Fleet client; the same arguments as ``Fleet``.

    Args:
        api_key: Fleet API key; else ``FLEET_API_KEY``.
        base_url: Orchestrator URL; else ``FLEET_BASE_URL``, else production.
        platform_url: Platform URL (traces, browser); else ``FLEET_PLATFORM_URL``.
        browser_url: Browser-lease URL; else ``BROWSER_API_BASE_URL``.
        browser_api_key: Browser key; else ``FLEET_TEAM_API_KEY``, ``BROWSER_API_TOKEN``, the API key.
        timeout: Per-attempt timeouts (default 60 s, connect 10 s; None: none).
        retry: Retry policy for safe calls (default ``RetryPolicy()``; None: no retries).
        deadline: Overall seconds per call, retries included (default 180 s; None: none).
        http_client: An ``httpx.AsyncClient`` every call goes through (custom transport,
            proxies, limits), MCP tool calls included; owned by the caller. Default: the SDK's
            own pool, closed by ``close``.
        environ: Environment to resolve settings from (default ``os.environ``).
        screenshot_store: Where ``traces`` uploads screenshots (default: for the production
            orchestrator, the production bucket with the AWS credential chain; for any other
            ``base_url``, the bucket that server names at ``GET /v1/discovery``, never production).
    """

    traces: AsyncTraces

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        platform_url: str | None = None,
        browser_url: str | None = None,
        browser_api_key: str | None = None,
        timeout: Timeout | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven | None = NOT_GIVEN,
        deadline: float | NotGiven | None = NOT_GIVEN,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
        screenshot_store: ScreenshotSink | None = None,
    ) -> None:
        from ._runtime._pool import async_pool_client  # httpx loads with the first client, not the import

        super().__init__(
            api_key,
            base_url=base_url,
            platform_url=platform_url,
            browser_url=browser_url,
            browser_api_key=browser_api_key,
            timeout=timeout,
            retry=retry,
            deadline=deadline,
            environ=environ,
            http_client=http_client,
            new_pool=async_pool_client,
            api=AsyncFleetAPI,
        )
        self._tool_lists: ToolLists | None = None  # made by the first ``make`` (fleet_sdk.mcp loads late)
        self.traces = AsyncTraces(self, screenshot_store)
        """Trace jobs and session uploads with screenshots (``fleet_sdk.traces``)."""
        self.tasks = AsyncTasks(self)
        """Task configs as ``fleet_sdk.Task``: ``list``, ``get``, ``load``."""

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The connection pool every call goes through (``with_options`` copies share it)."""
        return self._pool

    def _shared_clients(self) -> dict[str, Any]:
        return {"http_client": self._pool}

    async def list_envs(self) -> list[models.Environment]:
        """Every environment the key can use."""
        return await self.api.control_plane.list_envs()

    async def make(
        self,
        env: str,
        *,
        data_key: str | None = None,
        data_version: str | None = None,
        env_variables: Mapping[str, Any] | None = None,
        image_type: str | None = None,
        ttl_seconds: int | None = None,
        region: str | None = None,
        run_id: str | None = None,
        heartbeat_interval: int | None = None,
        keep_alive: bool = True,
        max_wait_seconds: int | None = None,
        provision_deadline: float = 600.0,
        retry: RetryPolicy | None = None,
    ) -> AsyncEnv:
        """Create an environment instance and wait until it runs.

        Transient provisioning failures are retried with backoff inside ``provision_deadline``,
        each retry logged, all with one idempotency key (so a retry never makes a second
        instance): connection errors, timeouts, 408, 429, every 5xx, any error flagged
        ``"retryable": true`` at the top of the body, in a ``detail`` object or in a driver's
        JSON error quoted inside the ``detail`` string, and a few known transient messages
        (``fleet_sdk._runtime.TRANSIENT_MESSAGES``). Permanent ones raise at once: 401, 403,
        ``env_not_found``, ``version_not_found``, other 4xx, and ``"retryable": false``.

        Args:
            env: ``"key"`` or ``"key:version"`` (``"fira:1.2.3"`` -> ``fira`` at ``v1.2.3``).
            data_key: ``"key"`` or ``"key:version"`` of the data snapshot.
            data_version: The data version, when not given inside ``data_key``.
            env_variables: Variables for the instance (``CURRENT_DATE``, ``LOGGED_IN_USER``...).
            image_type: Image flavour (None lets the platform choose the standard image).
            ttl_seconds: Lifetime before the platform reaps the instance.
            region: Region to run in.
            run_id: Groups instances of one training run.
            heartbeat_interval: Seconds between expected heartbeats: the platform reclaims the
                instance once they stop, e.g. when the process running the episode dies.
            keep_alive: With ``heartbeat_interval``, send the heartbeats in the background
                until the env is closed (``AsyncEnv.keep_alive``); False leaves them to you.
            max_wait_seconds: How long to wait for the instance to be running.
            provision_deadline: Overall seconds for creation, retries and waiting.
            retry: Backoff policy between provisioning attempts (default: ``PROVISIONING_RETRY``).
        """
        from fleet_generated.env_instance import models  # loaded with the control plane's client

        env_ref = parse_ref(env, what="env")
        data_ref = parse_ref(data_key, version=data_version, what="data") if data_key else None
        fields: dict[str, Any] = {
            "env_key": env_ref.key,
            "env_version": env_ref.version,
            "data_key": data_ref.key if data_ref else None,
            "data_version": data_ref.version if data_ref else None,
            "env_variables": dict(env_variables) if env_variables is not None else None,
            "image_type": image_type,
            "ttl_seconds": ttl_seconds,
            "region": region,
            "run_id": run_id,
            "heartbeat_interval": heartbeat_interval,
            "max_wait_seconds": max_wait_seconds,
            "created_from": "fleet_sdk",
        }
        request = models.InstanceRequest(**{k: v for k, v in fields.items() if v is not None})
        deadline = Deadline(provision_deadline)
        # A creation that fails or is cancelled deletes what it may have made (``create_instance``).
        instance = await create_instance(
            self.api.control_plane, request, deadline=deadline, policy=retry or PROVISIONING_RETRY
        )
        made: AsyncEnv | None = None
        try:
            instance = await self._wait_running(instance, deadline)
            # Instances of one version, image flavour and variables serve the same tools: listed once.
            variables = json.dumps(fields["env_variables"], sort_keys=True, default=str)
            key = (instance.env_key, instance.version, image_type, variables)
            if self._tool_lists is None:
                from .mcp import ToolLists

                self._tool_lists = ToolLists()
            made = AsyncEnv(self, instance, shared_tools=(self._tool_lists, key))
            if heartbeat_interval is not None and keep_alive:
                await made.keep_alive()
        except BaseException:
            # Nobody else holds the instance yet: a wait that timed out, failed or was cancelled
            # (a trainer's timeout, Ctrl-C) must not leave it billed until its TTL.
            if made is not None:
                await made.close()
            else:
                await self._discard(instance.instance_id)
            raise
        return made

    async def _discard(self, instance_id: str) -> None:
        """Delete an instance ``make`` created and will not hand over, even in a cancelled task.

        Never raises but a held cancellation: the caller is raising the reason already.
        """
        control_plane = self._api.control_plane

        async def delete() -> None:
            try:
                await delete_instance(control_plane, instance_id, deadline=Deadline(CLEANUP_DEADLINE))
            except FleetError as exc:
                log.warning("could not delete instance %s after a failed make: %s", instance_id, exc)

        await run_cleanup(delete, what=f"deleting instance {instance_id}")

    async def _wait_running(
        self, instance: models.InstanceResponse, deadline: Deadline
    ) -> models.InstanceResponse:
        delay = 0.5
        while instance.status == "pending":
            if not deadline.allows(delay):
                raise FleetError(
                    f"instance {instance.instance_id} still pending at the provisioning deadline"
                )
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)
            instance = await self.api.control_plane.get_instance(
                instance.instance_id, options=within(deadline)
            )
        if instance.status != "running":
            raise FleetError(f"instance {instance.instance_id} is {instance.status}, not running")
        return instance

    async def instances(
        self,
        *,
        status: InstanceStatus | None = None,
        region: str | None = None,
        run_id: str | None = None,
        profile_id: str | None = None,
    ) -> list[models.InstanceResponse]:
        """Instances visible to the key, optionally filtered.

        Args:
            status: Only instances in this status (``running``, ``terminated``...).
            region: Only this region.
            run_id: Only this training run.
            profile_id: Only this profile.
        """
        return await self.api.control_plane.list_instances(
            status=status,
            region=region,
            run_id=run_id,
            profile_id=profile_id,
        )

    async def instance(self, instance_id: str) -> AsyncEnv:
        """Attach to an existing instance.

        Args:
            instance_id: The instance id.
        """
        return AsyncEnv(self, await self.api.control_plane.get_instance(instance_id))

    async def close(self) -> None:
        """Close the connection pool (if this client created it); idempotent. Every further use
        of this client raises ``ClientClosedError``."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool:
            await self._pool.aclose()

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Fleet(_FleetBase["httpx.Client", FleetAPI]):
    """Synchronous Fleet client.

    Its typed clients (``fleet.api``) send through ``http_client``. Its other methods (``make``,
    ``list_envs``, an env's tool calls, ``traces``, ``tasks``) run their async twins on the SDK's
    own event loop thread, so they send through an async client: ``async_http_client`` when
    given; else, when ``http_client`` is given, one that hands every request to ``http_client``
    in a worker thread (its transport, proxies, auth and event hooks apply to everything); else
    the SDK's own pool. Nothing bypasses a client you pass.

    Args:
        api_key: Fleet API key; else ``FLEET_API_KEY``.
        base_url: Orchestrator URL; else ``FLEET_BASE_URL``, else production.
        platform_url: Platform URL (traces, browser); else ``FLEET_PLATFORM_URL``.
        browser_url: Browser-lease URL; else ``BROWSER_API_BASE_URL``.
        browser_api_key: Browser key; else ``FLEET_TEAM_API_KEY``, ``BROWSER_API_TOKEN``, the API key.
        timeout: Per-attempt timeouts (default 60 s, connect 10 s; None: none).
        retry: Retry policy for safe calls (default ``RetryPolicy()``; None: no retries).
        deadline: Overall seconds per call, retries included (default 180 s; None: none).
        http_client: An ``httpx.Client`` every call goes through (custom transport, proxies);
            owned by the caller. Default: the SDK's own pool, closed by ``close``.
        async_http_client: An ``httpx.AsyncClient`` for the async traffic (the methods above
            and MCP tool calls), used on the SDK's event loop thread only; owned by the caller.
            Default: through ``http_client`` when given, else the SDK's own async pool.
        environ: Environment to resolve settings from (default ``os.environ``).
        screenshot_store: Where ``traces`` uploads screenshots (default: for the production
            orchestrator, the production bucket with the AWS credential chain; for any other
            ``base_url``, the bucket that server names at ``GET /v1/discovery``, never production).
    """

    traces: Traces

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        platform_url: str | None = None,
        browser_url: str | None = None,
        browser_api_key: str | None = None,
        timeout: Timeout | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven | None = NOT_GIVEN,
        deadline: float | NotGiven | None = NOT_GIVEN,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
        screenshot_store: ScreenshotSink | None = None,
    ) -> None:
        from ._runtime._pool import pool_client

        super().__init__(
            api_key,
            base_url=base_url,
            platform_url=platform_url,
            browser_url=browser_url,
            browser_api_key=browser_api_key,
            timeout=timeout,
            retry=retry,
            deadline=deadline,
            environ=environ,
            http_client=http_client,
            new_pool=pool_client,
            api=FleetAPI,
        )
        self._async_pool = async_http_client
        self._derived_pool: httpx.AsyncClient | None = None  # through ``http_client``; this client's
        self._async: AsyncFleet | None = None
        self.traces = Traces(self, screenshot_store)
        """Trace jobs and session uploads with screenshots (``fleet_sdk.traces``)."""
        self.tasks = Tasks(self)
        """Task configs as ``fleet_sdk.Task``: ``list``, ``get``, ``load``."""

    @property
    def http_client(self) -> httpx.Client:
        """The connection pool ``fleet.api`` sends through (``with_options`` copies share it)."""
        return self._pool

    @property
    def async_fleet(self) -> AsyncFleet:
        """The async client the facade methods run on (created on first use).

        Raises:
            ClientClosedError: The client is closed (a closed client never makes a new pool).
        """
        self._require_open()
        if self._async is None:
            pool = self._async_pool
            if pool is None and not self._owns_pool:
                from ._runtime._threaded import async_client_over

                # The caller's sync client carries the async traffic too: never the network around it.
                pool = self._derived_pool = async_client_over(self._pool)
            self._async = AsyncFleet(**self._settings(), http_client=pool)
        return self._async

    @property
    def _inner(self) -> AsyncFleet:
        return self.async_fleet

    def _shared_clients(self) -> dict[str, Any]:
        # The copy's facades run on the same async pool as this client's.
        return {"http_client": self._pool, "async_http_client": self.async_fleet.http_client}

    list_envs = sync_method(AsyncFleet.list_envs)
    make = sync_method(AsyncFleet.make, wrap=Env)
    instances = sync_method(AsyncFleet.instances)
    instance = sync_method(AsyncFleet.instance, wrap=Env)

    def close(self) -> None:
        """Close the connection pools (if this client created them); idempotent. Every further
        use of this client raises ``ClientClosedError``."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool:
            self._pool.close()
        if self._async is not None:
            run_sync(self._async.close())
            self._async = None
        if self._derived_pool is not None:
            run_sync(self._derived_pool.aclose())
            self._derived_pool = None

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def async_fleet_of(fleet: Fleet) -> AsyncFleet:
    """The async client a ``Fleet`` runs on: how a sync function twin takes a ``Fleet``
    (``sync_function(run_remote, first=async_fleet_of)``).

    Args:
        fleet: The sync client.
    """
    return fleet.async_fleet
