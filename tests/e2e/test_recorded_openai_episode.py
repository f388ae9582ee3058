"""A recorded OpenAI chat-completions episode drives ``TaskEnv.step`` to reward 1.0 as is.

The fixture (``tests/fixtures/openai_chat/``) holds the responses of one episode; each goes to
``step`` unchanged, whole or as its message: no parsing of tool calls in the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet_sdk import AsyncFleet
from fleet_sdk.task_env import TaskEnv

FIXTURE = Path(__file__).parent.parent / "fixtures" / "openai_chat" / "orderdesk-october-refund-total.json"


@pytest.mark.parametrize("form", ["completion", "message"])
async def test_recorded_responses_reach_reward_1(afleet: AsyncFleet, form: str) -> None:
    recording = json.loads(FIXTURE.read_text())
    task = await afleet.tasks.get(recording["task_key"])
    async with TaskEnv(task, fleet=afleet, max_steps=10) as env:
        await env.reset_async()
        outcomes: list[tuple[Any, Any, bool, dict[str, Any]]] = []
        for response in recording["responses"]:
            action = response if form == "completion" else response["choices"][0]["message"]
            outcomes.append(await env.step_async(action))
        _, reward, done, info = outcomes[-1]
        assert done and info["done_reason"] == "submitted"
        assert reward == 1.0 and env.final_reward == 1.0, env.verifier_error
        assert env.final_answer == "$253.50"
        assert env.step_count == len(recording["responses"]) and env.tool_errors == []

        # The parallel calls ran in order, each observed, answering the model's own call ids.
        parallel = outcomes[1][0]["results"]
        assert [r["content"]["id"] for r in parallel] == [1011, 1012, 1025]
        sent = [c["id"] for r in recording["responses"] for c in r["choices"][0]["message"]["tool_calls"]]
        history = env.messages("openai")
        assert [m["tool_call_id"] for m in history if m["role"] == "tool"] == sent
        assert [m["role"] for m in history] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool",
            "tool",
            "assistant",
            "tool",
        ]
        assert history[3]["content"] == recording["responses"][1]["choices"][0]["message"]["content"]
