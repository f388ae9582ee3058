"""MCP access to an environment instance: one persistent session per endpoint, on the
connection pool of the ``Fleet`` that made the env (see ``docs`` of ``MCPClient``).

- Tools are the union over the endpoints that answer, de-duplicated by name, the
  first endpoint to list a tool owning it. An endpoint that fails is tolerated
  only if another returned tools, and the partial union is logged as a warning;
  an empty union is an error.
- Each endpoint gets one MCP session (``initialize`` + ``notifications/initialized``),
  opened on first use and reused by every call; a session the server ended (HTTP 404
  on a request carrying its ``Mcp-Session-Id``, per the streamable HTTP transport) is
  re-established once. Closing the client ends the sessions (HTTP DELETE).
- The client speaks JSON-RPC over the streamable HTTP transport itself, on the
  caller's ``httpx.AsyncClient``, so it works the same with every ``mcp`` major and
  needs no background task per session. ``tools/list`` runs only when listing.
- A ``tools/call`` is repeated only when repeating cannot run the tool twice: see
  ``may_retry_tool_call``. Everything else surfaces as ``MCPError`` inside the
  call's deadline.
- A tool the server does not know is ``ToolNotFoundError``, never retried: either it is
  missing from the listed tools, or the server answers the call with JSON-RPC error -32602
  (invalid params), as the 2025-11-25 revision has servers answer an unknown tool; the
  cached tool list is dropped then, since it no longer matches the server.
- Instances of one environment version serve the same tools, so an env made by
  ``AsyncFleet.make`` shares its tool list with the fleet's other instances of that version,
  image flavour and variables (``ToolLists``): only the first instance lists its endpoints,
  and a later one opens a session only on the endpoint owning a tool it calls (one session
  per episode instead of one per endpoint). Only a complete union is shared (every endpoint
  answered); ``list_tools(refresh=True)`` asks again, and a tool the server does not know
  drops the shared list too.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from ._exceptions import ClientClosedError, MCPError, ToolNotFoundError, ToolsUnavailableError
from ._mcp_results import extract_tool_result
from ._public import publish
from ._retry import call_with_retries, is_transient_reply
from ._runtime import Deadline, RetryPolicy, Timeout
from ._runtime._cleanup import run_cleanup
from ._version import __version__
from .tools import Tool

__all__ = [
    "MCPClient",
    "MCPSessionExpiredError",
    "MCPTransportError",
    "ToolLists",
    "extract_tool_result",
    "may_retry_tool_call",
]

log = logging.getLogger("fleet_sdk.mcp")

DEFAULT_CALL_DEADLINE = 120.0
DEFAULT_LIST_DEADLINE = 60.0
PROTOCOL_VERSION = "2025-11-25"
"""The revision proposed in ``initialize``; the server's answer is what the session then uses."""

INVALID_PARAMS = -32602
"""JSON-RPC's "invalid params", what a ``tools/call`` of an unknown tool is answered with."""
_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"
_ACCEPT = "application/json, text/event-stream"
# Failures where the request provably never left this process (no connection, or no pooled slot).
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class MCPSessionExpiredError(MCPError):
    """The server no longer knows the session (HTTP 404 on its id); the request was not run.

    Attributes:
        session_id: The id the server no longer knows.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class MCPTransportError(MCPError):
    """An MCP request failed at the HTTP level (connection, timeout or an error status).

    Attributes:
        sent: False when the request provably never reached the server (no connection); True
            when it may have, so a tool call may have run.
        status_code: The HTTP status, when the server answered.
    """

    def __init__(self, message: str, *, sent: bool, status_code: int | None = None) -> None:
        super().__init__(message)
        self.sent = sent
        self.status_code = status_code

    @property
    def transient(self) -> bool:
        """Whether another attempt may succeed: no answer at all, or an answer the one
        classifier (``fleet_sdk._retry.is_transient_reply``) calls transient."""
        return self.status_code is None or is_transient_reply(self.status_code, str(self))


@dataclass
class _Session:
    """One endpoint's MCP session: its id and negotiated revision, set up at most once at a time."""

    endpoint: str
    session_id: str | None = None
    protocol_version: str | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def is_open(self) -> bool:
        return self.protocol_version is not None

    def reset(self) -> None:
        self.session_id = None
        self.protocol_version = None


