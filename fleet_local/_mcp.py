"""MCP (streamable HTTP) for every local instance, and the one in-process tool runner.

Each instance serves its environment's tools at ``{urls.root}mcp`` and, as aggregator images do,
at ``{urls.root}api/v1/mcp`` (docs/wire.md#mcp); both endpoints serve the same tools, with or without a
trailing slash (no redirect, so a POST is never turned into a GET). The instance id comes from the
path; a tool runs against that instance's ``current`` database.

The server is the ``mcp`` package's low-level :class:`~mcp.server.lowlevel.Server` (``mcp`` 1.x or
2.x), announcing the ``fleet_sdk`` version as its ``serverInfo.version``, behind two
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager` answering JSON (no SSE
stream is needed: every tool call is a single request/response):

* a stateful one for clients that open a session (``initialize``, then requests carrying its
  ``Mcp-Session-Id``); sessions idle for ``LocalSettings.mcp_session_idle_timeout`` seconds are
  ended by the server;
* a stateless one for a request that carries no session id and is not an ``initialize``: the
  public SDK's ``env.mcp.list_tools()`` posts a bare ``tools/list``, and a ``tools/call`` may come
  the same way (docs/wire.md#mcp).

A ``tools/call`` of a session that is fully open (its ``notifications/initialized`` accepted, the
2025-11-25 revision negotiated and named in its header) is answered by the endpoint itself
(:class:`_ShortCalls`): the same tool runner and result shape as the ``mcp`` package's handler,
the session's idle timer held as the package's transport holds it, without the package's
per-request transport streams and dispatcher. Anything else (another method or revision, an
unknown tool, odd headers, a session the package is ending) goes to the package as before.

A plain session on that revision (the SDK's: an ``initialize`` with exactly the protocol
version, empty capabilities and a client name and version, JSON in and out) is opened by the
endpoint itself once the server has seen the package answer one such ``initialize`` (whose result
it then repeats, :meth:`_InstanceMCPEndpoint._open_own`): its ``notifications/initialized``, short
``tools/call`` and ``DELETE`` are answered there too, with the package's status, headers and
bodies, and its idle timeout, live-session count, session limit (``mcp`` 2.x) and end with its
instance kept as the package keeps them. The first request on it that anything else would answer
(``tools/list``, a ``GET`` stream, an unknown tool, other headers) makes the package's session
behind it, by handing the package the session's own ``initialize`` (and
``notifications/initialized``), and from then on goes there with the session id swapped both
ways. ``fleet_local_mcp_endpoint_sessions_total`` counts both steps.

An instance's sessions end with it (:class:`_InstanceSessions`): a client that never sends the
session's ``DELETE`` (a trainer that drops its envs and leaves them to the TTL) would otherwise
keep each one, and its server task and streams, until the idle timeout.

Job policies call tools through :func:`execute_tool`, the same function the MCP handlers use.

Results:

* success → one text block holding the JSON of the value (plus ``structuredContent`` when the value
  is an object);
* a tool error (:class:`ToolError`, e.g. a bad argument or "order 999 not found") →
  ``isError: true`` with the message as the only text block;
* an unknown tool → JSON-RPC error -32602 (invalid params), ``"Unknown tool: <name>"``, as the
  2025-11-25 revision answers it;
* an unknown or terminated instance → HTTP 404 (``code: instance_not_found``) before MCP is spoken.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

import anyio
import mcp.server.streamable_http_manager as _manager_module
from fastapi import FastAPI
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic_core import to_json
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from fleet_sdk import __version__

from . import _action_log
from ._errors import LocalAPIError
from ._state import LocalState
from ._validation import CHECKED_BODY, CheckedBody

if TYPE_CHECKING:
    from .environments import EnvironmentDefinition, ToolDefinition

__all__ = [
    "MCP_PATHS",
    "InstanceUnavailableError",
    "ToolOutcome",
    "UnknownToolError",
    "execute_tool",
    "instance_environment",
    "lifespan",
    "mount",
    "to_call_tool_result",
]

logger = logging.getLogger(__name__)

MCP_PATHS = ("/instances/{instance_id}/mcp", "/instances/{instance_id}/api/v1/mcp")
"""The two MCP endpoints of an instance, relative to the server (``{urls.root}mcp`` and ``api/v1/mcp``)."""

_SCOPE_KEY = "fleet.instance_id"
_LIVE_STATUSES = frozenset({"pending", "running"})


class UnknownToolError(Exception):
    """Raised by a ``tools/call`` handler of :func:`low_level_server` for a tool that does not exist;
    the client gets JSON-RPC error -32602 (invalid params).

    Args:
        name: The tool asked for.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}")
        self.name = name


