"""Browser leases for ``browser_use`` episodes: lease, wait, navigate, health-check, release.

A ``browser_use`` task runs on a standard environment instance that serves a web UI. The agent
does not get the instance's tools: it gets the ``computer`` tool of a browser lease, a remote
browser allowed to open the instance's host. ``BrowserSession.open`` does the whole start:

1. create a lease whose ``allowed_hosts`` include the instance's host;
2. wait until it is ``running``, under a deadline;
3. connect to its MCP endpoint and require the ``computer`` tool;
4. navigate to the instance's web UI and take a screenshot, which must be a real, non-blank PNG.

A start that fails at any step deletes the lease before raising. ``close`` deletes it too (a lease
that already ended, 404 or 410, is fine).

Both multimodal modalities get the long TTL of ``MULTIMODAL_TTL_SECONDS`` by default, and
``computer_use`` instances are created from the MCP image type (``computer_use_make_kwargs``).
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlsplit

import anyio

from ._exceptions import (
    APIResponseValidationError,
    APIStatusError,
    BrowserStartError,
    ClientClosedError,
    FleetError,
    MCPError,
    RateLimitError,
    ToolNotFoundError,
)
from ._png import is_blank_png
from ._retry import call_with_retries
from ._runtime import Deadline, RequestOptions, RetryPolicy, is_transient, within
from ._runtime._cleanup import CLEANUP_DEADLINE, run_cleanup
from ._runtime._policy import parse_retry_after
from .mcp import MCPClient
from .messages import ContentBlock
from .tools import Tool

if TYPE_CHECKING:
    from fleet_generated.browser_lease.models import BrowserLease, BrowserLeaseRequest

    from ._client import AsyncFleet
    from .env import AsyncEnv

__all__ = [
    "MULTIMODAL_TTL_SECONDS",
    "BrowserSession",
    "BrowserStartError",
    "ComputerResult",
    "ToolFailure",
    "computer_use_make_kwargs",
    "multimodal_ttl",
]

log = logging.getLogger("fleet_sdk.browser")

MULTIMODAL_TTL_SECONDS = 1800
"""Default TTL (instance and lease) of computer_use and browser_use episodes."""

COMPUTER = "computer"
POLL_INTERVAL = 0.5
CLOSE_DEADLINE = CLEANUP_DEADLINE
"""Seconds ``close`` may take to delete the lease, even in a cancelled task."""


class ToolFailure(TypedDict):
    """What a failed tool call answers the agent (docs/wire.md#mcp): the tool's message."""

    error: str


ComputerResult = list[ContentBlock] | ToolFailure
"""What a ``computer`` action answers: its content blocks (the screenshot as an ``image_url``
block, and any text), or ``{"error": ...}``."""


def _computer_result(value: Any) -> ComputerResult:
    """A lease tool's agent-facing value as a ``ComputerResult``: blocks and failures as they are,
    anything else (text, JSON) as one text block."""
    if isinstance(value, dict) and set(value) == {"error"}:
        return {"error": str(value["error"])}
    if isinstance(value, list) and all(
        isinstance(block, dict) and block.get("type") in ("text", "image_url") for block in value
    ):
        blocks: list[ContentBlock] = value
        return blocks
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return [{"type": "text", "text": text}]


def multimodal_ttl(modality: str, ttl_seconds: int | None) -> int | None:
    """The TTL to use: the given one, else ``MULTIMODAL_TTL_SECONDS`` for computer/browser use.

    Args:
        modality: The task modality.
        ttl_seconds: An explicit TTL (wins when set).
    """
    if ttl_seconds is not None:
        return ttl_seconds
    return MULTIMODAL_TTL_SECONDS if modality in ("computer_use", "browser_use") else None


def computer_use_make_kwargs(modality: str, make_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``make`` arguments for a modality: ``computer_use`` asks for ``image_type="mcp"`` unless given."""
    kwargs = dict(make_kwargs)
    if modality == "computer_use":
        kwargs.setdefault("image_type", "mcp")
    return kwargs


def _png_from_value(value: Any) -> bytes | None:
    """The first PNG in an agent-facing tool value (image blocks with data URLs), else None."""
    blocks = value if isinstance(value, list) else [value]
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "image_url":
            url = str((block.get("image_url") or {}).get("url") or "")
            prefix, _, data = url.partition(";base64,")
            if prefix.startswith("data:image/") and data:
                return base64.b64decode(data)
    return None


async def _create_lease(fleet: AsyncFleet, request: BrowserLeaseRequest, ready: Deadline) -> BrowserLease:
    """Create the lease, waiting out 429s (no browser free: browser-lease.yaml) until ``ready`` ends.

    A refused create made nothing, so making it again is safe. Every attempt carries one
    ``Idempotency-Key``: a create whose answer was lost, unreadable or cancelled is sent once more
    with it, which names the lease it made (or makes one), and that lease is deleted.
    """
    api = fleet.api.browser
    key = str(uuid.uuid4())
    while True:
        try:
            return await api.create_browser_lease(request, idempotency_key=key, options=within(ready))
        except RateLimitError as exc:
            wait = parse_retry_after(exc.response) or POLL_INTERVAL * 4
            if not ready.allows(wait):
                raise BrowserStartError(f"no browser was free before the deadline: {exc}") from exc
            log.info("no browser free (429): creating the lease again in %.1fs", wait)
            await anyio.sleep(wait)
        except APIStatusError:
            raise  # answered: nothing was made
        except BaseException:
            await run_cleanup(lambda: _reclaim_lease(fleet, request, key), what="reclaiming a browser lease")
            raise


async def _delete_lease(fleet: AsyncFleet, lease_id: str, deadline: Deadline) -> None:
    """Delete a lease until it is gone (an ended one, 404 or 410, is); a delete is safe to repeat,
    so every transient failure is retried, every 5xx included, and a 2xx answer that cannot be read
    still says it was deleted."""
    api = fleet.api.browser

    async def attempt() -> None:
        options: RequestOptions = {**(within(deadline) or {}), "max_retries": 0}
        try:
            await api.delete_browser_lease(lease_id, options=options)
        except APIStatusError as exc:
            if exc.status_code not in (404, 410):
                raise
        except APIResponseValidationError as exc:
            if not 200 <= exc.status_code < 300:
                raise

    await call_with_retries(
        attempt,
        what=f"deleting browser lease {lease_id}",
        policy=_DELETE_RETRY,
        deadline=deadline,
        log=log,
        transient=lambda exc: is_transient(exc, server_errors=True),
    )


_DELETE_RETRY = RetryPolicy(max_retries=4, backoff_base=0.5, backoff_max=4.0)


async def _reclaim_lease(fleet: AsyncFleet, request: BrowserLeaseRequest, key: str) -> None:
    """Delete the lease a create with ``key`` may have made (never raises)."""
    api = fleet.api.browser
    limit = Deadline(CLEANUP_DEADLINE)
    try:
        lease = await api.create_browser_lease(request, idempotency_key=key, options=within(limit))
        await _delete_lease(fleet, lease.lease_id, limit)
    except FleetError as exc:
        log.warning("could not reclaim the lease of a failed create: %s", type(exc).__name__)


class BrowserSession:
    """A ready browser lease and its ``computer`` tool (create with ``open``).

    Attributes:
        lease_id: The lease.
        mcp: The MCP client of the lease's ``mcp_url``.
        start_url: The instance's web UI.
        tools: The lease's tools (the ``computer`` tool).
        screenshot: The health-check screenshot (agent-facing image blocks), once ``open`` took it.
    """

    def __init__(self, fleet: AsyncFleet, lease_id: str, mcp: MCPClient | None, start_url: str) -> None:
        self._fleet = fleet
        self.lease_id = lease_id
        self._mcp = mcp  # None until ``open`` sees the lease running
        self.start_url = start_url
        self.tools: list[Tool] = []
        self.screenshot: list[ContentBlock] | None = None
        self._closed = False

    @property
    def mcp(self) -> MCPClient:
        """The MCP client of the running lease's ``mcp_url``."""
        if self._mcp is None:
            raise BrowserStartError(f"browser lease {self.lease_id} is not running yet")
        return self._mcp

    def __repr__(self) -> str:
        return f"BrowserSession(lease_id={self.lease_id!r}, start_url={self.start_url!r})"

    @classmethod
    async def open(
        cls,
        fleet: AsyncFleet,
        env: AsyncEnv,
        *,
        ttl_seconds: int = MULTIMODAL_TTL_SECONDS,
        ready_deadline: float = 120.0,
        call_deadline: float = 120.0,
        lease_id: str | None = None,
    ) -> BrowserSession:
        """Lease a browser for ``env``'s web UI, wait for it, open the UI and health-check it.

        Args:
            fleet: The client (its ``api.browser`` creates the lease).
            env: The instance whose web UI the browser opens (``urls.app[0]``, else its root).
            ttl_seconds: The lease's lifetime.
            ready_deadline: Seconds for the lease to become ``running``.
            call_deadline: Seconds per ``computer`` call.
            lease_id: The lease's id (None: the platform picks one).

        Raises:
            BrowserStartError: No browser was free within ``ready_deadline`` (each create
                refused with 429 is tried again after its ``Retry-After``), the lease ended, did
                not start in time, lacks the ``computer`` tool, or its first screenshot was blank
                or failed. The lease is deleted first.
        """
        from fleet_generated.browser_lease import models

        urls = env.instance.urls
        if urls is None:
            raise BrowserStartError(f"instance {env.instance_id} has no URLs yet: no web UI to open")
        start_url = urls.app[0] if urls.app else urls.root
        host = urlsplit(start_url).netloc
        ready = Deadline(ready_deadline)
        lease = await _create_lease(
            fleet,
            models.BrowserLeaseRequest(
                ttl_seconds=ttl_seconds, allowed_hosts=[host], **({"lease_id": lease_id} if lease_id else {})
            ),
            ready,
        )
        # A pending lease has no mcp_url yet (browser-lease.yaml): the MCP client is built on the
        # running lease, on the fleet's pool and call policy like AsyncEnv's.
        session = cls(fleet, lease.lease_id, None, start_url)
        try:
            running = await session._wait_running(lease, ready)
            session._mcp = MCPClient(
                [running.mcp_url],
                http_client=fleet.http_client,
                retry=fleet.call_policy.retry,
                timeout=fleet.call_policy.timeout,
                call_deadline=call_deadline,
            )
            await session._start(call_deadline)
        except BaseException as exc:
            await session.close()
            if isinstance(exc, FleetError | TimeoutError) and not isinstance(exc, BrowserStartError):
                raise BrowserStartError(f"browser lease {lease.lease_id} did not start: {exc}") from exc
            raise
        return session

    async def _wait_running(self, lease: Any, deadline: Deadline) -> Any:
        """Poll until the lease is running; returns the running lease (with its ``mcp_url``)."""
        while lease.status != "running":
            if lease.status in ("expired", "terminated", "error"):
                raise BrowserStartError(f"browser lease {self.lease_id} is {lease.status}")
            if not deadline.allows(POLL_INTERVAL):
                raise BrowserStartError(
                    f"browser lease {self.lease_id} is still {lease.status} at its deadline"
                )
            await anyio.sleep(POLL_INTERVAL)
            lease = await self._fleet.api.browser.get_browser_lease(self.lease_id)
        if not lease.mcp_url:
            raise BrowserStartError(f"browser lease {self.lease_id} is running without an mcp_url")
        return lease

    async def _start(self, call_deadline: float) -> None:
        tools = await self.mcp.list_tools()
        if not any(tool.name == COMPUTER for tool in tools):
            raise BrowserStartError(f"browser lease {self.lease_id} has no {COMPUTER!r} tool")
        self.tools = [tool for tool in tools if tool.name == COMPUTER]
        await self.show_start_page(call_deadline)

    async def show_start_page(self, call_deadline: float = 120.0) -> list[ContentBlock]:
        """Navigate to the web UI and health-check it; returns (and keeps) the screenshot.

        Args:
            call_deadline: Seconds per ``computer`` call.

        Raises:
            BrowserStartError: Navigation failed or the screenshot is missing or blank.
        """
        try:
            moved = await self.call_tool(
                COMPUTER, {"action": "navigate", "url": self.start_url}, deadline=call_deadline
            )
            if isinstance(moved, dict):
                raise BrowserStartError(
                    f"browser lease {self.lease_id} could not open {self.start_url}: {moved['error']}"
                )
            shot = await self.call_tool(COMPUTER, {"action": "screenshot"}, deadline=call_deadline)
        except (MCPError, ToolNotFoundError) as exc:
            raise BrowserStartError(f"browser lease {self.lease_id} failed its health check: {exc}") from exc
        if isinstance(shot, dict):
            raise BrowserStartError(f"browser lease {self.lease_id} failed its health check: {shot['error']}")
        png = _png_from_value(shot)
        if png is None or is_blank_png(png):
            raise BrowserStartError(
                f"browser lease {self.lease_id} failed its health check: no image or a blank one"
            )
        self.screenshot = shot
        return shot

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, deadline: float | None = None
    ) -> ComputerResult:
        """Call a tool of the lease (the ``computer`` tool) and return what the agent sees.

        Args:
            name: Tool name.
            arguments: Tool arguments, e.g. ``{"action": "left_click", "coordinate": [x, y]}``.
            deadline: Wall-clock seconds for the call, retries included.

        Returns:
            The action's content blocks (every action answers with a screenshot, an
            ``image_url`` block with a data URL), or ``{"error": message}`` when it failed.
        """
        if self._closed:
            raise ClientClosedError(f"browser lease {self.lease_id} is closed (deleted)")
        return _computer_result(await self.mcp.call_tool(name, arguments, deadline=deadline))

    async def close(self) -> None:
        """Delete the lease (an already-ended one is fine) and close the MCP client; idempotent."""
        if self._closed:
            return
        self._closed = True
        # Run to its end (bounded) in a cancelled task too: the lease must still be deleted.
        await run_cleanup(self._close, what=f"deleting browser lease {self.lease_id}", seconds=CLOSE_DEADLINE)

    async def _close(self) -> None:
        try:
            if self._mcp is not None:
                await self._mcp.aclose()
        finally:
            try:
                await _delete_lease(self._fleet, self.lease_id, Deadline(CLOSE_DEADLINE))
            except APIStatusError as exc:
                log.warning("browser lease %s: delete failed with %s", self.lease_id, exc.status_code)
            except FleetError as exc:
                log.warning("browser lease %s: delete failed: %s", self.lease_id, type(exc).__name__)
