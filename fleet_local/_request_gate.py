"""What is decided about a request before any route runs: the key, the body's size, the body.

FastAPI reads and decodes a route's JSON body before it runs the route's dependencies, so a
bearer check written as a dependency comes too late to spare the server a huge body from a
caller without a key. This ASGI middleware runs first:

1. for a path served by a keyed router it answers 401 when the key is missing or wrong,
   without reading a byte of the body;
2. it answers 413 ``payload_too_large`` when ``Content-Length`` exceeds the path's limit, and
   stops a body sent without a length (chunked) once it grows past it. Paths served without a
   key (the instance manager API, MCP, the web UI) have a smaller limit than keyed ones
   (``LocalSettings.max_keyless_body_bytes``), and a route may have its own (``path_limits``);
3. it reads a JSON body (and any body of a schema operation) whole and has
   ``BodySchemas.check`` judge it: 422 naming the field (413 past ``MAX_JSON_VALUES``), or the
   route runs on the same bytes and finds the decoded value under ``CHECKED_BODY`` in its
   scope. Judging costs Python work proportional to the body, so a body larger than
   ``INLINE_BYTES`` is judged in a worker thread while the event loop goes on answering
   others; bodies from ``LARGE_BYTES`` on have two workers of their own, so a few huge bodies
   never hold up the small ones.

Decoding JSON is one C call that holds the interpreter's lock wherever it runs (about 10 ms a
MiB); the body limits are what bound it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import LocalAPIError, PayloadTooLarge, payload_too_large, validation_error_body
from ._validation import CHECKED_BODY, BodySchemas, CheckedBody, is_json_media

__all__ = ["INLINE_BYTES", "LARGE_BYTES", "PayloadTooLarge", "RequestGate"]

INLINE_BYTES = 4096
"""Bodies up to this size are checked on the event loop: a millisecond or two at most (a
thread hop would cost more than it saves); larger ones in a worker thread."""
LARGE_BYTES = 256 * 1024
"""Bodies from this size on are checked two at a time (each can keep a core busy for seconds);
smaller ones have workers of their own, so they never wait behind a large one."""


_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods whose bodies no route reads: only their size is limited."""


def too_large_body(limit: int) -> dict[str, Any]:
    """The ``ErrorResponse`` body of a 413."""
    return payload_too_large(limit).body()


class _ClientGone(Exception):
    """The client disconnected before it had sent the whole body."""


