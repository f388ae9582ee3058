"""The CDP proxy of a lease's browser: one pipe to Chromium, shared by every client, each confined.

Chromium is driven over ``--remote-debugging-pipe`` (fds 3 and 4, NUL-separated JSON), never a TCP
port, so nothing on the machine can reach its DevTools but through this proxy. The server's own
Playwright connection (the ``computer`` tool) and every ``cdp_url`` client are clients of the same
:class:`CDPConnection`, each with a session of its own:

* a browser client gets a browser session (``Target.attachToBrowserTarget``), a page client a
  session on its page (``Target.attachToTarget``, flat); its messages without a ``sessionId`` go
  to that session and the answers come back without one, as on a connection of its own;
* it may address only the sessions it owns: that one, those it attached (a ``sessionId`` in a
  result) and those attached for it (``Target.attachedToTarget`` on one of its sessions);
* every message is checked by ``_cdp_policy`` (an allow-list of methods, URLs outside the lease's
  hosts, downloads turned into ``deny``) and sent re-serialised, so the browser reads what was
  checked;
  a context a client makes gets ``deny`` for downloads before the client hears of it;
* when it disconnects, its browser session is detached, which detaches its child sessions and
  disposes the contexts it made with ``disposeOnDetach`` (Playwright's ``new_context``).

Chromium appends ``,"sessionId":"..."}`` to every message of a flat session, so large messages
(screenshots) are routed by that suffix without being parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._cdp_policy import refusal, rewritten, target_refusal

__all__ = ["MAX_MESSAGE_BYTES", "CDPClient", "CDPConnection", "CDPError", "pump"]

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest message read from Chromium (a full-page screenshot of a long page)."""
MAX_PENDING_BYTES = 128 * 1024 * 1024
"""Messages a client may leave unread before it is disconnected."""
PARSE_LIMIT = 64 * 1024
"""Messages up to this size are parsed; larger ones (screenshots, bodies) are only routed."""
CALL_TIMEOUT = 30.0
"""Seconds one of the proxy's own commands may take."""

_SESSION_SUFFIX = re.compile(rb',"sessionId":"([^"\\]+)"\}\Z')
_TARGET_EVENT = b'{"method":"Target.'
# Ids of the proxy's own commands on a client's session; clients count from 1.
_OWN_IDS = itertools.count(2_000_000_000)


class CDPError(Exception):
    """A command of the proxy's own failed, or the browser's pipe closed."""


def _error(message_id: Any, message: str, session: str | None, code: int = -32000) -> bytes:
    body: dict[str, Any] = {"id": message_id, "error": {"code": code, "message": message}}
    if session is not None:
        body["sessionId"] = session
    return json.dumps(body).encode()


class CDPClient:
    """One client of a browser: its sessions and the messages waiting for it.

    Args:
        connection: The browser's connection.
        root: The session its messages without a ``sessionId`` go to.
    """

    def __init__(self, connection: CDPConnection, root: str) -> None:
        self._connection = connection
        self.root = root
        self.sessions = {root}
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pending = 0
        self.closed = False

    def deliver(self, message: bytes) -> None:
        """Queue a message for the client (disconnecting one that reads too slowly)."""
        if self.closed:
            return
        self._pending += len(message)
        if self._pending > MAX_PENDING_BYTES:
            logger.warning("a CDP client left %d bytes unread: disconnected", self._pending)
            self.close()
            return
        self._outbox.put_nowait(message)

    async def receive(self) -> bytes | None:
        """The next message for the client, or None once it is disconnected."""
        message = await self._outbox.get()
        if message is not None:
            self._pending -= len(message)
        return message

    async def send(self, text: str | bytes) -> None:
        """Check one message of the client and send it to the browser, or answer it with an error."""
        try:
            message = json.loads(text)
        except ValueError:
            self.deliver(_error(0, "Message must be a valid JSON", None, -32700))
            return
        if not isinstance(message, dict):
            self.deliver(_error(0, "Message must be an object", None, -32600))
            return
        message_id, method = message.get("id"), message.get("method")
        explicit = message.get("sessionId")
        session = explicit if isinstance(explicit, str) else self.root
        shown = session if explicit is not None else None
        params = message.get("params", {})
        if not isinstance(message_id, int) or isinstance(message_id, bool) or not isinstance(method, str):
            self.deliver(
                _error(message_id, "Message must have an integer id and a string method", shown, -32600)
            )
            return
        if not isinstance(params, dict):
            self.deliver(_error(message_id, "params must be an object", shown, -32602))
            return
        if session not in self.sessions:
            self.deliver(_error(message_id, "Session with given id not found.", shown, -32001))
            return
        why = refusal(method, params, self._connection.allowed_hosts)
        if why is None and method == "Target.attachToTarget":
            why = await self._connection.target_refusal(params.get("targetId"))
        if why is not None:
            logger.info("CDP %s refused: %s", method, why)
            self.deliver(_error(message_id, why, shown))
            return
        if method == "Target.createBrowserContext":
            self._connection.new_contexts.add((session, message_id))
        out = {"id": message_id, "method": method, "params": rewritten(method, params), "sessionId": session}
        try:
            self._connection.write(out)
        except ValueError:  # NaN or Infinity: not JSON
            self.deliver(_error(message_id, "params must be JSON (no NaN or Infinity)", shown, -32602))

    def close(self) -> None:
        """Disconnect: detach its sessions in the browser and end :meth:`receive`."""
        self._connection.release(self)


