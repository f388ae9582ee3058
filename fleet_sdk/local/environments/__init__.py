"""Bundled environments the local server mounts.

Each :class:`EnvironmentSpec` carries the SQL of its seed database, its MCP tools (:class:`ToolSpec`:
JSON Schema plus a handler over an instance's ``current`` database) and its tasks (task configs
as in docs/wire.md#episodes, with verifiers and reference solutions)::

    env = get_environment("orderdesk")
    env.build_seed("/tmp/orderdesk/seed.db")
    conn = sqlite3.connect("/tmp/orderdesk/current.db")   # a copy of the seed
    env.tool("get_order").call(conn, {"order_id": 1012})
"""

from __future__ import annotations

import functools

from ._spec import (
    EnvironmentSpec,
    ReferenceStep,
    TaskMetadata,
    TaskSpec,
    ToolError,
    ToolHandler,
    ToolSpec,
    UnknownEnvironmentError,
)

__all__ = [
    "EnvironmentSpec",
    "ReferenceStep",
    "TaskMetadata",
    "TaskSpec",
    "ToolError",
    "ToolHandler",
    "ToolSpec",
    "UnknownEnvironmentError",
    "get_environment",
    "registry",
]


def _load() -> dict[str, EnvironmentSpec]:
    from .calendar_app import ENVIRONMENT as calendar
    from .orderdesk import ENVIRONMENT as orderdesk

    return {env.env_key: env for env in (orderdesk, calendar)}


@functools.cache
def _environments() -> dict[str, EnvironmentSpec]:
    return _load()


def registry() -> dict[str, EnvironmentSpec]:
    """Every bundled environment by ``env_key`` (a new dict each call; the specs are shared)."""
    return dict(_environments())


def get_environment(env_key: str) -> EnvironmentSpec:
    """The bundled environment ``env_key``; :class:`UnknownEnvironmentError` (a ``KeyError``) otherwise."""
    environments = registry()
    try:
        return environments[env_key]
    except KeyError:
        raise UnknownEnvironmentError(env_key, list(environments)) from None
