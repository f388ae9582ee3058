"""``TaskEnv.step`` takes actions as trainers have them, against the local server over real MCP.

Every valid shape runs the tool; every malformed action raises ``ActionError`` without using a
step; a closed episode, a missing tool and the generated ``Task`` model behave as documented.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet_local import LocalFleet
from fleet_sdk import ActionError, EpisodeError, Fleet
from fleet_sdk.task_env import TaskEnv

TASK_KEY = "orderdesk-count-pending-orders"  # offers submit_final_answer


@pytest.fixture(scope="module")
def client(server: LocalFleet) -> Iterator[Fleet]:
    with server.fleet() as fleet:
        yield fleet


@pytest.fixture(scope="module")
def env(client: Fleet) -> Iterator[TaskEnv]:
    """One instance for the module; every test starts a fresh episode with ``reset``."""
    task_env = TaskEnv(client.tasks.get(TASK_KEY), fleet=client, max_steps=10)
    yield task_env
    task_env.close()


def customer_name(client: Fleet, env: TaskEnv, customer_id: int) -> str:
    assert env.env is not None
    rows = client.api.manager(env.env.instance.urls.manager.api).query_database(
        "current", _query("SELECT name FROM customers WHERE id = ?", [customer_id])
    )
    return str(rows.rows[0][0])  # type: ignore[index]


def _query(sql: str, args: list[Any]) -> Any:
    from fleet_sdk.types import env_instance as models

    return models.QueryRequest(query=sql, args=args)


ARGS = '{"customer_id": 7}'
VALID_SHAPES: dict[str, Any] = {
    "native": {"tool": "get_customer", "params": {"customer_id": 7}},
    "openai-call-string-arguments": {
        "id": "call_s",
        "type": "function",
        "function": {"name": "get_customer", "arguments": ARGS},
    },
    "openai-call-object-arguments": {
        "id": "call_o",
        "type": "function",
        "function": {"name": "get_customer", "arguments": {"customer_id": 7}},
    },
    "openai-assistant-message": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_m", "type": "function", "function": {"name": "get_customer", "arguments": ARGS}}
        ],
    },
    "anthropic-tool-use-block": {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_customer",
        "input": {"customer_id": 7},
    },
    "anthropic-assistant-message": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_2", "name": "get_customer", "input": {"customer_id": 7}},
        ],
    },
}


@pytest.mark.parametrize("shape", list(VALID_SHAPES))
def test_each_valid_shape_runs_the_tool(client: Fleet, env: TaskEnv, shape: str) -> None:
    env.reset()
    obs, reward, done, info = env.step(VALID_SHAPES[shape])
    assert (reward, done, env.step_count, info["tool_error"]) == (0.0, False, 1, None)
    assert obs["tool"] == "get_customer"
    assert obs["content"]["id"] == 7
    assert obs["content"]["name"] == customer_name(client, env, 7)
    assert [r["tool"] for r in obs["results"]] == ["get_customer"]
    assistant, tool = env.chat_history[-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_customer"
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"] == obs["tool_call_id"]


def test_assistant_message_runs_its_calls_in_order_in_one_step(env: TaskEnv) -> None:
    env.reset()
    message = {
        "role": "assistant",
        "content": "Adding a note, then reading the order back.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "add_order_note",
                    "arguments": '{"order_id": 1012, "body": "checked by QA"}',
                },
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_order", "arguments": '{"order_id": 1012}'},
            },
        ],
    }
    obs, _, done, _ = env.step(message)
    assert not done and env.step_count == 1
    assert [(r["tool"], r["tool_call_id"]) for r in obs["results"]] == [
        ("add_order_note", "call_1"),
        ("get_order", "call_2"),
    ]
    note = obs["results"][0]["content"]
    assert note["body"] == "checked by QA"
    assert note["id"] in [
        n["id"] for n in obs["results"][1]["content"]["notes"]
    ]  # the second call saw the first
    assert [m["role"] for m in env.chat_history[-3:]] == ["assistant", "tool", "tool"]
    assert env.chat_history[-3]["content"] == message["content"]


def deep_object(depth: int) -> dict[str, Any]:
    """``{"a": {"a": ...}}``, ``depth`` levels deep (as a model's sample could be)."""
    top: dict[str, Any] = {}
    inner = top
    for _ in range(depth - 1):
        inner["a"] = {}
        inner = inner["a"]
    return top


MALFORMED: dict[str, Any] = {
    "bare-string": "get_customer",
    "params-without-tool": {"params": {}},
    "native-with-arguments": {"tool": "get_customer", "arguments": {"customer_id": 7}},
    "openai-call-bad-json": {
        "type": "function",
        "function": {"name": "get_customer", "arguments": "{customer_id: 7"},
    },
    "openai-message-without-calls": {"role": "assistant", "content": "I think we're done here."},
    "anthropic-block-input-not-object": {"type": "tool_use", "id": "t", "name": "get_customer", "input": "7"},
    "list": [{"tool": "get_customer"}],
    # A model can sample these; json.loads / json.dumps raised RecursionError out of step().
    "openai-arguments-100000-deep": {
        "type": "function",
        "function": {"name": "get_customer", "arguments": "[" * 100_000 + "]" * 100_000},
    },
    "native-params-5000-deep": {"tool": "get_customer", "params": deep_object(5_000)},
}


@pytest.mark.parametrize("shape", list(MALFORMED))
def test_each_malformed_action_raises_without_using_a_step(env: TaskEnv, shape: str) -> None:
    env.reset()
    env.step({"tool": "list_orders", "params": {"status": "pending"}})
    history = list(env.chat_history)
    with pytest.raises(ActionError) as caught:
        env.step(MALFORMED[shape])
    assert str(caught.value)
    assert env.step_count == 1 and not env.done
    assert env.chat_history == history
    _, _, done, _ = env.step(VALID_SHAPES["native"])  # the episode goes on
    assert env.step_count == 2 and not done


def test_bare_string_error_says_how_to_call_the_tool(env: TaskEnv) -> None:
    env.reset()
    with pytest.raises(ActionError, match=r"pass \{'tool': 'get_customer', 'params'"):
        env.step("get_customer")  # type: ignore[arg-type]
    with pytest.raises(ActionError, match="use 'params'") as caught:
        env.step({"tool": "get_customer", "arguments": {"customer_id": 7}})
    assert caught.value.field == "arguments"


def test_unknown_tool_lists_every_offered_tool_including_submit(env: TaskEnv) -> None:
    obs = env.reset()
    offered = sorted(t["function"]["name"] for t in obs["tools"])
    obs, _, _, info = env.step({"tool": "no_such_tool", "params": {}})
    assert "submit_final_answer" in offered
    assert obs["content"] == {"error": f"tool 'no_such_tool' not found; available: {offered}"}
    assert info["tool_error"] == env.tool_errors[-1]
    assert env.step_count == 1  # a model's mistake, answered in an observation


def test_observations_of_reset_and_step_share_one_shape(env: TaskEnv) -> None:
    first = env.reset()
    second, _, _, _ = env.step(VALID_SHAPES["native"])
    third, _, done, _ = env.step({"tool": "submit_final_answer", "params": {"answer": "6"}})
    assert set(first) == set(second) == set(third)
    assert first["tool"] is None and first["content"] is None and first["results"] == []
    assert third["content"] == "Final answer submitted." and done


def test_history_renders_in_openai_and_anthropic_formats(env: TaskEnv) -> None:
    env.reset()
    env.step(VALID_SHAPES["anthropic-assistant-message"])
    openai = env.messages("openai")
    assert [m["role"] for m in openai] == ["user", "assistant", "tool"]
    anthropic = env.messages("anthropic")
    assert anthropic["system"] is None
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant", "user"]
    assert anthropic["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_2",
        "name": "get_customer",
        "input": {"customer_id": 7},
    }
    assert anthropic["messages"][2]["content"][0]["tool_use_id"] == "toolu_2"
    assert [t["name"] for t in env.tool_specs("anthropic")] == [
        t["function"]["name"] for t in env.tool_specs()
    ]


def test_step_after_close_says_the_episode_was_closed(client: Fleet) -> None:
    task_env = TaskEnv(client.tasks.get(TASK_KEY), fleet=client)
    task_env.reset()
    task_env.close()
    with pytest.raises(EpisodeError, match="was closed") as caught:
        task_env.step(VALID_SHAPES["native"])
    assert not isinstance(caught.value, ActionError)


def test_max_output_chars_alone_cuts_output_without_offering_context_tools(client: Fleet) -> None:
    task = client.tasks.get("orderdesk-ledger-reference")
    with TaskEnv(task, fleet=client, max_output_chars=2000) as task_env:
        obs = task_env.reset()
        assert not {"search_tool_output", "view_tool_output"} & {t["function"]["name"] for t in obs["tools"]}
        obs, _, _, _ = task_env.step({"tool": "export_inventory_ledger", "params": {"days": 30}})
        assert obs["results"][0]["truncated"] and len(obs["content"]) <= 2000
        assert obs["content"].endswith("The rest is not shown.]")
        assert len(task_env.context.outputs[0].text) > 50_000
        obs, _, _, _ = task_env.step({"tool": "view_tool_output", "params": {"page": 2}})
        assert obs["content"]["error"].startswith("tool 'view_tool_output' not found")
