"""The one HTTP policy of ``fleet_sdk``: URLs, auth, timeouts, deadlines, retries,
errors and redaction. ``HTTPClient`` / ``AsyncHTTPClient`` are the transports handed to the
generated clients (``fleet_generated``, whose ``_transport`` protocols they satisfy); nothing
above this package knows about retries or auth.

A name is imported from its module on first use: the settings and the call policy
(``FleetConfig``, ``CallPolicy``...) load without httpx, which only the transports need, so
building a client's configuration, or importing ``fleet_sdk.AsyncFleet``, does not load the
HTTP stack before a client is made (``benchmarks/bench_startup.py``).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_generated._transport import QueryValue, RequestOptions

    from ._async import AsyncHTTPClient
    from ._base import REQUEST_ID_HEADER, RETRY_COUNT_HEADER, BaseHTTPClient
    from ._config import ORCHESTRATOR_URL, PLATFORM_URL, FleetConfig, Surface
    from ._policy import (
        IDEMPOTENCY_HEADER,
        NO_RETRIES,
        NO_TIMEOUT,
        NOT_GIVEN,
        TRANSIENT_MESSAGES,
        CallPolicy,
        Deadline,
        NotGiven,
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
    "NOT_GIVEN",
    "NO_RETRIES",
    "NO_TIMEOUT",
    "ORCHESTRATOR_URL",
    "PLATFORM_URL",
    "REDACTED",
    "REQUEST_ID_HEADER",
    "RETRY_COUNT_HEADER",
    "TRANSIENT_MESSAGES",
    "APIResponse",
    "AsyncHTTPClient",
    "BaseHTTPClient",
    "CallPolicy",
    "Deadline",
    "FleetConfig",
    "HTTPClient",
    "NotGiven",
    "QueryValue",
    "Redactor",
    "RequestOptions",
    "RetryPolicy",
    "Surface",
    "Timeout",
    "is_transient",
    "within",
]

_HOMES = {
    "QueryValue": "fleet_generated._transport",
    "RequestOptions": "fleet_generated._transport",
    "AsyncHTTPClient": "._async",
    "REQUEST_ID_HEADER": "._base",
    "RETRY_COUNT_HEADER": "._base",
    "BaseHTTPClient": "._base",
    "ORCHESTRATOR_URL": "._config",
    "PLATFORM_URL": "._config",
    "FleetConfig": "._config",
    "Surface": "._config",
    "IDEMPOTENCY_HEADER": "._policy",
    "NOT_GIVEN": "._policy",
    "NO_RETRIES": "._policy",
    "NO_TIMEOUT": "._policy",
    "NotGiven": "._policy",
    "TRANSIENT_MESSAGES": "._policy",
    "CallPolicy": "._policy",
    "Deadline": "._policy",
    "RetryPolicy": "._policy",
    "Timeout": "._policy",
    "is_transient": "._policy",
    "within": "._policy",
    "REDACTED": "._redact",
    "Redactor": "._redact",
    "APIResponse": "._response",
    "HTTPClient": "._sync",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
