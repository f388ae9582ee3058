"""A model's raw text output read into an action ``TaskEnv.step`` accepts.

Text-in/text-out trainers (SkyRL-gym) hand the environment what the model wrote. It is read as:

1. ``<tool_call>{...}</tool_call>`` blocks (Hermes/Qwen style), each holding
   ``{"name", "arguments"}`` or an OpenAI tool call;
2. otherwise OpenAI JSON tool calls written as the whole output (optionally in a
   ```` ```json ```` fence): one call ``{"name", "arguments"}`` or
   ``{"type": "function", "function": {...}}``, a list of them, or ``{"tool_calls": [...]}``;
3. otherwise a final answer: the text of an ``<answer>...</answer>`` block, else the whole output.

Tool calls become an OpenAI assistant message, so ``fleet_sdk.actions.parse_action`` validates
them (arguments that are not JSON raise ``ActionError`` naming the call); a final answer becomes
a ``submit_final_answer`` call when the task offers that tool, else ``{"done": True}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._exceptions import ActionError
from ..task_env import SUBMIT_FINAL_ANSWER

__all__ = ["TOOL_CALL_FORMAT", "final_answer_of", "parse_text_action"]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)

TOOL_CALL_FORMAT = (
    'To call a tool, write <tool_call>{"name": TOOL, "arguments": {...}}</tool_call> '
    "(several blocks run in order). When you are finished, write your final answer as "
    "<answer>...</answer> with no tool call."
)


def _as_openai_call(value: Any, where: str) -> dict[str, Any]:
    """One call in OpenAI's shape; ``parse_action`` checks its parts."""
    if not isinstance(value, Mapping):
        raise ActionError(f"{where} must be a JSON object, got {type(value).__name__}", field=where)
    if "function" in value:
        return {"type": "function", **value}
    if "name" not in value:
        raise ActionError(
            f'{where} has no \'name\': write {{"name": ..., "arguments": {{...}}}}', field=where
        )
    arguments = value.get("arguments", value.get("parameters", {}))
    call: dict[str, Any] = {"type": "function", "function": {"name": value["name"], "arguments": arguments}}
    if value.get("id"):
        call["id"] = value["id"]
    return call


def _json_calls(text: str) -> list[dict[str, Any]] | None:
    """The tool calls of an output that is only JSON, or None when it is not tool-call JSON."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body or body[0] not in "[{":
        return None
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    if isinstance(value, Mapping) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, Mapping) and ("name" in i or "function" in i) for i in items):
        return None  # JSON, but not tool calls: a final answer that happens to be JSON
    return [_as_openai_call(item, f"tool_calls[{n}]") for n, item in enumerate(items)]


def final_answer_of(text: str) -> str:
    """The final answer in a model's output: its ``<answer>`` block, else the whole text.

    Args:
        text: What the model wrote.
    """
    match = _ANSWER.search(text)
    return (match.group(1) if match else text).strip()


def parse_text_action(text: str, *, offers_submit: bool) -> dict[str, Any]:
    """Read a model's raw output into an action for ``TaskEnv.step``.

    Args:
        text: What the model wrote.
        offers_submit: The episode offers ``submit_final_answer`` (a final answer is submitted
            with it; otherwise the answer is kept as the message's text and the episode ends).

    Returns:
        An OpenAI assistant message with ``tool_calls``, or ``{"done": True, "content": ...}``.

    Raises:
        ActionError: A ``<tool_call>`` block is not a JSON object with a ``name`` (``field``
            says which block).
    """
    if not isinstance(text, str):
        raise ActionError(f"the model output must be a string, got {type(text).__name__}", field="action")
    blocks = _TOOL_CALL.findall(text)
    calls: list[dict[str, Any]] | None
    if blocks:
        calls = []
        for index, block in enumerate(blocks):
            where = f"tool_call[{index}]"
            try:
                value = json.loads(block)
            except json.JSONDecodeError as exc:
                raise ActionError(
                    f"{where} is not valid JSON ({exc.msg} at character {exc.pos}): {block[:80]!r}",
                    field=where,
                ) from None
            calls.append(_as_openai_call(value, where))
        content = _TOOL_CALL.sub("", text).strip() or None
    else:
        calls = _json_calls(text)
        content = None
    if calls:
        return {"role": "assistant", "content": content, "tool_calls": calls}
    answer = final_answer_of(text)
    if offers_submit:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": SUBMIT_FINAL_ANSWER, "arguments": json.dumps({"answer": answer})},
                }
            ],
        }
    return {"done": True, "content": answer}
