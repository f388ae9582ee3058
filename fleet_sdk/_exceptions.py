"""The one error hierarchy of ``fleet_sdk``, shared by sync and async code.

Errors are chosen by HTTP status code and by the structured error body
(``{"detail": ..., "code": ..., "retryable": ...}``), never by matching
substrings of a message. The orchestrator does not always put the structured
fields at the top level: it may nest them in a ``detail`` object, or forward a
driver's JSON error verbatim inside the ``detail`` string. ``read_error_body``
looks in all three places (see ``ErrorBodyFields``)::

    FleetError
    ├── ConfigurationError              bad or missing settings (no API key, bad URL)
    ├── ClientClosedError               a closed client (or env, MCP client, lease) was used again
    ├── APIError                        anything that went wrong talking to an API
    │   ├── APIConnectionError          no response: DNS, refused, reset
    │   │   └── APITimeoutError         connect/read timeout, or the call's deadline ran out
    │   ├── APIResponseValidationError  a 2xx whose body is not JSON or not the schema's shape
    │   └── APIStatusError              a 4xx/5xx response
    │       ├── BadRequestError             400
    │       ├── AuthenticationError         401
    │       ├── PermissionDeniedError       403
    │       ├── NotFoundError               404
    │       │   ├── EnvNotFoundError            code "env_not_found" (400 or 404; also a BadRequestError)
    │       │   └── VersionNotFoundError        code "version_not_found" (likewise)
    │       ├── ConflictError               409
    │       ├── UnprocessableEntityError    422
    │       ├── RateLimitError              429
    │       └── InternalServerError         5xx
    ├── MCPError                        an instance's MCP endpoints failed
    │   ├── ToolsUnavailableError       no endpoint listed any tool
    │   ├── ToolNotFoundError           the tool does not exist (never retried)
    │   ├── MCPTransportError           [mcp] an MCP request failed over HTTP (``sent``: may it have run)
    │   └── MCPSessionExpiredError      [mcp] the server ended the session (opened again once, then raised)
    ├── EpisodeError                    a task-environment episode was misused (step after done)
    │   └── ActionError                 an action ``step`` cannot read (names what was wrong; no step used)
    ├── ContextToolError                a context tool got bad arguments (bad pattern, unknown output)
    ├── DatabaseError                   an instance database refused a statement (carries its message)
    ├── TaskConfigError                 a task file or task config is malformed (names index and field)
    ├── PolicyError                     a policy could not produce a turn (no model endpoint, a failed model)
    ├── EvaluationError                 an evaluation could not run (bad run directory, a job with no results)
    │   └── EvaluationTimeoutError      an evaluation job was not terminal by its deadline
    ├── BrowserStartError               a browser lease could not be made ready (deleted first)
    ├── UnknownPartError                [reports] a report part, model or scenario the report does not have
    ├── VerifierCodeError               [verifiers] the verifier's code does not parse or has no entry point
    ├── InvalidResultError              [verifiers] a verifier returned something that is not a score
    └── UnknownDatabaseError            [verifiers] ``env.db(name)`` names no database of the environment

Each is exported from ``fleet_sdk``, except those marked ``[module]``: exported from
``fleet_sdk.<module>`` (``fleet_sdk.mcp.MCPTransportError``). ``MCPTransportError`` and
``MCPSessionExpiredError`` are defined in ``fleet_sdk/mcp.py`` (``transient`` reads the runtime's
retry rule, which this module, standard library only, cannot import), ``UnknownPartError`` in
``fleet_sdk/reports/_render.py``, and the last three in the standard-library-only verifier
modules the local server's sandbox child loads without ``fleet_sdk`` (there they derive from
``Exception``; see ``fleet_sdk/verifiers/_compat.py``); ``UnknownPartError``, ``ContextToolError``
and ``TaskConfigError`` are ``ValueError``s too, ``InvalidResultError`` a ``TypeError`` and
``UnknownDatabaseError`` a ``LookupError``. ``tests/test_exception_tree.py`` checks this drawing
against the classes. Every error pickles (Ray ships them between processes).

Every ``APIError`` carries the ``request_id`` sent as ``X-Request-ID`` (the same
across the retries of one call), the method and URL, and, for status errors,
``status_code``, the parsed ``body``, its ``code`` and ``retryable`` flag (and
``retryable_at``, where the flag was found). Messages never contain secrets: they
pass through the runtime's redactor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "ActionError",
    "AuthenticationError",
    "BadRequestError",
    "BrowserStartError",
    "ClientClosedError",
    "ConfigurationError",
    "ConflictError",
    "ContextToolError",
    "DatabaseError",
    "EnvNotFoundError",
    "EpisodeError",
    "ErrorBodyFields",
    "EvaluationError",
    "EvaluationTimeoutError",
    "FleetError",
    "InternalServerError",
    "MCPError",
    "NotFoundError",
    "PermissionDeniedError",
    "PolicyError",
    "RateLimitError",
    "TaskConfigError",
    "ToolNotFoundError",
    "ToolsUnavailableError",
    "UnprocessableEntityError",
    "VersionNotFoundError",
    "read_error_body",
]


class FleetError(Exception):
    """Base class of every error raised by ``fleet_sdk``."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt without ``__init__``, whose keyword-only arguments ``args`` does not hold: pickle,
        # ``copy`` and Ray (which ships errors between processes) would fail to call it.
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[FleetError], args: tuple[Any, ...]) -> FleetError:
    """An error of ``cls`` with ``args``, its attributes left to pickle's state."""
    error = cls.__new__(cls, *args)
    error.args = args
    return error


