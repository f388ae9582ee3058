"""Browser leases of the platform host (``schemas/browser-lease.yaml``).

A lease is created ``running`` at once (there is no scheduler to wait for)
and its ``mcp_url`` / ``cdp_url`` / ``stream_url`` point at this server under
``/browser/{lease_id}/...``. Behind each lease is a headless Chromium of its own
(``_chromium``), started on the lease's first use of ``mcp_url`` or ``cdp_url``
and killed, process group and all, when the lease ends. ``mcp_url`` serves the
``computer`` tool over MCP (``_computer``, ``_lease_endpoints``), ``cdp_url``
the browser's DevTools endpoint (with the bearer key, through the CDP proxy);
``stream_url`` (a live video stream) is not served, so ``stream_ready`` stays false.
``GET /v1/browser/{lease_id}/mcp-tools`` lists the ``computer`` tool with its input schema
(``COMPUTER_TOOL``).

Leases end three ways: ``DELETE`` (status ``terminated``), their TTL
(``expired``), or the server shutting down (every browser is killed; the lease
records stay as they were and expire by TTL). Expiry is applied both lazily, whenever
a lease is read, and by a reaper task started in ``lifespan`` so the store
reflects it without a read. Deleting an ended lease answers 410, an unknown one
404. ``Idempotency-Key`` on create returns the lease first created with that key
and body (another body is a 409); a client-chosen ``lease_id`` that is still live
is a 409 too, while the id of an ended lease starts a new lease. Past ``max_browsers``
live leases a create is a 429 with ``Retry-After`` (``_lease_book``).

Every ``LeaseBook`` call from here runs in the server's worker threads: the book reads and writes
the store, whose one lock the worker threads share, so a call on the event loop would stall
every route while a slow store call held it (``tests/local/test_store_off_the_loop.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import anyio
from fastapi import APIRouter

from fleet_sdk.types import browser_lease as models

from ._computer import COMPUTER_ACTIONS, COMPUTER_TOOL
from ._errors import LocalAPIError, not_found
from ._idempotency import IdempotencyKey
from ._lease_book import LIVE_STATUSES, REAPER_INTERVAL, LeaseBook
from ._records import LeaseRecord
from ._state import LocalState

__all__ = ["COMPUTER_ACTIONS", "COMPUTER_TOOL", "LeaseBook", "lifespan", "router"]


def book(state: LocalState) -> LeaseBook:
    """The server's lease book (created on first use)."""
    return _book(state)


async def live_lease(state: LocalState, lease_id: str) -> LeaseRecord:
    """A live lease, or a 404 naming why it is not (the store is read in a worker thread).

    Args:
        state: Server state.
        lease_id: The lease.

    Raises:
        LocalAPIError: 404 when the lease is unknown or has ended.
    """
    record = await anyio.to_thread.run_sync(_book(state).get, lease_id)
    if record is None:
        raise not_found("browser lease", lease_id)
    if record.lease.status not in LIVE_STATUSES:
        raise LocalAPIError(
            404,
            f"browser lease {lease_id!r} is {record.lease.status}: its endpoints are gone",
            code="not_found",
            retryable=False,
        )
    return record


def _book(state: LocalState) -> LeaseBook:
    return state.browser_leases


# The lease endpoints (``_lease_endpoints``: MCP and CDP per lease) build on this module; the
# app mounts them and runs their lifespan inside this one's, so this module does not import them.


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Run the TTL reaper for the server's lifetime."""
    book = _book(state)

    async def reaper() -> None:
        while True:
            await asyncio.sleep(REAPER_INTERVAL)
            await anyio.to_thread.run_sync(book.reap)

    task = asyncio.create_task(reaper(), name="browser-lease-reaper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await book.browsers.aclose()  # no Chromium outlives the server


def router(state: LocalState) -> APIRouter:
    """Routes of the browser-lease surface (bearer auth is added by the app)."""
    api = APIRouter(tags=["browser-lease"])

    @api.post("/v1/browser", response_model=models.BrowserLease)
    async def create_browser_lease(
        body: models.BrowserLeaseRequest,
        idempotency_key: IdempotencyKey = None,
    ) -> models.BrowserLease:
        """Start a lease, ``running`` at once; the same ``Idempotency-Key`` and body return the same
        lease; 429 ``browser_limit`` past ``max_browsers`` live leases."""
        created = await anyio.to_thread.run_sync(_book(state).create, body, idempotency_key)
        return created.lease

    @api.get("/v1/browser/{lease_id}", response_model=models.BrowserLease)
    async def get_browser_lease(lease_id: str) -> models.BrowserLease:
        """The lease; one past its TTL reports ``expired``."""
        record = await anyio.to_thread.run_sync(_book(state).get, lease_id)
        if record is None:
            raise not_found("browser lease", lease_id)
        return record.lease

    @api.delete("/v1/browser/{lease_id}", response_model=models.BrowserLeaseDeleted)
    async def delete_browser_lease(lease_id: str) -> models.BrowserLeaseDeleted:
        """Terminate a lease: 200, or 404 (unknown) / 410 (already ended)."""
        ended = await anyio.to_thread.run_sync(_book(state).terminate, lease_id)
        return models.BrowserLeaseDeleted(success=True, lease_id=lease_id, status=ended.lease.status)

    @api.get("/v1/browser/{lease_id}/mcp-tools", response_model=models.BrowserMCPTools)
    async def get_browser_lease_mcp_tools(lease_id: str) -> models.BrowserMCPTools:
        """The tools of a live lease's MCP endpoint (the ``computer`` tool); 404 once it ended."""
        await live_lease(state, lease_id)
        return models.BrowserMCPTools(lease_id=lease_id, tools=[models.MCPToolInfo(**COMPUTER_TOOL)])

    return api
