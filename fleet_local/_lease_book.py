"""Browser lease records: created, read with their TTL applied, ended, reaped.

The records live in the server's store, as ``_records.LeaseRecord`` (the ``BrowserLease`` the
API answers with, and the server's own fields beside it); each live lease's Chromium is in the ``BrowserPool``
(``_chromium``). The HTTP routes over them are in ``_browser``.

Every live lease may run a Chromium (250-400 MiB each), started on its first use, so the cap on
browsers is a cap on live leases, checked when a lease is created: whether its browser starts
then or later, no lease can start one past the cap. Lease browsers, instance ``cdp`` browsers and
job sessions' browsers are all leases here, so one count holds them all; past it a create
answers 429 ``browser_limit`` with ``Retry-After``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from fleet_sdk.types import browser_lease as models

from ._chromium import BrowserPool
from ._errors import LocalAPIError, not_found
from ._idempotency import body_digest, conflict
from ._ids import new_id
from ._records import LeasePrivate, LeaseRecord
from ._store import Records, Store

__all__ = [
    "CLUSTER_NAME",
    "ENDED_STATUSES",
    "IDEMPOTENCY_KIND",
    "LEASE_BROWSERS_DIR",
    "LEASE_KIND",
    "LIVE_STATUSES",
    "LeaseBook",
    "default_max_browsers",
    "now_ms",
]

LEASE_KIND = "browser_lease"
IDEMPOTENCY_KIND = "browser_lease_idempotency"
LIVE_STATUSES = frozenset({"pending", "starting", "running"})
ENDED_STATUSES = frozenset({"expired", "terminated", "error"})
CLUSTER_NAME = "local"
REAPER_INTERVAL = 0.5
"""Seconds between two sweeps of the TTL reaper."""

LEASE_BROWSERS_DIR = "browsers"
"""Subdirectory of the data dir holding the leases' Chromium profiles."""

