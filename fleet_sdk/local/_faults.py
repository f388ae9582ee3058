"""Fault injection for tests: make the next N requests to a path fail.

Off unless the server was started with ``faults_enabled``. Armed through
``POST /_admin/faults`` with a ``FaultRule``; each rule matches a method and a
path (exact, or a prefix ending in ``*``) and fires ``count`` times:

- ``status``: answer ``status`` (502/503...) with a retryable error body;
- ``hang``: wait ``delay`` seconds (past the client's timeout), then answer 504;
- ``drop``: close the connection without any response.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import threading
from dataclasses import dataclass
from typing import Any, Literal

from starlette.types import ASGIApp, Receive, Scope, Send

FaultMode = Literal["status", "hang", "drop"]
ADMIN_PATH = "/_admin/faults"


class DroppedConnection(Exception):
    """Raised inside the ASGI app so the server closes the socket with no response."""


@dataclass
class FaultRule:
    """One armed fault.

    Attributes:
        path: Request path, or a glob (``/instances/*/mcp*``).
        method: HTTP method to match, or ``*``.
        mode: ``status``, ``hang`` or ``drop``.
        status: Status for ``status`` mode.
        count: How many matching requests fail before the rule disarms.
        delay: Seconds to hang in ``hang`` mode.
        body: Optional JSON body for ``status`` mode (default: a retryable error).
    """

    path: str
    method: str = "*"
    mode: FaultMode = "status"
    status: int = 503
    count: int = 1
    delay: float = 30.0
    body: dict[str, Any] | None = None

    def matches(self, method: str, path: str) -> bool:
        """Whether a request is hit by this rule."""
        return self.method in ("*", method) and fnmatch.fnmatchcase(path, self.path)


class FaultInjector:
    """Holds armed rules; thread-safe."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self.fired: list[tuple[str, str, str]] = []

    def arm(self, rule: FaultRule) -> None:
        """Add a rule."""
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        """Disarm everything."""
        with self._lock:
            self._rules.clear()

    def take(self, method: str, path: str) -> FaultRule | None:
        """The rule that fires for this request, decrementing its count."""
        if not self.enabled:
            return None
        with self._lock:
            for rule in self._rules:
                if rule.count > 0 and rule.matches(method, path):
                    rule.count -= 1
                    self.fired.append((method, path, rule.mode))
                    if rule.count == 0:
                        self._rules.remove(rule)
                    return rule
        return None


class FaultMiddleware:
    """ASGI middleware that applies armed faults and serves the admin API."""

    def __init__(self, app: ASGIApp, injector: FaultInjector) -> None:
        self.app = app
        self.injector = injector

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.injector.enabled:
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        if path == ADMIN_PATH:
            await self._admin(method, receive, send)
            return
        rule = self.injector.take(method, path)
        if rule is None:
            await self.app(scope, receive, send)
            return
        if rule.mode == "drop":
            await _drop(send)
            return
        status = rule.status
        if rule.mode == "hang":
            await asyncio.sleep(rule.delay)
            status = 504
        body = rule.body or {
            "detail": f"injected fault: {status}",
            "code": "injected_fault",
            "retryable": True,
        }
        await _json(send, status, body)

    async def _admin(self, method: str, receive: Receive, send: Send) -> None:
        if method == "DELETE":
            self.injector.clear()
            await _json(send, 200, {"cleared": True})
            return
        if method == "GET":
            await _json(send, 200, {"fired": [list(f) for f in self.injector.fired]})
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            rule = FaultRule(**json.loads(raw or b"{}"))
        except (TypeError, ValueError) as exc:
            await _json(send, 422, {"detail": f"bad fault rule: {exc}", "code": "validation_error"})
            return
        self.injector.arm(rule)
        await _json(send, 200, {"armed": rule.__dict__})


async def _drop(send: Send) -> None:
    """Break the connection mid-response.

    ASGI gives no handle on the socket, and an exception raised here is turned
    into a 500 by the app's error middleware. Instead, start a response that
    promises a body and return without sending it: uvicorn then closes the
    connection, and the client sees the peer hang up (a transport error, never a status).
    """
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1024")],
        }
    )


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
