"""The endpoints a browser lease hands out: ``mcp_url`` (the ``computer`` tool) and ``cdp_url``.

* ``/browser/{lease_id}/mcp`` speaks MCP over streamable HTTP (stateless, JSON answers, like an
  instance's endpoint in ``_mcp``). ``tools/list`` returns the ``computer`` tool; ``tools/call``
  runs one action on the lease's Chromium and answers with the PNG screenshot taken after it as an
  image block (``_computer``). Any failure, the screenshot included, is ``isError: true`` with a
  text message: an image block is only ever a real PNG. Like an instance's MCP endpoint it takes
  no bearer key: the lease id is the capability, and the tool does only what a model may (act on
  pages of the lease's allowed hosts). Production clients of the tool (``fleet_sdk.browser``'s
  ``BrowserSession``) send none.
* ``/browser/{lease_id}/cdp`` answers like a browser's DevTools HTTP endpoint (``/json/version``,
  ``/json/list``) and serves its WebSockets (``/devtools/browser/...``, ``/devtools/page/<id>``),
  only with the server's bearer key: CDP reaches far more than the computer tool, so
  ``playwright.chromium.connect_over_cdp(cdp_url, headers={"Authorization": "Bearer <key>"})``
  (the headers go with the WebSocket too). Every WebSocket is a client of the lease's CDP proxy
  (``_cdp``, ``_cdp_policy``); Chromium itself has no DevTools port.

An unknown or ended lease is a 404 before MCP or CDP is spoken (after the key check on ``cdp_url``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from mcp import types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from fleet_sdk import BrowserStartError

from ._auth import auth_refusal
from ._browser import book, live_lease
from ._cdp import CDPError, pump
from ._computer import COMPUTER_TOOL, ComputerError, png_base64, run_action
from ._errors import LocalAPIError
from ._mcp import UnknownToolError, low_level_server
from ._state import LocalState

if TYPE_CHECKING:
    from ._chromium import LeaseBrowser

__all__ = ["ComputerOutcome", "computer_call", "lease_browser", "lifespan", "mount"]

logger = logging.getLogger(__name__)

_SCOPE_KEY = "fleet.lease_id"
MCP_PATH = "/browser/{lease_id}/mcp"
CDP_PATH = "/browser/{lease_id}/cdp"


async def lease_browser(state: LocalState, lease_id: str) -> LeaseBrowser:
    """The Chromium of a live lease, started on first use.

    Raises:
        LocalAPIError: 404 for an unknown or ended lease.
        BrowserStartError: The browser could not start.
    """

    record = await live_lease(state, lease_id)
    return await book(state).browsers.get(lease_id, record.lease.allowed_hosts, record.private.start_url)


@dataclass(frozen=True)
class ComputerOutcome:
    """One ``computer`` call: the PNG taken after the action, or the agent-facing error.

    Attributes:
        png: The screenshot (None on error).
        error: Why the call failed, or None.
    """

    png: bytes | None = None
    error: str | None = None


async def computer_call(
    state: LocalState, lease_id: str, arguments: dict[str, Any] | None
) -> ComputerOutcome:
    """Run one ``computer`` action on a lease's browser: the single path of the lease's MCP endpoint
    and of job episodes (``_job_browser``).

    Every failure (ended lease, browser that cannot start, bad argument, dead browser) comes back
    as an error outcome, never raised, so an agent sees it as an observation.

    Args:
        state: Server state.
        lease_id: The lease.
        arguments: The tool arguments (``action`` and its parameters).
    """
    try:
        browser = await lease_browser(state, lease_id)
        return ComputerOutcome(png=await run_action(browser, dict(arguments or {})))
    except LocalAPIError as exc:
        return ComputerOutcome(error=exc.detail)
    except (BrowserStartError, ComputerError) as exc:
        return ComputerOutcome(error=str(exc))
    except Exception as exc:  # a browser that died mid-call; the agent sees why
        logger.warning("computer action on lease %s failed: %s", lease_id, type(exc).__name__)
        return ComputerOutcome(error=f"computer failed: {type(exc).__name__}: {exc}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult.model_validate({"content": [{"type": "text", "text": text}], "isError": True})


def _lease_of(request: Any) -> str:
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict) or not isinstance(scope.get(_SCOPE_KEY), str):
        raise RuntimeError("MCP request without a lease id")
    return str(scope[_SCOPE_KEY])


def _computer_tool() -> types.Tool:
    return types.Tool.model_validate(
        {
            "name": COMPUTER_TOOL["name"],
            "description": COMPUTER_TOOL["description"],
            "inputSchema": COMPUTER_TOOL["input_schema"],
        }
    )


def _build_server(state: LocalState) -> Any:
    """The low-level MCP server of every lease; the lease id of a request is read from its scope."""

    async def call_tool(request: Any, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        if name != COMPUTER_TOOL["name"]:
            raise UnknownToolError(name)
        outcome = await computer_call(state, _lease_of(request), arguments)
        if outcome.png is None:
            return _error(outcome.error or "computer failed")
        image = {"type": "image", "data": png_base64(outcome.png), "mimeType": "image/png"}
        return types.CallToolResult.model_validate({"content": [image], "isError": False})

    async def list_tools(request: Any) -> list[types.Tool]:
        return [_computer_tool()]

    return low_level_server(
        "fleet-local-browser", "The computer tool of a browser lease.", list_tools, call_tool
    )


def session_manager(state: LocalState) -> StreamableHTTPSessionManager:
    """The lease MCP session manager (``build_state`` keeps it as ``state.lease_mcp_sessions``)."""
    return StreamableHTTPSessionManager(_build_server(state), json_response=True, stateless=True)


def _error_response(exc: LocalAPIError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


class _LeaseMCPEndpoint:
    """Raw ASGI endpoint: checks the lease is live, tags the scope with its id, serves MCP."""

    def __init__(self, state: LocalState) -> None:
        self._state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:

        lease_id = str(scope.get("path_params", {}).get("lease_id", ""))
        try:
            await live_lease(self._state, lease_id)
        except LocalAPIError as exc:
            await _error_response(exc)(scope, receive, send)
            return
        await self._state.lease_mcp_sessions.handle_request({**scope, _SCOPE_KEY: lease_id}, receive, send)


def _key_refusal(state: LocalState, headers: Any) -> LocalAPIError | None:
    return auth_refusal(
        headers.get("authorization", ""), state.settings.api_key, x_api_key="x-api-key" in headers
    )


def _unavailable(exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc), "code": "browser_unavailable", "retryable": True}, 503)


def _devtools_base(url: Any, lease_id: str) -> str:
    scheme = "wss" if url.scheme == "https" else "ws"
    return f"{scheme}://{url.netloc}{CDP_PATH.format(lease_id=lease_id)}/devtools"


def _cdp_endpoint(state: LocalState, which: str) -> Any:
    async def endpoint(request: Request) -> Response:
        refusal = _key_refusal(state, request.headers)
        if refusal is not None:
            return _error_response(refusal)
        lease_id = request.path_params["lease_id"]
        try:
            browser = await lease_browser(state, lease_id)
        except LocalAPIError as exc:
            return _error_response(exc)
        except BrowserStartError as exc:
            return _unavailable(exc)
        base = _devtools_base(request.url, lease_id)
        try:
            if which == "version":
                info = await browser.cdp.call("Browser.getVersion")
                return JSONResponse(
                    {
                        "Browser": info.get("product"),
                        "Protocol-Version": info.get("protocolVersion"),
                        "User-Agent": info.get("userAgent"),
                        "V8-Version": info.get("jsVersion"),
                        "WebKit-Version": info.get("revision"),
                        "webSocketDebuggerUrl": f"{base}/browser/{lease_id}",
                    }
                )
            targets = (await browser.cdp.call("Target.getTargets")).get("targetInfos", [])
        except CDPError as exc:
            return _unavailable(exc)
        pages = [
            {
                "description": "",
                "id": t["targetId"],
                "title": t.get("title", ""),
                "type": "page",
                "url": t.get("url", ""),
                "webSocketDebuggerUrl": f"{base}/page/{t['targetId']}",
            }
            for t in targets
            if t.get("type") == "page"
        ]
        return JSONResponse(pages)

    return endpoint


async def _refuse_socket(websocket: WebSocket, exc: LocalAPIError | Exception) -> None:
    """Refuse a WebSocket before accepting it: an HTTP answer where the server can send one."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        answer = _error_response(exc) if isinstance(exc, LocalAPIError) else _unavailable(exc)
        await websocket.send_denial_response(answer)
    else:
        await websocket.close(code=1008)


