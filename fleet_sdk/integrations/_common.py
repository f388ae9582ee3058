"""What the adapters share: building a ``TaskEnv`` from the constructor arguments trainers know."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError
from ..task_env import TaskEnv

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .._client import AsyncFleet, Fleet
    from ..tasks import Task


def build_task_env(
    task_config: Task | Mapping[str, Any] | BaseModel,
    *,
    fleet: AsyncFleet | Fleet | None,
    api_key: str | None,
    ttl_seconds: int | None,
    max_steps: int,
    partial_reward: bool,
    request_timeout_s: float | None,
    options: Mapping[str, Any] | None = None,
) -> tuple[TaskEnv, Fleet | None]:
    """A ``TaskEnv`` for an adapter, and the client made for it (None when the caller gave one).

    ``api_key`` and ``request_timeout_s`` configure the client made here (a sync ``Fleet``,
    so the episode's HTTP pool lives on the SDK's own loop and any thread or loop can drive
    it); with ``fleet`` given they must be left unset.

    Raises:
        ConfigurationError: ``api_key`` or ``request_timeout_s`` given together with ``fleet``.
    """
    made: Fleet | None = None
    if fleet is None:
        from .._client import Fleet
        from .._runtime import NOT_GIVEN, Timeout

        timeout = Timeout(total=request_timeout_s) if request_timeout_s is not None else NOT_GIVEN
        made = fleet = Fleet(api_key=api_key, timeout=timeout)
    elif api_key is not None or request_timeout_s is not None:
        raise ConfigurationError(
            "api_key and request_timeout_s configure the client the adapter creates; "
            "set them on the fleet client you pass instead"
        )
    env = TaskEnv(
        task_config,
        fleet=fleet,
        max_steps=max_steps,
        partial_reward=partial_reward,
        ttl_seconds=ttl_seconds,
        **dict(options or {}),
    )
    return env, made
