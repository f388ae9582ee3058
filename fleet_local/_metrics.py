"""``GET /metrics``: the server's own state in the Prometheus text format.

What a long training run wants to watch without reading the store: how many instances, browser
leases and MCP sessions are live, how many verifier runs are running and how many wait for a
slot, how many instances, verifier runs and sessions have ended, how long requests take per
group of routes, and the process's memory, fds and threads (``prometheus_client``'s process
collector, plus ``fleet_local_process_threads``).

Counters are counted where the thing happens (``ServerMetrics`` on ``LocalState.metrics``); the
gauges are read when the page is scraped (``_metrics_page``, which serves the route). This module
imports nothing of the server's, so every module may count into it.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestMetrics", "ServerMetrics", "route_group"]

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
        mcp_sessions_opened: Stateful MCP sessions opened on instances, by endpoint path
            (``mcp``, ``api/v1/mcp``).
        mcp_short_calls: Tool calls of open MCP sessions the instance endpoint answered itself.
        mcp_endpoint_sessions: MCP sessions the instance endpoint opened itself (``opened``), and
            those a request then needed the package's session for (``handed_to_package``).
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
        self.mcp_sessions_opened = Counter(
            "fleet_local_mcp_sessions_opened",
            "Stateful MCP sessions opened on instances, by endpoint path.",
            ["path"],
            registry=registry,
        )
        self.mcp_short_calls = Counter(
            "fleet_local_mcp_short_calls",
            "Tool calls of open MCP sessions answered by the instance endpoint itself.",
            registry=registry,
        )
        self.mcp_endpoint_sessions = Counter(
            "fleet_local_mcp_endpoint_sessions",
            "MCP sessions the instance endpoint opened itself, by what became of them.",
            ["outcome"],
            registry=registry,
        )
        self.pruned = Counter(
            "fleet_local_records_pruned",
            "Records and files the retention removed (--retention-seconds; replay records always), by kind.",
            ["kind"],
            registry=registry,
        )
        for reason in ("deleted", "expired"):
            self.instances_ended.labels(reason)
        for outcome in ("opened", "handed_to_package"):
            self.mcp_endpoint_sessions.labels(outcome)
        for outcome in ("passed", "failed", "error"):
            self.verifier_runs.labels(outcome)
        for source in ("job", "ingest"):
            self.sessions_finished.labels(source)
        for path in ("mcp", "api/v1/mcp"):
            self.mcp_sessions_opened.labels(path)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)

    def verifier_run(self, success: bool, score: float | None) -> None:
        """Count one finished verifier run.

        Args:
            success: The verifier ran and returned.
            score: Its score, if any.
        """
        outcome = "error" if not success else "passed" if score is not None and score >= 1.0 else "failed"
        self.verifier_runs.labels(outcome).inc()


class RequestMetrics:
    """ASGI middleware timing every HTTP request into ``ServerMetrics.requests``.

    Args:
        app: The app it wraps.
        metrics: Where the times go.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self._requests = metrics.requests
        # The histogram's child of each (group, status class), as ``labels`` returns it (the same
        # object every time), kept here: ``labels`` takes a lock and builds its key per call.
        self._children: dict[tuple[str, int], Any] = {}

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
            elapsed = time.perf_counter() - started
            group = route_group(str(scope.get("path", "")))
            key = (group, status // 100)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._requests.labels(group, f"{key[1]}xx")
            child.observe(elapsed)
