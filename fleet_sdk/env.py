"""``AsyncEnv`` / ``Env``: one environment instance, its databases and its tools.

An env is created by ``AsyncFleet.make`` (or ``Fleet.make``). It speaks to the
control plane for its lifecycle, to the instance manager API for reset,
databases and diffs, and to the instance's MCP endpoints for tools. The sync
``Env`` runs the async one on the SDK's loop bridge.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ._exceptions import ClientClosedError, DatabaseError, FleetError, NotFoundError, ToolNotFoundError
from ._runtime import Deadline
from ._runtime._cleanup import CLEANUP_DEADLINE, run_cleanup
from ._twin import sync_method, sync_view

if TYPE_CHECKING:
    import asyncio

    from fleet_generated.env_instance import models

    from ._api import AsyncAPIOwner
    from .mcp import MCPClient, ToolLists
    from .tools import Tool

__all__ = ["AsyncDatabase", "AsyncEnv", "Database", "Env", "Modality"]

Modality = Literal["tool_use", "computer_use", "browser_use"]
COMPUTER_TOOL = "computer"

log = logging.getLogger("fleet_sdk.env")


def filter_tools(tools: list[Tool], modality: str) -> list[Tool]:
    """The tools an agent may use for a task modality (docs/wire.md#mcp).

    Args:
        tools: Every tool of the instance.
        modality: ``tool_use`` (all but ``computer``), ``computer_use`` or ``browser_use``
            (only ``computer``; an error when it is missing).
    """
    if modality == "tool_use":
        return [t for t in tools if t.name != COMPUTER_TOOL]
    if modality in ("computer_use", "browser_use"):
        computer = [t for t in tools if t.name == COMPUTER_TOOL]
        if not computer:
            names = sorted(t.name for t in tools)
            raise ToolNotFoundError(f"{modality} needs the {COMPUTER_TOOL!r} tool; the instance has {names}")
        return computer
    raise ValueError(f"unknown modality {modality!r}: expected tool_use, computer_use or browser_use")


class AsyncDatabase:
    """A SQLite resource of an instance (``seed`` or ``current``); queries are read-only unless asked.

    Args:
        env: The owning environment.
        name: Resource name.
    """

    def __init__(self, env: AsyncEnv, name: str) -> None:
        self._env = env
        self.name = name

    async def describe(self) -> models.DescribeResponse:
        """Tables, their SQL and columns."""
        self._env._require_open()
        return await self._env.manager.describe_database(self.name)

    async def query(
        self, sql: str, args: list[Any] | None = None, *, read_only: bool = True
    ) -> models.QueryResponse:
        """Run one SQL statement.

        Args:
            sql: The SQL text.
            args: Positional parameters for ``?`` placeholders.
            read_only: Refuse writes (``PermissionDeniedError``); ``False`` lets a statement
                write to ``current`` (``seed`` is always read-only).

        Raises:
            DatabaseError: The database refused the statement (bad SQL, a constraint); carries
                the database's message.
        """
        self._env._require_open()
        response = await self._env.manager.query_database(
            self.name, query=sql, args=args, read_only=read_only
        )
        if not response.success:
            raise DatabaseError(
                response.error or response.message or "statement failed", sql=sql, database=self.name
            )
        return response


class AsyncEnv:
    """An environment instance (async).

    Args:
        fleet: The client that created it (an ``AsyncFleet``).
        instance: The instance as the control plane described it.
        mcp_endpoints: MCP URLs to use (default: ``{root}mcp`` then ``{root}api/v1/mcp``).
        call_deadline: Default wall-clock seconds per tool call.
        shared_tools: Where the fleet's instances of one version share their tool list, and
            this instance's key in it (``fleet_sdk.mcp.ToolLists``; ``AsyncFleet.make`` passes
            them); None lists this instance's endpoints for it alone.
    """

    def __init__(
        self,
        fleet: AsyncAPIOwner,
        instance: models.InstanceResponse,
        *,
        mcp_endpoints: list[str] | None = None,
        call_deadline: float = 120.0,
        shared_tools: tuple[ToolLists, Hashable] | None = None,
    ) -> None:
        from .mcp import MCPClient

        self._fleet = fleet
        self.instance = instance
        self.manager = fleet.api.manager(instance)  # a FleetError while the instance has no URLs
        urls = instance.urls
        assert urls is not None  # manager() checked
        root = urls.root if urls.root.endswith("/") else urls.root + "/"
        # MCP rides the fleet's pool: the user's transport, proxies and limits, and warm connections.
        self.mcp: MCPClient = MCPClient(
            mcp_endpoints or [f"{root}mcp", f"{root}api/v1/mcp"],
            http_client=fleet.api.http_client,
            retry=fleet.api.call_policy.retry,
            timeout=fleet.api.call_policy.timeout,
            call_deadline=call_deadline,
            shared_tools=shared_tools if mcp_endpoints is None else None,
        )
        self._closed = False
        self._heartbeats: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"AsyncEnv(instance_id={self.instance_id!r}, env_key={self.instance.env_key!r})"

    @property
    def instance_id(self) -> str:
        """The instance id."""
        return self.instance.instance_id

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (the instance is deleted)."""
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"instance {self.instance_id!r} is closed (deleted); make a new env")

    @property
    def env_key(self) -> str:
        """The environment key."""
        return self.instance.env_key

    async def reset(self, seed: int | None = None) -> models.ResetResponse:
        """Restore the instance's data to its seed.

        Args:
            seed: Optional seed forwarded to the instance.
        """
        self._require_open()
        if seed is None:
            return await self.manager.reset_instance()
        return await self.manager.reset_instance(seed=seed)

    def db(self, name: str = "current") -> AsyncDatabase:
        """A database resource.

        Args:
            name: ``current`` (live data) or ``seed`` (the data the instance started from).
        """
        return AsyncDatabase(self, name)

    async def resources(self) -> list[models.Resource]:
        """The instance's resources (databases, browsers, APIs)."""
        self._require_open()
        return await self.manager.list_resources()

    async def diff(self, ignore: models.DiffIgnoreConfig | None = None) -> models.DiffResponse:
        """Structured diff of ``seed`` vs ``current``.

        Args:
            ignore: Tables, fields and per-table fields to leave out.
        """
        self._require_open()
        if ignore is None:
            return await self.manager.structured_diff()
        return await self.manager.structured_diff(ignore_config=ignore)

    async def list_tools(self, modality: Modality = "tool_use", *, refresh: bool = False) -> list[Tool]:
        """The tools for a task modality, the union over the instance's MCP endpoints.

        An env ``make`` started shares the listing of its fleet's other instances of the same
        version (``fleet_sdk.mcp.ToolLists``): only the first of them asks the endpoints.

        Args:
            modality: ``tool_use``, ``computer_use`` or ``browser_use``.
            refresh: Ask the endpoints again instead of using the cached list.
        """
        return filter_tools(await self.mcp.list_tools(refresh=refresh), modality)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, deadline: float | None = None
    ) -> Any:
        """Call a tool; returns the agent-facing value (docs/wire.md#mcp).

        Args:
            name: Tool name.
            arguments: Tool arguments.
            deadline: Wall-clock seconds for the call, retries included.
        """
        return await self.mcp.call_tool(name, arguments, deadline=deadline)

    async def heartbeat(self) -> models.HeartbeatResponse:
        """Extend the instance's TTL."""
        self._require_open()
        return await self._fleet.api.control_plane.heartbeat_instance(self.instance_id)

    async def keep_alive(self, period: float | None = None) -> None:
        """Send heartbeats in the background until the env is closed (or its process ends).

        For an instance made with ``heartbeat_interval``: the platform reclaims it once
        heartbeats stop, so an episode whose worker dies (a killed Ray actor, a preempted
        node) leaves nothing running for long, while a live one is never reclaimed however
        long it runs. ``make(heartbeat_interval=...)`` starts this by itself. A failed
        heartbeat is logged and the next one tried; the beats stop when the instance is gone.
        Calling it again changes nothing while the beats run.

        Args:
            period: Seconds between heartbeats (default: half the instance's
                ``heartbeat_interval``, or 30 when it has none).

        Raises:
            ClientClosedError: The env is closed.
        """
        self._require_open()
        if self._heartbeats is not None and not self._heartbeats.done():
            return
        if period is None:
            interval = self.instance.heartbeat_interval
            period = interval / 2 if interval else 30.0
        if period <= 0:
            raise ValueError(f"period must be positive, got {period}")
        import asyncio

        self._heartbeats = asyncio.get_running_loop().create_task(
            self._beat(period), name=f"fleet-heartbeat-{self.instance_id}"
        )

    async def _beat(self, period: float) -> None:
        while True:
            await anyio.sleep(period)
            try:
                with anyio.fail_after(2 * period):  # a slow beat must not hold up the next for long
                    await self.heartbeat()
            except NotFoundError:
                log.warning("instance %s is gone; heartbeats stop", self.instance_id)
                return
            except (FleetError, TimeoutError) as exc:
                log.warning("heartbeat of instance %s failed: %s", self.instance_id, exc)

    async def refresh(self) -> models.InstanceResponse:
        """Fetch the instance's current state from the control plane."""
        self._require_open()
        self.instance = await self._fleet.api.control_plane.get_instance(self.instance_id)
        return self.instance

    async def close(self) -> None:
        """End the MCP sessions and delete the instance (idempotent; an already-deleted instance is
        fine). Runs to its end in a cancelled task too (bounded); every further use of the env
        raises ``ClientClosedError``."""
        if self._closed:
            return
        self._closed = True
        await run_cleanup(self._close, what=f"closing instance {self.instance_id}")

    async def _close(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            import asyncio

            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeats
        try:
            # End the MCP sessions first: once the instance is gone its endpoints answer 404.
            await self.mcp.aclose()
        finally:
            from ._provisioning import delete_instance

            await delete_instance(
                self._fleet.api.control_plane, self.instance_id, deadline=Deadline(CLEANUP_DEADLINE)
            )

    async def __aenter__(self) -> AsyncEnv:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class Database:
    """Sync twin of ``AsyncDatabase``: every method runs the async one (``fleet_sdk._twin``).

    Args:
        inner: The async database.
    """

    def __init__(self, inner: AsyncDatabase) -> None:
        self._inner = inner
        self.name = inner.name

    describe = sync_method(AsyncDatabase.describe)
    query = sync_method(AsyncDatabase.query)


class Env:
    """An environment instance (sync twin of ``AsyncEnv``; every method runs the async one).

    Args:
        inner: The async environment.
    """

    def __init__(self, inner: AsyncEnv) -> None:
        self._inner = inner

    def __repr__(self) -> str:
        return f"Env(instance_id={self.instance_id!r}, env_key={self.env_key!r})"

    @property
    def async_env(self) -> AsyncEnv:
        """The async environment this wraps."""
        return self._inner

    @property
    def instance(self) -> models.InstanceResponse:
        """The instance as last described by the control plane."""
        return self._inner.instance

    @property
    def instance_id(self) -> str:
        """The instance id."""
        return self._inner.instance_id

    @property
    def env_key(self) -> str:
        """The environment key."""
        return self._inner.env_key

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (the instance is deleted)."""
        return self._inner.closed

    reset = sync_method(AsyncEnv.reset)
    db = sync_view(AsyncEnv.db, wrap=Database)
    resources = sync_method(AsyncEnv.resources)
    diff = sync_method(AsyncEnv.diff)
    list_tools = sync_method(AsyncEnv.list_tools)
    call_tool = sync_method(AsyncEnv.call_tool)
    heartbeat = sync_method(AsyncEnv.heartbeat)
    keep_alive = sync_method(AsyncEnv.keep_alive)
    refresh = sync_method(AsyncEnv.refresh)
    close = sync_method(AsyncEnv.close)

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
