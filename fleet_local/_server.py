"""Running the local server in this process: ``serve`` (what ``fleet-sdk serve`` and
``python -m fleet_local serve`` run) and the state it builds.

``LocalFleet`` (``_local_fleet.py``) runs this same command in a child process; the names here
are the interface between the two: the environment variables the command reads its keys from
and the ``ready`` line it prints once it listens.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Mapping
from typing import Any

from ._claim import ServerClaim, claim_server
from ._state import LocalSettings, LocalState

_log = logging.getLogger(__name__)

API_KEY_ENV = "FLEET_LOCAL_API_KEY"
MODEL_API_KEY_ENV = "FLEET_LOCAL_MODEL_API_KEY"
"""Where ``fleet-sdk serve`` reads the key of ``--model-base-url`` (never from its command line)."""
READY_EVENT = "ready"


def build_state(settings: LocalSettings) -> LocalState:
    """Create the server state for ``settings``: store, environments, fault injector, services."""
    from . import _instance_browser, _lease_endpoints, _metrics_page
    from ._faults import FaultInjector
    from ._folder_spread import skips_recently_freed_inodes, spread_subfolders
    from ._lease_book import LeaseBook
    from ._mcp import session_manager, sessionless_manager
    from ._metrics import ServerMetrics
    from ._store import Store
    from .environments import registry
    from .sandbox._zygote import set_database_roots

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    set_database_roots([settings.data_dir])  # where the zygote's runs find their databases
    state = LocalState(
        settings=settings,
        store=Store(settings.data_dir / "fleet.db"),
        environments=registry(),
        faults=FaultInjector(enabled=settings.faults_enabled),
    )
    state.instances_dir.mkdir(exist_ok=True)
    if skips_recently_freed_inodes(state.instances_dir):
        spread_subfolders(state.instances_dir)  # each instance's folder in its own ext4 block group
    state.metrics = ServerMetrics()
    state.browser_leases = LeaseBook(
        state.store, state.data_dir, lambda: state.public_url, max_browsers=settings.max_browsers
    )
    state.mcp_sessions = session_manager(state)
    state.mcp_sessionless = sessionless_manager(state)
    state.lease_mcp_sessions = _lease_endpoints.session_manager(state)
    state.instance_end_hooks.append(lambda instance_id: _instance_browser.release(state, instance_id))
    _metrics_page.attach(state)
    return state


def jail_notice(*, allow_unjailed: bool, opt_in: str) -> str | None:
    """What to say when the verifier OS jail cannot start here (None when it can).

    The rule it describes is ``_verifier_exec.may_run_unjailed``'s.

    Args:
        allow_unjailed: The server runs trusted code under the audit hook alone.
        opt_in: How the reader allows that (a flag, a keyword).
    """
    from .sandbox import jail_status

    status = jail_status()
    if status.available:
        return None
    if allow_unjailed:
        outcome = (
            "requests bearing the server's key run their verifiers under the audit hook alone "
            f"({opt_in}: trusted code only); others only the bundled tasks' own"
        )
    else:
        outcome = (
            "only the bundled tasks' own verifiers run (under the audit hook alone); others are "
            f"refused (503) unless you opt in with {opt_in} (trusted code only)"
        )
    return f"the verifier OS jail is unavailable: {status.reason}; {outcome}"


def _announce_jail(state: LocalState) -> None:
    """Say once on stderr, at startup, what bounds a verifier run here (and which run at all)."""
    from ._verifier_exec import verifier_concurrency
    from .sandbox import jail_status

    notice = jail_notice(
        allow_unjailed=state.settings.allow_unjailed_verifiers, opt_in="--allow-unjailed-verifiers"
    )
    if notice is None:
        line = f"{jail_status().summary()}. At most {verifier_concurrency(state)} verifier runs at once"
    else:
        line = f"WARNING: {notice}"
    sys.stderr.write(f"fleet-sdk local server: {line}\n")
    sys.stderr.flush()


def client_env(url: str, api_key: str | None) -> dict[str, str]:
    """The environment variables a client of the server at ``url`` sets: ``FLEET_BASE_URL`` and,
    when the key may be announced (a generated one), ``FLEET_API_KEY``. Nothing else: the SDK
    derives the platform and browser URLs from the base URL and asks the server where screenshots
    go (``GET /v1/discovery``); the public SDK needs only these two as well.

    Args:
        url: The server's base URL.
        api_key: The key to announce, or None to leave it out.
    """
    env = {"FLEET_BASE_URL": url}
    if api_key:
        env["FLEET_API_KEY"] = api_key
    return env


def serve(
    settings: LocalSettings,
    *,
    announce: bool = True,
    ready_fields: Mapping[str, Any] | None = None,
    claim: ServerClaim | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, printing one JSON ``ready`` line once started.

    Args:
        settings: Server configuration.
        announce: Print ``{"event": "ready", "url": ..., "s3_url": ...}`` to stdout when ready.
        ready_fields: More fields for the ready line (a generated ``api_key``).
        claim: The address and data dir already taken (``claim_server``, as the command line
            does before anything else); taken here when None. Released when serving ends.

    Raises:
        ConfigurationError: The address cannot be bound (port in use, no such interface) or
            another server holds the data dir.
    """
    if claim is None:
        claim = claim_server(settings.host, settings.port, settings.data_dir)
    try:
        _serve_claimed(settings, claim, announce=announce, ready_fields=ready_fields)
    finally:
        claim.release()


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's ``http`` setting: httptools (C) when it is installed, with h11's bound on a
    request's head (``_httptools_protocol``), else uvicorn's pure-Python h11 parser.

    Named rather than left to uvicorn's "auto", which would take httptools without the bound.
    A uvicorn whose httptools protocol no longer has what the bound hooks into gets h11 and a
    warning naming what changed: slower, never unbounded.
    """
    if importlib.util.find_spec("httptools") is None:
        return "h11"
    from ._httptools_protocol import BoundedHttpToolsProtocol, uvicorn_mismatches

    if mismatches := uvicorn_mismatches():
        _log.warning(
            "parsing HTTP with h11: the request head bound does not fit this uvicorn (%s)",
            "; ".join(mismatches),
        )
        return "h11"
    return BoundedHttpToolsProtocol


def _serve_claimed(
    settings: LocalSettings, claim: ServerClaim, *, announce: bool, ready_fields: Mapping[str, Any] | None
) -> None:
    import uvicorn

    from ._app import create_app
    from ._memory import limit_arenas

    limit_arenas()  # before the server's threads start (``_memory``)
    sock = claim.socket
    host, port = sock.getsockname()[:2]
    state = build_state(settings)
    state.public_url = f"http://{host}:{port}"

    def ready() -> None:
        if announce:
            line: dict[str, Any] = {
                "event": READY_EVENT,
                "url": state.public_url,
                "s3_url": state.s3_url,
                "pid": os.getpid(),
            }
            line.update(ready_fields or {})
            line["client_env"] = client_env(state.public_url, (ready_fields or {}).get("api_key"))
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
        # The probe starts a jailed interpreter (~0.1-1 s): once ready, not in startup's way.
        threading.Thread(target=_announce_jail, args=(state,), name="fleet-jail", daemon=True).start()

    state.on_ready = ready

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Job sessions close their envs (browser lease, verifier, instance) through this
            # server's own HTTP API: stop them while it still answers, then stop listening.
            from ._episodes import stop_jobs
            from .sandbox._zygote import stop_zygote

            await stop_jobs(state)
            await super().shutdown(sockets)
            stop_zygote()  # the verifier zygote (and any run still in it) ends with the server

    config = uvicorn.Config(
        create_app(state),
        log_level="warning",
        http=http_protocol(),
        # The standard library's loop, named: uvicorn's "auto" would switch to uvloop whenever
        # it happens to be installed.
        loop="asyncio",
        lifespan="on",
        timeout_graceful_shutdown=5,
        access_log=False,
        # Longer than clients keep idle pooled connections, so the server never closes one
        # under a request a client is just sending (a load balancer's idle timeout is similar).
        timeout_keep_alive=75,
        # CDP WebSockets carry screenshots: compressing them costs the event loop ~10 ms each.
        ws_per_message_deflate=False,
    )
    try:
        Server(config).run(sockets=[sock])
    finally:
        state.store.close()
