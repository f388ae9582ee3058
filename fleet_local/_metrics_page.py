"""``GET /metrics`` and the gauges read from the server's state when it is scraped.

The counters live in ``_metrics`` (``LocalState.metrics``); this module adds what is read at
scrape time (live instances, leases, MCP sessions, verifier slots, jobs, threads) and serves the
page, built in a worker thread since the live instance count is one SQL query. The route needs
the server's key, as every route but the keyless instance endpoints does: Prometheus sends it
with ``authorization`` in its scrape config (docs/long-runs.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import anyio
from fastapi import APIRouter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from starlette.responses import Response

from ._instances import KIND as INSTANCE_KIND
from ._mcp import endpoint_sessions
from ._state import LocalState
from ._verifier_exec import verifier_concurrency

__all__ = ["attach", "router"]


def attach(state: LocalState) -> None:
    """Read ``state``'s live gauges on every scrape of its ``metrics``.

    Args:
        state: The server's state.
    """
    state.metrics.registry.register(_StateCollector(state))


class _StateCollector(Collector):
    """The gauges read from the server's state at scrape time."""

    def __init__(self, state: LocalState) -> None:
        self._state = state

    def describe(self) -> list[Any]:
        return []  # read at scrape time only: registering must not query the store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self._state
        yield _gauge("fleet_local_instances_live", "Instances not yet terminated.", _live_instances(state))
        leases = state.browser_leases.live_count("") if hasattr(state, "browser_leases") else 0
        yield _gauge(
            "fleet_local_browser_leases_live", "Browser leases live (each may run a Chromium).", leases
        )
        sessions = GaugeMetricFamily(
            "fleet_local_mcp_sessions", "Stateful MCP sessions open, by endpoint.", labels=["endpoint"]
        )
        for endpoint, name in (("instance", "mcp_sessions"), ("lease", "lease_mcp_sessions")):
            sessions.add_metric([endpoint], _open_sessions(getattr(state, name, None)))
        yield sessions
        running, queued = _verifier_slots(state)
        yield _gauge("fleet_local_verifier_runs_running", "Verifier runs holding a run slot.", running)
        yield _gauge("fleet_local_verifier_runs_queued", "Verifier runs waiting for a run slot.", queued)
        yield _gauge("fleet_local_jobs_running", "Jobs whose sessions are being played.", len(state.jobs))
        yield _gauge("fleet_local_process_threads", "Threads of the server process.", _threads())


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _live_instances(state: LocalState) -> int:
    return state.store.count(INSTANCE_KIND, exclude_status="terminated")


def _open_sessions(manager: Any) -> int:
    # ``mcp`` keeps a session manager's open sessions in this dict (1.x and 2.x alike); a manager
    # without it (a future release) reads as zero rather than failing the scrape.
    return len(getattr(manager, "_server_instances", None) or {}) + len(endpoint_sessions(manager))


def _verifier_slots(state: LocalState) -> tuple[int, int]:
    gate = state.verifier_gate
    if gate is None:  # no run yet
        return 0, 0
    return verifier_concurrency(state) - int(gate.value), gate.statistics().tasks_waiting


def _threads() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    except (OSError, StopIteration, ValueError):
        import threading

        return threading.active_count()  # not Linux: Python's own threads


def router(state: LocalState) -> APIRouter:
    """``GET /metrics`` (keyed like every route of the API)."""
    api = APIRouter(tags=["metrics"])

    @api.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """The server's metrics in the Prometheus text format."""
        page = await anyio.to_thread.run_sync(generate_latest, state.metrics.registry)
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    return api
