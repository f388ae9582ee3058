"""Errors the local server answers with, in the schemas' ``ErrorResponse`` shape:
``{"detail": ..., "code": ..., "retryable": ...}``. FastAPI's own validation
errors keep their ``detail: [{loc, msg, type}]`` list, so a 422 names the field."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import pydantic
from fastapi import Depends, Request
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


ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


def _integral_floats_to_ints(value: Any) -> tuple[Any, bool]:
    """``value`` with every integral float (``3.0``) made an int; and whether anything changed.

    JSON Schema counts ``3.0`` as an integer, pydantic's strict mode does not.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value), True
    if isinstance(value, list):
        items = [_integral_floats_to_ints(item) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    if isinstance(value, dict):
        pairs = {key: _integral_floats_to_ints(item) for key, item in value.items()}
        return {key: item for key, (item, _) in pairs.items()}, any(changed for _, changed in pairs.values())
    return value, False


def strict_body(model: type[ModelT], *, non_nullable: tuple[str, ...] = ()) -> Any:
    """A dependency parsing the JSON request body into ``model`` as exactly as the schema reads.

    FastAPI validates bodies in lax mode, which accepts what the schemas forbid
    (``false`` for a number, ``"1"`` for an integer, ``1`` for a string). This
    validates the whole tree (nested models included) in pydantic strict mode,
    except that an integral float is an integer as in JSON Schema. Failures are
    answered as FastAPI's 422 with ``loc`` starting at ``"body"``, so the
    response names the bad field.

    Generated models type an optional field as ``X | None = None`` whether or
    not the schema allows ``null``; list the top-level fields whose schema does
    not in ``non_nullable`` and an explicit ``null`` there is refused too.

    Use as ``body: Annotated[Model, strict_body(Model)]``.

    Args:
        model: The request model.
        non_nullable: Optional top-level fields that must not be sent as ``null``.
    """

    async def parse(request: Request) -> ModelT:
        raw = await request.body()
        if not raw.strip():
            raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
        errors: list[dict[str, Any]] = []
        try:
            data = json.loads(raw)
        except ValueError:
            pass  # pydantic reports it as json_invalid below
        else:
            data, changed = _integral_floats_to_ints(data)
            if changed:
                raw = json.dumps(data).encode()
            if isinstance(data, dict):
                errors += [
                    {"type": "null_not_allowed", "loc": ("body", name), "msg": "Input should not be null"}
                    for name in non_nullable
                    if name in data and data[name] is None
                ]
        try:
            parsed = model.model_validate_json(raw, strict=True)
        except pydantic.ValidationError as exc:
            errors += [
                {"type": err["type"], "loc": ("body", *err["loc"]), "msg": err["msg"]}
                for err in exc.errors(include_url=False)
            ]
        if errors:
            raise RequestValidationError(errors)
        return parsed

    return Depends(parse)


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
    Probing with ``BaseRoute.matches`` works for included routers too.
    """
    allowed: set[str] = set()
    for method in _PROBED_METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            allowed.add(method)
    return allowed


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = exc.headers
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        if allowed:
            headers = {**(headers or {}), "Allow": ", ".join(sorted(allowed))}
    return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    issues = [
        {
            "loc": [str(p) if not isinstance(p, int) else p for p in err.get("loc", ())],
            "msg": err.get("msg", ""),
            "type": err.get("type", "value_error"),
        }
        for err in exc.errors()
    ]
    return JSONResponse({"detail": issues, "code": "validation_error", "retryable": False}, status_code=422)


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"internal error: {type(exc).__name__}: {exc}", "code": "internal", "retryable": True},
        status_code=500,
    )


EXCEPTION_HANDLERS = {
    LocalAPIError: _local_error,
    StarletteHTTPException: _http_error,
    RequestValidationError: _validation_error,
    Exception: _unexpected_error,
}
