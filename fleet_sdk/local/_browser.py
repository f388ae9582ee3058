"""Browser leases of the platform host (``schemas/browser-lease.yaml``).

A lease is created ``running`` at once (there is no scheduler to wait for)
and its ``mcp_url`` / ``cdp_url`` / ``stream_url`` point at this server under
``/browser/{lease_id}/...``. Behind each lease is a headless Chromium of its own
(``_chromium``), started on the lease's first use of ``mcp_url`` or ``cdp_url``
and killed, process group and all, when the lease ends. ``mcp_url`` serves the
``computer`` tool over MCP (``_computer``, ``_lease_endpoints``), ``cdp_url``
the browser's DevTools endpoint; ``stream_url`` (a live video stream) is not
served, so ``stream_ready`` stays false. ``GET /v1/browser/{lease_id}/mcp-tools``
lists the ``computer`` tool with its input schema (``COMPUTER_TOOL``).

Leases end three ways: ``DELETE`` (status ``terminated``), their TTL
(``expired``), or the server shutting down (every browser is killed; the lease
records stay as they were and expire by TTL). Expiry is applied both lazily, whenever
a lease is read, and by a reaper task started in ``lifespan`` so the store
reflects it without a read. Deleting an ended lease answers 410, an unknown one
404. ``Idempotency-Key`` on create returns the lease first created with that key
and body (another body is a 409); a client-chosen ``lease_id`` that is still live
is a 409 too, while the id of an ended lease starts a new lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter

from .._generated.browser_lease import models
from ._chromium import BrowserPool
from ._computer import COMPUTER_ACTIONS, COMPUTER_TOOL
from ._errors import LocalAPIError, not_found
from ._idempotency import IdempotencyKey, body_digest, conflict
from ._state import LocalState, new_id

__all__ = ["COMPUTER_ACTIONS", "COMPUTER_TOOL", "LeaseBook", "lifespan", "router"]

LEASE_KIND = "browser_lease"
IDEMPOTENCY_KIND = "browser_lease_idempotency"
LIVE_STATUSES = frozenset({"pending", "starting", "running"})
ENDED_STATUSES = frozenset({"expired", "terminated", "error"})
CLUSTER_NAME = "local"
REAPER_INTERVAL = 0.5
"""Seconds between two sweeps of the TTL reaper."""

LEASE_BROWSERS_DIR = "browsers"
"""Subdirectory of the data dir holding the leases' Chromium profiles."""


def now_ms() -> int:
    """Unix epoch milliseconds."""
    return int(time.time() * 1000)


