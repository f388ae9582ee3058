"""Wire conventions the client and the local server share, defined once.

Both sides import these names from here: the client's ``TaskEnv`` and ``make()`` on one side,
the local server (``fleet_sdk.local``) on the other. This module imports nothing from either,
so the server never loads the client facades to learn a constant.
"""

from __future__ import annotations

from .tools import Tool

__all__ = ["SUBMIT_FINAL_ANSWER", "SUBMIT_TOOL", "normalize_version"]

SUBMIT_FINAL_ANSWER = "submit_final_answer"
"""The tool a ``tool_use`` episode ends with when the task's prompt mentions it."""

SUBMIT_TOOL = Tool(
    name=SUBMIT_FINAL_ANSWER,
    description="Submit your final answer to the task. This ends the episode.",
    input_schema={
        "type": "object",
        "properties": {"answer": {"description": "The final answer."}},
        "required": ["answer"],
    },
)
"""The submit tool as offered to a model, beside the instance's own tools."""


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
