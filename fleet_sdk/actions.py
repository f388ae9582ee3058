"""Actions as trainers have them, read into one shape for ``TaskEnv.step``.

``parse_action`` accepts:

- the native dict ``{"tool": name, "params": {...}, "done": bool}`` (optional ``tool_call_id``
  and ``content``, the model's text); ``{"done": True}`` alone ends the episode;
- an OpenAI tool call ``{"type": "function", "id": ..., "function": {"name", "arguments"}}``,
  ``arguments`` a JSON string or an object;
- an OpenAI assistant message ``{"role": "assistant", "content", "tool_calls": [...]}``, or a
  whole chat-completions response (its first choice's message); the calls run in order;
- an Anthropic ``tool_use`` block ``{"type": "tool_use", "id", "name", "input"}``, or an
  Anthropic assistant message whose ``content`` holds ``text`` and ``tool_use`` blocks;
- any of these as a pydantic object of the OpenAI or Anthropic SDK (read via ``model_dump``);
- an ``Action`` itself (what ``fleet_sdk.episodes.play_episode`` builds from a policy's turn).

Anything else raises :class:`~fleet_sdk.ActionError` naming what was wrong (``field`` says
where), before the episode uses a step. So do arguments nested deeper than
``MAX_ARGUMENT_DEPTH`` (a model can write ``[[[[...]]]]`` a hundred thousand levels deep; such
arguments could not reach a tool anyway, see ``fleet_sdk.protocol.MAX_JSON_DEPTH``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._exceptions import ActionError
from .protocol import MAX_JSON_DEPTH, too_deep

__all__ = ["MAX_ARGUMENT_DEPTH", "Action", "ToolCall", "parse_action"]

MAX_ARGUMENT_DEPTH = MAX_JSON_DEPTH // 2
"""How deeply a tool call's arguments may nest (the arguments object is level 1): half of what a
server body may have, leaving room for the envelope they travel in (an MCP JSON-RPC request)."""

NATIVE_KEYS = frozenset({"tool", "params", "done", "tool_call_id", "id", "content"})
# Keys of other shapes that land in a native dict by mistake, and what to use instead.
_HINTS = {
    "arguments": "use 'params' for a native action, or pass the OpenAI tool call itself",
    "input": "use 'params' for a native action, or pass the Anthropic tool_use block itself",
    "name": "use 'tool' for a native action",
    "function": 'an OpenAI tool call also needs "type": "function"',
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an action.

    Attributes:
        name: The tool.
        arguments: Its arguments.
        call_id: The model's id for the call (None: ``TaskEnv`` makes one).
        error: Why the call is answered with this error instead of being run (a model wrote
            arguments that are not a JSON object): the model is told, and the episode goes on.
        written: With ``error``, the arguments as the model wrote them, which the transcript
            keeps (``arguments`` is then empty).
    """

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None
    error: str | None = None
    written: str | None = None


@dataclass(frozen=True)
class Action:
    """An action read from any accepted shape.

    Attributes:
        calls: Tool calls to run, in order (empty for a bare ``{"done": True}``).
        done: The agent ends the episode after the calls.
        content: The model's text that came with the calls.
    """

    calls: tuple[ToolCall, ...]
    done: bool = False
    content: str | None = None


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ActionError(f"{field} must be a non-empty string, got {_describe(value)}", field=field)
    return value


def _call_id(value: Any, field: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ActionError(f"{field} must be a string, got {type(value).__name__}", field=field)
    return value


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ActionError(f"{field} must be an object, got {type(value).__name__}", field=field)
    return dict(value)


def _arguments(value: Any, field: str) -> dict[str, Any]:
    """A tool call's arguments: an object nested at most ``MAX_ARGUMENT_DEPTH`` levels."""
    arguments = _object(value, field)
    if too_deep(arguments, MAX_ARGUMENT_DEPTH) is not None:
        raise _too_deep(field)
    return arguments


def _too_deep(field: str) -> ActionError:
    return ActionError(
        f"{field} nests arrays and objects deeper than {MAX_ARGUMENT_DEPTH} levels", field=field
    )


def _openai_call(call: Any, field: str) -> ToolCall:
    if not isinstance(call, Mapping):
        raise ActionError(f"{field} must be an object, got {type(call).__name__}", field=field)
    if call.get("type", "function") != "function":
        raise ActionError(
            f"{field}.type must be 'function', got {_describe(call.get('type'))}", field=f"{field}.type"
        )
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise ActionError(
            f"{field}.function must be an object with 'name' and 'arguments'", field=f"{field}.function"
        )
    name = _name(function.get("name"), f"{field}.function.name")
    raw = function.get("arguments")
    where = f"{field}.function.arguments"
    if isinstance(raw, str):
        if not raw.strip():
            raw = "{}"
        try:
            raw = json.loads(raw)
        except RecursionError:  # nested past the parser's own limit
            raise _too_deep(where) from None
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"{where} of {name!r} is not valid JSON ({exc.msg} at character {exc.pos}): {_describe(raw)}",
                field=where,
            ) from None
    return ToolCall(name, _arguments(raw, where), _call_id(call.get("id"), f"{field}.id"))