BROWSERS_PER_CORE = 4
BYTES_PER_BROWSER = 2 * 1024**3
"""RAM set aside per browser when sizing the cap: a Chromium takes 250-400 MiB, its pages more."""
RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a create refused for the cap (sooner when a lease expires sooner)."""


def _memory_bytes() -> int:
    """RAM this process may use: the machine's, or its cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def default_max_browsers() -> int:
    """The cap on live browser leases for this machine: 4 per core, one per 2 GB of RAM, at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(BROWSERS_PER_CORE * cores, _memory_bytes() // BYTES_PER_BROWSER))


def now_ms() -> int:
    """Unix epoch milliseconds."""
    return int(time.time() * 1000)


class LeaseBook:
    """Lease records in the store, with expiry applied on every read.

    Keeps the ids and deadlines of live leases in memory so the reaper does not
    scan every lease ever created. Every method reads or writes the store: from async code,
    call them in a worker thread (``anyio.to_thread.run_sync``), never on the event loop.

    Args:
        store: The server's store, where lease records live.
        data_dir: The server's data directory (the leases' browser profiles go under it).
        public_url: The base URL clients reach the server at (known once it is bound).
        max_browsers: Leases live at once (None: :func:`default_max_browsers`).
    """

    def __init__(
        self, store: Store, data_dir: Path, public_url: Callable[[], str], *, max_browsers: int | None = None
    ) -> None:
        self._store = store
        self._records = Records(store, LEASE_KIND, LeaseRecord)
        self._public_url = public_url
        self.max_browsers = max(0, max_browsers) if max_browsers is not None else default_max_browsers()
        self._lock = threading.Lock()
        self.browsers = BrowserPool(data_dir / LEASE_BROWSERS_DIR)
        self._live: dict[str, int] = {}
        for record in self._records.list():
            if record.lease.status in LIVE_STATUSES:
                self._live[record.lease.lease_id] = record.lease.expires_timestamp_ms

    def create(
        self, body: models.BrowserLeaseRequest, idempotency_key: str | None, *, start_url: str | None = None
    ) -> LeaseRecord:
        """Create a running lease, or return the one first created with the same idempotency key.

        Args:
            body: The lease asked for.
            idempotency_key: The request's ``Idempotency-Key``, if any.
            start_url: The page the lease's browser opens when it starts (``about:blank``
                without); kept in the record's private part, which no response carries.

        Raises:
            LocalAPIError: 409 ``idempotency_conflict`` when the key was used with another body;
                409 ``conflict`` when ``lease_id`` names a live lease; 429 ``browser_limit`` when
                ``max_browsers`` leases are live.
        """
        store = self._store
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
            if existing is not None and existing.lease.status in LIVE_STATUSES:
                raise LocalAPIError(
                    409,
                    f"browser lease {lease_id!r} is already {existing.lease.status}; "
                    "use Idempotency-Key to retry a create safely",
                    code="conflict",
                    retryable=False,
                )
            self._check_capacity()
            record = LeaseRecord(self._new_lease(lease_id, body), LeasePrivate(start_url=start_url))
            self.browsers.reopen(lease_id)
            record = self._records.put(lease_id, record)
            self._live[lease_id] = record.lease.expires_timestamp_ms
            if idempotency_key is not None:
                store.put(IDEMPOTENCY_KIND, idempotency_key, {"lease_id": lease_id, "digest": digest})
            return record

    def _check_capacity(self) -> None:
        """Expire what is due, then refuse a lease past ``max_browsers`` (the lock is held)."""
        self._expire_due()
        if len(self._live) < self.max_browsers:
            return
        deadline = now_ms()
        soonest = math.ceil((min(self._live.values(), default=deadline) - deadline) / 1000)
        retry_after = max(1, min(RETRY_AFTER_SECONDS, soonest))
        raise LocalAPIError(
            429,
            f"{len(self._live)} browser leases are live, the most this server runs at once "
            f"(max_browsers={self.max_browsers}); retry once one ends",
            code="browser_limit",
            retryable=True,
            headers={"Retry-After": str(retry_after)},
        )

    def _new_lease(self, lease_id: str, body: models.BrowserLeaseRequest) -> models.BrowserLease:
        public_url = self._public_url()
        base = f"{public_url}/browser/{lease_id}"
        host_domain = urlsplit(public_url).netloc or "127.0.0.1"
        created = now_ms()
        return models.BrowserLease(
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

    def live_count(self, prefix: str) -> int:
        """How many live leases have an id starting with ``prefix``.

        Args:
            prefix: The id prefix, e.g. that of the instances' leases.
        """
        with self._lock:
            return sum(1 for lease_id in self._live if lease_id.startswith(prefix))

    def get(self, lease_id: str) -> LeaseRecord | None:
        """The lease with its TTL applied, or None when unknown."""
        with self._lock:
            return self._read(lease_id)

    def _read(self, lease_id: str) -> LeaseRecord | None:
        record = self._records.get(lease_id)
        if record is None:
            return None
        if record.lease.status in LIVE_STATUSES and now_ms() >= record.lease.expires_timestamp_ms:
            record = self._end(record, "expired")
        return record

    def _end(self, record: LeaseRecord, status: Literal["expired", "terminated"]) -> LeaseRecord:
        """The lease ended (the book's lock is held: every write of a lease is under it)."""
        lease_id = record.lease.lease_id
        self._live.pop(lease_id, None)
        self.browsers.end(lease_id)  # kills its Chromium process group before the lease reads as ended
        record.lease.status = status
        record.lease.stream_ready = False
        return self._records.put(lease_id, record)

    def terminate(self, lease_id: str) -> LeaseRecord:
        """End a live lease; 404 when unknown, 410 when it already ended."""
        with self._lock:
            record = self._read(lease_id)
            if record is None:
                raise not_found("browser lease", lease_id)
            if record.lease.status in ENDED_STATUSES:
                raise LocalAPIError(
                    410,
                    f"browser lease {lease_id!r} is already {record.lease.status}",
                    code="gone",
                    retryable=False,
                )
            return self._end(record, "terminated")

    def reap(self) -> list[str]:
        """Expire every live lease past its TTL; returns their ids."""
        with self._lock:
            return self._expire_due()

    def _expire_due(self) -> list[str]:
        deadline = now_ms()
        due = [lease_id for lease_id, expires in self._live.items() if expires <= deadline]
        for lease_id in due:
            self._read(lease_id)
            self._live.pop(lease_id, None)
        return due