class LeaseBook:
    """Lease records in the store, with expiry applied on every read.

    Keeps the ids and deadlines of live leases in memory so the reaper does not
    scan every lease ever created.

    Args:
        state: The server state (store, public URL).
    """

    def __init__(self, state: LocalState) -> None:
        self._state = state
        self._lock = threading.Lock()
        self.browsers = BrowserPool(state.settings.data_dir / LEASE_BROWSERS_DIR)
        self._live: dict[str, int] = {}
        for doc in state.store.list(LEASE_KIND):
            if doc.get("status") in LIVE_STATUSES:
                self._live[doc["lease_id"]] = int(doc["expires_timestamp_ms"])

    def create(self, body: models.BrowserLeaseRequest, idempotency_key: str | None) -> dict[str, Any]:
        """Create a running lease, or return the one first created with the same idempotency key.

        Raises:
            LocalAPIError: 409 ``idempotency_conflict`` when the key was used with another body;
                409 ``conflict`` when ``lease_id`` names a live lease.
        """
        store = self._state.store
        digest = body_digest(body.model_dump(mode="json", exclude_none=True))
        with self._lock:
            if idempotency_key is not None:
                seen = store.get(IDEMPOTENCY_KIND, idempotency_key)
                if seen is not None:
                    if seen.get("digest", digest) != digest:
                        raise conflict(idempotency_key)
                    earlier = self._read(seen["lease_id"])
                    if earlier is not None:
                        return earlier
            lease_id = body.lease_id or new_id("lease")
            existing = self._read(lease_id)
            if existing is not None and existing["status"] in LIVE_STATUSES:
                raise LocalAPIError(
                    409,
                    f"browser lease {lease_id!r} is already {existing['status']}; "
                    "use Idempotency-Key to retry a create safely",
                    code="conflict",
                    retryable=False,
                )
            lease = self._new_lease(lease_id, body)
            self.browsers.reopen(lease_id)
            store.put(LEASE_KIND, lease_id, lease)
            self._live[lease_id] = lease["expires_timestamp_ms"]
            if idempotency_key is not None:
                store.put(IDEMPOTENCY_KIND, idempotency_key, {"lease_id": lease_id, "digest": digest})
            return lease

    def _new_lease(self, lease_id: str, body: models.BrowserLeaseRequest) -> dict[str, Any]:
        base = f"{self._state.public_url}/browser/{lease_id}"
        host_domain = urlsplit(self._state.public_url).netloc or "127.0.0.1"
        created = now_ms()
        lease = models.BrowserLease(
            id=lease_id,
            lease_id=lease_id,
            browser_id=new_id("browser"),
            host_domain=host_domain,
            mcp_url=f"{base}/mcp",
            cdp_url=f"{base}/cdp",
            stream_url=f"{base}/stream",
            status="running",
            stream_ready=False,
            # Default policy: the host of this server, where every local instance's web UI lives.
            allowed_hosts=list(body.allowed_hosts) if body.allowed_hosts is not None else [host_domain],
            created_timestamp_ms=created,
            expires_timestamp_ms=created + body.ttl_seconds * 1000,
            cluster_name=CLUSTER_NAME,
        )
        return lease.model_dump(mode="json")

    def get(self, lease_id: str) -> dict[str, Any] | None:
        """The lease with its TTL applied, or None when unknown."""
        with self._lock:
            return self._read(lease_id)

    def _read(self, lease_id: str) -> dict[str, Any] | None:
        lease = self._state.store.get(LEASE_KIND, lease_id)
        if lease is None:
            return None
        if lease["status"] in LIVE_STATUSES and now_ms() >= lease["expires_timestamp_ms"]:
            lease = self._end(lease_id, "expired") or lease
        return lease

    def _end(self, lease_id: str, status: str) -> dict[str, Any] | None:
        self._live.pop(lease_id, None)
        self.browsers.end(lease_id)  # kills its Chromium process group before the lease reads as ended
        changes: dict[str, Any] = {"status": status, "stream_ready": False}
        return self._state.store.update(LEASE_KIND, lease_id, **changes)

    def terminate(self, lease_id: str) -> dict[str, Any]:
        """End a live lease; 404 when unknown, 410 when it already ended."""
        with self._lock:
            lease = self._read(lease_id)
            if lease is None:
                raise not_found("browser lease", lease_id)
            if lease["status"] in ENDED_STATUSES:
                raise LocalAPIError(
                    410,
                    f"browser lease {lease_id!r} is already {lease['status']}",
                    code="gone",
                    retryable=False,
                )
            ended = self._end(lease_id, "terminated")
            assert ended is not None
            return ended

    def reap(self) -> list[str]:
        """Expire every live lease past its TTL; returns their ids."""
        deadline = now_ms()
        with self._lock:
            due = [lease_id for lease_id, expires in self._live.items() if expires <= deadline]
            for lease_id in due:
                self._read(lease_id)
                self._live.pop(lease_id, None)
        return due


def book(state: LocalState) -> LeaseBook:
    """The server's lease book (created on first use)."""
    return _book(state)


def live_lease(state: LocalState, lease_id: str) -> dict[str, Any]:
    """A live lease, or a 404 naming why it is not.

    Raises:
        LocalAPIError: 404 when the lease is unknown or has ended.
    """
    lease = _book(state).get(lease_id)
    if lease is None:
        raise not_found("browser lease", lease_id)
    if lease["status"] not in LIVE_STATUSES:
        raise LocalAPIError(
            404,
            f"browser lease {lease_id!r} is {lease['status']}: its endpoints are gone",
            code="not_found",
            retryable=False,
        )
    return lease


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
            book.reap()

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
    ) -> dict[str, Any]:
        """Start a lease, ``running`` at once; the same ``Idempotency-Key`` and body return the same lease."""
        return _book(state).create(body, idempotency_key)

    @api.get("/v1/browser/{lease_id}", response_model=models.BrowserLease)
    async def get_browser_lease(lease_id: str) -> dict[str, Any]:
        """The lease; one past its TTL reports ``expired``."""
        lease = _book(state).get(lease_id)
        if lease is None:
            raise not_found("browser lease", lease_id)
        return lease

    @api.delete("/v1/browser/{lease_id}", response_model=models.BrowserLeaseDeleted)
    async def delete_browser_lease(lease_id: str) -> models.BrowserLeaseDeleted:
        """Terminate a lease: 200, or 404 (unknown) / 410 (already ended)."""
        lease = _book(state).terminate(lease_id)
        return models.BrowserLeaseDeleted(success=True, lease_id=lease_id, status=lease["status"])

    @api.get("/v1/browser/{lease_id}/mcp-tools", response_model=models.BrowserMCPTools)
    async def get_browser_lease_mcp_tools(lease_id: str) -> models.BrowserMCPTools:
        """The tools of a live lease's MCP endpoint (the ``computer`` tool); 404 once it ended."""
        live_lease(state, lease_id)
        return models.BrowserMCPTools(lease_id=lease_id, tools=[models.MCPToolInfo(**COMPUTER_TOOL)])

    return api
