"""fleet_sdk: a typed SDK for Fleet-style RL-environment platforms.

Importing this package stays light: boto3, mcp and the local server stack load
only when the feature that needs them is used.
"""

from ._exceptions import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    EnvNotFoundError,
    FleetError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    UnprocessableEntityError,
    VersionNotFoundError,
)
from ._runtime import (
    APIResponse,
    AsyncHTTPClient,
    FleetConfig,
    HTTPClient,
    RequestOptions,
    RetryPolicy,
    Surface,
    Timeout,
)
from ._version import __version__

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponse",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncHTTPClient",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "EnvNotFoundError",
    "FleetConfig",
    "FleetError",
    "HTTPClient",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestOptions",
    "RetryPolicy",
    "Surface",
    "Timeout",
    "UnprocessableEntityError",
    "VersionNotFoundError",
    "__version__",
]
