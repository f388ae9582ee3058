"""The SkyRL-gym adapter, made through skyrl_gym's own registry and driven with raw model text
against the local server: tool calls in each accepted text shape, unreadable output, a final
answer, rewards and the metrics a trainer builds hints from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import skyrl_gym

import fleet_sdk.integrations.skyrl as fleet_skyrl
from fleet_local import LocalFleet
from fleet_sdk import ConfigurationError, Fleet


@pytest.fixture
def fleet(local: LocalFleet) -> Iterator[Fleet]:
    with local.fleet() as client:
        yield client


def tool_call_block(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_fleet_is_registered_in_skyrl_gym() -> None:
    assert skyrl_gym.spec("fleet").entry_point == "fleet_sdk.integrations.skyrl:FleetTextEnv"
    fleet_skyrl.register()  # idempotent
    assert skyrl_gym.spec("fleet").id == "fleet"


def test_reference_episode_from_raw_text_scores_1(fleet: Fleet) -> None:
    task = fleet.tasks.get("orderdesk-cancel-pending-order")
    env = skyrl_gym.make(
        "fleet", env_config={"max_steps": 10}, extras={"task": task.model_dump()}, fleet=fleet
    )
    assert isinstance(env, fleet_skyrl.FleetTextEnv)
    try:
        prompt, info = env.init([])
        assert prompt[0]["role"] == "system" and "<tool_call>" in prompt[0]["content"]
        assert "cancel_order" in prompt[0]["content"]
        assert prompt[1] == {"role": "user", "content": task.prompt}
        assert info["task_key"] == task.task_key

        steps = task.metadata["reference_solution"]
        # 1. a <tool_call> block with text around it
        out = env.step("Let me look. " + tool_call_block(steps[0]["tool"], steps[0]["params"]))
        assert out["done"] is False and out["reward"] == 0.0
        assert out["observations"][0]["role"] == "user"
        assert "Ben Carter" in out["observations"][0]["content"]
        # 2. an OpenAI tool call as bare JSON, in a fence
        openai_call = {
            "type": "function",
            "id": "c2",
            "function": {"name": steps[1]["tool"], "arguments": json.dumps(steps[1]["params"])},
        }
        out = env.step(f"```json\n{json.dumps(openai_call)}\n```")
        assert out["done"] is False and "1021" in out["observations"][0]["content"]
        # 3. unreadable output: told, no tool run
        out = env.step("<tool_call>{not json}</tool_call>")
        assert out["done"] is False and out["reward"] == 0.0
        assert "tool_call[0] is not valid JSON" in out["metadata"]["parse_error"]
        assert "could not be run" in out["observations"][0]["content"]
        # 4. a wrong tool: a tool error the model sees
        out = env.step(tool_call_block("refund_everything", {}))
        assert out["metadata"]["tool_errors"] and "refund_everything" in out["metadata"]["tool_errors"][0]
        # 5. {"tool_calls": [...]} JSON
        out = env.step(
            json.dumps({"tool_calls": [{"name": steps[2]["tool"], "arguments": steps[2]["params"]}]})
        )
        assert out["done"] is False
        # 6. a final answer ends the episode (no submit tool on this task) and grades it
        out = env.step("Done. <answer>cancelled order 1021</answer>")
        assert out["done"] is True and out["reward"] == 1.0 and out["observations"] == []
        assert out["metadata"]["done_reason"] == "agent" and out["metadata"]["reward_unknown"] is False

        metrics = env.get_metrics()
        assert metrics["turns"] == 6 and metrics["tool_calls"] == 4
        assert metrics["tool_errors"] == 1 and "refund_everything" in metrics["tool_error_messages"][0]
        assert metrics["parse_errors"] == 1 and metrics["reward"] == 1.0 and metrics["done_reason"] == "agent"
        assert metrics["verifier_error"] is None and isinstance(metrics["verifier_feedback"], str)
        aggregated = fleet_skyrl.FleetTextEnv.aggregate_metrics([metrics, {**metrics, "reward": 0.0}])
        assert aggregated["reward"] == 0.5 and aggregated["tool_errors"] == 1.0
    finally:
        env.close()
    assert env.task_env.env is None  # the instance is deleted


def test_final_answer_goes_through_submit_tool_and_wrong_answer_scores_0(fleet: Fleet) -> None:
    env = skyrl_gym.make(
        "fleet",
        env_config={"max_steps": 5, "observation_role": "tool"},
        extras={"extra_info": {"task_key": "orderdesk-count-pending-orders"}},
        fleet=fleet,
    )
    try:
        env.init([{"role": "user", "content": "Count the pending orders."}])
        out = env.step(tool_call_block("list_orders", {"status": "pending"}))
        assert out["observations"][0]["role"] == "tool" and out["observations"][0]["tool_call_id"]
        out = env.step("<answer>5</answer>")  # the reference answer is 6
        assert out["done"] is True and out["reward"] == 0.0
        assert out["metadata"]["done_reason"] == "submitted"
        assert env.task_env.final_answer == "5"
        assert env.get_metrics()["verifier_feedback"] is not None
    finally:
        env.close()


def test_unreadable_output_on_the_last_turn_ends_and_grades_the_episode(fleet: Fleet) -> None:
    task = fleet.tasks.get("orderdesk-cancel-pending-order").model_dump()
    env = skyrl_gym.make("fleet", env_config={"max_steps": 1}, extras={"task": task}, fleet=fleet)
    try:
        env.init([])
        out = env.step('<tool_call>{"arguments": {}}</tool_call>')
        assert out["done"] is True and out["reward"] == 0.0
        assert "has no 'name'" in out["metadata"]["parse_error"]
        assert env.get_metrics()["parse_errors"] == 1
    finally:
        env.close()


def test_bad_config_names_the_field(fleet: Fleet) -> None:
    with pytest.raises(ConfigurationError, match="max_turnz"):
        skyrl_gym.make("fleet", env_config={"max_turnz": 3}, extras={"task_key": "x"}, fleet=fleet)
    with pytest.raises(ConfigurationError, match="task_key"):
        skyrl_gym.make("fleet", env_config={}, extras={}, fleet=fleet)


def test_a_client_made_for_a_row_that_fails_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import fleet_sdk._client as client_module

    made: list[Fleet] = []

    class Recorded(Fleet):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(client_module, "Fleet", Recorded)
    with pytest.raises(ConfigurationError, match="task_key"):
        skyrl_gym.make("fleet", env_config={"api_key": "sk-test"}, extras={})
    assert len(made) == 1 and made[0].http_client.is_closed
