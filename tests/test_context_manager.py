"""``fleet_sdk.context.ContextManager`` on its own: truncation, paging, searches, dropping turns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleet_sdk import ContextToolError
from fleet_sdk.context import CONTEXT_TOOL_NAMES, CONTEXT_TOOLS, ContextManager, message_text


def big_text(lines: int, marker: str = "NEEDLE-42") -> str:
    body = [f"line {i:05d}: " + "abcdefghij" * 5 for i in range(lines)]
    body[-3] += f" {marker}"
    return "\n".join(body)


def assistant(name: str, call_id: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments or {})},
            }
        ],
    }


def play_turn(context: ContextManager, name: str, value: Any, n: int) -> tuple[Any, bool]:
    context.add_message(assistant(name, f"call_{n}"))
    return context.add_tool_result(f"call_{n}", name, value)


def test_short_output_is_kept_as_is_and_long_output_is_cut_under_the_limit_with_a_note() -> None:
    context = ContextManager(max_output_chars=2000)
    shown, truncated = play_turn(context, "get", {"id": 1}, 1)
    assert shown == {"id": 1} and truncated is False
    text = big_text(500)
    shown, truncated = play_turn(context, "export", text, 2)
    assert truncated is True
    assert isinstance(shown, str) and len(shown) <= 2000
    assert shown.startswith(text[:1000])
    assert "NEEDLE-42" not in shown
    assert 'view_tool_output(output_id="out_1", page=2' in shown
    assert context.history[-1]["content"] == shown  # the history keeps what the model saw
    [stored] = context.outputs
    assert stored.text == text and stored.tool == "export" and stored.turn == 2


def test_json_values_are_measured_as_their_message_text() -> None:
    context = ContextManager(max_output_chars=1000)
    rows = [{"id": i, "name": "x" * 30} for i in range(100)]
    shown, truncated = play_turn(context, "list", rows, 1)
    assert truncated and len(shown) <= 1000
    assert context.outputs[0].text == json.dumps(rows)


def test_pages_concatenate_to_the_exact_text_and_are_stable() -> None:
    context = ContextManager(max_output_chars=1500)
    text = big_text(300) + "\u00e9\u4e2d end"
    play_turn(context, "export", text, 1)
    first = context.view_tool_output(page=1, page_size=700)
    pages = [context.view_tool_output(page=p, page_size=700).text for p in range(1, first.pages + 1)]
    assert "".join(pages) == text
    assert context.view_tool_output(page=3, page_size=700) == context.view_tool_output(page=3, page_size=700)
    rendered = context.call("view_tool_output", {"page": 2, "page_size": 700})
    header, _, body = rendered.partition("\n")
    assert header == f"[out_1 page 2 of {first.pages}, characters 700-1400]"
    assert body == text[700:1400]


def test_view_tool_output_rejects_bad_pages_and_sizes_by_name() -> None:
    context = ContextManager(max_output_chars=1000)
    with pytest.raises(ContextToolError, match="no tool output has been truncated"):
        context.view_tool_output()
    play_turn(context, "export", big_text(100), 1)
    with pytest.raises(ContextToolError, match="page must be an integer from 1 to"):
        context.view_tool_output(page=0)
    with pytest.raises(ContextToolError, match="page_size must be an integer from 1 to 600"):
        context.view_tool_output(page=1, page_size=5000)
    with pytest.raises(ContextToolError, match="unknown output_id 'out_9'"):
        context.view_tool_output(output_id="out_9")


def test_search_tool_output_finds_text_only_in_the_cut_part() -> None:
    context = ContextManager(max_output_chars=1000)
    text = big_text(400)
    shown, _ = play_turn(context, "export", text, 1)
    assert "NEEDLE" not in shown
    found = context.search_tool_output(r"NEEDLE-\d+")
    assert found["total_matches"] == 1
    [match] = found["matches"]
    assert match["output_id"] == "out_1" and match["truncated_part"] is True
    assert text[match["offset"] : match["offset"] + 9] == "NEEDLE-42"
    page = context.view_tool_output(page=match["page"], page_size=match["page_size"])
    assert page.start <= match["offset"] < page.start + len(page.text)
    assert page.text[match["offset"] - page.start] == "N"


def test_searches_are_bounded_and_a_bad_pattern_is_a_clear_error() -> None:
    context = ContextManager(max_output_chars=1000, max_matches=5, excerpt_chars=50)
    play_turn(context, "export", big_text(400), 1)
    found = context.search_tool_output("line")
    assert found["total_matches"] == 400 and len(found["matches"]) == 5
    assert all(len(m["excerpt"]) <= 100 for m in found["matches"])
    assert len(context.search_tool_output("line", max_matches=7)["matches"]) == 7
    with pytest.raises(ContextToolError, match=r"invalid regular expression '\(unclosed'"):
        context.search_history("(unclosed")
    with pytest.raises(ContextToolError, match="max_matches must be an integer from 1 to 100"):
        context.search_history("x", max_matches=1000)


def test_manage_context_keeps_system_prompt_and_latest_turn_and_history_stays_searchable() -> None:
    context = ContextManager(max_output_chars=1000)
    context.add_message({"role": "system", "content": "You are careful."})
    context.add_message({"role": "user", "content": "Do the task."})
    for n in range(1, 6):
        play_turn(context, "lookup", f"result of turn {n}: secret-{n}", n)
    context.add_message({"role": "system", "content": "Mid-episode reminder."})
    context.add_message(assistant("manage_context", "call_6", {"keep_recent_turns": 1}))
    report = context.manage_context(1)
    assert report["dropped_turns"] == [1, 2, 3, 4, 5]
    assert report["dropped_messages"] == 10
    assert report["kept_turns"] == 1
    assert [d["tools"] for d in report["dropped"]] == [["lookup"]] * 5
    live = context.messages
    assert [m["role"] for m in live] == ["system", "user", "system", "assistant"]
    assert live[-1]["tool_calls"][0]["function"]["name"] == "manage_context"
    assert len(context.history) == 14  # 2 + 5 turns of 2 + reminder + the latest call
    found = context.search_history(r"secret-3")
    assert [(m["turn"], m["dropped"], m["role"]) for m in found["matches"]] == [(3, True, "tool")]
    assert context.manage_context(1)["dropped_turns"] == []  # nothing left to drop
    with pytest.raises(ContextToolError, match="keep_recent_turns must be at least 1"):
        context.manage_context(0)


def test_check_context_counts_live_size_with_the_given_tokenizer() -> None:
    context = ContextManager(
        max_output_chars=1000, max_context_tokens=500, tokenizer=lambda s: len(s.split())
    )
    context.add_message({"role": "user", "content": "one two three"})
    play_turn(context, "export", big_text(100), 1)
    report = context.check_context()
    assert report["visible_turns"] == 1 and report["messages"] == 3 and report["total_turns"] == 1
    words = sum(len((message_text(m.get("content")) + "").split()) for m in context.messages)
    assert report["estimated_tokens"] >= words
    assert report["remaining_tokens"] == 500 - report["estimated_tokens"]
    assert report["truncated_outputs"][0]["output_id"] == "out_1"
    default = ContextManager(max_output_chars=1000)
    default.add_message({"role": "user", "content": "x" * 400})
    assert default.check_context()["estimated_tokens"] == 100


def test_call_checks_tool_names_and_arguments() -> None:
    context = ContextManager()
    with pytest.raises(ContextToolError, match="'rm' is not a context tool"):
        context.call("rm", {})
    with pytest.raises(ContextToolError, match=r"unknown argument\(s\) \['regex'\]"):
        context.call("search_history", {"regex": "x"})
    with pytest.raises(ContextToolError, match=r"missing required argument\(s\) \['pattern'\]"):
        context.call("search_history", {})
    assert context.call("check_context", {})["messages"] == 0


def test_tool_schemas_in_both_formats() -> None:
    assert {
        "check_context",
        "manage_context",
        "search_history",
        "search_tool_output",
        "view_tool_output",
    } == CONTEXT_TOOL_NAMES
    for tool in CONTEXT_TOOLS:
        openai = tool.to_openai()
        anthropic = tool.to_anthropic()
        assert openai["function"]["name"] == anthropic["name"] == tool.name
        assert openai["function"]["parameters"] == anthropic["input_schema"]
        assert set(anthropic["input_schema"]["required"]) <= set(anthropic["input_schema"]["properties"])


def test_max_output_chars_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="max_output_chars must be at least 800"):
        ContextManager(max_output_chars=100)


async def test_a_backtracking_search_is_a_tool_error_and_the_loop_keeps_running() -> None:
    import anyio

    context = ContextManager(max_output_chars=10_000)
    play_turn(context, "dump", "a" * 5000 + "b", 1)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.05)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        with pytest.raises(ContextToolError, match=r"ran past its .* limit"):
            await context.acall("search_history", {"pattern": "(a+)+$"})
        group.cancel_scope.cancel()
    # The loop ran while the search did (it stops itself after SEARCH_TIMEOUT); a search that
    # blocked the loop would leave at most one tick, however fast or loaded the machine.
    assert ticks >= 3
    assert (await context.acall("search_history", {"pattern": "a{3}b"}))["total_matches"] == 1
    with pytest.raises(ContextToolError, match="at most 1000 characters"):
        await context.acall("search_tool_output", {"pattern": "x" * 1001})


def test_a_json_tool_result_is_serialised_once() -> None:
    class Counted:
        calls = 0

        def __str__(self) -> str:
            Counted.calls += 1
            return "counted"

    context = ContextManager(max_output_chars=2000)
    _shown, truncated = play_turn(context, "lookup", {"value": Counted()}, 1)
    assert Counted.calls == 1 and not truncated
    assert context.history[-1]["content"] == '{"value": "counted"}'
