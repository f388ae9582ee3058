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
    BrowserStartError,
    ClientClosedError,
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
    PolicyError,
    RateLimitError,
    TaskConfigError,
    ToolNotFoundError,
    ToolsUnavailableError,
    UnprocessableEntityError,
    VersionNotFoundError,
)
from ._public import publish
from ._version import __version__

if TYPE_CHECKING:
    from ._client import AsyncFleet, Fleet
    from ._runtime import (
        APIResponse,
        AsyncHTTPClient,
        CallPolicy,
        FleetConfig,
        HTTPClient,
        RequestOptions,
        RetryPolicy,
        Surface,
        Timeout,
    )
    from .context import ContextManager
    from .env import AsyncDatabase, AsyncEnv, Database, Env
    from .task_env import TaskEnv
    from .tasks import Task, load_tasks
    from .tools import Tool

# Names whose modules load the HTTP stack (httpx, anyio, the generated clients) are imported on
# first use, so that ``import fleet_sdk.verifiers`` in a grading process loads only the standard
# library and pydantic (tests/test_import_graph.py). No import order depends on this: the
# package has no import cycles (the same test walks the graph).
_ON_FIRST_USE = {
    "APIResponse": "._runtime",
    "AsyncHTTPClient": "._runtime",
    "CallPolicy": "._runtime",
    "FleetConfig": "._runtime",
    "HTTPClient": "._runtime",
    "RequestOptions": "._runtime",
    "RetryPolicy": "._runtime",
    "Surface": "._runtime",
    "Timeout": "._runtime",
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
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'fleet_sdk' has no attribute {name!r}")
    loaded = importlib.import_module(module, __name__)
    # Every name of that module at once: a published class's annotations name its neighbours
    # (``CallPolicy`` names ``Timeout``), and get_type_hints reads them from this namespace.
    names = [other for other, home in _ON_FIRST_USE.items() if home == module]
    globals().update({other: getattr(loaded, other) for other in names})
    publish(__name__, globals(), names)
    return globals()[name]


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
    "BrowserStartError",
    "CallPolicy",
    "ClientClosedError",
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
    "PolicyError",
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

publish(__name__, globals(), __all__)
