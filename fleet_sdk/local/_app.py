"""The local server's ASGI app: every surface of the four schemas in one process.

Routes live in one module per surface; this module wires them together with
bearer auth, the ``ErrorResponse`` error shape, fault injection and a lifespan
that starts and stops the feature runtimes (S3 endpoint, MCP session manager,
TTL reaper, job runner).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Request

from . import _browser, _control, _jobs, _manager, _mcp, _s3, _sessions, _traces, _webui
from ._errors import EXCEPTION_HANDLERS, LocalAPIError
from ._faults import FaultMiddleware
from ._state import LocalState

# The platform's own answer to an X-API-Key header (seed): Bearer is the only scheme.
X_API_KEY_REFUSAL = "Authentication required. Provide either API key or JWT token with team ID"


def bearer_auth(state: LocalState) -> Any:
    """A dependency enforcing ``Authorization: Bearer <key>`` on a router."""

    async def check(request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise LocalAPIError(401, X_API_KEY_REFUSAL, code="unauthorized", retryable=False)
        if state.settings.api_key is not None and token.strip() != state.settings.api_key:
            raise LocalAPIError(401, "invalid API key", code="unauthorized", retryable=False)

    return Depends(check)


# Feature modules with a ``lifespan(state)`` async context manager, started in this order.
_LIFESPANS = (_s3, _control, _mcp, _jobs, _browser)


def create_app(state: LocalState) -> FastAPI:
    """Build the app for ``state``.

    Args:
        state: Shared server state; ``state.public_url`` must be set before requests arrive.
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for module in _LIFESPANS:
                hook = getattr(module, "lifespan", None)
                if hook is not None:
                    await stack.enter_async_context(hook(state))
            on_ready = state.extras.get("on_ready")
            if on_ready is not None:
                on_ready()
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
    auth = [bearer_auth(state)]
    app.include_router(_control.router(state), dependencies=auth)
    app.include_router(_jobs.router(state), dependencies=auth)
    app.include_router(_sessions.router(state), dependencies=auth)
    app.include_router(_traces.router(state), dependencies=auth)
    app.include_router(_browser.router(state), dependencies=auth)
    app.include_router(_manager.router(state))
    app.include_router(_webui.router(state))
    _mcp.mount(app, state)
    app.add_middleware(FaultMiddleware, injector=state.faults)
    return app
