"""Fault injection for tests: make the next N requests to a path fail.

Off unless the server was started with ``faults_enabled``. Armed through
``POST /_admin/faults`` with a ``FaultRule`` (validated: a bad field is a 422 that
names it), with the server's bearer key like every other route. Each rule matches
a method and a path (exact, or a glob) and fires ``count`` times:

- ``status``: answer ``status`` with ``body`` (default: a retryable error body);
- ``hang``: wait ``delay`` seconds (past the client's timeout), then answer 504;
- ``drop``: close the connection without any response.

With ``when="after"`` the request is first handled for real and its answer
thrown away, as when a server does the work but the response is lost: that is
what tests that a retried create with an idempotency key makes one instance.
``GET /_admin/faults`` lists the faults fired; ``DELETE`` disarms every rule.
``GET /_admin/state`` lists what the server holds for clients (``_debug_state``).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._auth import auth_refusal
from ._errors import payload_too_large

FaultMode = Literal["status", "hang", "drop"]
ADMIN_PATH = "/_admin/faults"
STATE_PATH = "/_admin/state"
MAX_RULE_BYTES = 65_536


class FaultRule(BaseModel):
    """One armed fault.

    Attributes:
        path: Request path, or a glob (``/instances/*/mcp*``).
        method: HTTP method to match, or ``*``.
        mode: ``status``, ``hang`` or ``drop``.
        status: Status for ``status`` mode (an error status, 400-599).
        count: How many matching requests fail before the rule disarms.
        delay: Seconds to hang in ``hang`` mode.
        body: JSON object answered in ``status`` mode (default: a retryable error).
        when: ``before`` the request reaches the app (nothing happens), or ``after`` the
            app handled it (the work is done, the answer lost).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1, max_length=2048, pattern=r"^/")
    method: str = Field(default="*", pattern=r"^(\*|[A-Z]{1,16})$")
    mode: FaultMode = "status"
    status: int = Field(default=503, ge=400, le=599)
    count: int = Field(default=1, ge=1, le=1_000_000)
    delay: float = Field(default=30.0, ge=0, le=3600, allow_inf_nan=False)
    body: dict[str, Any] | None = None
    when: Literal["before", "after"] = "before"

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
    """ASGI middleware that applies armed faults and serves the admin API.

    Args:
        app: The app behind it.
        injector: The armed rules.
        api_key: The server's bearer key, required by the admin API (None: any bearer key).
        live_objects: What ``GET /_admin/state`` answers (None: 404).
    """

    def __init__(
        self,
        app: ASGIApp,
        injector: FaultInjector,
        api_key: str | None = None,
        live_objects: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.app = app
        self.injector = injector
        self.api_key = api_key
        self.live_objects = live_objects

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.injector.enabled:
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        if path in (ADMIN_PATH, STATE_PATH):
            await self._admin(scope, receive, send)
            return
        rule = self.injector.take(method, path)
        if rule is None:
            await self.app(scope, receive, send)
            return
        if rule.when == "after":
            await self.app(scope, receive, _discard)
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

    async def _admin(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        refusal = auth_refusal(headers.get(b"authorization", b"").decode("latin-1"), self.api_key)
        if refusal is not None:
            await _json(send, refusal.status, refusal.body())
            return
        method = scope["method"]
        if scope["path"] == STATE_PATH:
            if method != "GET" or self.live_objects is None:
                await _json(send, 405, {"detail": "Method Not Allowed", "code": "method_not_allowed"})
                return
            await _json(send, 200, self.live_objects())
            return
        if method == "DELETE":
            self.injector.clear()
            await _json(send, 200, {"cleared": True})
            return
        if method == "GET":
            await _json(send, 200, {"fired": [list(f) for f in self.injector.fired]})
            return
        if method != "POST":
            await _json(send, 405, {"detail": "Method Not Allowed", "code": "method_not_allowed"})
            return
        raw = await _read_body(receive, MAX_RULE_BYTES)
        if raw is None:
            await _json(send, 413, payload_too_large(MAX_RULE_BYTES).body())
            return
        try:
            rule = FaultRule.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            issues = [
                {"loc": ["body", *err["loc"]], "msg": err["msg"], "type": err["type"]} for err in exc.errors()
            ]
            await _json(send, 422, {"detail": issues, "code": "validation_error", "retryable": False})
            return
        self.injector.arm(rule)
        await _json(send, 200, {"armed": rule.model_dump()})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None once it grows past ``limit`` bytes."""
    raw = b""
    while True:
        message = await receive()
        raw += bytes(message.get("body", b""))
        if len(raw) > limit:
            return None
        if not message.get("more_body"):
            return raw


async def _discard(_: Message) -> None:
    """An ASGI ``send`` that throws the app's answer away."""


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
