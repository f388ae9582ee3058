"""The one HTTP policy of ``fleet_sdk``: URLs, auth, timeouts, deadlines, retries,
errors and redaction. ``HTTPClient`` / ``AsyncHTTPClient`` are the transports handed to the
generated clients (``fleet_generated``, whose ``_transport`` protocols they satisfy); nothing
above this package knows about retries or auth."""

from fleet_generated._transport import QueryValue, RequestOptions

from ._async import AsyncHTTPClient
from ._base import REQUEST_ID_HEADER, BaseHTTPClient
from ._config import ORCHESTRATOR_URL, PLATFORM_URL, FleetConfig, Surface
from ._policy import (
    IDEMPOTENCY_HEADER,
    TRANSIENT_MESSAGES,
    CallPolicy,
    Deadline,
    RetryPolicy,
    Timeout,
    is_transient,
    within,
)
from ._redact import REDACTED, Redactor
from ._response import APIResponse
from ._sync import HTTPClient

__all__ = [
    "IDEMPOTENCY_HEADER",
    "ORCHESTRATOR_URL",
    "PLATFORM_URL",
    "REDACTED",
    "REQUEST_ID_HEADER",
    "TRANSIENT_MESSAGES",
    "APIResponse",
    "AsyncHTTPClient",
    "BaseHTTPClient",
    "CallPolicy",
    "Deadline",
    "FleetConfig",
    "HTTPClient",
    "QueryValue",
    "Redactor",
    "RequestOptions",
    "RetryPolicy",
    "Surface",
    "Timeout",
    "is_transient",
    "within",
]
