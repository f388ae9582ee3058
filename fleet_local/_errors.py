"""Errors the local server answers with, in the schemas' ``ErrorResponse`` shape:
``{"detail": ..., "code": ..., "retryable": ...}``. Every 422 carries the
``detail: [{loc, msg, type}]`` list of FastAPI's validation errors, so it names
the field (request bodies are validated against the schemas by ``_validation``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match


class LocalAPIError(Exception):
    """Raise from a route to answer ``status`` with a structured error body.

    Args:
        status: HTTP status code.
        detail: Human-readable message.
        code: Machine-readable code (``env_not_found``, ``read_only``...).
        retryable: Whether the client may retry the same request.
        headers: Extra response headers (``Retry-After``...).
    """

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        code: str | None = None,
        retryable: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.retryable = retryable
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The ``ErrorResponse`` JSON body."""
        body: dict[str, Any] = {"detail": self.detail}
        if self.code is not None:
            body["code"] = self.code
        if self.retryable is not None:
            body["retryable"] = self.retryable
        return body


def payload_too_large(limit: int) -> LocalAPIError:
    """The 413 of a body larger than ``limit`` bytes: one code and message on every route."""
    return LocalAPIError(
        413,
        f"request body is larger than the server's limit of {limit} bytes",
        code="payload_too_large",
        retryable=False,
    )


def not_found(kind: str, id: str, code: str = "not_found") -> LocalAPIError:
    """A 404 naming what was not found."""
    return LocalAPIError(404, f"{kind} {id!r} not found", code=code, retryable=False)


async def _local_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LocalAPIError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


_PROBED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _allowed_methods(request: Request) -> set[str]:
    """Every method some route serves at the request's path.

    Starlette's 405 names only the methods of the first route matching the path,
    so a path served by two routes (GET and DELETE) advertised half of them.
    Probing with ``BaseRoute.matches`` works for included routers too. A literal path that a
    template also matches (``/v1/env/instances/batch`` and ``/v1/env/instances/{instance_id}``)
    is its own resource: only the literal routes' methods count there.
    """
    matched: list[tuple[str, str]] = []
    for method in _PROBED_METHODS:
        scope = {**request.scope, "method": method}
        for route in _leaf_routes(request.app.router.routes):
            if route.matches(scope)[0] == Match.FULL:
                matched.append((method, str(getattr(route, "path_format", "{}"))))
    literal = {method for method, path in matched if "{" not in path}
    return literal or {method for method, _ in matched}


def _leaf_routes(routes: list[Any]) -> list[Any]:
    """The routes of included routers, flattened (FastAPI wraps each ``include_router``)."""
    leaves: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        leaves.extend(_leaf_routes(list(inner.routes)) if inner is not None else [route])
    return leaves


def _undecodable_body(exc: StarletteHTTPException) -> bool:
    """Whether FastAPI refused a body it could not even decode (bad UTF-8, nesting too deep).

    FastAPI answers a JSON syntax error 422 but these 400, raising from the decoding error.
    """
    return exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError)


# Here rather than in _request_gate (which raises it): the handler below must know it, and
# the gate already builds on this module.
class PayloadTooLarge(StarletteHTTPException):
    """Raised from ``receive`` when a body outgrows the limit while being read.

    An ``HTTPException`` so that FastAPI's body parsing lets it through unchanged (it turns any
    other exception into a 400).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, payload_too_large(limit).detail)
        self.limit = limit


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if _undecodable_body(exc):
        cause = exc.__cause__
        issue = {"loc": ["body"], "msg": f"JSON decode error: {type(cause).__name__}", "type": "json_invalid"}
        return JSONResponse(
            {"detail": [issue], "code": "validation_error", "retryable": False}, status_code=422
        )
    if isinstance(exc, PayloadTooLarge):  # a body outgrew the limit while being read
        return JSONResponse(payload_too_large(exc.limit).body(), status_code=413)
    headers = exc.headers
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        if allowed:
            headers = {**(headers or {}), "Allow": ", ".join(sorted(allowed))}
    return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=headers)


def _printable(text: str) -> str:
    """``text`` with lone surrogates escaped: a body field named by one must still encode."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def validation_error_body(errors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``ErrorResponse`` body of a 422: the ValidationIssues of ``errors``, each encodable."""
    issues = [
        {
            "loc": [_printable(str(p)) if not isinstance(p, int) else p for p in err.get("loc", ())],
            "msg": _printable(str(err.get("msg", ""))),
            "type": err.get("type", "value_error"),
        }
        for err in errors
    ]
    return {"detail": issues, "code": "validation_error", "retryable": False}


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(validation_error_body(exc.errors()), status_code=422)


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    # A bug of ours: the same request would fail the same way, so it is not retryable.
    # The one transient fault that reaches here is SQLite's lock timeout: 503, retry later.
    if isinstance(exc, sqlite3.OperationalError) and _sqlite_busy(exc):
        body = {"detail": f"the database is busy: {exc}", "code": "busy", "retryable": True}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
    detail = _printable(f"internal error: {type(exc).__name__}: {exc}")
    return JSONResponse({"detail": detail, "code": "internal", "retryable": False}, status_code=500)


def _sqlite_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


EXCEPTION_HANDLERS = {
    LocalAPIError: _local_error,
    StarletteHTTPException: _http_error,
    RequestValidationError: _validation_error,
    Exception: _unexpected_error,
}