class InstanceUnavailableError(Exception):
    """The instance does not exist, is terminated, or runs an environment this server lacks."""

    def __init__(self, instance_id: str, reason: str) -> None:
        super().__init__(f"instance {instance_id!r} {reason}")
        self.instance_id = instance_id
        self.reason = reason


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call, before it is shaped for MCP or a transcript.

    Attributes:
        name: The tool called.
        value: The handler's JSON-serialisable return value (None on error).
        error: The agent-facing error message, or None on success.
        unknown_tool: The environment has no tool of that name (``error`` says so).
    """

    name: str
    value: Any = None
    error: str | None = None
    unknown_tool: bool = False

    @property
    def is_error(self) -> bool:
        """True when the call failed."""
        return self.error is not None

    def text(self) -> str:
        """The single text block: the value as JSON, or the error message."""
        if self.error is not None:
            return self.error
        return json.dumps(self.value, default=str)


async def instance_environment(state: LocalState, instance_id: str) -> EnvironmentDefinition:
    """The environment of a live instance: from ``state.live_instances`` once an earlier request
    found it live, else from the store, in a worker thread.

    Args:
        state: Server state.
        instance_id: The instance.

    Raises:
        InstanceUnavailableError: The instance is unknown, terminated or of an unknown environment.
    """
    live = state.live_instances
    # ``state.instance_dir(instance_id)``, as a string: this runs on every MCP request.
    env_key = live.env_key(instance_id, f"{state.data_dir}{os.sep}instances{os.sep}{instance_id}")
    if env_key is None:  # not seen live yet (or just deleted): the store says
        env_key = await anyio.to_thread.run_sync(_live_env_key, state, instance_id)
        live.remember(instance_id, env_key)
    env = state.environments.get(env_key)
    if env is None:
        raise InstanceUnavailableError(instance_id, f"runs unknown environment {env_key!r}")
    return env


def _live_env_key(state: LocalState, instance_id: str) -> str:
    """The ``env_key`` of a live instance, from the store (blocking).

    Raises:
        InstanceUnavailableError: The instance is unknown or not live.
    """
    from . import _instances

    try:
        record = _instances.get_instance(state, instance_id)
    except LocalAPIError as exc:
        raise InstanceUnavailableError(instance_id, "not found") from exc
    if record.status not in _LIVE_STATUSES:
        raise InstanceUnavailableError(instance_id, f"is {record.status}")
    return record.env_key


def _run_tool_sync(
    state: LocalState, instance_id: str, tool: ToolDefinition, arguments: dict[str, Any]
) -> Any:
    """Run one tool against the instance's ``current`` database and log it in the instance's
    action log (blocking; call from a thread)."""
    # The instance's ``current`` connections stay open between calls (``_instance_dbs``): opened
    # as ``_instances.open_db`` opens them, without reading the store again, never creating it.
    folder = state.instance_dir(instance_id)
    try:
        with state.instance_connections.borrow(instance_id, folder, "ro" if tool.read_only else "rw") as conn:
            value = tool.call(conn, arguments)
            if not tool.read_only:
                conn.commit()
    except Exception as exc:
        outcome = {"error": getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"}
        _action_log.record(
            state, instance_id, "tool_call", path=tool.name, args=arguments, raw_payload=outcome
        )
        raise
    _action_log.record(
        state, instance_id, "tool_call", path=tool.name, args=arguments, raw_payload={"ok": True}
    )
    return value


async def execute_tool(
    state: LocalState,
    instance_id: str,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    env: EnvironmentDefinition | None = None,
) -> ToolOutcome:
    """Call one environment tool on an instance: the single tool path of MCP and job policies.

    Tool errors, unknown tools and handler crashes come back as an error outcome (never raised), so
    an agent sees them as observations. The blocking SQLite work runs in a worker thread.

    Args:
        state: Server state.
        instance_id: The instance whose ``current`` database the tool acts on.
        name: Tool name.
        arguments: Tool arguments (validated against the tool's ``input_schema``).
        env: The instance's environment, when the caller has just looked it up
            (:func:`instance_environment`); looked up here when None.

    Raises:
        InstanceUnavailableError: The instance is unknown or terminated.
    """
    from .environments import ToolError

    if env is None:
        env = await instance_environment(state, instance_id)
    tool = next((t for t in env.tools if t.name == name), None)
    if tool is None:
        return ToolOutcome(name=name, error=f"Unknown tool: {name}", unknown_tool=True)
    try:
        value = await anyio.to_thread.run_sync(
            _run_tool_sync, state, instance_id, tool, dict(arguments or {})
        )
    except ToolError as exc:
        return ToolOutcome(name=name, error=exc.message)
    except Exception as exc:
        logger.exception("tool %s crashed on instance %s", name, instance_id)
        return ToolOutcome(name=name, error=f"Tool {name} failed: {type(exc).__name__}: {exc}")
    return ToolOutcome(name=name, value=json.loads(json.dumps(value, default=str)))


def to_call_tool_result(outcome: ToolOutcome) -> types.CallToolResult:
    """Shape an outcome as an MCP ``CallToolResult``."""
    # Built from the wire (camelCase) form, which both ``mcp`` majors accept.
    content = [{"type": "text", "text": outcome.text()}]
    if outcome.is_error:
        return types.CallToolResult.model_validate({"content": content, "isError": True})
    structured = outcome.value if isinstance(outcome.value, dict) else None
    return types.CallToolResult.model_validate(
        {"content": content, "structuredContent": structured, "isError": False}
    )


def mcp_tool(tool: ToolDefinition) -> types.Tool:
    """An environment tool as MCP ``tools/list`` shows it."""
    return types.Tool.model_validate(
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": {"readOnlyHint": tool.read_only, "destructiveHint": not tool.read_only},
        }
    )


_TOOL_LISTS: weakref.WeakKeyDictionary[EnvironmentDefinition, list[types.Tool]] = weakref.WeakKeyDictionary()


def _mcp_tools(env: EnvironmentDefinition) -> list[types.Tool]:
    """``tools/list`` of an environment, built once (its tools never change while it is loaded)."""
    tools = _TOOL_LISTS.get(env)
    if tools is None:
        tools = _TOOL_LISTS[env] = [mcp_tool(tool) for tool in env.tools]
    return list(tools)


def _instance_of(request: Any) -> str:
    """The instance id the endpoint tagged the HTTP request's ASGI scope with."""
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict) or not isinstance(scope.get(_SCOPE_KEY), str):
        raise RuntimeError("MCP request without an instance id")
    return str(scope[_SCOPE_KEY])


async def call_tool_result(
    state: LocalState,
    instance_id: str,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    env: EnvironmentDefinition | None = None,
) -> types.CallToolResult:
    """A ``tools/call`` of an instance as MCP answers it (the package's handler and
    :class:`_ShortCalls` alike): a vanished instance is an ``isError`` result.

    Args:
        state: Server state.
        instance_id: The instance.
        name: The tool.
        arguments: Its arguments.
        env: The instance's environment, when the caller has just looked it up.

    Raises:
        UnknownToolError: The environment has no such tool (JSON-RPC -32602).
    """
    try:
        outcome = await execute_tool(state, instance_id, name, arguments, env=env)
    except InstanceUnavailableError as exc:
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        )
    if outcome.unknown_tool:
        raise UnknownToolError(name)
    return to_call_tool_result(outcome)


