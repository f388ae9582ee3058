"""fleet_sdk: a typed SDK for Fleet-style RL-environment platforms.

Importing this package stays light: boto3, mcp and the local server stack load
only when the feature that needs them is used.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._exceptions import (
    ActionError,
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    ContextToolError,
    DatabaseError,
    EnvNotFoundError,
    EpisodeError,
    EvaluationError,
    EvaluationTimeoutError,
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

if TYPE_CHECKING:
    from ._client import AsyncFleet, Fleet
    from .context import ContextManager
    from .env import AsyncDatabase, AsyncEnv, Database, Env
    from .task_env import TaskEnv
    from .tasks import Task, load_tasks
    from .tools import Tool

# Facades load on first use: the generated clients import ``fleet_sdk._runtime``, so loading the
# facades (which import the generated clients) here would be circular when ``fleet_api`` is
# imported first; it also keeps ``import fleet_sdk`` cheap.
_LAZY = {
    "AsyncFleet": "._client",
    "Fleet": "._client",
    "AsyncDatabase": ".env",
    "AsyncEnv": ".env",
    "Database": ".env",
    "Env": ".env",
    "TaskEnv": ".task_env",
    "ContextManager": ".context",
    "Task": ".tasks",
    "load_tasks": ".tasks",
    "Tool": ".tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fleet_sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponse",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "ActionError",
    "AsyncDatabase",
    "AsyncEnv",
    "AsyncFleet",
    "AsyncHTTPClient",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "ContextManager",
    "ContextToolError",
    "Database",
    "DatabaseError",
    "Env",
    "EnvNotFoundError",
    "EpisodeError",
    "EvaluationError",
    "EvaluationTimeoutError",
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
