"""Bundled environments the local server mounts.

Each :class:`EnvironmentDefinition` carries the SQL of its seed database, its MCP tools
(:class:`ToolDefinition`: JSON Schema plus a handler over an instance's ``current`` database) and
its tasks (task configs as in docs/wire.md#episodes, with verifiers and reference solutions)::

    env = get_environment("orderdesk")
    env.build_seed("/tmp/orderdesk/seed.db")
    conn = sqlite3.connect("/tmp/orderdesk/current.db")   # a copy of the seed
    env.tool("get_order").call(conn, {"order_id": 1012})
"""

from __future__ import annotations

import functools

from ._definition import (
    EnvironmentDefinition,
    ReferenceStep,
    TaskDefinition,
    TaskMetadata,
    ToolDefinition,
    ToolError,
    ToolHandler,
    UnknownEnvironmentError,
)

# The names these classes had before ``spec`` came to mean only an OpenAPI document (codegen).
EnvironmentSpec = EnvironmentDefinition
ToolSpec = ToolDefinition
TaskSpec = TaskDefinition

__all__ = [
    "EnvironmentDefinition",
    "ReferenceStep",
    "TaskDefinition",
    "TaskMetadata",
    "ToolDefinition",
    "ToolError",
    "ToolHandler",
    "UnknownEnvironmentError",
    "get_environment",
    "registry",
]


def _load() -> dict[str, EnvironmentDefinition]:
    from .calendar_app import ENVIRONMENT as calendar
    from .orderdesk import ENVIRONMENT as orderdesk

    return {env.env_key: env for env in (orderdesk, calendar)}


@functools.cache
def _environments() -> dict[str, EnvironmentDefinition]:
    return _load()


def registry() -> dict[str, EnvironmentDefinition]:
    """Every bundled environment by ``env_key`` (a new dict each call; the specs are shared)."""
    return dict(_environments())


def get_environment(env_key: str) -> EnvironmentDefinition:
    """The bundled environment ``env_key``; :class:`UnknownEnvironmentError` (a ``KeyError``) otherwise."""
    environments = registry()
    try:
        return environments[env_key]
    except KeyError:
        raise UnknownEnvironmentError(env_key, list(environments)) from None
