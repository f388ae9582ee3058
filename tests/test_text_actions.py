"""Raw model text read into TaskEnv actions (fleet_sdk.integrations.text_actions), every shape,
checked by the same parser TaskEnv.step uses."""

from __future__ import annotations

import json

import pytest

from fleet_sdk import ActionError
from fleet_sdk.actions import ToolCall, parse_action
from fleet_sdk.integrations.text_actions import final_answer_of, parse_text_action


def calls(text: str, offers_submit: bool = False) -> list[ToolCall]:
    return list(parse_action(parse_text_action(text, offers_submit=offers_submit)).calls)


def test_tool_call_blocks_run_in_order_with_the_text_kept() -> None:
    text = (
        'I will search. <tool_call>{"name": "search", "arguments": {"q": "a"}}</tool_call>\n'
        '<tool_call>{"name": "open", "parameters": {"id": 2}}</tool_call>'
    )
    action = parse_text_action(text, offers_submit=False)
    assert action["content"] == "I will search."
    assert calls(text) == [ToolCall("search", {"q": "a"}), ToolCall("open", {"id": 2})]


def test_tool_call_block_may_hold_an_openai_call_and_may_be_unclosed() -> None:
    openai = {"type": "function", "id": "c9", "function": {"name": "f", "arguments": '{"x": 1}'}}
    assert calls(f"<tool_call>{json.dumps(openai)}</tool_call>") == [ToolCall("f", {"x": 1}, "c9")]
    assert calls('<tool_call>{"name": "g", "arguments": {}}') == [ToolCall("g", {})]  # cut at max tokens


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "f", "arguments": {"x": 1}}',
        '```json\n{"name": "f", "arguments": {"x": 1}}\n```',
        '[{"type": "function", "function": {"name": "f", "arguments": "{\\"x\\": 1}"}}]',
        '{"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}',
    ],
)
def test_openai_json_tool_calls(text: str) -> None:
    assert calls(text) == [ToolCall("f", {"x": 1})]


def test_final_answer_submits_when_offered_else_ends() -> None:
    assert calls("So it is <answer> 42 </answer>", offers_submit=True) == [
        ToolCall("submit_final_answer", {"answer": "42"})
    ]
    assert parse_text_action("It is 42.", offers_submit=False) == {"done": True, "content": "It is 42."}
    # JSON that is not a tool call is an answer too
    assert parse_text_action('{"total": 3}', offers_submit=False)["done"] is True
    assert final_answer_of("<answer>x</answer> trailing") == "x"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("<tool_call>{oops}</tool_call>", "tool_call[0]", "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "tool_call[0]", "has no 'name'"),
        ('<tool_call>["f"]</tool_call>', "tool_call[0]", "must be a JSON object"),
    ],
)
def test_malformed_blocks_name_the_block(text: str, field: str, message: str) -> None:
    with pytest.raises(ActionError, match=message) as info:
        parse_text_action(text, offers_submit=False)
    assert info.value.field == field


def test_bad_arguments_are_caught_by_the_shared_action_parser() -> None:
    action = parse_text_action(
        '<tool_call>{"name": "f", "arguments": "{bad"}</tool_call>', offers_submit=False
    )
    with pytest.raises(ActionError, match="not valid JSON") as info:
        parse_action(action)
    assert info.value.field == "message.tool_calls[0].function.arguments"