def _build_server(state: LocalState) -> Any:
    """The low-level MCP server; the instance id of each request is read from its ASGI scope."""

    async def list_tools(request: Any) -> list[types.Tool]:
        return _mcp_tools(await instance_environment(state, _instance_of(request)))

    async def call_tool(request: Any, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        return await call_tool_result(state, _instance_of(request), name, arguments)

    return low_level_server(
        "fleet-local-instance", "Tools of a local Fleet env instance.", list_tools, call_tool
    )


def low_level_server(
    name: str,
    instructions: str,
    list_tools: Callable[[Any], Awaitable[list[types.Tool]]],
    call_tool: Callable[[Any, str, dict[str, Any] | None], Awaitable[types.CallToolResult]],
) -> Any:
    """A low-level MCP server whose two handlers get the HTTP request of each MCP request.

    ``mcp`` 2.x takes handlers as constructor arguments, 1.x through decorators; both wrap the
    same two functions, so the instance and browser-lease endpoints share this one adapter. The
    server announces the ``fleet_sdk`` version; :class:`UnknownToolError` from ``call_tool``
    becomes JSON-RPC error -32602 on either major.

    Args:
        name: The server name announced at initialization.
        instructions: The instructions announced at initialization.
        list_tools: ``tools/list``: the request to the tools.
        call_tool: ``tools/call``: the request, tool name and arguments to the result.
    """
    if not hasattr(Server, "list_tools"):  # mcp 2.x
        from mcp.shared.exceptions import MCPError  # type: ignore[attr-defined,unused-ignore]

        async def on_list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=await list_tools(ctx.request))

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            try:
                return await call_tool(ctx.request, params.name, params.arguments)
            except UnknownToolError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from exc

        # Typed through Any: mypy sees whichever mcp major is installed, and 1.x lacks these keywords.
        server_v2: Any = Server
        return server_v2(
            name,
            version=__version__,
            instructions=instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    from mcp.shared.exceptions import McpError  # type: ignore[attr-defined,unused-ignore]

    server: Any = Server(name, version=__version__, instructions=instructions)  # mcp 1.x

    @server.list_tools()  # type: ignore[untyped-decorator]
    async def list_tools_v1() -> list[types.Tool]:
        return await list_tools(server.request_context.request)

    v1_types: Any = types  # 1.x names, typed through Any as the server is

    # Registered directly, not through ``server.call_tool()``: that decorator turns every
    # exception into an ``isError`` result, and an unknown tool is a protocol error.
    async def call_tool_v1(request: Any) -> Any:
        try:
            result = await call_tool(
                server.request_context.request, request.params.name, request.params.arguments
            )
        except UnknownToolError as exc:
            raise McpError(v1_types.ErrorData(code=v1_types.INVALID_PARAMS, message=str(exc))) from exc
        return v1_types.ServerResult(result)

    server.request_handlers[types.CallToolRequest] = call_tool_v1
    return server


def session_manager(state: LocalState) -> StreamableHTTPSessionManager:
    """The MCP session manager of a server (``build_state`` keeps it as ``state.mcp_sessions``).

    Stateful: a client initializes once and reuses its session; an idle session is ended after
    ``mcp_session_idle_timeout`` and its id then answers 404 (the client opens a new one).
    """
    return StreamableHTTPSessionManager(
        _build_server(state),
        json_response=True,
        stateless=False,
        session_idle_timeout=state.settings.mcp_session_idle_timeout,
    )


def sessionless_manager(state: LocalState) -> StreamableHTTPSessionManager:
    """The manager of requests made without a session (``build_state`` keeps it as
    ``state.mcp_sessionless``): each is served on its own, no ``initialize`` needed."""
    return StreamableHTTPSessionManager(_build_server(state), json_response=True, stateless=True)


_NOT_JSON: Any = object()
""":func:`_message` of a body that is no JSON."""


def _message(scope: Scope, body: bytes) -> Any:
    """The JSON value of a request body: what the request gate decoded from the same bytes
    (``CHECKED_BODY``), else decoded here; :data:`_NOT_JSON` when it is none."""
    checked = scope.get(CHECKED_BODY)
    if isinstance(checked, CheckedBody) and checked.value is not None:
        return checked.value
    try:
        return json.loads(body)
    except ValueError:
        return _NOT_JSON


def _opens_session(message: Any) -> bool:
    """Whether a POST body is (or holds, in a batch) an ``initialize`` request; one that is not
    JSON goes to the session manager too, which answers it as a parse error.

    Args:
        message: The body's JSON value (:func:`_message`).
    """
    if message is _NOT_JSON:
        return True
    messages = message if isinstance(message, list) else [message]
    return any(not isinstance(m, dict) or m.get("method") == "initialize" for m in messages)


_SESSION_HEADER = b"mcp-session-id"


@dataclass(eq=False)
class _OwnSession:
    """A session the endpoint opened itself (:meth:`_InstanceMCPEndpoint._open_own`).

    Attributes:
        instance_id: Its instance.
        path: The endpoint it was opened on (``mcp`` or ``api/v1/mcp``), the metric's label.
        revision: The revision negotiated (:data:`SHORT_REVISION`).
        opening: The ``initialize`` request's scope and body, replayed to the package when a
            request needs the package's session (:meth:`_InstanceMCPEndpoint._materialize`).
        initialized: Its ``notifications/initialized`` was accepted.
        package_id: The package's session standing behind it, once one was needed.
        in_flight: Requests on it being answered (no idle countdown meanwhile).
        last: When its last request was answered (the loop's clock).
    """

    instance_id: str
    path: str
    revision: str
    opening: tuple[Scope, bytes]
    initialized: bool = False
    package_id: str | None = None
    in_flight: int = 0
    last: float = 0.0
    timer: asyncio.TimerHandle | None = None
    lock: asyncio.Lock | None = None


_ENDPOINT_SESSIONS: weakref.WeakKeyDictionary[Any, _InstanceSessions] = weakref.WeakKeyDictionary()


def endpoint_sessions(manager: Any) -> list[str]:
    """The ids of the sessions the instance endpoint opened itself on ``manager``'s behalf that
    the manager does not hold (the debug route and the live-session gauge add them to its own).

    Args:
        manager: A session manager (``state.mcp_sessions``; any other has none).
    """
    sessions = _ENDPOINT_SESSIONS.get(manager) if manager is not None else None
    return sessions.own_ids() if sessions is not None else []


class _InstanceSessions:
    """The stateful MCP sessions open on each instance, ended when the instance ends.

    The endpoint notes each session it sees opened (the ``Mcp-Session-Id`` of a successful
    ``initialize``) or ended by its client; ``end`` (an instance end hook, called from any
    thread) ends what is left of an instance's sessions on the server's loop, by handing the
    session manager the ``DELETE`` a closing client would send. Entries live no longer than
    their instance.

    Args:
        state: Server state.
    """

    def __init__(self, state: LocalState) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._by_instance: dict[str, set[str]] = {}
        self._revisions: dict[str, str] = {}  # session id -> its negotiated revision, once initialized
        self._negotiated: dict[str, str] = {}  # the same, between ``initialize`` and ``initialized``
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ending: set[asyncio.Task[None]] = set()
        self._own: dict[str, _OwnSession] = {}  # sessions the endpoint opened itself, by id
        self._own_by_instance: dict[str, set[str]] = {}
        self._answers: dict[str, Any] = {}  # the package's ``initialize`` result, by revision asked
        _ENDPOINT_SESSIONS[state.mcp_sessions] = self

    def seen_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the loop the sessions run on (the endpoint's, on its first request)."""
        self._loop = loop

    def opened(self, instance_id: str, session_id: str, path: str) -> None:
        """Note a session opened on an instance, through its endpoint ``path`` (``mcp`` or
        ``api/v1/mcp``)."""
        with self._lock:
            self._by_instance.setdefault(instance_id, set()).add(session_id)
        self._state.metrics.mcp_sessions_opened.labels(path).inc()

    def negotiated(self, session_id: str, revision: str) -> None:
        """Note the revision an ``initialize`` answer gave a session."""
        with self._lock:
            self._negotiated[session_id] = revision

    def initialized(self, instance_id: str, session_id: str) -> None:
        """Note a session whose ``notifications/initialized`` the package accepted."""
        with self._lock:
            revision = self._negotiated.pop(session_id, None)
            if revision is not None and session_id in self._by_instance.get(instance_id, ()):
                self._revisions[session_id] = revision

    def revision(self, session_id: str) -> str | None:
        """The revision of a fully initialized session, or None."""
        return self._revisions.get(session_id)

    def closed(self, instance_id: str, session_id: str) -> None:
        """Forget a session its client ended."""
        with self._lock:
            self._revisions.pop(session_id, None)
            self._negotiated.pop(session_id, None)
            sessions = self._by_instance.get(instance_id)
            if sessions is not None:
                sessions.discard(session_id)
                if not sessions:
                    del self._by_instance[instance_id]

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_instance.keys() | self._own_by_instance.keys())

    def learn(self, requested: str, body: bytes) -> None:
        """Keep the result of the package's answer to a plain ``initialize`` asking for revision
        ``requested`` (the same for every session of this server), when it agreed to it."""
        try:
            message = json.loads(body)
        except ValueError:
            return
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and result.get("protocolVersion") == requested:
            self._answers[requested] = result

    def answer_for(self, requested: str) -> Any:
        """The package's ``initialize`` result for revision ``requested``, once learned, or None."""
        return self._answers.get(requested)

    def own_count(self) -> int:
        """Sessions the endpoint opened itself and the package does not hold (yet)."""
        return len(self.own_ids())

    def own_ids(self) -> list[str]:
        """The ids of :meth:`own_count`'s sessions (any thread: the metrics page reads them)."""
        with self._lock:
            return [sid for sid, own in self._own.items() if own.package_id is None]

    def own(self, session_id: str) -> _OwnSession | None:
        """A session the endpoint opened itself, or None."""
        return self._own.get(session_id)

    def open_own(self, session_id: str, own: _OwnSession) -> None:
        """Note a session the endpoint opened itself, and start its idle timer (on the loop)."""
        with self._lock:
            self._own[session_id] = own
            self._own_by_instance.setdefault(own.instance_id, set()).add(session_id)
        self._state.metrics.mcp_sessions_opened.labels(own.path).inc()
        self._state.metrics.mcp_endpoint_sessions.labels("opened").inc()
        self._arm(session_id, own, self._idle_timeout())

    def adopt(self, instance_id: str, package_id: str, revision: str) -> None:
        """Note the package's session that now stands behind one the endpoint opened (it ends
        with the instance as any other; not counted as opened again)."""
        with self._lock:
            self._by_instance.setdefault(instance_id, set()).add(package_id)
            self._negotiated[package_id] = revision

    def drop_own(self, session_id: str) -> None:
        """Forget a session the endpoint opened (ended by its client, its idle time or its
        instance); on the loop's thread."""
        with self._lock:
            own = self._own.pop(session_id, None)
            if own is None:
                return
            sessions = self._own_by_instance.get(own.instance_id)
            if sessions is not None:
                sessions.discard(session_id)
                if not sessions:
                    del self._own_by_instance[own.instance_id]
        if own.timer is not None:
            own.timer.cancel()
            own.timer = None

    def _idle_timeout(self) -> float | None:
        timeout = self._state.settings.mcp_session_idle_timeout
        return float(timeout) if timeout is not None and math.isfinite(timeout) and timeout > 0 else None

    def _arm(self, session_id: str, own: _OwnSession, delay: float | None) -> None:
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        own.timer = loop.call_later(delay, self._expire, session_id)

    def _expire(self, session_id: str) -> None:
        """The idle timer of a session the endpoint opened: ends it once no request was in
        flight for the idle timeout (as the package's transport does), or, once the package
        holds it, forgets it when the package ended it."""
        own = self._own.get(session_id)
        timeout = self._idle_timeout()
        if own is None or timeout is None:
            return
        own.timer = None
        if own.package_id is not None:
            if own.package_id not in (getattr(self._state.mcp_sessions, "_server_instances", None) or {}):
                self.drop_own(session_id)
            else:
                self._arm(session_id, own, timeout)
            return
        if own.in_flight:
            self._arm(session_id, own, timeout)
            return
        remaining = own.last + timeout - asyncio.get_running_loop().time()
        if remaining <= 0:
            self.drop_own(session_id)
        else:
            self._arm(session_id, own, remaining)

    def end(self, instance_id: str) -> None:
        """End the sessions still open on an instance that ended (any thread)."""
        with self._lock:
            sessions = self._by_instance.pop(instance_id, None)
            for session_id in sessions or ():
                self._revisions.pop(session_id, None)
                self._negotiated.pop(session_id, None)
            own = set(self._own_by_instance.get(instance_id, ()))
        loop = self._loop
        if (not sessions and not own) or loop is None or loop.is_closed():
            return
        path = MCP_PATHS[0].format(instance_id=instance_id)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: so did the sessions
            if own:
                loop.call_soon_threadsafe(self._drop_all, own)
            if sessions:
                loop.call_soon_threadsafe(self._spawn, path, sessions)

    def _drop_all(self, session_ids: set[str]) -> None:
        for session_id in session_ids:
            self.drop_own(session_id)

    def _spawn(self, path: str, sessions: set[str]) -> None:
        for session_id in sessions:
            task = asyncio.ensure_future(self._delete(path, session_id))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def _delete(self, path: str, session_id: str) -> None:
        host = self._state.public_url.split("://", 1)[-1].encode() or b"127.0.0.1"
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(_SESSION_HEADER, session_id.encode()), (b"host", host)],
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
        }

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            pass  # nobody waits for this answer

        try:
            await self._state.mcp_sessions.handle_request(scope, receive, send)
        except Exception:  # the session may be ending on its own: the idle timeout is the backstop
            logger.debug("could not end MCP session %s", session_id, exc_info=True)


