"""``GET /metrics``: the server's own state in the Prometheus text format.

What a long training run wants to watch without reading the store: how many instances, browser
leases and MCP sessions are live, how many verifier runs are running and how many wait for a
slot, how many instances, verifier runs and sessions have ended, how long requests take per
group of routes, and the process's memory, fds and threads (``prometheus_client``'s process
collector, plus ``fleet_local_process_threads``).

Counters are counted where the thing happens (``ServerMetrics`` on ``LocalState.metrics``); the
gauges are read when the page is scraped (``_StateCollector``), in a worker thread, since the
live instance count is one SQL query. The route needs the server's key, as every route but the
keyless instance endpoints does: Prometheus sends it with ``authorization`` in its scrape config.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from ._state import LocalState

__all__ = ["RequestMetrics", "ServerMetrics", "route_group", "router"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Path prefixes and the group their requests are timed under (first match wins).
_GROUPS: tuple[tuple[str, str], ...] = (
    ("/v1/env", "control"),
    ("/v1/tasks", "control"),
    ("/v1/verifiers", "control"),
    ("/v1/account", "control"),
    ("/v1/regions", "control"),
    ("/v1/jobs", "jobs"),
    ("/v1/sessions", "sessions"),
    ("/v1/traces", "sessions"),
    ("/v1/browser", "leases"),
    ("/v1/evaluation", "reports"),
    ("/metrics", "metrics"),
)


def route_group(path: str) -> str:
    """The group a request path is timed under: ``control``, ``manager`` (an instance's own API),
    ``mcp`` (an instance's MCP endpoints), ``jobs``, ``sessions``, ``leases``, ``reports``,
    ``metrics`` or ``other``.

    Args:
        path: The request path.
    """
    if path.startswith("/instances/"):
        return "mcp" if path.rstrip("/").endswith("/mcp") else "manager"
    for prefix, group in _GROUPS:
        if path.startswith(prefix):
            return group
    return "other"


class ServerMetrics:
    """The counters and histograms of one server, in a registry of its own (two servers in one
    process never share one).

    Attributes:
        registry: Everything ``GET /metrics`` shows.
        requests: Request latency by route group and status class.
        instances_created: Instances created.
        instances_ended: Instances ended, by reason (``deleted``, ``expired``).
        verifier_runs: Verifier runs finished, by outcome (``passed``: score 1; ``failed``: ran,
            score below 1 or none; ``error``: the verifier or its runner failed).
        sessions_finished: Sessions that reached a final status, by source (``job``, ``ingest``).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Histogram(
            "fleet_local_request_duration_seconds",
            "Seconds from a request's arrival to the end of its answer, by route group.",
            ["group", "status"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.instances_created = Counter(
            "fleet_local_instances_created", "Instances created.", registry=registry
        )
        self.instances_ended = Counter(
            "fleet_local_instances_ended", "Instances ended (deleted, or expired and reaped).", ["reason"],
            registry=registry,
        )  # fmt: skip
        self.verifier_runs = Counter(
            "fleet_local_verifier_runs_finished",
            "Verifier runs finished (a graded episode is one), by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.sessions_finished = Counter(
            "fleet_local_sessions_finished",
            "Sessions that reached a final status (job sessions, ingested traces).",
            ["source"],
            registry=registry,
        )
        self.pruned = Counter(
            "fleet_local_records_pruned",
            "Finished records removed by the retention (--retention-seconds), by kind.",
            ["kind"],
            registry=registry,
        )
        for reason in ("deleted", "expired"):
            self.instances_ended.labels(reason)
        for outcome in ("passed", "failed", "error"):
            self.verifier_runs.labels(outcome)
        for source in ("job", "ingest"):
            self.sessions_finished.labels(source)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)

    def attach(self, state: LocalState) -> None:
        """Read ``state``'s live gauges on every scrape.

        Args:
            state: The server's state.
        """
        self.registry.register(_StateCollector(state))

    def verifier_run(self, success: bool, score: float | None) -> None:
        """Count one finished verifier run.

        Args:
            success: The verifier ran and returned.
            score: Its score, if any.
        """
        outcome = "error" if not success else "passed" if score is not None and score >= 1.0 else "failed"
        self.verifier_runs.labels(outcome).inc()


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
    from ._instances import KIND

    return state.store.count(KIND, exclude_status="terminated")


def _open_sessions(manager: Any) -> int:
    # ``mcp`` keeps a session manager's open sessions in this dict (1.x and 2.x alike); a manager
    # without it (a future release) reads as zero rather than failing the scrape.
    return len(getattr(manager, "_server_instances", None) or {})


def _verifier_slots(state: LocalState) -> tuple[int, int]:
    from ._verifier_exec import verifier_concurrency

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


class RequestMetrics:
    """ASGI middleware timing every HTTP request into ``ServerMetrics.requests``.

    Args:
        app: The app it wraps.
        metrics: Where the times go.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self._requests = metrics.requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an app that raises before it answers

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            group = route_group(str(scope.get("path", "")))
            self._requests.labels(group, f"{status // 100}xx").observe(time.perf_counter() - started)


def router(state: LocalState) -> APIRouter:
    """``GET /metrics`` (keyed like every route of the API)."""
    api = APIRouter(tags=["metrics"])

    @api.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """The server's metrics in the Prometheus text format."""
        page = await anyio.to_thread.run_sync(generate_latest, state.metrics.registry)
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    return api