class RequestGate:
    """ASGI middleware: 401 before the body for keyed paths, 413 beyond the path's limit, then
    the JSON body checked against its schema (off the event loop when it is large).

    Args:
        app: The wrapped application.
        bodies: The schema operations' body validators.
        max_body_bytes: The largest body accepted on a keyed path.
        max_keyless_body_bytes: The largest body accepted on any other path.
        keyed_paths: Regexes of the paths that need the bearer key (the keyed routers' routes).
        path_limits: Regexes of paths with a limit of their own, and that limit (first match wins).
        check_key: Returns the 401 error for the request's headers (lower-case names), or
            ``None`` when its key is good.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        bodies: BodySchemas,
        max_body_bytes: int,
        max_keyless_body_bytes: int,
        keyed_paths: Iterable[re.Pattern[str]],
        path_limits: Sequence[tuple[re.Pattern[str], int]] = (),
        check_key: Callable[[Mapping[str, str]], LocalAPIError | None],
    ) -> None:
        self.app = app
        self.bodies = bodies
        self.keyed_limit = max_body_bytes
        self.keyless_limit = max_keyless_body_bytes
        self.keyed = any_of(keyed_paths)
        self.path_limits = tuple(path_limits)
        self.check_key = check_key
        self._workers: tuple[anyio.CapacityLimiter, anyio.CapacityLimiter] | None = None

    def _limit(self, path: str, keyed: bool) -> int:
        for pattern, limit in self.path_limits:
            if pattern.match(path):
                return limit
        return self.keyed_limit if keyed else self.keyless_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _gate_headers(scope.get("headers", []))
        path = scope.get("path", "")
        keyed = self.keyed(path)
        if keyed:
            refusal = self.check_key(headers)
            if refusal is not None:
                await JSONResponse(refusal.body(), status_code=refusal.status)(scope, receive, send)
                return
        limit = self._limit(path, keyed)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:  # uvicorn refuses a malformed length
            await JSONResponse(too_large_body(limit), status_code=413)(scope, receive, send)
            return
        method = scope.get("method", "GET")
        is_json = is_json_media(headers.get("content-type", ""))
        if method not in _NO_BODY and (is_json or self.bodies.match(method, path) is not None):
            await self._checked(scope, receive, send, limit, is_json=is_json)
        else:
            await self._streamed(scope, receive, send, limit)

    async def _checked(
        self, scope: Scope, receive: Receive, send: Send, limit: int, *, is_json: bool
    ) -> None:
        """Read the whole body, judge it, and run the app on it (or answer the refusal)."""
        method, path = scope.get("method", "GET"), scope.get("path", "")
        try:
            raw = await _read_body(receive, limit)
        except PayloadTooLarge:
            await JSONResponse(too_large_body(limit), status_code=413)(scope, receive, send)
            return
        except _ClientGone:
            return
        check = functools.partial(self.bodies.check, method, path, raw, is_json=is_json)
        if len(raw) <= INLINE_BYTES:
            checked = check()
        else:
            limiter = self._limiters()[len(raw) >= LARGE_BYTES]
            checked = await anyio.to_thread.run_sync(check, limiter=limiter)
        if checked.too_large:
            refusal = LocalAPIError(413, checked.issues[0]["msg"], code="payload_too_large", retryable=False)
            await JSONResponse(refusal.body(), status_code=413)(scope, receive, send)
            return
        if checked.issues:
            await JSONResponse(validation_error_body(checked.issues), status_code=422)(scope, receive, send)
            return
        scope[CHECKED_BODY] = CheckedBody(checked.value, [])
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()  # after the body: a disconnect, when it comes

        await self.app(scope, replay, send)

    def _limiters(self) -> tuple[anyio.CapacityLimiter, anyio.CapacityLimiter]:
        """The worker slots of (smaller, large) bodies: made on first use, inside the event loop.
        Neither takes every worker thread of the server."""
        if self._workers is None:
            self._workers = (anyio.CapacityLimiter(8), anyio.CapacityLimiter(2))
        return self._workers

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """Run the app, stopping a body that grows past ``limit`` while it is read."""
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(limit)
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
            await JSONResponse(too_large_body(limit), status_code=413)(scope, receive, send)


_GATE_HEADERS = frozenset({b"authorization", b"x-api-key", b"content-length", b"content-type"})


def _gate_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request headers the gate reads (lower-case names; the last of a repeated one wins),
    without decoding the others: a request carries a dozen it never looks at."""
    picked: dict[str, str] = {}
    for name, value in raw:
        lowered = name.lower()
        if lowered in _GATE_HEADERS:
            picked[lowered.decode("latin-1")] = value.decode("latin-1")
    return picked


_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")


def any_of(patterns: Iterable[re.Pattern[str]]) -> Callable[[str], bool]:
    """Whether any of ``patterns`` matches a path (``match``: from its start), as one regex, so a
    request's path is tried once instead of once per keyed route.

    Named groups are made plain (routes share parameter names, which one regex cannot repeat);
    nothing reads them here. Patterns that cannot be joined that way (different flags, a
    backreference to a name) are tried one by one, with the same answer.

    Args:
        patterns: Starlette route regexes (``Route.path_regex``).
    """
    patterns = tuple(patterns)
    if not patterns:
        return lambda path: False
    if len({p.flags for p in patterns}) == 1 and not any("(?P=" in p.pattern for p in patterns):
        joined = "|".join(f"(?:{_NAMED_GROUP.sub('(?:', p.pattern)})" for p in patterns)
        try:
            regex = re.compile(joined, patterns[0].flags)
        except re.error:
            pass
        else:
            return lambda path: regex.match(path) is not None
    return lambda path: any(p.match(path) for p in patterns)


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, at most ``limit`` bytes.

    Raises:
        PayloadTooLarge: It grew past ``limit``.
        _ClientGone: The client disconnected first.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
