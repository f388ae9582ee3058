"""fleet_sdk: a typed SDK for Fleet-style RL-environment platforms.

Importing this package stays light: boto3, mcp and the local server stack load
only when the feature that needs them is used.
"""

from ._client import AsyncFleet, Fleet
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
    EpisodeError,
    FleetError,
    InternalServerError,
    MCPError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    TaskConfigError,
    ToolNotFoundError,
    ToolsUnavailableError,
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
from .env import AsyncDatabase, AsyncEnv, Database, Env
from .task_env import TaskEnv
from .tasks import Task, load_tasks
from .tools import Tool

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponse",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncDatabase",
    "AsyncEnv",
    "AsyncFleet",
    "AsyncHTTPClient",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "Database",
    "Env",
    "EnvNotFoundError",
    "EpisodeError",
    "Fleet",
    "FleetConfig",
    "FleetError",
    "HTTPClient",
    "InternalServerError",
    "MCPError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestOptions",
    "RetryPolicy",
    "Surface",
    "Task",
    "TaskConfigError",
    "TaskEnv",
    "Timeout",
    "Tool",
    "ToolNotFoundError",
    "ToolsUnavailableError",
    "UnprocessableEntityError",
    "VersionNotFoundError",
    "__version__",
    "load_tasks",
]