def _cdp_socket(state: LocalState) -> Any:
    async def endpoint(websocket: WebSocket) -> None:
        refusal = _key_refusal(state, websocket.headers)
        if refusal is not None:
            await _refuse_socket(websocket, refusal)
            return
        lease_id = websocket.path_params["lease_id"]
        target = websocket.path_params.get("target_id")
        try:
            browser = await lease_browser(state, lease_id)
            client = await browser.cdp.attach(target)
        except (LocalAPIError, BrowserStartError) as exc:
            await _refuse_socket(websocket, exc)
            return
        except CDPError as exc:  # no such page (or not one a client may attach to), or no browser
            refused = LocalAPIError(404, str(exc), code="not_found", retryable=False) if target else exc
            await _refuse_socket(websocket, refused)
            return
        await websocket.accept()

        async def receive() -> str | bytes | None:
            try:
                message = await websocket.receive()
            except WebSocketDisconnect:
                return None
            if message["type"] == "websocket.disconnect":
                return None
            text = message.get("text")
            return text if text is not None else message.get("bytes")

        await pump(client, receive, websocket.send_text)
        with contextlib.suppress(Exception):
            await websocket.close()

    return endpoint


def mount(app: FastAPI, state: LocalState) -> None:
    """Mount the lease MCP endpoint, the CDP discovery routes and the CDP WebSockets, ahead of
    any catch-all route."""
    mcp_endpoint = _LeaseMCPEndpoint(state)
    routes: list[Route | WebSocketRoute] = [Route(MCP_PATH + suffix, mcp_endpoint) for suffix in ("", "/")]
    for suffix, which in (
        ("", "version"),
        ("/json/version", "version"),
        ("/json", "list"),
        ("/json/list", "list"),
    ):
        for slash in ("", "/"):
            routes.append(Route(CDP_PATH + suffix + slash, _cdp_endpoint(state, which), methods=["GET"]))
    devtools = _cdp_socket(state)
    for path in ("/devtools/browser", "/devtools/browser/{browser_id}", "/devtools/page/{target_id}"):
        routes.append(WebSocketRoute(CDP_PATH + path, devtools))
    app.router.routes[0:0] = routes


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Run the lease MCP session manager for the life of the server."""
    async with state.lease_mcp_sessions.run():
        yield