class _InstanceMCPEndpoint:
    """Raw ASGI endpoint: checks the instance is live, tags the scope with its id, serves MCP
    (sessionless requests on their own, see the module docstring)."""

    def __init__(self, state: LocalState, sessions: _InstanceSessions) -> None:
        self._state = state
        self._sessions = sessions
        self._short = _ShortCalls(state, sessions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        instance_id = str(scope.get("path_params", {}).get("instance_id", ""))
        try:
            env = await instance_environment(self._state, instance_id)
        except InstanceUnavailableError as exc:
            body = {"detail": str(exc), "code": "instance_not_found", "retryable": False}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        self._sessions.seen_on(asyncio.get_running_loop())
        headers = scope.get("headers", [])
        session_id = next((v.decode("latin-1") for k, v in headers if k.lower() == _SESSION_HEADER), None)
        if session_id is not None:
            own = self._sessions.own(session_id)
            if own is not None and own.instance_id == instance_id:
                await self._serve_own(
                    scope, receive, send, instance_id=instance_id, env=env, session_id=session_id, own=own
                )
                return
        await self._serve(scope, receive, send, instance_id=instance_id, env=env, session_id=session_id)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        instance_id: str,
        env: EnvironmentDefinition,
        session_id: str | None,
    ) -> None:
        """Serve a request of a live instance that is not on a session the endpoint opened."""
        if scope.get("method") == "POST" and session_id is not None:
            payload = await _read_body(receive)  # bounded by the server's body limit (RequestGate)
            message = _message(scope, payload)
            if await self._short.answer(
                scope,
                instance_id=instance_id,
                env=env,
                session_id=session_id,
                payload=payload,
                message=message,
                send=send,
            ):
                return
            tagged = {**scope, _SCOPE_KEY: instance_id}
            if _is_initialized_notification(message):
                send = self._noting_initialized(instance_id, session_id, send)
            await self._state.mcp_sessions.handle_request(tagged, _replay(payload, receive), send)
            return
        tagged = {**scope, _SCOPE_KEY: instance_id}
        if scope.get("method") != "POST" or session_id is not None:
            if scope.get("method") == "DELETE" and session_id is not None:
                self._sessions.closed(instance_id, session_id)
            await self._state.mcp_sessions.handle_request(tagged, receive, send)
            return
        payload = await _read_body(receive)  # bounded by the server's body limit (RequestGate)
        message = _message(scope, payload)
        if _opens_session(message):
            path = "api/v1/mcp" if "/api/v1/mcp" in str(scope.get("path", "")) else "mcp"
            requested = self._plain_opening(scope, payload, message)
            if requested is not None:
                known = self._sessions.answer_for(requested)
                if known is not None:
                    await self._open_own(
                        scope,
                        send,
                        instance_id=instance_id,
                        path=path,
                        payload=payload,
                        message=message,
                        result=known,
                    )
                    return
            if self._sessions.own_count() and self._at_session_limit():  # the package counts only its own
                await _too_many_sessions()(scope, _no_receive, send)
                return
            await self._state.mcp_sessions.handle_request(
                tagged, _replay(payload, receive), self._noting_session(instance_id, path, send, requested)
            )
            return
        sessionless = {**tagged, "headers": _accepting_json(tagged.get("headers", []))}
        await self._state.mcp_sessionless.handle_request(sessionless, _replay(payload, receive), send)

    def _at_session_limit(self) -> bool:
        """Whether the package's session limit (``max_sessions``) is reached, counting the sessions
        the endpoint holds itself."""
        manager = self._state.mcp_sessions
        limit = getattr(manager, "max_sessions", None)
        held = len(getattr(manager, "_server_instances", None) or {})
        return limit is not None and held + self._sessions.own_count() >= limit

    def _plain_opening(self, scope: Scope, payload: bytes, message: Any) -> str | None:
        """The revision a plain ``initialize`` asks for, when the endpoint may open its session
        itself (see :meth:`_open_own`); else None."""
        if len(payload) > _SHORT_MAX_BODY or scope.get("user") is not None or not _package_plain(self._state):
            return None
        headers = scope.get("headers", [])
        if _header(headers, b"mcp-protocol-version") is not None or not _json_in_and_out(headers):
            return None
        if not isinstance(message, dict) or message.keys() != _CALL_KEYS or message.get("jsonrpc") != "2.0":
            return None
        request_id, params = message.get("id"), message.get("params")
        if message.get("method") != "initialize" or not _plain_id(request_id) or not isinstance(params, dict):
            return None
        info = params.get("clientInfo")
        if params.keys() != _OPENING_KEYS or params.get("capabilities") != {} or not isinstance(info, dict):
            return None
        if info.keys() != _INFO_KEYS or not all(isinstance(value, str) for value in info.values()):
            return None
        revision = params.get("protocolVersion")
        return revision if revision == SHORT_REVISION else None

    async def _open_own(
        self,
        scope: Scope,
        send: Send,
        *,
        instance_id: str,
        path: str,
        payload: bytes,
        message: dict[str, Any],
        result: Any,
    ) -> None:
        """Answer a plain ``initialize`` as the package answers it (its result, learned from the
        package's answer to the same request), opening a session the endpoint holds itself: no
        transport, streams or server task until a request on it needs the package's session."""
        if self._at_session_limit():
            await _too_many_sessions()(scope, _no_receive, send)
            return
        session_id = uuid.uuid4().hex
        opening = {key: scope[key] for key in _OPENING_SCOPE if key in scope}
        own = _OwnSession(instance_id, path, SHORT_REVISION, (opening, payload))
        own.last = asyncio.get_running_loop().time()
        self._sessions.open_own(session_id, own)
        body = to_json({"jsonrpc": "2.0", "id": message["id"], "result": result})
        await _json_answer(body, 200, session_id)(scope, _no_receive, send)

    async def _serve_own(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        instance_id: str,
        env: EnvironmentDefinition,
        session_id: str,
        own: _OwnSession,
    ) -> None:
        """Serve a request on a session the endpoint opened: its ``notifications/initialized``,
        short ``tools/call`` and ``DELETE`` here, anything else by the package's session standing
        behind it (made on first need), the session id translated both ways."""
        loop = asyncio.get_running_loop()
        own.in_flight += 1
        try:
            if own.package_id is None:
                method = scope.get("method")
                headers = scope.get("headers", [])
                if method == "POST":
                    payload = await _read_body(receive)  # bounded by the server's body limit
                    message = _message(scope, payload)
                    revision_ok = _header(headers, b"mcp-protocol-version") in (None, own.revision)
                    if (
                        own.lock is None  # a package session is not being made for it
                        and not own.initialized
                        and message == _INITIALIZED
                        and revision_ok
                        and _json_in_and_out(headers)
                        and len([k for k, _ in headers if k.lower() == _SESSION_HEADER]) == 1
                    ):
                        own.initialized = True
                        await _json_answer(None, 202, session_id)(scope, _no_receive, send)
                        return
                    if own.initialized and await self._short.answer(
                        scope,
                        instance_id=instance_id,
                        env=env,
                        session_id=session_id,
                        payload=payload,
                        message=message,
                        send=send,
                        own=own,
                    ):
                        return
                    receive = _replay(payload, receive)
                elif (
                    method == "DELETE"
                    and own.lock is None
                    and _header(headers, b"mcp-protocol-version") in (None, own.revision)
                    and len([k for k, _ in headers if k.lower() == _SESSION_HEADER]) == 1
                ):
                    self._sessions.drop_own(session_id)
                    await _json_answer(None, 200, session_id)(scope, _no_receive, send)
                    return
                if await self._materialize(session_id, own) is None:
                    # The package could not open it (its session limit): the session is gone,
                    # and the package answers its id as it answers any unknown one (404).
                    self._sessions.drop_own(session_id)
                    await self._serve(
                        scope, receive, send, instance_id=instance_id, env=env, session_id=session_id
                    )
                    return
            package_id = own.package_id
            assert package_id is not None
            status = await self._forward(
                scope,
                receive,
                send,
                instance_id=instance_id,
                env=env,
                session_id=session_id,
                package_id=package_id,
            )
            if status == 404 or (scope.get("method") == "DELETE" and status is not None and status < 300):
                self._sessions.drop_own(session_id)
        finally:
            own.in_flight -= 1
            own.last = loop.time()

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        instance_id: str,
        env: EnvironmentDefinition,
        session_id: str,
        package_id: str,
    ) -> int | None:
        """Serve a request on the package's session ``package_id`` standing behind the
        endpoint's ``session_id``: the id swapped in the request and back in the answer.
        Returns the answer's status."""
        ours, theirs = session_id.encode("latin-1"), package_id.encode("latin-1")
        headers = [(k, theirs if k.lower() == _SESSION_HEADER else v) for k, v in scope.get("headers", [])]
        status: int | None = None

        async def swapping(message: Any) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = message.get("status")
                swapped = [
                    (k, ours if k.lower() == _SESSION_HEADER and v == theirs else v)
                    for k, v in message.get("headers", [])
                ]
                message = {**message, "headers": swapped}
            await send(message)

        await self._serve(
            {**scope, "headers": headers},
            receive,
            swapping,
            instance_id=instance_id,
            env=env,
            session_id=package_id,
        )
        return status

    async def _materialize(self, session_id: str, own: _OwnSession) -> str | None:
        """The package's session standing behind ``own``, opened on first need by replaying its
        ``initialize`` (and ``notifications/initialized``, when the client sent it) to the
        package; None when the package refused."""
        if own.lock is None:
            own.lock = asyncio.Lock()
        async with own.lock:
            if own.package_id is not None or self._sessions.own(session_id) is not own:
                return own.package_id
            opening, payload = own.opening
            status, answer = await self._internal({**opening, _SCOPE_KEY: own.instance_id}, payload)
            package_id = next((v.decode("latin-1") for k, v in answer if k.lower() == _SESSION_HEADER), None)
            if status is None or status >= 400 or package_id is None:
                return None
            self._sessions.adopt(own.instance_id, package_id, own.revision)
            if own.initialized:
                headers = [
                    (k, v) for k, v in opening.get("headers", []) if k.lower() not in _REPLACED_HEADERS
                ] + [
                    (_SESSION_HEADER, package_id.encode("latin-1")),
                    (b"mcp-protocol-version", own.revision.encode()),
                    (b"content-length", str(len(_INITIALIZED_BODY)).encode()),
                ]
                status, _ = await self._internal(
                    {**opening, "headers": headers, _SCOPE_KEY: own.instance_id}, _INITIALIZED_BODY
                )
                if status == 202:
                    self._sessions.initialized(own.instance_id, package_id)
            if self._sessions.own(session_id) is not own:  # ended meanwhile (its instance ended)
                self._sessions.closed(own.instance_id, package_id)
                await self._internal(_ending_scope(opening, package_id), b"")
                return None
            own.package_id = package_id
            self._state.metrics.mcp_endpoint_sessions.labels("handed_to_package").inc()
            return package_id

    async def _internal(self, scope: Scope, body: bytes) -> tuple[int | None, list[tuple[bytes, bytes]]]:
        """Hand the session manager one request made here; its status and headers."""
        answer: dict[str, Any] = {}

        async def receive() -> Any:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Any) -> None:
            if message.get("type") == "http.response.start":
                answer.update(message)

        await self._state.mcp_sessions.handle_request(scope, receive, send)
        return answer.get("status"), list(answer.get("headers", []))

    def _noting_session(self, instance_id: str, path: str, send: Send, requested: str | None = None) -> Send:
        """``send``, noting the session id a successful ``initialize`` answers with, and the
        revision its JSON answer negotiated; and the answer's result, when ``requested`` (the
        revision of a plain ``initialize``, :meth:`_plain_opening`) is set."""
        opened: str | None = None
        body: list[bytes] = []

        async def noting(message: Any) -> None:
            nonlocal opened
            if message.get("type") == "http.response.start" and message.get("status", 500) < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == _SESSION_HEADER:
                        opened = value.decode("latin-1")
                        self._sessions.opened(instance_id, opened, path)
            elif message.get("type") == "http.response.body" and opened is not None:
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    revision = _negotiated_revision(b"".join(body))
                    if revision is not None:
                        self._sessions.negotiated(opened, revision)
                    if requested is not None:
                        self._sessions.learn(requested, b"".join(body))
            await send(message)

        return noting

    def _noting_initialized(self, instance_id: str, session_id: str, send: Send) -> Send:
        """``send``, noting a session whose ``notifications/initialized`` the package accepted."""

        async def noting(message: Any) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 202:
                self._sessions.initialized(instance_id, session_id)
            await send(message)

        return noting


