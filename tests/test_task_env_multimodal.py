"""computer_use episodes: only the computer tool, an initial screenshot with reset, and a
``[Turn N/M]`` text block after each image (docs/wire.md#episodes).

The local server has no computer-use image (an instance serving the ``computer`` tool itself), so
the env here is a stand-in that returns what the MCP layer returns for a screenshot; everything
TaskEnv does with it is real. browser_use episodes, whose computer tool comes from a browser lease,
run against a real Chromium in tests/e2e/test_browser_episodes.py."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_sdk import ToolNotFoundError
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task
from fleet_sdk.tools import Tool

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


class ScreenEnv:
    """Stands in for an AsyncEnv whose MCP serves a ``computer`` tool."""

    def __init__(self, tools: list[str]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.mcp = self
        self._tools = [Tool(name=name) for name in tools]

    async def list_tools(self) -> list[Tool]:
        return self._tools

    async def reset(self, seed: int | None = None) -> None:
        return None

    async def call_tool(self, name: str, arguments: dict[str, Any], *, deadline: float | None = None) -> Any:
        self.calls.append((name, arguments))
        return [IMAGE]


def episode(modality: str, tools: list[str]) -> tuple[TaskEnv, ScreenEnv]:
    task = Task(task_key="cu", prompt="Click the button.", env_key="x", task_modality=modality)  # type: ignore[arg-type]
    env = TaskEnv(task, max_steps=5)
    screen = ScreenEnv(tools)
    env.env = screen  # type: ignore[assignment]
    return env, screen


@pytest.mark.parametrize("modality", ["computer_use"])
async def test_reset_offers_only_the_computer_tool_with_a_screenshot(modality: str) -> None:
    env, screen = episode(modality, ["computer", "search_orders"])
    obs = await env.reset_async()
    assert [t["function"]["name"] for t in obs["tools"]] == ["computer"]
    assert screen.calls == [("computer", {"action": "screenshot"})]
    assert obs["content"] == [IMAGE, {"type": "text", "text": "[Turn 0/5]"}]


async def test_each_step_observation_ends_with_the_turn_footer() -> None:
    env, _ = episode("computer_use", ["computer"])
    await env.reset_async()
    obs, reward, done, _ = await env.step_async(
        {"tool": "computer", "params": {"action": "click", "x": 1, "y": 2}}
    )
    assert not done and reward == 0.0
    assert obs["content"] == [IMAGE, {"type": "text", "text": "[Turn 1/5]"}]


async def test_missing_computer_tool_fails_clearly() -> None:
    env, _ = episode("computer_use", ["search_orders"])
    with pytest.raises(ToolNotFoundError, match="computer"):
        await env.reset_async()
