"""How long the server keeps what has finished (``LocalSettings.retention_seconds``).

A training run makes an instance document, a verifier execution, a session with its transcript
and a few bookkeeping records per episode; without a bound the data dir grows by each of them
for ever. With ``retention_seconds`` set, a pass every minute (or sooner for a short retention)
deletes the records that finished and have not changed for that long:

* terminated instances (their files went when they ended) and verifier executions;
* sessions that reached a final status, with their transcripts, and finished jobs;
* ended browser leases;
* the ``Idempotency-Key`` and ``X-Request-ID`` records, kept at least :data:`REPLAY_FLOOR` seconds
  whatever the retention, since a client may resend a create for as long as its provisioning
  deadline (ten minutes by default).

Kept whatever their age: what is live (running instances, sessions and jobs, live leases),
tasks, stored verifier bundles, seed archives, trace jobs, instance backups (explicit user data),
and screenshots in the S3 endpoint. SQLite reuses the pages of deleted rows, so ``fleet.db``
stops growing once as much is deleted as is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import anyio

from ._state import LocalState
from ._store import Store

__all__ = ["REPLAY_FLOOR", "lifespan", "prune"]

_log = logging.getLogger(__name__)

REPLAY_FLOOR = 600.0
"""Seconds a replay record (idempotency key, request id) is kept at least: the SDK's default
provisioning deadline, within which a client may send a create again."""

# (kind, statuses that keep a document whatever its age, replay record)
_RULES: tuple[tuple[str, frozenset[str] | None, bool], ...] = (
    ("instance", frozenset({"pending", "running", "stopped", "error"}), False),
    ("verifier_execution", None, False),
    ("session", frozenset({"pending", "running"}), False),
    ("job", frozenset({"pending", "running"}), False),
    ("browser_lease", frozenset({"pending", "starting", "running"}), False),
    ("idempotency", None, True),
    ("create_request_id", None, True),
    ("browser_lease_idempotency", None, True),
)


def prune(store: Store, retention_seconds: float, *, now: float | None = None) -> dict[str, int]:
    """Delete every finished record older than the retention (blocking: run it in a thread).

    Args:
        store: The server's store.
        retention_seconds: Records last written longer ago than this go (see the module docstring).
        now: The present, as ``time.time()`` (tests).

    Returns:
        How many records of each kind were deleted (kinds with none left out).
    """
    moment = time.time() if now is None else now
    deleted: dict[str, int] = {}
    for kind, live, replay in _RULES:
        keep = max(retention_seconds, REPLAY_FLOOR) if replay else retention_seconds
        while ids := store.prune(kind, moment - keep, live_statuses=live):
            if kind == "session":
                store.delete_messages(ids)
            deleted[kind] = deleted.get(kind, 0) + len(ids)
    return deleted


async def _prune_forever(state: LocalState, retention: float) -> None:
    interval = min(60.0, max(1.0, retention / 4))
    while True:
        await asyncio.sleep(interval)
        try:
            deleted = await anyio.to_thread.run_sync(prune, state.store, retention)
        except Exception:  # the next pass tries again
            _log.exception("retention pass failed")
            continue
        for kind, count in deleted.items():
            state.metrics.pruned.labels(kind).inc(count)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Prune finished records for the life of the server, when a retention is set."""
    retention = state.settings.retention_seconds
    if retention is None:
        yield
        return
    task = asyncio.create_task(_prune_forever(state, retention), name="fleet-local-retention")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