class CDPConnection:
    """The pipe to one Chromium and the clients sharing it.

    Args:
        read_fd: Our end of the pipe Chromium writes (its fd 4).
        write_fd: Our end of the pipe Chromium reads (its fd 3).
        allowed_hosts: The lease's hosts, for ``_cdp_policy``.
    """

    def __init__(self, read_fd: int, write_fd: int, allowed_hosts: Sequence[str]) -> None:
        self._read_fd, self._write_fd = read_fd, write_fd
        self.allowed_hosts = list(allowed_hosts)
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.StreamReader | None = None
        self._reading: asyncio.Task[None] | None = None
        self._calls: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._owners: dict[str, CDPClient] = {}
        self._own_ids: set[int] = set()
        self.new_contexts: set[tuple[str, int]] = set()
        """(session, id) of each ``Target.createBrowserContext`` not answered yet."""
        self.closed = False

    async def open(self) -> None:
        """Attach to the pipe's two ends and start reading."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self._read_fd, "rb", buffering=0)
        )
        transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(self._write_fd, "wb", buffering=0)
        )
        self._reader, self._writer = reader, transport
        self._reading = asyncio.ensure_future(self._read_loop())

    def write(self, message: dict[str, Any]) -> None:
        """Send one message to the browser (buffered by the pipe's transport; Chromium reads fast).

        Raises:
            ValueError: ``message`` is not JSON (NaN, Infinity).
            CDPError: The pipe is closed.
        """
        data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\0"
        if self.closed or self._writer is None or self._writer.is_closing():
            raise CDPError("the browser's CDP pipe is closed")
        self._writer.write(data)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a command of the proxy's own on the browser connection; returns its result.

        Raises:
            CDPError: The browser answered with an error, did not answer in time, or is gone.
        """
        message_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._calls[message_id] = future
        try:
            self.write({"id": message_id, "method": method, "params": params or {}})
            async with asyncio.timeout(CALL_TIMEOUT):
                answer = await future
        except TimeoutError:
            raise CDPError(f"{method}: no answer within {CALL_TIMEOUT:g}s") from None
        finally:
            self._calls.pop(message_id, None)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error'].get('message', answer['error'])}")
        return dict(answer.get("result") or {})

    async def target_refusal(self, target_id: Any) -> str | None:
        """Why a client may not attach to ``target_id`` (the browser's own UI, no such target), or None."""
        try:
            info = (await self.call("Target.getTargetInfo", {"targetId": str(target_id)}))["targetInfo"]
        except (CDPError, KeyError) as exc:
            return f"no target {target_id!r}: {exc}"
        return target_refusal(info)

    async def attach(self, target_id: str | None = None) -> CDPClient:
        """A new client: on a browser session, or on a session of page ``target_id``.

        Raises:
            CDPError: The page is not one a client may attach to, or the browser is gone.
        """
        if target_id is None:
            result = await self.call("Target.attachToBrowserTarget")
        else:
            why = await self.target_refusal(target_id)
            if why is not None:
                raise CDPError(why)
            result = await self.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        client = CDPClient(self, str(result["sessionId"]))
        self._owners[client.root] = client
        return client

    def release(self, client: CDPClient) -> None:
        """Disconnect ``client``: forget its sessions and detach its browser session."""
        if client.closed:
            return
        client.closed = True
        client._outbox.put_nowait(None)
        for session in client.sessions:
            if self._owners.get(session) is client:
                del self._owners[session]
        self._send_own("Target.detachFromTarget", {"sessionId": client.root})

    def _send_own(self, method: str, params: dict[str, Any], session: str | None = None) -> None:
        """Send a command of the proxy's own without waiting; its answer is dropped."""
        if self.closed or self._writer is None or self._writer.is_closing():
            return
        message_id = next(_OWN_IDS)
        self._own_ids.add(message_id)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._writer.write(json.dumps(message).encode() + b"\0")

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                try:
                    raw = await self._reader.readuntil(b"\0")
                except asyncio.IncompleteReadError:
                    return  # the browser is gone
                try:
                    self._route(raw[:-1])
                except Exception:  # one odd message must not end the connection
                    logger.exception("CDP message not routed")
        except asyncio.LimitOverrunError:
            logger.warning("a CDP message over %d bytes: connection closed", MAX_MESSAGE_BYTES)
        finally:
            self._close()

    def _route(self, raw: bytes) -> None:
        suffix = _SESSION_SUFFIX.search(raw, max(0, len(raw) - 200))
        if suffix is None:
            self._root_message(json.loads(raw))
            return
        session = suffix[1].decode()
        client = self._owners.get(session)
        if client is None:
            return  # a session of a client that has gone
        parse = len(raw) <= PARSE_LIMIT or raw.startswith(_TARGET_EVENT)
        if parse and not self._inspect(client, session, json.loads(raw)):
            return
        if session == client.root:
            raw = raw[: suffix.start()] + b"}"
        client.deliver(raw)

    def _inspect(self, client: CDPClient, session: str, message: dict[str, Any]) -> bool:
        """Track the sessions a client gains and loses; False for a message it must not see."""
        method = message.get("method")
        params = message.get("params") or {}
        if method == "Target.attachedToTarget":
            child = str(params.get("sessionId"))
            why = target_refusal(params.get("targetInfo") or {})
            if why is not None:  # the browser's own UI: detached again, never shown to the client
                self._send_own("Target.detachFromTarget", {"sessionId": child}, session)
                return False
            client.sessions.add(child)
            self._owners[child] = client
        elif method == "Target.detachedFromTarget":
            child = str(params.get("sessionId"))
            client.sessions.discard(child)
            if self._owners.get(child) is client:
                del self._owners[child]
        elif "id" in message:
            if message["id"] in self._own_ids:
                self._own_ids.discard(message["id"])
                return False
            result = message.get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                client.sessions.add(result["sessionId"])
                self._owners[result["sessionId"]] = client
            if (session, message["id"]) in self.new_contexts:
                self.new_contexts.discard((session, message["id"]))
                if isinstance(result, dict) and isinstance(result.get("browserContextId"), str):
                    # Sent before the client hears of the context: no download in it is ever allowed.
                    deny = {"behavior": "deny", "browserContextId": result["browserContextId"]}
                    self._send_own("Browser.setDownloadBehavior", deny)
        return True

    def _root_message(self, message: dict[str, Any]) -> None:
        message_id = message.get("id")
        if message_id in self._own_ids:
            self._own_ids.discard(message_id)
            return
        if isinstance(message_id, int):
            future = self._calls.get(message_id)
            if future is not None and not future.done():
                future.set_result(message)
            return
        if message.get("method") == "Target.detachedFromTarget":
            client = self._owners.get(str((message.get("params") or {}).get("sessionId")))
            if client is not None:  # its page closed, or its browser session was detached
                client.close()

    def _close(self) -> None:
        self.closed = True
        for future in self._calls.values():
            if not future.done():
                future.set_exception(CDPError("the browser's CDP pipe closed"))
        for client in {id(c): c for c in self._owners.values()}.values():
            client.close()
        if self._writer is not None:
            self._writer.close()

    async def aclose(self) -> None:
        """Close the pipe (the browser is being killed) and disconnect every client."""
        self._close()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading


async def pump(
    client: CDPClient,
    receive: Callable[[], Awaitable[str | bytes | None]],
    send: Callable[[str], Awaitable[None]],
) -> None:
    """Carry messages between a WebSocket and ``client`` until either side closes.

    Args:
        client: The browser client.
        receive: The next message of the WebSocket, None once it closed.
        send: Send a text message on the WebSocket.
    """

    async def incoming() -> None:
        while (text := await receive()) is not None:
            await client.send(text)

    async def outgoing() -> None:
        while (message := await client.receive()) is not None:
            await send(message.decode())

    tasks = {asyncio.ensure_future(incoming()), asyncio.ensure_future(outgoing())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        client.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # a peer gone mid-send is no error
