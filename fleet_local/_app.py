"""The local server's ASGI app: every surface of the four schemas in one process.

Routes live in one module per surface; this module wires them together with
bearer auth, request bodies validated against their schemas before any route runs
(``_request_gate``, ``_validation``),
the ``ErrorResponse`` error shape, fault injection and a lifespan that starts and
stops the feature runtimes (S3 endpoint, MCP session manager, TTL reaper, job
runner).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import Depends, FastAPI, Request

from . import (
    _browser,
    _control,
    _data_files,
    _debug_state,
    _episodes,
    _jobs,
    _lease_endpoints,
    _manager,
    _mcp,
    _metrics,
    _metrics_page,
    _reports,
    _retention,
    _s3,
    _session_logs,
    _sessions,
    _traces,
    _validation,
    _webui,
    _webui_apps,
)
from ._auth import auth_refusal
from ._errors import EXCEPTION_HANDLERS
from ._faults import FaultMiddleware
from ._request_gate import RequestGate
from ._state import LocalState


def bearer_auth(state: LocalState) -> Any:
    """A dependency enforcing ``Authorization: Bearer <key>`` on a router.

    ``RequestGate`` already refuses a bad key before the body is read; this keeps each keyed
    router correct on its own.
    """

    async def check(request: Request) -> None:
        refusal = auth_refusal(
            request.headers.get("authorization", ""),
            state.settings.api_key,
            x_api_key="x-api-key" in request.headers,
        )
        if refusal is not None:
            raise refusal

    return Depends(check)


@contextlib.contextmanager
def _loop_thread_named() -> Iterator[None]:
    """Name this thread's async library (``asyncio``) for ``sniffio`` while the server runs.

    anyio asks ``sniffio`` which library runs on every call that needs its backend (a thread
    hop, an event, a cancel scope, the ``mcp`` package's streams: dozens per MCP request), and
    ``sniffio`` finds asyncio by asking for the current task each time unless the thread says
    which library it runs, the way its documentation has an event loop declare itself. The
    server's lifespan runs on the thread of its event loop, which runs nothing else. A thread
    that already names a library is left as it is; the name is taken back when the server stops.
    """
    try:
        import sniffio
    except ImportError:  # anyio then asks asyncio directly
        yield
        return
    if sniffio.thread_local.name is not None:
        yield
        return
    sniffio.thread_local.name = "asyncio"
    try:
        yield
    finally:
        sniffio.thread_local.name = None


# Feature modules with a ``lifespan(state)`` async context manager, started in this order (and
# stopped in reverse): jobs stop first, so their sessions end their browser leases themselves
# before the browser pool is closed.
_LIFESPANS = (_s3, _control, _retention, _mcp, _browser, _lease_endpoints, _episodes)


def create_app(state: LocalState) -> FastAPI:
    """Build the app for ``state``.

    Args:
        state: Shared server state; ``state.public_url`` must be set before requests arrive.
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(_loop_thread_named())
            for module in _LIFESPANS:
                hook = getattr(module, "lifespan", None)
                if hook is not None:
                    await stack.enter_async_context(hook(state))
            if state.on_ready is not None:
                state.on_ready()
            yield

    app = FastAPI(
        title="fleet-sdk local server",
        description="A Fleet-compatible server for one machine. The contract is schemas/*.yaml.",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
    )
    app.state.local = state
    # Every JSON body is checked against its operation's schema by the RequestGate, after the
    # key (401 before 422).
    bodies = _validation.load_body_schemas({"instance-manager": _manager.MANAGER_PREFIX})
    keyed = [bearer_auth(state)]
    surfaces = [
        (_control.router(state), keyed),
        (_data_files.router(state), keyed),
        (_jobs.router(state), keyed),
        (_sessions.router(state), keyed),
        (_session_logs.router(state), keyed),
        (_traces.router(state), keyed),
        (_browser.router(state), keyed),
        (_reports.router(state), keyed),
        (_metrics_page.router(state), keyed),
        (_manager.router(state), []),
    ]
    webui = _webui.router(state)
    webui_apps = _webui_apps.router(state)
    for surface, dependencies in surfaces:
        app.include_router(surface, dependencies=dependencies)
    app.include_router(webui)
    app.include_router(webui_apps)
    # Fail at startup, not on a request, if a route with a body has no schema operation or vice versa.
    bodies.check_routes(
        [*(route for surface, _ in surfaces for route in surface.routes), *webui.routes, *webui_apps.routes]
    )
    _mcp.mount(app, state)
    _lease_endpoints.mount(app, state)
    app.add_middleware(
        FaultMiddleware,
        injector=state.faults,
        api_key=state.settings.api_key,
        live_objects=lambda: _debug_state.live_objects(state),
    )
    keyed_paths = [
        getattr(route, "path_regex", None) for surface, deps in surfaces if deps for route in surface.routes
    ]
    app.add_middleware(
        RequestGate,
        bodies=bodies,
        max_body_bytes=state.settings.max_body_bytes,
        max_keyless_body_bytes=state.settings.max_keyless_body_bytes,
        keyed_paths=[r for r in keyed_paths if isinstance(r, re.Pattern)],
        path_limits=_reports.BODY_LIMITS,
        check_key=lambda headers: auth_refusal(
            headers.get("authorization", ""), state.settings.api_key, x_api_key="x-api-key" in headers
        ),
    )
    app.add_middleware(_metrics.RequestMetrics, metrics=state.metrics)  # outermost: times it all
    return app
