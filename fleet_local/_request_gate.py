"""What is decided about a request before its body is read: the key, then the body's size.

FastAPI reads and decodes a route's JSON body before it runs the route's dependencies, so a
bearer check written as a dependency comes too late to spare the server a huge body from a
caller without a key. This ASGI middleware runs first: for a path served by a keyed router it
answers 401 when the key is missing or wrong, without reading a byte of the body; for every
request it answers 413 ``payload_too_large`` when ``Content-Length`` exceeds
``LocalSettings.max_body_bytes``, and stops a body sent without a length (chunked) once it
grows past the limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import LocalAPIError, PayloadTooLarge, payload_too_large

__all__ = ["PayloadTooLarge", "RequestGate"]


def too_large_body(limit: int) -> dict[str, Any]:
    """The ``ErrorResponse`` body of a 413."""
    return payload_too_large(limit).body()


class RequestGate:
    """ASGI middleware: 401 before the body for keyed paths, 413 beyond ``max_body_bytes``.

    Args:
        app: The wrapped application.
        max_body_bytes: The largest body accepted.
        keyed_paths: Regexes of the paths that need the bearer key (the keyed routers' routes).
        check_key: Returns the 401 error for the request's headers (lower-case names), or
            ``None`` when its key is good.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        keyed_paths: Iterable[re.Pattern[str]],
        check_key: Callable[[Mapping[str, str]], LocalAPIError | None],
    ) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.keyed = tuple(keyed_paths)
        self.check_key = check_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        if any(pattern.match(path) for pattern in self.keyed):
            refusal = self.check_key(headers)
            if refusal is not None:
                await JSONResponse(refusal.body(), status_code=refusal.status)(scope, receive, send)
                return
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:  # uvicorn refuses a malformed length
            await JSONResponse(too_large_body(self.limit), status_code=413)(scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise PayloadTooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except PayloadTooLarge:
            if started:
                raise
            await JSONResponse(too_large_body(self.limit), status_code=413)(scope, receive, send)
