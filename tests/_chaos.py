"""An httpx transport that makes one chosen request of an operation go wrong, over a real one.

Requests are numbered from 1 as the client sends them. At request ``at`` it does one thing:

- ``cancel_before``: cancels the operation's task before the request is sent (the server never
  sees it); ``cancel_after``: sends it, lets the server act, then cancels before the answer is read;
- ``refused``: a connection error before sending; ``reset_after``: the server acts, then the
  connection breaks; ``server_error``: a 500 without sending; ``timeout``: a read timeout without
  sending (the client cannot tell it was not sent); ``malformed``: the server acts, the answer's
  body is not JSON.

The operation's task is ``target`` (set by the test); a request made by another task (a
cleanup running in a task of its own) cancels the target and is still sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Literal

import httpx

from fleet_sdk.verifiers._entry import score_from_result

__all__ = ["CANCELS", "FAULTS", "Chaos", "ChaosTransport", "rebuilt"]

Chaos = Literal[
    "cancel_before", "cancel_after", "refused", "reset_after", "server_error", "timeout", "malformed"
]
VERIFIER_PATH = "/v1/verifiers/execute"
CANCELS: tuple[Chaos, ...] = ("cancel_before", "cancel_after")
FAULTS: tuple[Chaos, ...] = ("refused", "reset_after", "server_error", "timeout", "malformed")


def rebuilt(response: httpx.Response, body: bytes, request: httpx.Request) -> httpx.Response:
    """A response to ``request`` with the status and headers of ``response`` (read) and ``body``."""
    headers = [
        (k, v) for k, v in response.headers.items() if k.lower() not in ("content-length", "content-encoding")
    ]
    return httpx.Response(response.status_code, headers=headers, content=body, request=request)


class ChaosTransport(httpx.AsyncBaseTransport):
    """Sends through a real transport; request ``at`` goes wrong as ``chaos`` says.

    Args:
        chaos: What happens to request ``at`` (None: nothing, only counting).
        at: The request number (from 1).
        on_request: Called with every request's number and the request, before it is sent.
        inner: The transport requests go through (default: a plain ``httpx.AsyncHTTPTransport``).
    """

    def __init__(
        self,
        chaos: Chaos | None = None,
        at: int = 0,
        *,
        on_request: Callable[[int, httpx.Request], None] | None = None,
        inner: httpx.AsyncHTTPTransport | None = None,
    ) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()
        self.chaos = chaos
        self.at = at
        self.on_request = on_request
        self.sent: list[str] = []
        self.target: asyncio.Task[object] | None = None
        self.fired: str | None = None  # "METHOD path" of the request that went wrong
        self.sessions: set[str] = set()  # MCP session ids in the answers handed to the client
        self.scores: list[float] = []  # scores of the verifier answers handed to the client

    @property
    def count(self) -> int:
        """Requests seen so far."""
        return len(self.sent)

    async def _cancel(self) -> None:
        assert self.target is not None, "set .target to the operation's task"
        self.target.cancel()
        if asyncio.current_task() is self.target:
            await asyncio.sleep(0)  # raises the CancelledError here, in the operation
            raise AssertionError("the cancellation did not arrive")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        number = len(self.sent)
        if self.on_request is not None:
            self.on_request(number, request)
        chaos = self.chaos if number == self.at else None
        if chaos is None:
            response = await self._inner.handle_async_request(request)
            if request.url.path == VERIFIER_PATH:
                body = await response.aread()
                await response.aclose()
                response = rebuilt(response, body, request)
            return self._seen(response, request)
        self.fired = self.sent[-1]
        if chaos == "cancel_before":
            await self._cancel()
            return await self._inner.handle_async_request(request)
        if chaos == "refused":
            raise httpx.ConnectError("injected: connection refused", request=request)
        if chaos == "timeout":
            raise httpx.ReadTimeout("injected: read timed out", request=request)
        if chaos == "server_error":
            return httpx.Response(
                500, json={"detail": "injected: internal error", "code": "injected_fault"}, request=request
            )
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        await response.aclose()
        if chaos == "cancel_after":
            await self._cancel()
            return self._seen(rebuilt(response, body, request), request)
        if chaos == "reset_after":
            raise httpx.ReadError("injected: connection reset by peer", request=request)
        assert chaos == "malformed"
        return self._seen(rebuilt(response, b'{"truncated', request), request)

    def _seen(self, response: httpx.Response, request: httpx.Request) -> httpx.Response:
        session = response.headers.get("mcp-session-id")
        if session:
            self.sessions.add(session)
        if request.url.path == VERIFIER_PATH and response.status_code == 200:
            try:
                answer = json.loads(response.content)
                if answer.get("success"):
                    self.scores.append(score_from_result(answer.get("result")))
            except (ValueError, TypeError, AttributeError):
                pass  # not a verifier's answer the client can read: no score handed over
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def open_connections(self) -> int:
        """Connections the real transport's pool still holds."""
        return len(self._inner._pool.connections)
