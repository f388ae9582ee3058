"""TaskEnv's grading part (``fleet_sdk/task_env/_grading.py``): an episode's verifier runs on the
platform once, whichever of the step that ends it, ``reset`` or ``close`` asks first, and a
verifier that cannot run or fails gives an unknown reward (None), never 0.0.

The platform is an ``httpx.MockTransport`` that pins the execute call (``POST
/v1/verifiers/execute``) and counts it; the episodes run on a stand-in instance, as in
``tests/test_task_env_multimodal.py``. ``tests/e2e/test_grading_once_per_episode.py`` checks the
episode-level count against the local server."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from fleet_sdk import AsyncFleet
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.task_env._grading import Grader
from fleet_sdk.tasks import Task
from fleet_sdk.tools import Tool

API_KEY = "sk-test-grading-0000"
CODE = "def verify(env, final_answer=None):\n    return 1.0\n"
PASSED = {
    "success": True,
    "result": 1.0,
    "stdout": "checked\n",
    "execution_time_ms": 3,
    "execution_id": "exec-1",
}


class Platform:
    """Answers every verifier run with ``reply`` (sent with ``status``) and keeps each request."""

    def __init__(self, reply: dict[str, Any] = PASSED, status: int = 200) -> None:
        self.reply = reply
        self.status = status
        self.runs: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/verifiers/execute":
            self.runs.append(json.loads(request.content))
            return httpx.Response(self.status, json=self.reply)
        return httpx.Response(404, json={"detail": f"unexpected {request.method} {request.url}"})


def fleet_on(platform: Platform) -> AsyncFleet:
    return AsyncFleet(
        API_KEY, http_client=httpx.AsyncClient(transport=httpx.MockTransport(platform)), environ={}
    )


class Instance:
    """Stands in for an ``AsyncEnv``: one tool, resets and closes that do nothing."""

    instance_id = "inst-grading"

    def __init__(self) -> None:
        self.mcp = self
        self.closed = False

    async def list_tools(self) -> list[Tool]:
        return [Tool(name="get_order")]

    async def reset(self, seed: int | None = None) -> None:
        return None

    async def call_tool(self, name: str, arguments: dict[str, Any], *, deadline: float | None = None) -> Any:
        return {"order": arguments}

    async def close(self) -> None:
        self.closed = True


def task(code: str | None = CODE) -> Task:
    return Task(
        task_key="grading-1",
        prompt="Find the order, then call submit_final_answer.",
        env_key="orderdesk",
        verifier_code=code,
    )


async def grade(grader: Grader, fleet: AsyncFleet, code: str | None = CODE) -> float | None:
    return await grader.grade(
        task(code),
        lambda: fleet,
        instance=Instance(),  # type: ignore[arg-type]
        final_answer="42",
        partial=False,
        run_timeout=60,
        deadline=30.0,
    )


async def test_the_verifier_runs_once_however_often_the_grade_is_asked() -> None:
    platform = Platform()
    grader = Grader()
    async with fleet_on(platform) as fleet:
        first = await grade(grader, fleet)
        again = await grade(grader, fleet)
    assert first == again == 1.0
    assert len(platform.runs) == 1
    assert platform.runs[0]["args"] == {"instance_id": "inst-grading", "final_answer": "42"}
    assert grader.graded and grader.reward == 1.0 and grader.error is None
    assert (grader.stdout, grader.execution_id) == ("checked\n", "exec-1")
    assert grader.outcome is not None and grader.outcome.score == 1.0


async def test_a_task_without_verifier_code_is_unknown_and_needs_no_client() -> None:
    def no_client() -> AsyncFleet:
        raise AssertionError("a task with nothing to run asked for a client")

    grader = Grader()
    reward = await grader.grade(
        task(None), no_client, instance=None, final_answer=None, partial=False, run_timeout=60, deadline=30.0
    )
    assert reward is None and grader.graded
    assert grader.error == "task 'grading-1' has no verifier_code; reward unknown"


async def test_a_verifier_that_cannot_run_is_unknown_not_zero_and_logged_with_its_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = Platform(
        {"detail": "instance inst-grading not found", "code": "instance_not_found"}, status=404
    )
    caplog.set_level(logging.WARNING, logger="fleet_sdk.task_env")
    grader = Grader()
    async with fleet_on(platform) as fleet:
        reward = await grade(grader, fleet)
        await grade(grader, fleet)
    assert reward is None and grader.reward is None
    assert len(platform.runs) == 1  # a 404 is not retried, and the second ask does not run it again
    assert grader.error is not None and grader.error.startswith("verifier could not be executed:")
    assert "not found" in grader.error
    [record] = [r for r in caplog.records if r.name == "fleet_sdk.task_env"]
    assert (
        "grading-1" in record.getMessage() and "| def verify(env, final_answer=None):" in record.getMessage()
    )


async def test_a_failed_verifier_keeps_its_error_output_and_run_id() -> None:
    failed = {
        "success": False,
        "stdout": "looking\n",
        "error": {"type": "ValueError", "message": "nope"},
        "execution_time_ms": 2,
        "execution_id": "exec-2",
    }
    grader = Grader()
    async with fleet_on(Platform(failed)) as fleet:
        reward = await grade(grader, fleet)
    assert reward is None
    assert grader.error == "exception: nope"
    assert (grader.stdout, grader.execution_id) == ("looking\n", "exec-2")


# -- through TaskEnv: one grade per episode, whatever ends it ---------------------------------------


async def episode(platform: Platform, **kwargs: Any) -> tuple[TaskEnv, AsyncFleet]:
    fleet = fleet_on(platform)
    env = TaskEnv(task(), fleet=fleet, **kwargs)
    env.env = Instance()  # type: ignore[assignment]
    await env.reset_async()
    return env, fleet


async def test_an_episode_ended_by_its_step_is_not_graded_again_by_close() -> None:
    platform = Platform()
    env, fleet = await episode(platform)
    async with fleet:
        _, reward, done, info = await env.step_async({"done": True})
        assert done and reward == 1.0 and info["verifier_execution_id"] == "exec-1"
        await env.close_async()
        await env.close_async()
    assert len(platform.runs) == 1
    assert env.final_reward == 1.0 and env.done_reason == "agent"


async def test_an_episode_at_max_steps_is_graded_once() -> None:
    platform = Platform()
    env, fleet = await episode(platform, max_steps=1)
    async with fleet:
        _, reward, done, _ = await env.step_async({"tool": "get_order", "params": {"order_id": 1}})
        await env.close_async()
    assert done and reward == 1.0 and env.done_reason == "max_steps"
    assert len(platform.runs) == 1


async def test_each_abandoned_episode_is_graded_once_by_reset_and_by_close() -> None:
    platform = Platform()
    env, fleet = await episode(platform)
    async with fleet:
        await env.step_async({"tool": "submit_final_answer", "params": {"answer": "7"}})
        assert env.done and len(platform.runs) == 1  # submitting ends the episode: graded then
        await env.reset_async()  # a finished episode is not graded again
        assert len(platform.runs) == 1
        await env.step_async({"tool": "get_order", "params": {"order_id": 1}})
        await env.reset_async()  # abandons the running episode: graded as closed
        assert len(platform.runs) == 2
        await env.close_async()  # abandons the third episode, which took no step
        await env.close_async()
    assert len(platform.runs) == 3
    assert [run["args"]["final_answer"] for run in platform.runs] == ["7", None, None]
    assert env.done_reason == "closed" and env.final_reward == 1.0


async def test_an_episode_not_yet_reset_is_not_graded() -> None:
    """An instance set before the first ``reset`` (as these tests do) holds no episode to grade."""
    platform = Platform()
    async with fleet_on(platform) as fleet:
        env = TaskEnv(task(), fleet=fleet)
        env.env = Instance()  # type: ignore[assignment]
        await env.reset_async()
        assert platform.runs == []
        await env.close_async()
    assert len(platform.runs) == 1
