"""``fleet_sdk.actions.parse_action`` and ``fleet_sdk.messages``: every shape in, one shape out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from fleet_sdk import ActionError, EpisodeError
from fleet_sdk.actions import MAX_ARGUMENT_DEPTH, Action, ToolCall, parse_action
from fleet_sdk.messages import to_anthropic, to_openai

CALL = ToolCall("get_customer", {"customer_id": 7}, "call_a")


@pytest.mark.parametrize(
    "action",
    [
        {
            "type": "function",
            "id": "call_a",
            "function": {"name": "get_customer", "arguments": '{"customer_id": 7}'},
        },
        {
            "type": "function",
            "id": "call_a",
            "function": {"name": "get_customer", "arguments": {"customer_id": 7}},
        },
        {"type": "tool_use", "id": "call_a", "name": "get_customer", "input": {"customer_id": 7}},
        {"tool": "get_customer", "params": {"customer_id": 7}, "tool_call_id": "call_a"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_customer", "arguments": '{"customer_id":7}'},
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_a", "name": "get_customer", "input": {"customer_id": 7}}
            ],
        },
    ],
    ids=[
        "openai-string-args",
        "openai-object-args",
        "anthropic-block",
        "native",
        "openai-message",
        "anthropic-message",
    ],
)
def test_every_shape_reads_as_the_same_call(action: dict[str, Any]) -> None:
    assert parse_action(action).calls == (CALL,)


def test_assistant_message_keeps_calls_in_order_and_its_text() -> None:
    message = {
        "role": "assistant",
        "content": "Looking both up.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_order", "arguments": '{"order_id": 1}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "get_customer", "arguments": ""}},
        ],
    }
    action = parse_action(message)
    assert action == Action(
        (ToolCall("get_order", {"order_id": 1}, "c1"), ToolCall("get_customer", {}, "c2")),
        content="Looking both up.",
    )
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message}],
    }
    assert parse_action(response) == action


def test_sdk_objects_are_read_through_model_dump() -> None:
    class Function(BaseModel):
        name: str
        arguments: str

    class Call(BaseModel):
        id: str
        type: str
        function: Function

    call = Call(
        id="call_a", type="function", function=Function(name="get_customer", arguments='{"customer_id": 7}')
    )
    assert parse_action(call).calls == (CALL,)


def test_native_done_alone_and_with_a_call() -> None:
    assert parse_action({"done": True}) == Action((), done=True)
    assert parse_action({"tool": "t", "done": True}) == Action((ToolCall("t", {}, None),), done=True)


@pytest.mark.parametrize(
    ("action", "field", "message"),
    [
        ("get_customer", "action", r"must be an object, got str 'get_customer'; to call the tool"),
        (None, "action", "must be an object, got NoneType"),
        ({"params": {}}, "tool", "names no 'tool' and is not done"),
        ({"params": {"customer_id": 7}}, "tool", "has 'params' but no 'tool'"),
        ({}, "tool", "names no 'tool' and is not done"),
        (
            {"tool": "get_customer", "arguments": {"customer_id": 7}},
            "arguments",
            "unknown action key.*'arguments'.*use 'params'",
        ),
        ({"tool": 3}, "action['tool']", "must be a non-empty string, got 3"),
        ({"tool": "t", "params": [1]}, "action['params']", "must be an object, got list"),
        ({"tool": "t", "done": "yes"}, "done", "must be a boolean"),
        (
            {"type": "function", "function": {"name": "t", "arguments": "{bad"}},
            "tool_call.function.arguments",
            "not valid JSON",
        ),
        (
            {"type": "function", "function": {"name": "t", "arguments": "[1, 2]"}},
            "tool_call.function.arguments",
            "must be an object, got list",
        ),
        (
            {"type": "function", "function": {"arguments": "{}"}},
            "tool_call.function.name",
            "non-empty string",
        ),
        ({"type": "image", "url": "x"}, "type", "unknown action type 'image'"),
        ({"role": "user", "content": "hi"}, "message.role", "must be 'assistant'"),
        ({"role": "assistant", "content": "I am done."}, "message.tool_calls", "has no tool calls"),
        (
            {"role": "assistant", "content": [{"type": "image"}]},
            "message.content[0]",
            "text or tool_use block",
        ),
        ({"choices": []}, "choices", "has no choices"),
    ],
)
def test_malformed_actions_raise_action_error_naming_the_field(action: Any, field: str, message: str) -> None:
    with pytest.raises(ActionError, match=message) as caught:
        parse_action(action)
    assert caught.value.field == field
    assert isinstance(caught.value, EpisodeError)


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep, built without recursion."""
    top: dict[str, Any] = {}
    inner = top
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return top


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (
            {"type": "function", "function": {"name": "t", "arguments": "[" * 100_000 + "]" * 100_000}},
            "tool_call.function.arguments",
        ),
        (
            {"type": "function", "function": {"name": "t", "arguments": json.dumps(nested(900))}},
            "tool_call.function.arguments",
        ),
        ({"tool": "t", "params": nested(5_000)}, "action['params']"),
        (
            {"type": "tool_use", "id": "u", "name": "t", "input": nested(MAX_ARGUMENT_DEPTH + 1)},
            "tool_use.input",
        ),
    ],
    ids=["openai-100000-brackets", "openai-900-deep", "native-5000-deep", "anthropic-one-too-deep"],
)
def test_arguments_nested_too_deep_raise_action_error_not_recursion_error(action: Any, field: str) -> None:
    """A model's arguments ``[[[[...]]]]`` a hundred thousand levels deep (or native params
    5,000 deep) raised RecursionError out of the parser or out of the step's json.dumps, which
    a trainer catching the SDK's errors does not catch."""
    with pytest.raises(ActionError, match=f"deeper than {MAX_ARGUMENT_DEPTH} levels") as caught:
        parse_action(action)
    assert caught.value.field == field


def test_arguments_at_the_depth_limit_are_accepted() -> None:
    (call,) = parse_action({"tool": "t", "params": nested(MAX_ARGUMENT_DEPTH)}).calls
    assert call.name == "t"


def history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Find customer 7."},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_customer", "arguments": '{"customer_id": 7}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "list_orders", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"id": 7}'},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "text", "text": "[Turn 1/5]"},
            ],
        },
    ]


def test_history_renders_for_anthropic_with_alternating_roles() -> None:
    rendered = to_anthropic(history())
    assert rendered["system"] == "Be brief."
    messages = rendered["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "c1", "name": "get_customer", "input": {"customer_id": 7}},
        {"type": "tool_use", "id": "c2", "name": "list_orders", "input": {}},
    ]
    first, second = messages[2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "c1", "content": '{"id": 7}'}
    assert second["tool_use_id"] == "c2"
    assert second["content"][0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    json.dumps(rendered)


def test_openai_rendering_is_a_deep_copy() -> None:
    original = history()
    copied = to_openai(original)
    assert copied == original
    copied[2]["tool_calls"][0]["id"] = "changed"
    assert original[2]["tool_calls"][0]["id"] == "c1"
