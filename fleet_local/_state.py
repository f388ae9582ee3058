"""Everything one local server process shares between its routes."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ._ids import iso, new_id, utcnow
from ._instance_dbs import InstanceConnections
from ._live import LiveInstances
from ._store import Store

__all__ = ["LocalSettings", "LocalState", "iso", "new_id", "utcnow"]

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from concurrent.futures import ThreadPoolExecutor

    import anyio
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from fleet_sdk import AsyncFleet

    from ._faults import FaultInjector
    from ._lease_book import LeaseBook
    from ._metrics import ServerMetrics
    from .environments import EnvironmentDefinition


@dataclass
class LocalSettings:
    """How a local server is configured.

    Attributes:
        data_dir: Where state, seed and instance databases live.
        api_key: The bearer key clients must send; None accepts any bearer key.
        host: Interface to bind (loopback by default).
        port: Port to bind (0 picks a free one).
        s3: Start the S3-compatible endpoint for screenshots.
        verifier_timeout: Default wall-clock seconds for a verifier run.
        verifier_memory_mb: Address-space limit of a verifier process.
        verifier_scratch_mb: Size of a jailed verifier's scratch tmpfs, and of its ``/tmp``.
        verifier_concurrency: Verifier runs at once; more wait for a slot within their run's
            timeout, then get 503 ``verifier_busy``. None sizes it to the machine
            (``_verifier_exec.default_verifier_concurrency``).
        job_concurrency: Sessions a job runs at once.
        job_browser_concurrency: Browser leases (one headless Chromium each, 250-400 MiB) a job
            holds at once for its browser_use / computer_use sessions; within ``job_concurrency``.
        instance_browsers: Instances whose ``cdp`` resource may hold a browser lease at once
            (one headless Chromium each once used, 250-400 MiB; ``_instance_browser``): a part of
            ``max_browsers`` that keyless manager calls can take, so they never take it all.
        max_browsers: Browser leases live at once, server-wide (lease browsers, instance ``cdp``
            browsers and job sessions' browsers alike; each may run one Chromium); 429 with
            ``Retry-After`` beyond. None sizes it to the machine (``default_max_browsers``).
        model_base_url: OpenAI-compatible chat-completions URL for non-local policies.
        model_api_key: Key for ``model_base_url``.
        instance_ttl_seconds: Default TTL of an instance.
        reaper_interval: Seconds between two passes of the TTL reaper.
        faults_enabled: Serve the fault-injection admin API (tests only; off by default).
        mcp_session_idle_timeout: Seconds of inactivity after which an instance's MCP session is
            ended (its id then answers 404 and the client opens a new session).
        query_timeout: Seconds one SQL request may take (waiting included) before it is stopped.
        query_concurrency: SQL statements run at once; more wait, within their deadline.
        max_body_bytes: The largest request body accepted on a route that needs the key (413 beyond).
        max_keyless_body_bytes: The largest request body accepted on a route that needs no key (the
            instance manager API, MCP, the web UI): room for the largest verifier bundle (a 5 MiB
            zip, base64-encoded in JSON), no more.
        retention_seconds: How long finished records (terminated instances, verifier
            executions, finished sessions with their transcripts and jobs, ended leases) and the
            files that go with them are kept once they stopped changing; None keeps them for ever
            (``_retention``, which lists every kind).
        allow_unjailed_verifiers: Where the OS jail (bubblewrap) cannot start, run the verifiers
            of requests bearing the server's key under the audit hook alone: trusted code only
            (docs/threat-model.md). Requests without the key are refused (503) all the same;
            so is every run without this setting, but the bundled tasks' own verifiers.
    """

    data_dir: Path
    api_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    s3: bool = True
    verifier_timeout: float = 30.0
    verifier_memory_mb: int = 512
    verifier_scratch_mb: int = 64
    verifier_concurrency: int | None = None
    job_concurrency: int = 8
    job_browser_concurrency: int = 2
    instance_browsers: int = 2
    max_browsers: int | None = None
    model_base_url: str | None = None
    model_api_key: str | None = field(default=None, repr=False)
    instance_ttl_seconds: int = 3600
    reaper_interval: float = 5.0
    faults_enabled: bool = False
    mcp_session_idle_timeout: float = 1800.0
    allow_unjailed_verifiers: bool = False
    query_timeout: float = 30.0
    query_concurrency: int = 64
    max_body_bytes: int = 32 * 1024 * 1024
    max_keyless_body_bytes: int = 8 * 1024 * 1024
    retention_seconds: float | None = None


@dataclass
class LocalState:
    """Shared state of one running local server.

    Attributes:
        settings: Its configuration.
        store: The SQLite document store.
        environments: Bundled environments by ``env_key``.
        public_url: The base URL clients reach this server at (set once bound).
        s3_url: The S3-compatible endpoint URL, once started.
        faults: The fault injector (inactive unless a test arms it).
        browser_leases: The browser leases and their TTL reaper.
        mcp_sessions: The MCP session manager every instance endpoint is served by.
        mcp_sessionless: The MCP manager of instance requests made without a session.
        instance_end_hooks: Called with the id of every instance that ends (deleted or expired),
            for what must end with it.
        lease_mcp_sessions: The MCP session manager of the browser leases' endpoints.
        jobs: The running job tasks by job id (cancelled on shutdown).
        job_client: The client jobs play their sessions through: this server over loopback
            (``_episodes.job_client``; made on first use).
        on_ready: Called once every lifespan has started (the ready line).
        sql_workers: The gate SQL requests wait at and the SQL threads, which run below the
            server's priority (``_sql_work``; made on first use, inside the loop).
        verifier_gate: The slots verifier runs wait for (``_verifier_exec``; made on first use).
        argument_readers: The worker threads reading pickled verifier arguments' shapes share
            (``_verifier_exec``; made on first use).
        metrics: What ``GET /metrics`` counts (``_metrics``).
        instance_connections: Idle SQLite connections of live instances that tool calls reuse
            (``_instance_dbs``), closed as each instance ends.

    ``build_state`` (``fleet_local._server``) creates one with every service in place.
    """

    settings: LocalSettings
    store: Store
    environments: dict[str, EnvironmentDefinition]
    faults: FaultInjector
    public_url: str = ""
    s3_url: str | None = None
    browser_leases: LeaseBook = field(init=False)
    mcp_sessions: StreamableHTTPSessionManager = field(init=False)
    mcp_sessionless: StreamableHTTPSessionManager = field(init=False)
    lease_mcp_sessions: StreamableHTTPSessionManager = field(init=False)
    instance_end_hooks: list[Callable[[str], None]] = field(default_factory=list)
    jobs: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    job_client: AsyncFleet | None = None
    on_ready: Callable[[], None] | None = None
    sql_workers: tuple[asyncio.Semaphore, ThreadPoolExecutor] | None = None
    verifier_gate: anyio.Semaphore | None = None
    argument_readers: anyio.CapacityLimiter | None = None
    metrics: ServerMetrics = field(init=False)
    instance_connections: InstanceConnections = field(default_factory=InstanceConnections)

    def __post_init__(self) -> None:
        self.instance_end_hooks.append(self.instance_connections.forget)

    @functools.cached_property
    def live_instances(self) -> LiveInstances:
        """The environments of the instances known to be live (``_live``), forgotten as each ends."""
        live = LiveInstances()
        self.instance_end_hooks.append(live.forget)
        return live

    @property
    def data_dir(self) -> Path:
        """The data directory."""
        return self.settings.data_dir

    @functools.cached_property
    def bundled_verifiers(self) -> frozenset[str]:
        """The verifier code of the bundled tasks, as it ships with this package.

        Where the OS jail cannot start, this code (and only this, compared as text, so an
        imported or edited task's verifier never passes for it) runs under the audit hook
        alone without ``allow_unjailed_verifiers``.
        """
        return frozenset(task["verifier_code"] for env in self.environments.values() for task in env.tasks)

    @property
    def instances_dir(self) -> Path:
        """Folder holding every instance's folder (:meth:`instance_dir`)."""
        return self.data_dir / "instances"

    def instance_dir(self, instance_id: str) -> Path:
        """Folder holding an instance's ``seed.db`` and ``current.db``."""
        return self.instances_dir / instance_id

    def seed_path(self, env_key: str, version: str) -> Path:
        """Built seed database of an environment version."""
        return self.data_dir / "seeds" / f"{env_key}-{version}.db"

    def instance_root(self, instance_id: str) -> str:
        """``urls.root`` of an instance (ends with a slash)."""
        return f"{self.public_url}/instances/{instance_id}/"
