"""Wire conventions the client and the local server share, defined once.

Both sides import these names from here: the client's ``TaskEnv`` and ``make()`` on one side,
the local server (``fleet_local``) on the other. This module imports nothing from either,
so the server never loads the client facades to learn a constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rewards import reward_from_outcome
from .tools import Tool

__all__ = [
    "MAX_JSON_DEPTH",
    "SUBMIT_FINAL_ANSWER",
    "SUBMIT_TOOL",
    "bare_model",
    "normalize_version",
    "session_score",
    "too_deep",
]

MAX_JSON_DEPTH = 64
"""How deeply arrays and objects may nest in a JSON body the local server accepts (the body
itself is level 1). JSON Schema cannot say it, so it is stated once here: the server refuses a
deeper body with a 422 naming where it got too deep, and the client refuses tool arguments that
could not travel within it (``fleet_sdk.actions``)."""

SUBMIT_FINAL_ANSWER = "submit_final_answer"
"""The tool a ``tool_use`` episode ends with when the task's prompt mentions it."""

# Built without validation, like fleet_sdk.context.CONTEXT_TOOLS (and checked the same way).
SUBMIT_TOOL = Tool.model_construct(
    name=SUBMIT_FINAL_ANSWER,
    description="Submit your final answer to the task. This ends the episode.",
    input_schema={
        "type": "object",
        "properties": {"answer": {"description": "The final answer."}},
        "required": ["answer"],
    },
)
"""The submit tool as offered to a model, beside the instance's own tools."""


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> tuple[str | int, ...] | None:
    """Where ``value`` nests arrays and objects deeper than ``limit`` levels, or None.

    Walks without recursion, so a value nested far past Python's recursion limit is measured
    too; stops at the first container past the limit.

    Args:
        value: Plain JSON data (dicts, lists, scalars); ``value`` itself, if a container, is level 1.
        limit: The deepest nesting allowed.

    Returns:
        The path (keys and indexes) to the first container at level ``limit + 1``, or None.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if len(path) >= limit:
            return path
        stack.extend(
            (child, (*path, key)) for key, child in children if isinstance(child, Mapping | list | tuple)
        )
    return None


def normalize_version(version: str | None) -> str | None:
    """The version as the platform stores it: a ``v`` before a version that starts with a digit.

    Environment and data versions follow the same rule; blank means "not given".

    Args:
        version: ``"1.2.3"``, ``"v1.2.3"``, ``"latest"`` or None.
    """
    if version is None:
        return None
    version = version.strip()
    if not version:
        return None
    return f"v{version}" if version[0].isdigit() else version


def bare_model(model_id: str) -> str:
    """The bare model name sessions report: job models are ``provider/model`` ids, sessions come
    back with the name alone, so results are matched by it (docs/wire.md#instances).

    Args:
        model_id: ``anthropic/claude-x`` (-> ``claude-x``) or a bare name (returned as is).
    """
    return model_id.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class _Execution:
    """A verifier execution (wire dict) as ``rewards.OutcomeLike``."""

    success: bool
    score: float | None
    stdout: str | None
    error: Any = None


def session_score(verifier_execution: Mapping[str, Any] | None) -> float | None:
    """A session's reward by ``rewards.reward_from_outcome``; None (errored) when ungraded.

    The one rule the local server and the evaluation reports share: ``score``, else 1.0 when
    the verifier succeeded without one (it returned none); None without a verifier execution,
    when it failed (``success`` false) or its judge failed.

    Args:
        verifier_execution: The session's ``verifier_execution`` (a wire dict), or None.
    """
    if verifier_execution is None:
        return None
    success = verifier_execution.get("success") is True
    score = verifier_execution.get("score")
    if not isinstance(score, int | float) or isinstance(score, bool):
        score = 1.0 if success else None
    stdout = verifier_execution.get("stdout")
    return reward_from_outcome(
        _Execution(
            success=success,
            score=float(score) if score is not None else None,
            stdout=stdout if isinstance(stdout, str) else None,
        )
    )