def _too_many_sessions() -> Response:
    """The package's answer to a session opened beyond its limit (its own, where it has one:
    the two majors word its id differently)."""
    package_answer = getattr(_manager_module, "_error_response", None)
    if callable(package_answer):
        answer: Response = package_answer("Too many open sessions", 503, types.INTERNAL_ERROR)
        return answer
    error = {"code": types.INTERNAL_ERROR, "message": "Too many open sessions"}
    body = to_json({"jsonrpc": "2.0", "id": None, "error": error})
    return Response(body, status_code=503, media_type="application/json")


def _ending_scope(opening: Scope, session_id: str) -> Scope:
    """The scope of a ``DELETE`` of a session, made from its ``initialize`` request's."""
    headers = [(k, v) for k, v in opening.get("headers", []) if k.lower() not in _REPLACED_HEADERS]
    return {**opening, "method": "DELETE", "headers": [*headers, (_SESSION_HEADER, session_id.encode())]}


def _negotiated_revision(body: bytes) -> str | None:
    """The ``protocolVersion`` of a successful JSON ``initialize`` answer, or None."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    result = message.get("result") if isinstance(message, dict) else None
    revision = result.get("protocolVersion") if isinstance(result, dict) else None
    return revision if isinstance(revision, str) else None


def _is_initialized_notification(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    return message.get("method") == "notifications/initialized" and "id" not in message


# mcp 2.x shapes each result for the session's revision (its ``mcp_types`` package); 1.x sends it
# as dumped. Typed through Any: mypy sees whichever mcp major is installed.
_shape_for_revision: Any = None
if not hasattr(Server, "list_tools"):  # mcp 2.x, as in ``low_level_server``
    from mcp_types.methods import serialize_server_result as _shape_for_revision

SHORT_REVISION = "2025-11-25"
"""The one revision whose ``tools/call`` :class:`_ShortCalls` answers: the one the SDK proposes
and the newest both ``mcp`` majors speak (2.x's shaping of a result for it is applied too)."""
_SHORT_MAX_BODY = 64 * 1024  # far below the package's own body limit: larger calls go to the package
_CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments"})


class _ShortCalls:
    """Answers a ``tools/call`` of a fully open session in the endpoint, or declines.

    It answers only what the ``mcp`` package would answer with the tool's result: a session the
    package still holds, not ending, whose ``notifications/initialized`` it accepted, on
    :data:`SHORT_REVISION` (negotiated and named in the request's header); JSON in and out
    (``Content-Type`` and ``Accept`` naming ``application/json``); one request with exactly the
    ``tools/call`` fields, an integer or string id, and a tool the environment has. While the
    tool runs, the session's idle timer is held exactly as the package's transport holds it for
    a request in flight. Everything else (and a package whose transport lacks what this relies
    on) is declined, and the caller hands the request to the package.

    Args:
        state: Server state.
        sessions: The endpoint's session notes (which sessions are initialized, on what revision).
    """

    def __init__(self, state: LocalState, sessions: _InstanceSessions) -> None:
        self._state = state
        self._sessions = sessions

    def _transport(self, scope: Scope, session_id: str) -> Any:
        """The package's transport of an open session that may be answered here, or None."""
        manager = self._state.mcp_sessions
        transports = getattr(manager, "_server_instances", None)
        if not isinstance(transports, dict) or not _package_plain(self._state):
            return None
        if scope.get("user") is not None:  # sessions tied to a credential: the package checks it
            return None
        if (getattr(manager, "_session_owners", None) or {}).get(session_id) is not None:  # mcp 2.x
            return None
        transport = transports.get(session_id)
        if transport is None or getattr(transport, "is_terminated", True):
            return None
        if not hasattr(transport, "_requests_in_flight") or not hasattr(transport, "_idle_timeout"):
            return None
        idle = getattr(transport, "idle_scope", None)
        if idle is not None and idle.cancel_called:  # the package is ending it: let it answer
            return None
        return transport

    async def answer(
        self,
        scope: Scope,
        *,
        instance_id: str,
        env: EnvironmentDefinition,
        session_id: str,
        payload: bytes,
        message: Any,
        send: Send,
        own: _OwnSession | None = None,
    ) -> bool:
        """Answer the request and return True, or return False having sent nothing.

        Args:
            scope: The request's ASGI scope.
            instance_id: Its instance.
            env: The instance's environment, as the endpoint just found it live.
            session_id: Its ``Mcp-Session-Id``.
            payload: Its body.
            message: The body's JSON value (:func:`_message`).
            send: Where the answer goes.
            own: The session, when the endpoint opened it itself (its caller holds its idle
                timer; the package holds no transport for it).
        """
        revision = own.revision if own is not None else self._sessions.revision(session_id)
        if revision != SHORT_REVISION or len(payload) > _SHORT_MAX_BODY:
            return False
        headers = scope.get("headers", [])
        if _header(headers, b"mcp-protocol-version") != SHORT_REVISION or not _json_in_and_out(headers):
            return False
        call = _tool_call(message)
        if call is None:
            return False
        request_id, name, arguments = call
        if not any(tool.name == name for tool in env.tools):
            return False  # the package answers an unknown tool (JSON-RPC -32602)
        respond = functools.partial(
            self._respond,
            scope,
            instance_id=instance_id,
            env=env,
            session_id=session_id,
            request_id=request_id,
            name=name,
            arguments=arguments,
            send=send,
        )
        if own is not None:
            await respond()
            return True
        transport = self._transport(scope, session_id)
        if transport is None:
            return False
        idle = transport.idle_scope
        # What the package's transport does around a request in flight: no idle countdown while
        # it runs, and a fresh one once the last request in flight is answered.
        transport._requests_in_flight += 1
        if idle is not None:
            idle.deadline = math.inf
        try:
            await respond()
        finally:
            transport._requests_in_flight -= 1
            if idle is not None and not transport._requests_in_flight:
                idle.deadline = anyio.current_time() + transport._idle_timeout
        return True

    async def _respond(
        self,
        scope: Scope,
        *,
        instance_id: str,
        env: EnvironmentDefinition,
        session_id: str,
        request_id: int | str,
        name: str,
        arguments: dict[str, Any] | None,
        send: Send,
    ) -> None:
        called = await call_tool_result(self._state, instance_id, name, arguments, env=env)
        result = called.model_dump(by_alias=True, mode="json", exclude_none=True)
        if _shape_for_revision is not None:  # as the package's server shapes it (mcp 2.x)
            result = _shape_for_revision("tools/call", SHORT_REVISION, result)
        # ``JSONRPCResponse(jsonrpc, id, result).model_dump_json(exclude_unset=True)`` as the
        # package writes it, by the same serializer, without building the model.
        body = to_json({"jsonrpc": "2.0", "id": request_id, "result": result})
        await _json_answer(body, 200, session_id)(scope, _no_receive, send)
        self._state.metrics.mcp_short_calls.inc()


def _json_answer(body: bytes | None, status: int, session_id: str) -> Response:
    """An answer of a session's transport as the package writes it (``Content-Type`` and the
    session id; no body for a notification's 202 or a ``DELETE``'s 200)."""
    return Response(
        body, status_code=status, headers={"Content-Type": "application/json", "mcp-session-id": session_id}
    )


def _package_plain(state: LocalState) -> bool:
    """Whether the instance session manager answers as the endpoint does where it answers in
    its place: no transport security checks, no results it would amend."""
    manager = state.mcp_sessions
    if getattr(manager, "security_settings", None) is not None:
        return False
    return not getattr(getattr(manager, "app", None), "cache_hints", None)


def _json_in_and_out(headers: list[tuple[bytes, bytes]]) -> bool:
    """A JSON body (``Content-Type``) whose answer may be JSON (``Accept``)."""
    if _media_types(_header(headers, b"content-type"))[:1] != ["application/json"]:
        return False
    return "application/json" in _media_types(_header(headers, b"accept"))


def _plain_id(request_id: Any) -> TypeGuard[int | str]:
    return isinstance(request_id, int | str) and not isinstance(request_id, bool)


_OPENING_SCOPE = (
    *("type", "asgi", "http_version", "method", "scheme", "path", "raw_path", "query_string"),
    *("root_path", "headers", "client", "server", "path_params"),
)
"""What a session the endpoint opened keeps of its ``initialize`` request's scope, to replay it."""
_OPENING_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo"})
_INFO_KEYS = frozenset({"name", "version"})
_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
_INITIALIZED_BODY = json.dumps(_INITIALIZED).encode()
_REPLACED_HEADERS = frozenset({b"content-length", _SESSION_HEADER, b"mcp-protocol-version"})


async def _no_receive() -> Any:
    return {"type": "http.disconnect"}


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [value for key, value in headers if key.lower() == name]
    return values[0].decode("latin-1") if len(values) == 1 else None


def _media_types(value: str | None) -> list[str]:
    """The media types of a ``Content-Type`` or ``Accept`` value, lower case, parameters dropped."""
    if not value:
        return []
    return [part.split(";", 1)[0].strip().lower() for part in value.split(",")]


def _tool_call(message: Any) -> tuple[int | str, str, dict[str, Any] | None] | None:
    """``(id, name, arguments)`` of a body (its JSON value, :func:`_message`) that is exactly
    one plain ``tools/call``, else None."""
    if not isinstance(message, dict) or not message.keys() <= _CALL_KEYS:
        return None
    request_id, params = message.get("id"), message.get("params")
    if message.get("jsonrpc") != "2.0" or message.get("method") != "tools/call":
        return None
    if not _plain_id(request_id):
        return None
    if not isinstance(params, dict) or not params.keys() <= _PARAM_KEYS:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    return request_id, name, arguments


def _accepting_json(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers, with ``Accept: application/json`` when the client accepts anything.

    A bare client (the public SDK's, on aiohttp) sends ``Accept: */*``, which accepts the JSON
    answer; ``mcp`` 1.x would refuse it with 406 all the same.
    """
    accept = next((value for name, value in headers if name.lower() == b"accept"), b"*/*")
    if b"application/json" in accept or b"*/*" not in accept:
        return headers
    return [(name, value) for name, value in headers if name.lower() != b"accept"] + [
        (b"accept", b"application/json")
    ]


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out the body already read, then waits on the real one (for the
    client's disconnect)."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def mount(app: FastAPI, state: LocalState) -> None:
    """Mount the per-instance MCP endpoints (both paths, with and without a trailing slash).

    The routes go first in the routing table so no catch-all route of another surface shadows them.
    """
    sessions = _InstanceSessions(state)
    state.instance_end_hooks.append(sessions.end)
    endpoint = _InstanceMCPEndpoint(state, sessions)
    routes = [Route(path + suffix, endpoint) for path in MCP_PATHS for suffix in ("", "/")]
    app.router.routes[0:0] = routes


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Run the MCP session managers for the life of the server."""
    async with state.mcp_sessions.run(), state.mcp_sessionless.run():
        yield