class ToolLists:
    """Each endpoint's ``tools/list`` answer by environment version, shared by a fleet's envs.

    Keys are chosen by whoever makes the envs (``AsyncFleet.make``: the environment, its running
    version, the image flavour and the variables asked for; only envs on the default endpoints
    share); values are the tools each endpoint listed, in endpoint order. Bounded: the least
    recently used version is forgotten first.

    Args:
        size: How many versions to keep.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        # Kept as JSON text: every env gets tools of its own, which no other env's caller can change.
        self._lists: OrderedDict[Hashable, str] = OrderedDict()

    def get(self, key: Hashable) -> tuple[list[dict[str, Any]], ...] | None:
        """The endpoints' tools remembered under ``key`` (a fresh copy), or None.

        Args:
            key: The version's key.
        """
        text = self._lists.get(key)
        if text is None:
            return None
        self._lists.move_to_end(key)
        return tuple(json.loads(text))

    def put(self, key: Hashable, lists: tuple[list[dict[str, Any]], ...]) -> None:
        """Remember a complete listing (every endpoint answered).

        Args:
            key: The version's key.
            lists: Each endpoint's tools, in endpoint order.
        """
        self._lists[key] = json.dumps(lists)
        self._lists.move_to_end(key)
        while len(self._lists) > self._size:
            self._lists.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        """Forget a version whose server no longer matches what was listed.

        Args:
            key: The version's key.
        """
        self._lists.pop(key, None)

    def __len__(self) -> int:
        return len(self._lists)


def may_retry_tool_call(failure: BaseException, annotations: Mapping[str, Any] | None) -> bool:
    """Whether a failed ``tools/call`` may be sent again without risking a second run.

    Only transient failures count (``MCPTransportError.transient``: no answer; else the error
    body's ``retryable`` flag when it has one, else 408/429/502/503/504). Then: True when the
    request provably never reached the server (no connection could be made), or when the
    tool declares itself safe to repeat in its MCP annotations (``readOnlyHint`` or
    ``idempotentHint``). A request that was sent and then failed (connection reset, read
    timeout, 503) may have run the tool, so it is not repeated.

    Args:
        failure: The error of the attempt.
        annotations: The tool's ``annotations`` from ``tools/list`` (None when it had none).
    """
    if not isinstance(failure, MCPTransportError) or not failure.transient:
        return False  # an answer (a JSON-RPC error, a 4xx): repeating gets the same answer
    if not failure.sent:
        return True
    hints = annotations or {}
    return bool(hints.get("readOnlyHint") or hints.get("idempotentHint"))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _loads(data: str | bytes, response: httpx.Response) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:  # JSONDecodeError, or undecodable bytes
        content_type = response.headers.get("content-type", "") or "no content type"
        raise MCPError(f"MCP answer from {response.request.url} ({content_type}) is not JSON: {exc}") from exc


def _parse_body(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id``, from a JSON body or an SSE stream."""
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        # Notifications may precede the response on the stream; take the matching message.
        # SSE lines may end in CRLF, CR or LF (sse-starlette, the mcp server's, sends CRLF).
        text = response.text.replace("\r\n", "\n").replace("\r", "\n")
        for event in text.split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
            if not data:
                continue
            message = _loads(data, response)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        raise MCPError(f"MCP stream from {response.request.url} ended without a response")
    message = _loads(response.content, response)
    if not isinstance(message, dict):
        raise MCPError(f"MCP answer from {response.request.url} is not a JSON-RPC object")
    return message


class MCPClient:
    """Async MCP client over streamable HTTP for one instance's endpoints.

    Args:
        endpoints: MCP URLs in priority order, e.g. ``[root + "mcp", root + "api/v1/mcp"]``.
        http_client: The pool to send on (the ``AsyncFleet``'s, so the user's transport,
            proxies, limits and timeouts apply); owned by the caller. None creates one,
            closed by ``aclose``.
        headers: Extra HTTP headers for every MCP request.
        retry: Backoff policy for retries that are safe (see ``may_retry_tool_call``).
        call_deadline: Default wall-clock seconds per tool call, retries included.
        list_deadline: Wall-clock seconds for listing tools.
        attempt_timeout: Seconds for one HTTP attempt (when ``timeout`` is not given).
        timeout: Per-attempt timeouts (the fleet's call policy).
        shared_tools: Where instances of the same version share their tool list, and this
            client's key in it (see ``ToolLists``); None lists the endpoints for this client.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        http_client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE,
        list_deadline: float = DEFAULT_LIST_DEADLINE,
        attempt_timeout: float = 30.0,
        timeout: Timeout | None = None,
        shared_tools: tuple[ToolLists, Hashable] | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("MCPClient needs at least one endpoint")
        self.endpoints = list(endpoints)
        self._headers = {"accept": _ACCEPT, **dict(headers or {})}
        self._retry = retry or RetryPolicy(max_retries=3, backoff_base=1.0, backoff_max=8.0)
        self.call_deadline = call_deadline
        self.list_deadline = list_deadline
        self.attempt_timeout = attempt_timeout
        self._timeout = timeout or Timeout(total=attempt_timeout)
        self._tools: dict[str, Tool] | None = None
        self._annotations: dict[str, dict[str, Any]] = {}
        self._owns_http = http_client is None
        self._http = http_client
        self._sessions = {endpoint: _Session(endpoint) for endpoint in self.endpoints}
        self._next_id = 0
        self._closed = False
        self._shared_tools = shared_tools
        self.initializations = 0
        """How many sessions this client has set up (one per endpoint unless the server ended one)."""

    def __repr__(self) -> str:
        return f"MCPClient(endpoints={self.endpoints!r})"

    @property
    def closed(self) -> bool:
        """Whether ``aclose`` was called: every further request raises ``ClientClosedError``."""
        return self._closed

    async def aclose(self) -> None:
        """End the open sessions (best effort, each DELETE tried again on a transient failure
        within 5 s) and close the pool if this client made it; idempotent."""
        self._closed = True
        try:
            for session in self._sessions.values():
                if session.session_id is not None and self._http is not None and not self._http.is_closed:
                    await self._end_session(self._http, session)
                session.reset()
        finally:
            if self._owns_http and self._http is not None:
                await self._http.aclose()
                self._http = None

    async def _end_session(self, http: httpx.AsyncClient, session: _Session) -> None:
        """``DELETE`` one session; a DELETE is safe to repeat, so transient failures are retried."""
        assert session.session_id is not None
        headers = {**self._headers, _SESSION_HEADER: session.session_id}
        deadline = Deadline(5.0)

        async def delete() -> None:
            try:
                response = await http.delete(
                    session.endpoint, headers=headers, timeout=self._timeout.to_httpx(deadline.remaining())
                )
            except _NOT_SENT as exc:
                raise MCPTransportError(_describe(exc), sent=False) from exc
            except httpx.HTTPError as exc:
                raise MCPTransportError(_describe(exc), sent=True) from exc
            if response.status_code >= 500 or response.status_code in (408, 429):
                raise MCPTransportError(
                    f"HTTP {response.status_code}", sent=True, status_code=response.status_code
                )

        try:
            with anyio.fail_after(deadline.remaining()):
                await call_with_retries(
                    delete,
                    what=f"ending MCP session on {session.endpoint}",
                    policy=RetryPolicy(max_retries=2, backoff_base=0.1, backoff_max=0.5),
                    deadline=deadline,
                    log=log,
                    transient=lambda exc: isinstance(exc, MCPTransportError) and exc.transient,
                )
        except (MCPError, TimeoutError) as exc:
            log.debug("ending MCP session on %s failed: %s", session.endpoint, _describe(exc))

    def _require_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"the MCP client of {self.endpoints} is closed (its sessions ended)")
        if self._http is not None and self._http.is_closed:  # the fleet that made the env closed it
            raise ClientClosedError(f"the connection pool of the MCP client of {self.endpoints} is closed")

    def _pool(self) -> httpx.AsyncClient:
        self._require_open()
        if self._http is None:
            # Created on first use so it binds to the loop that uses it.
            self._http = httpx.AsyncClient()
        return self._http

    async def _post(self, session: _Session, payload: dict[str, Any], deadline: Deadline) -> httpx.Response:
        """One HTTP POST of a JSON-RPC message; transport failures become ``MCPTransportError``."""
        headers = dict(self._headers)
        headers["content-type"] = "application/json"
        session_id = session.session_id  # the id this request carries, whatever happens meanwhile
        if session_id is not None:
            headers[_SESSION_HEADER] = session_id
        if session.protocol_version is not None:
            headers[_VERSION_HEADER] = session.protocol_version
        remaining = deadline.remaining()
        if remaining is not None and remaining <= 0:
            raise MCPError(f"MCP {payload['method']} on {session.endpoint} ran past its deadline")
        body = json.dumps(payload, separators=(",", ":")).encode()
        try:
            response = await self._pool().post(
                session.endpoint, content=body, headers=headers, timeout=self._timeout.to_httpx(remaining)
            )
        except _NOT_SENT as exc:
            raise MCPTransportError(_describe(exc), sent=False) from exc
        except httpx.HTTPError as exc:
            raise MCPTransportError(_describe(exc), sent=True) from exc
        if response.status_code == 404 and session_id is not None:
            raise MCPSessionExpiredError(
                f"the server ended MCP session on {session.endpoint}", session_id=session_id
            )
        if response.status_code >= 400:
            raise MCPTransportError(
                f"HTTP {response.status_code} from {session.endpoint}: {response.text[:200]}",
                sent=True,
                status_code=response.status_code,
            )
        return response

    async def _rpc(self, session: _Session, method: str, params: dict[str, Any], deadline: Deadline) -> Any:
        """Send a request on an open session and return its ``result``."""
        self._next_id += 1
        request_id = self._next_id
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        message = _parse_body(await self._post(session, payload, deadline), request_id)
        error = message.get("error")
        if error is not None:  # a JSON-RPC error from the server: retrying cannot help
            detail = error.get("message") if isinstance(error, dict) else error
            refusal = f"MCP {method} on {session.endpoint} was refused: {detail}"
            if method == "tools/call" and isinstance(error, dict) and error.get("code") == INVALID_PARAMS:
                raise ToolNotFoundError(refusal)
            raise MCPError(refusal)
        return message.get("result")

    async def _open(self, session: _Session, deadline: Deadline) -> None:
        """Set up the session once; concurrent callers wait for the first to finish."""
        if session.is_open():
            return
        async with session.lock:
            if session.is_open():
                return
            params = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "fleet-sdk", "version": __version__},
            }
            self._next_id += 1
            request_id = self._next_id
            payload = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
            response = await self._post(session, payload, deadline)
            # From here the server holds a session: one not set up to the end is ended at once
            # (the client would forget its id, and the server keep it until its idle timeout).
            opened = _Session(session.endpoint, response.headers.get(_SESSION_HEADER))
            try:
                message = _parse_body(response, request_id)
                if message.get("error") is not None:
                    raise MCPError(f"MCP initialize on {session.endpoint} was refused: {message['error']}")
                result = message.get("result") or {}
                session.session_id = opened.session_id
                session.protocol_version = str(result.get("protocolVersion") or PROTOCOL_VERSION)
                self.initializations += 1
                await self._post(session, {"jsonrpc": "2.0", "method": "notifications/initialized"}, deadline)
            except BaseException:
                session.reset()
                http = self._http
                if opened.session_id is not None and http is not None and not http.is_closed:
                    await run_cleanup(
                        lambda: self._end_session(http, opened),
                        what=f"ending MCP session on {opened.endpoint}",
                    )
                raise

    async def _request(
        self,
        endpoint: str,
        method: str,
        params: dict[str, Any],
        *,
        deadline: Deadline,
        annotations: Mapping[str, Any] | None = None,
    ) -> Any:
        """A request on the endpoint's session, with the retries that are safe for it.

        ``tools/list`` and the session setup are always safe to repeat; ``tools/call`` only
        as ``may_retry_tool_call`` says. A server-ended session is set up again once.
        """
        session = self._sessions[endpoint]
        attempts = 0
        renewed = False

        async def attempt() -> Any:
            nonlocal attempts, renewed
            attempts += 1
            while True:
                try:
                    try:
                        await self._open(session, deadline)
                    except MCPTransportError as exc:
                        raise MCPTransportError(str(exc), sent=False, status_code=exc.status_code) from exc
                    return await self._rpc(session, method, params, deadline)
                except MCPSessionExpiredError as exc:
                    # The server answers 404 without running the request, so resending is safe.
                    if session.session_id == exc.session_id:  # not already replaced by a concurrent call
                        session.reset()
                    if renewed:
                        raise
                    renewed = True
                    log.info("MCP session on %s ended by the server; opening a new one", endpoint)

        def safe(exc: BaseException) -> bool:
            # Listing and session setup are read-only; a tool call follows its own rule.
            if not isinstance(exc, MCPTransportError):
                return False
            return may_retry_tool_call(exc, annotations) if method == "tools/call" else exc.transient

        try:
            return await call_with_retries(
                attempt,
                what=f"MCP {method} on {endpoint}",
                policy=self._retry,
                deadline=deadline,
                log=log,
                transient=safe,
            )
        except MCPTransportError as exc:
            raise MCPTransportError(
                f"MCP {method} on {endpoint} failed after {attempts} attempt(s)"
                f"{'' if safe(exc) else ' (not repeated: the tool may have run)'}: {exc}",
                sent=exc.sent,
                status_code=exc.status_code,
            ) from exc

    async def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """The union of tools over all endpoints.

        Args:
            refresh: Ask the endpoints again instead of using the cached union.

        Raises:
            ToolsUnavailableError: No endpoint listed any tool.
        """
        self._require_open()
        if self._tools is not None and not refresh:
            return list(self._tools.values())
        shared = self._shared_tools[0].get(self._shared_tools[1]) if self._shared_tools else None
        if shared is not None and not refresh and len(shared) == len(self.endpoints):
            # Another instance of this version listed them: no request, no session opened.
            return self._adopt(dict(zip(self.endpoints, shared, strict=True)))
        deadline = Deadline(self.list_deadline)
        results: dict[str, list[dict[str, Any]] | BaseException] = {}

        async def list_one(endpoint: str) -> None:
            try:
                tools: list[dict[str, Any]] = []
                cursor: str | None = None
                while True:
                    params = {"cursor": cursor} if cursor else {}
                    page = await self._request(endpoint, "tools/list", params, deadline=deadline) or {}
                    tools.extend(t for t in page.get("tools") or [] if isinstance(t, dict))
                    cursor = page.get("nextCursor")
                    if not cursor:
                        break
                results[endpoint] = tools
            except MCPError as exc:
                results[endpoint] = exc

        async with anyio.create_task_group() as group:
            for endpoint in self.endpoints:
                group.start_soon(list_one, endpoint)
        tools = self._adopt(results)
        lists = tuple(r for r in (results[endpoint] for endpoint in self.endpoints) if isinstance(r, list))
        if self._shared_tools is not None and len(lists) == len(self.endpoints):  # a complete union
            self._shared_tools[0].put(self._shared_tools[1], lists)
        return tools

    def _adopt(self, results: Mapping[str, list[dict[str, Any]] | BaseException]) -> list[Tool]:
        """Build the union from each endpoint's tools (or failure) and keep it as the tool list."""
        union: dict[str, Tool] = {}
        annotations: dict[str, dict[str, Any]] = {}
        failures: list[str] = []
        for endpoint in self.endpoints:  # priority order decides ownership
            outcome = results[endpoint]
            if isinstance(outcome, BaseException):
                failures.append(f"{endpoint}: {outcome}")
                continue
            for tool in outcome:
                name = str(tool.get("name") or "")
                if name and name not in union:
                    union[name] = Tool(
                        name=name,
                        description=tool.get("description") or "",
                        input_schema=dict(tool.get("inputSchema") or {}),
                        endpoint=endpoint,
                    )
                    annotations[name] = dict(tool.get("annotations") or {})
        if not union:
            detail = "; ".join(failures) or "every endpoint answered with no tools"
            raise ToolsUnavailableError(f"no MCP tools found on {self.endpoints}: {detail}")
        if failures:
            log.warning(
                "partial MCP tool list: %d tools from the endpoints that answered; failed: %s",
                len(union),
                "; ".join(failures),
            )
        self._tools = union
        self._annotations = annotations
        return list(union.values())

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, deadline: float | None = None
    ) -> Any:
        """Call a tool and return its agent-facing value (see ``extract_tool_result``).

        Args:
            name: Tool name; must be in ``list_tools()``.
            arguments: Tool arguments.
            deadline: Wall-clock seconds for the call, retries included (default ``call_deadline``).

        Raises:
            ToolNotFoundError: The tool does not exist, as listed or as the server answers the
                call (not retried).
            MCPError: The call failed and repeating it was not safe, or the retries or the
                deadline ran out.
        """
        self._require_open()
        tools = self._tools if self._tools is not None else {t.name: t for t in await self.list_tools()}
        tool = tools.get(name)
        if tool is None:
            raise ToolNotFoundError(f"tool {name!r} not found; available: {sorted(tools)}")
        endpoint = tool.endpoint or self.endpoints[0]
        limit = Deadline(deadline or self.call_deadline)
        params = {"name": name, "arguments": dict(arguments or {})}
        try:
            with anyio.fail_after(limit.remaining()):
                result = await self._request(
                    endpoint, "tools/call", params, deadline=limit, annotations=self._annotations.get(name)
                )
        except TimeoutError as exc:
            raise MCPError(f"MCP tools/call {name!r} on {endpoint} ran past its deadline") from exc
        except ToolNotFoundError:
            self._tools = None  # the server's tools changed since they were listed
            if self._shared_tools is not None:
                self._shared_tools[0].drop(self._shared_tools[1])
            raise
        if not isinstance(result, dict):
            raise MCPError(f"MCP tools/call {name!r} on {endpoint} returned no result object")
        return extract_tool_result(result)


publish(__name__, globals(), __all__)