def _anthropic_call(block: Mapping[str, Any], field: str) -> ToolCall:
    name = _name(block.get("name"), f"{field}.name")
    # The Messages API always sends both; a block without them was built by hand or cut short, and
    # its tool_result could not be matched (no id) or its arguments were lost (no input).
    for required in ("id", "input"):
        if required not in block:
            raise ActionError(
                f"{field}.{required} is missing: an Anthropic tool_use block has 'id', 'name' and 'input'",
                field=f"{field}.{required}",
            )
    call_id = _name(block.get("id"), f"{field}.id")
    if block.get("input") is None:
        raise ActionError(f"{field}.input must be an object, got None", field=f"{field}.input")
    return ToolCall(name, _arguments(block.get("input"), f"{field}.input"), call_id)


def _assistant_message(message: Mapping[str, Any], field: str) -> Action:
    role = message.get("role")
    if role != "assistant":
        raise ActionError(
            f"{field}.role must be 'assistant' (a message the model wrote), got {_describe(role)}",
            field=f"{field}.role",
        )
    content = message.get("content")
    calls: list[ToolCall] = []
    texts: list[str] = []
    if isinstance(content, list):  # Anthropic: text and tool_use blocks
        for index, block in enumerate(content):
            where = f"{field}.content[{index}]"
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_use":
                calls.append(_anthropic_call(block, where))
            elif kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind not in ("thinking", "redacted_thinking"):
                raise ActionError(
                    f"{where} must be a text or tool_use block, got {_describe(block)}", field=where
                )
    elif isinstance(content, str):
        texts.append(content)
    elif content is not None:
        raise ActionError(f"{field}.content must be a string or a list of blocks", field=f"{field}.content")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            raise ActionError(f"{field}.tool_calls must be a list", field=f"{field}.tool_calls")
        calls.extend(_openai_call(call, f"{field}.tool_calls[{i}]") for i, call in enumerate(tool_calls))
    if not calls:
        raise ActionError(
            f"{field} has no tool calls; to end the episode without one, step({{'done': True}})",
            field=f"{field}.tool_calls",
        )
    return Action(tuple(calls), content="\n".join(texts) if texts else None)


def _native(action: Mapping[str, Any]) -> Action:
    unknown = sorted(str(k) for k in action if k not in NATIVE_KEYS)
    if unknown:
        hints = "; ".join(f"{k!r}: {_HINTS[k]}" for k in unknown if k in _HINTS)
        raise ActionError(
            f"unknown action key(s) {unknown}; a native action takes {sorted(NATIVE_KEYS)}"
            + (f" ({hints})" if hints else ""),
            field=unknown[0],
        )
    done = action.get("done", False)
    if not isinstance(done, bool):
        raise ActionError(f"action['done'] must be a boolean, got {_describe(done)}", field="done")
    content = action.get("content")
    if content is not None and not isinstance(content, str):
        raise ActionError(
            f"action['content'] must be a string, got {type(content).__name__}", field="content"
        )
    tool = action.get("tool")
    if tool is None:
        if action.get("params"):
            raise ActionError("action has 'params' but no 'tool': name the tool to call", field="tool")
        if not done:
            raise ActionError("action names no 'tool' and is not done: nothing to do", field="tool")
        return Action((), done=True, content=content)
    name = _name(tool, "action['tool']")
    params = _arguments(action.get("params"), "action['params']")
    call_id = _call_id(action.get("tool_call_id") or action.get("id"), "action['tool_call_id']")
    return Action((ToolCall(name, params, call_id),), done=done, content=content)


def parse_action(action: Any) -> Action:
    """Read an action of any accepted shape (see the module docstring).

    Args:
        action: What the trainer passed to ``step``.

    Raises:
        ActionError: The action has none of the accepted shapes, or a part of it is malformed.
    """
    if isinstance(action, Action):
        return action
    if not isinstance(action, Mapping) and hasattr(action, "model_dump"):
        action = action.model_dump(exclude_none=True)
    if not isinstance(action, Mapping):
        hint = (
            f"; to call the tool {action!r}, pass {{'tool': {action!r}, 'params': {{...}}}}"
            if isinstance(action, str)
            else ""
        )
        raise ActionError(
            f"an action must be an object, got {type(action).__name__} {_describe(action)}{hint}"
        )
    if "choices" in action:  # a whole chat-completions response
        choices = action.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ActionError("the chat-completions response has no choices", field="choices")
        return _assistant_message(
            _object(choices[0].get("message"), "choices[0].message"), "choices[0].message"
        )
    if "role" in action:
        return _assistant_message(action, "message")
    if "tool_calls" in action or isinstance(action.get("content"), list):
        # An assistant message with its role left out: say so, rather than list native keys.
        raise ActionError(
            "message.role is missing: an assistant message with tool_calls or content blocks needs "
            "'role': 'assistant' (or pass a native action {'tool': ..., 'params': {...}})",
            field="message.role",
        )
    kind = action.get("type")
    if kind == "function":
        return Action((_openai_call(action, "tool_call"),))
    if kind == "tool_use":
        return Action((_anthropic_call(action, "tool_use"),))
    if kind is not None:
        raise ActionError(
            f"unknown action type {_describe(kind)}: expected an OpenAI 'function' call "
            "or an Anthropic 'tool_use' block",
            field="type",
        )
    return _native(action)
