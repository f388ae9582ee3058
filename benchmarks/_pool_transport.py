"""A streamable HTTP transport for ``mcp.ClientSession`` over a given ``httpx.AsyncClient``.

A benchmark arm (``bench_mcp.py``), not library code: the alternative to the SDK's own MCP
client (``fleet_sdk/mcp.py``), measured against it. ``mcp`` 2.x's ``streamable_http_client``
only takes its own ``httpx2`` clients, so it cannot share the fleet's ``httpx`` pool; this
transport can.

It yields the ``(read_stream, write_stream)`` pair ``ClientSession`` takes. The write side is
not a memory stream: each message is POSTed by the task that sends it (so concurrent calls
send concurrently and no background task runs per session), and the answer, a JSON body or
an SSE stream, is parsed into messages on the read side as they arrive. It carries the
``Mcp-Session-Id`` the server gave ``initialize`` and the negotiated ``MCP-Protocol-Version``
(plus any per-message headers ``mcp`` 2.x stamps), and ends the session with a DELETE on exit.
No standalone GET stream: tool calls need none. Works with ``mcp`` 2.x and 1.x.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

__all__ = ["PoolWriteStream", "pool_transport"]

log = logging.getLogger(__name__)

parse_message: Callable[[str | bytes], Any]
# By the installed major, not by what imports: a venv downgraded to 1.x keeps 2.x's mcp_types.
MCP_1 = version("mcp").split(".")[0] == "1"
if MCP_1:  # a RootModel around the JSON-RPC message
    from mcp import types as _types_1

    def parse_message(data: str | bytes) -> Any:
        root: Any = _types_1.JSONRPCMessage
        return root.model_validate_json(data)

else:  # mcp 2.x: a message is the JSON-RPC model itself
    from mcp_types import jsonrpc_message_adapter

    def parse_message(data: str | bytes) -> Any:
        return jsonrpc_message_adapter.validate_json(data, by_name=False)


SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
# JSON-RPC error codes for answers the transport makes up when the server gave none.
PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603


class PoolWriteStream:
    """The write side: ``send`` POSTs one message on the shared client, in the caller's task.

    Args:
        url: The MCP endpoint.
        http: The shared client (not closed here).
        read: Where the server's messages go (the read side ``ClientSession`` receives from).
        headers: Extra HTTP headers for every request.
    """

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        read: MemoryObjectSendStream[SessionMessage | Exception],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self._http = http
        self._read = read
        self._headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        self._headers.update(headers or {})
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._closed = False

    async def __aenter__(self) -> PoolWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True

    def _request_headers(self, method: str | None, stamped: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(self._headers)
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None and method != "initialize":
            headers[VERSION_HEADER] = self.protocol_version
        headers.update(stamped or {})
        return headers

    async def send(self, item: SessionMessage) -> None:
        """POST one message; a request's answer goes to the read side before this returns.

        HTTP failures (no connection, timeouts) propagate to the sender; an error status
        becomes a JSON-RPC error for the request, as ``mcp``'s own transport does.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        message = getattr(item.message, "root", item.message)  # 1.x wraps it in a RootModel
        method: str | None = getattr(message, "method", None)
        request_id = getattr(message, "id", None) if method is not None else None
        # Serialised as each major's own transport does.
        body = message.model_dump_json(by_alias=True, exclude_unset=not MCP_1, exclude_none=MCP_1)
        # mcp 2.x stamps per-message headers (the negotiated version, Mcp-Method) in the metadata.
        headers = self._request_headers(method, getattr(item.metadata, "headers", None))
        request = self._http.build_request("POST", self.url, content=body, headers=headers)
        response = await self._http.send(request, stream=True)
        try:
            if request_id is None:  # a notification or a response: the server has nothing to say
                await response.aread()
                return
            await self._answer(response, request_id, method)
        finally:
            await response.aclose()

    async def _answer(self, response: httpx.Response, request_id: Any, method: str | None) -> None:
        """Forward the answer to one request to the read side."""
        status = response.status_code
        content_type = response.headers.get("content-type", "").lower()
        if status >= 400:
            await response.aread()
            if content_type.startswith("application/json"):
                try:  # a JSON-RPC error in an error status: forward it, under this request's id
                    error = json.loads(response.content).get("error")
                except (ValueError, AttributeError):
                    error = None
                if isinstance(error, dict):
                    code = int(error.get("code", INTERNAL_ERROR))
                    await self._fail(request_id, code, str(error.get("message")))
                    return
            if status == 404 and self.session_id is not None:
                await self._fail(request_id, INVALID_REQUEST, "Session terminated")
            else:
                await self._fail(request_id, INTERNAL_ERROR, f"HTTP {status} from {self.url}")
            return
        if status == 202:
            await response.aread()
            await self._fail(request_id, INVALID_REQUEST, "server answered a request with 202 Accepted")
            return
        if method == "initialize":
            self.session_id = response.headers.get(SESSION_HEADER) or self.session_id
        if content_type.startswith("application/json"):
            await self._deliver(await response.aread(), request_id, method)
        elif content_type.startswith("text/event-stream"):
            await self._read_sse(response, request_id, method)
        else:
            await response.aread()
            await self._fail(request_id, INVALID_REQUEST, f"unexpected content type {content_type!r}")

    async def _read_sse(self, response: httpx.Response, request_id: Any, method: str | None) -> None:
        """Deliver each event's message as it arrives (notifications may precede the answer).

        Reads the stream to its end (the server closes it after the answer), so the
        connection goes back to the pool rather than being dropped mid-body.
        """
        answered = False
        data: list[str] = []
        event = "message"
        async for line in response.aiter_lines():  # splits on CRLF, CR and LF alike
            if line:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    data.append(value)
                elif field == "event":
                    event = value
                continue
            if data and event == "message":
                answered |= await self._deliver("\n".join(data), request_id, method)
            data, event = [], "message"
        if data and event == "message":
            answered |= await self._deliver("\n".join(data), request_id, method)
        if not answered:
            await self._fail(request_id, INTERNAL_ERROR, "SSE stream ended without a response")

    async def _deliver(self, data: str | bytes, request_id: Any, method: str | None) -> bool:
        """Parse one message and pass it on; True when it answers the request."""
        try:
            parsed = parse_message(data)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            await self._fail(request_id, PARSE_ERROR, f"unparsable answer: {exc}")
            return True
        inner = getattr(parsed, "root", parsed)
        answers = getattr(inner, "method", None) is None and getattr(inner, "id", None) == request_id
        if answers and method == "initialize":
            result = getattr(inner, "result", None)
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self.protocol_version = result["protocolVersion"]  # what 1.x sessions do not stamp
        await self._read.send(SessionMessage(parsed))
        return answers

    async def _fail(self, request_id: Any, code: int, text: str) -> None:
        """Resolve the request with an error, so its caller does not wait for its read timeout."""
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
        await self._read.send(SessionMessage(parse_message(json.dumps(error))))

    async def terminate(self) -> None:
        """End the session on the server (DELETE), best effort, within 5 s."""
        if self.session_id is None:
            return
        headers = self._request_headers(None, None)
        with anyio.move_on_after(5, shield=True):
            try:
                await self._http.delete(self.url, headers=headers)
            except httpx.HTTPError as exc:
                log.debug("ending MCP session %s failed: %s", self.session_id, exc)


@asynccontextmanager
async def pool_transport(
    url: str,
    http: httpx.AsyncClient,
    *,
    headers: Mapping[str, str] | None = None,
    terminate_on_close: bool = True,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], PoolWriteStream]]:
    """The ``(read_stream, write_stream)`` pair for ``mcp.ClientSession``, over ``http``.

    Args:
        url: The MCP endpoint.
        http: The shared ``httpx.AsyncClient`` every request goes through (not closed here).
        headers: Extra HTTP headers for every request.
        terminate_on_close: End the server's session (HTTP DELETE) on exit.
    """
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    writer = PoolWriteStream(url, http, read_writer, headers)
    async with read_writer, read_stream:
        try:
            yield read_stream, writer
        finally:
            await writer.aclose()
            if terminate_on_close:
                await writer.terminate()
