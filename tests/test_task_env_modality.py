"""TaskEnv's modality part (``fleet_sdk/task_env/_modality.py``): which tools a task's modality
offers, how the instance is made, what the model is shown and where tool calls go.

The instance is a stand-in serving MCP tools (as in ``tests/test_task_env_multimodal.py``);
browser_use with a real lease and Chromium is ``tests/e2e/test_browser_episodes.py``."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_sdk import AsyncFleet, ToolNotFoundError
from fleet_sdk.browser import MULTIMODAL_TTL_SECONDS
from fleet_sdk.task_env._modality import Modality
from fleet_sdk.tasks import Task
from fleet_sdk.tools import Tool

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


class Instance:
    """Stands in for an ``AsyncEnv``: lists ``tools`` and records each call."""

    def __init__(self, *tools: str) -> None:
        self.mcp = self
        self._tools = [Tool(name=name) for name in tools]
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self) -> list[Tool]:
        return self._tools

    async def call_tool(self, name: str, arguments: dict[str, Any], *, deadline: float | None = None) -> Any:
        self.calls.append((name, arguments))
        return [IMAGE] if name == "computer" else {"ok": True}


def modality(kind: str, prompt: str = "Do the task.") -> Modality:
    return Modality(Task(task_key="m-1", prompt=prompt, env_key="x", task_modality=kind))  # type: ignore[arg-type]


def no_client() -> AsyncFleet:
    raise AssertionError("only a browser lease needs the client")


async def tools(part: Modality, instance: Instance) -> list[str]:
    offered = await part.tools(no_client, instance, ttl=None, call_deadline=5.0, browser_kwargs={})  # type: ignore[arg-type]
    return [tool.name for tool in offered]


async def test_tool_use_offers_the_instance_tools_but_computer() -> None:
    part = modality("tool_use")
    assert await tools(part, Instance("computer", "get_order", "list_orders")) == ["get_order", "list_orders"]
    assert not part.multimodal and not part.offers_submit()


async def test_tool_use_offers_submit_final_answer_when_the_prompt_names_it() -> None:
    part = modality("tool_use", "Answer with submit_final_answer.")
    assert await tools(part, Instance("get_order")) == ["get_order", "submit_final_answer"]


async def test_computer_use_offers_only_the_computer_tool() -> None:
    part = modality("computer_use", "Click, then submit_final_answer.")  # no submit tool on screens
    assert await tools(part, Instance("computer", "get_order")) == ["computer"]
    with pytest.raises(ToolNotFoundError, match="computer"):
        await tools(part, Instance("get_order"))


def test_tool_values_are_shown_as_they_are_on_tool_use() -> None:
    part = modality("tool_use")
    value = {"rows": [1, 2]}
    assert part.shown(value, step=3, max_steps=9) is value


def test_screens_end_with_the_turn_footer() -> None:
    part = modality("computer_use")
    assert part.shown([IMAGE], step=2, max_steps=9) == [IMAGE, {"type": "text", "text": "[Turn 2/9]"}]
    assert part.shown({"error": "no"}, step=3, max_steps=9) == [
        {"type": "text", "text": "{'error': 'no'}"},
        {"type": "text", "text": "[Turn 3/9]"},
    ]


@pytest.mark.parametrize(
    ("kind", "ttl", "image_type"),
    [
        ("tool_use", None, None),
        ("computer_use", MULTIMODAL_TTL_SECONDS, "mcp"),
        ("browser_use", MULTIMODAL_TTL_SECONDS, None),
    ],
)
def test_the_instance_is_made_for_the_modality(kind: str, ttl: int | None, image_type: str | None) -> None:
    part = modality(kind)
    assert part.ttl(None) == ttl and part.ttl(60) == 60
    assert part.make_kwargs({"region": "eu"}).get("image_type") == image_type
    assert part.make_kwargs({"image_type": "full"})["image_type"] == "full"


async def test_the_first_screen_and_every_call_go_to_the_instance_without_a_lease() -> None:
    part = modality("computer_use")
    instance = Instance("computer")
    assert await part.screenshot(instance, call_deadline=5.0) == [IMAGE]  # type: ignore[arg-type]
    await part.call(instance, "computer", {"action": "click"}, deadline=5.0)  # type: ignore[arg-type]
    assert instance.calls == [("computer", {"action": "screenshot"}), ("computer", {"action": "click"})]


async def test_with_a_lease_the_screen_and_the_calls_are_the_browser_s() -> None:
    part = modality("browser_use")
    lease = Instance("computer")
    lease.screenshot = [IMAGE, {"type": "text", "text": "health check"}]  # type: ignore[attr-defined]
    part.browser = lease  # type: ignore[assignment]
    instance = Instance("computer")
    assert await part.screenshot(instance, call_deadline=5.0) == lease.screenshot  # type: ignore[arg-type,attr-defined]
    await part.call(instance, "computer", {"action": "click"}, deadline=5.0)  # type: ignore[arg-type]
    assert lease.calls == [("computer", {"action": "click"})] and instance.calls == []
    assert part.release_browser() is lease and part.browser is None and part.release_browser() is None