class ConfigurationError(FleetError):
    """A setting is missing or invalid; the message names it."""


class ClientClosedError(FleetError):
    """A closed ``Fleet`` / ``AsyncFleet`` (or an env, MCP client or browser lease closed with it)
    was used again; nothing was sent. Make a new client instead."""


class APIError(FleetError):
    """A call to one of the Fleet APIs failed.

    Attributes:
        message: Human-readable, already redacted.
        method: HTTP method of the failed call.
        url: Full URL of the failed call (no credentials are ever put in URLs).
        request_id: The ``X-Request-ID`` the SDK sent, stable across retries.
    """

    def __init__(self, message: str, *, method: str, url: str, request_id: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url
        self.request_id = request_id

    def __str__(self) -> str:
        suffix = f" (request_id={self.request_id})" if self.request_id else ""
        return f"{self.message}{suffix}"


class APIConnectionError(APIError):
    """No response was received (connection refused, reset, DNS failure...)."""


class APITimeoutError(APIConnectionError):
    """The request timed out, or the call's overall deadline ran out."""


class APIResponseValidationError(APIError):
    """A successful response whose body was not JSON, or not the documented shape.

    Attributes:
        status_code: The HTTP status of the response.
        body: The parsed JSON body, or the raw text when it was not JSON.
    """

    def __init__(
        self, message: str, *, method: str, url: str, request_id: str | None, status_code: int, body: Any
    ) -> None:
        super().__init__(message, method=method, url=url, request_id=request_id)
        self.status_code = status_code
        self.body = body


class APIStatusError(APIError):
    """The API answered with a 4xx or 5xx status.

    Attributes:
        status_code: HTTP status code.
        body: Parsed JSON error body (``dict``), or the raw text if it was not JSON.
        code: Machine-readable error code from the body (``code``, else ``error``), wherever
            ``read_error_body`` found it; None if the body has none.
        retryable: The server's own ``retryable`` flag, wherever it was found; None if absent.
        retryable_at: Where the flag was found (``"body"``, ``"body.detail"``,
            ``"body.detail<json>.detail"``...), for logs; None if absent.
        response: The ``httpx.Response``, for headers.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str,
        url: str,
        request_id: str | None,
        response: httpx.Response,
        body: Any,
    ) -> None:
        super().__init__(message, method=method, url=url, request_id=request_id)
        self.response = response
        self.status_code = response.status_code
        self.body = body
        fields = read_error_body(body)
        self.code: str | None = fields.code
        self.retryable: bool | None = fields.retryable
        self.retryable_at: str | None = fields.retryable_at


class BadRequestError(APIStatusError):
    """400: the request was malformed."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing, wrong, or sent with the wrong scheme."""


class PermissionDeniedError(APIStatusError):
    """403: the key is valid but not allowed to do this."""


class NotFoundError(APIStatusError):
    """404: the resource does not exist."""


class EnvNotFoundError(NotFoundError, BadRequestError):
    """Code ``env_not_found``: the environment key is unknown (permanent).

    A 400 when a request body names the key (the orchestrator's answer to a create), a 404 when
    a path does; it is both a ``NotFoundError`` and a ``BadRequestError`` so either ``except``
    catches it."""


class VersionNotFoundError(NotFoundError, BadRequestError):
    """Code ``version_not_found``: the environment has no such version (permanent; 400 or 404,
    as ``EnvNotFoundError``)."""


class ConflictError(APIStatusError):
    """409: the request conflicts with the resource's state."""


class UnprocessableEntityError(APIStatusError):
    """422: the body failed validation; ``body["detail"]`` names the fields."""


class RateLimitError(APIStatusError):
    """429: too many requests."""


class InternalServerError(APIStatusError):
    """5xx: the server failed."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}

# Refinements chosen by the structured body's ``code``, within a status class.
_BY_CODE: dict[tuple[int, str], type[APIStatusError]] = {
    (400, "env_not_found"): EnvNotFoundError,
    (404, "env_not_found"): EnvNotFoundError,
    (400, "version_not_found"): VersionNotFoundError,
    (404, "version_not_found"): VersionNotFoundError,
}


@dataclass(frozen=True)
class ErrorBodyFields:
    """The structured fields of an error body, wherever the server put them.

    Attributes:
        code: The first string ``code`` found, or ``error`` (the name a driver gives its
            error, e.g. ``seed_placement_failed``) in an object without ``code``; None if neither.
        retryable: The first boolean ``retryable`` found; None if there is none.
        retryable_at: Where ``retryable`` was found, e.g. ``"body.detail<json>.detail"``.
    """

    code: str | None = None
    retryable: bool | None = None
    retryable_at: str | None = None


# Bounds on the search for JSON inside a message: an error body is small, and a hostile one
# must not make classifying it expensive.
_MAX_EMBEDDED_TEXT = 16_384
_MAX_EMBEDDED_TRIES = 16
_MAX_NESTING = 4


def read_error_body(body: Any) -> ErrorBodyFields:
    """Find ``retryable``, ``code`` and ``error`` in an error body.

    Looked for, in this order: the top level of the body; inside a ``detail`` object;
    inside a JSON object embedded in a ``detail`` string (an orchestrator forwarding a
    driver's error verbatim, e.g. ``"Failed to create instance: Driver API returned 400:
    {\"detail\": {\"error\": ..., \"retryable\": true}}"``), and so on into that
    object. The first flag found wins, so a top-level ``"retryable": false`` is final.

    Args:
        body: The parsed JSON body, or the raw text of a body that was not JSON.
    """
    code: str | None = None
    retryable: bool | None = None
    retryable_at: str | None = None
    for where, fields in _error_objects(body, "body", 0):
        if code is None:
            named = fields.get("code", fields.get("error"))
            code = named if isinstance(named, str) else None
        if retryable is None and isinstance(fields.get("retryable"), bool):
            retryable, retryable_at = fields["retryable"], where
    return ErrorBodyFields(code=code, retryable=retryable, retryable_at=retryable_at)


def _error_objects(value: Any, where: str, depth: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The JSON objects of an error body, outermost first, each with where it was found."""
    if depth > _MAX_NESTING:
        return
    if isinstance(value, dict):
        yield where, value
        yield from _error_objects(value.get("detail"), f"{where}.detail", depth + 1)
    elif isinstance(value, str):
        for embedded in _embedded_objects(value):
            yield from _error_objects(embedded, f"{where}<json>", depth + 1)


def _embedded_objects(text: str) -> Iterator[dict[str, Any]]:
    """JSON objects that appear inside a message, left to right."""
    text = text[:_MAX_EMBEDDED_TEXT]
    decoder = json.JSONDecoder()
    start, tries = text.find("{"), 0
    while start != -1 and tries < _MAX_EMBEDDED_TRIES:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            yield value
        start = text.find("{", end)


def status_error_class(status_code: int, body: Any) -> type[APIStatusError]:
    """Pick the exception class for an error response.

    Args:
        status_code: The HTTP status (>= 400).
        body: The parsed body; a ``code`` (see ``read_error_body``) refines the class.
    """
    code = read_error_body(body).code
    if code is not None and (status_code, code) in _BY_CODE:
        return _BY_CODE[(status_code, code)]
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code]
    if status_code >= 500:
        return InternalServerError
    return APIStatusError


class MCPError(FleetError):
    """The MCP endpoints of an instance failed (after retries, inside the deadline)."""


class ToolsUnavailableError(MCPError):
    """No MCP endpoint of the instance listed any tool (an empty union is a failure)."""


class ToolNotFoundError(MCPError):
    """The tool does not exist on the instance; retrying cannot help, so it never is."""


class EpisodeError(FleetError):
    """A task-environment episode was used out of order (for example a step after done)."""


class ActionError(EpisodeError):
    """``step`` got an action it cannot read; no step was used.

    Attributes:
        field: Where in the action the problem is (``"action"``, ``"tool_calls[1].function.arguments"``).
    """

    def __init__(self, message: str, *, field: str = "action") -> None:
        super().__init__(message)
        self.field = field


class ContextToolError(FleetError, ValueError):
    """A context tool (``fleet_sdk.context``) got a bad argument: an invalid pattern, an unknown output."""


class DatabaseError(FleetError):
    """A database of an instance refused a statement (bad SQL, a constraint).

    Attributes:
        message: The database's own message.
        sql: The statement that failed.
        database: The resource name (``current`` or ``seed``).
    """

    def __init__(self, message: str, *, sql: str, database: str) -> None:
        super().__init__(f"{database} database: {message}")
        self.message = message
        self.sql = sql
        self.database = database


class TaskConfigError(FleetError, ValueError):
    """A task file or task config is malformed; the message names the task index and field."""


class PolicyError(FleetError):
    """A policy (``fleet_sdk.policies``) could not produce a turn: no endpoint for its model, a task
    it cannot play, a model endpoint that failed."""


class EvaluationError(FleetError):
    """An evaluation could not run: a bad run directory, a job that ended without results..."""


class EvaluationTimeoutError(EvaluationError):
    """An evaluation job was not terminal by its deadline (the job itself keeps running).

    Not a ``TimeoutError``: the sync bridge reads that as its own wait expiring.
    """


class BrowserStartError(FleetError):
    """A browser could not be made ready: a lease that ended, did not start in time, lacks the
    ``computer`` tool or failed its health check (``BrowserSession.open`` deletes it first), or,
    on the local server, a Chromium or Playwright that is missing or did not come up."""
