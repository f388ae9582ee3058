"""``play_episode``'s boundary against the local server: never raise for the episode, always close,
grade what was abandoned, record what happened; cancellation still propagates."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk.episodes import TIME_LIMIT, play_episode, play_episode_sync
from fleet_sdk.policies import PolicyContext, PolicyTurn, RandomPolicy, ScriptedPolicy, ToolCallRequest
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

TASK_KEY = "orderdesk-count-pending-orders"  # two reference steps: list_orders, submit_final_answer


def _task(bundled_tasks: list[Task], key: str = TASK_KEY) -> Task:
    return next(t for t in bundled_tasks if t.task_key == key)


class InstanceSeen:
    """An ``on_step`` hook that remembers the env's instance id."""

    def __init__(self) -> None:
        self.instance_id: str | None = None

    async def __call__(self, env: TaskEnv) -> None:
        if env.env is not None:
            self.instance_id = env.env.instance_id


async def _status(fleet: AsyncFleet, instance_id: str | None) -> str | None:
    assert instance_id is not None
    return (await fleet.api.control_plane.get_instance(instance_id)).status


class RaisingPolicy:
    def __init__(self, context: PolicyContext) -> None:
        self.context = context

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        raise RuntimeError("policy blew up")

    async def aclose(self) -> None:
        pass


class BlockingPolicy:
    """Waits forever in its first turn; ``asked`` is set once it is there."""

    asked: asyncio.Event

    def __init__(self, context: PolicyContext) -> None:
        self.context = context

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        type(self).asked.set()
        await asyncio.Event().wait()
        raise AssertionError("never woken")

    async def aclose(self) -> None:
        pass


class RecordingPolicy:
    """One call whose arguments are not JSON, then one listing orders, then done; keeps what it saw."""

    seen: list[list[dict[str, Any]]]

    def __init__(self, context: PolicyContext) -> None:
        self.context = context

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        type(self).seen.append([dict(m) for m in messages])
        if len(type(self).seen) == 1:
            bad = ToolCallRequest(
                id="call_bad", name="list_orders", arguments=None, arguments_json="{status:"
            )
            return PolicyTurn(tool_calls=(bad,))
        if len(type(self).seen) == 2:
            return PolicyTurn(tool_calls=(ToolCallRequest.create("list_orders", {"status": "pending"}),))
        return PolicyTurn(content="I give up.")

    async def aclose(self) -> None:
        pass


async def test_a_scripted_episode_is_graded_recorded_uploaded_and_closed(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    task = _task(bundled_tasks)
    job_id = await afleet.traces.create_job("play_episode")
    seen = InstanceSeen()
    env = TaskEnv(task, fleet=afleet, trace_job_id=job_id, trace_model="local/scripted")
    result = await play_episode(env, ScriptedPolicy, episode_id="slot-1", on_step=seen)
    assert (result.episode_id, result.task_key, result.reward) == ("slot-1", TASK_KEY, 1.0)
    assert result.done_reason == "submitted" and result.steps == 2 and result.error is None
    assert result.verifier_execution_id and result.verifier_error is None and result.duration_s > 0
    assert result.session_id is not None and env.env is None
    assert await _status(afleet, seen.instance_id) == "terminated"
    sessions = await afleet.api.sessions.get_job_sessions(job_id)
    assert [s.session_id for t in sessions.tasks for s in t.sessions] == [result.session_id]


async def test_a_raising_policy_is_an_errored_result_never_uploaded_and_its_env_is_closed(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    job_id = await afleet.traces.create_job("play_episode raising")
    seen = InstanceSeen()
    env = TaskEnv(_task(bundled_tasks), fleet=afleet, trace_job_id=job_id, trace_model="m")
    result = await play_episode(env, RaisingPolicy, on_step=seen)
    assert result.error == "RuntimeError: policy blew up"
    assert result.reward is None  # errored: never a 0, although closing graded the abandoned episode
    assert result.done_reason == "closed" and result.verifier_execution_id is not None
    assert await _status(afleet, seen.instance_id) == "terminated"
    assert result.session_id is None and env.trace_job_id == job_id  # not uploaded; the env unchanged
    assert (await afleet.api.sessions.get_job_sessions(job_id)).total_sessions == 0


async def test_a_platform_refusal_is_an_errored_result(afleet: AsyncFleet) -> None:
    task = Task(
        task_key="nowhere", prompt="p", env_key="no-such-env", verifier_code="def verify(env): return 1"
    )
    result = await play_episode(TaskEnv(task, fleet=afleet), ScriptedPolicy)
    assert result.error is not None and result.error.startswith("EnvNotFoundError: ")
    assert (result.reward, result.done_reason, result.steps, result.verifier_execution_id) == (
        None,
        None,
        0,
        None,
    )


async def test_cancellation_propagates_after_the_env_is_closed(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    BlockingPolicy.asked = asyncio.Event()
    job_id = await afleet.traces.create_job("play_episode cancelled")
    seen = InstanceSeen()
    env = TaskEnv(_task(bundled_tasks), fleet=afleet, trace_job_id=job_id, trace_model="m")
    playing = asyncio.create_task(play_episode(env, BlockingPolicy, on_step=seen))
    await asyncio.wait_for(BlockingPolicy.asked.wait(), timeout=60)
    playing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await playing
    assert env.env is None and await _status(afleet, seen.instance_id) == "terminated"
    assert (await afleet.api.sessions.get_job_sessions(job_id)).total_sessions == 0


async def test_a_close_failure_is_recorded_and_the_reward_stands(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    refusal = {"detail": "deletion refused by the test", "code": "bad_request", "retryable": False}
    faulty_server.inject_fault("/v1/env/instances/*", method="DELETE", status=400, body=refusal)
    seen = InstanceSeen()
    result = await play_episode(
        TaskEnv(_task(bundled_tasks), fleet=faulty_afleet), ScriptedPolicy, on_step=seen
    )
    try:
        assert result.error is not None and result.error.startswith("close failed: BadRequestError")
        assert "deletion refused by the test" in result.error
        assert result.reward == 1.0 and result.done_reason == "submitted"  # graded before the delete
        assert await _status(faulty_afleet, seen.instance_id) == "running"  # left to its TTL
    finally:
        assert seen.instance_id is not None
        await faulty_afleet.api.control_plane.delete_instance(seen.instance_id)


async def test_a_time_limit_ends_the_episode_and_it_is_still_graded(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    BlockingPolicy.asked = asyncio.Event()
    seen = InstanceSeen()
    result = await play_episode(
        TaskEnv(_task(bundled_tasks), fleet=afleet), BlockingPolicy, time_limit=1.0, on_step=seen
    )
    assert result.done_reason == TIME_LIMIT and result.error is None
    assert result.reward == 0.0 and result.verifier_execution_id  # graded: no answer was given
    assert await _status(afleet, seen.instance_id) == "terminated"


async def test_the_policy_sees_the_system_prompt_and_a_call_with_bad_arguments_is_a_tool_error(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    RecordingPolicy.seen = []
    env = TaskEnv(_task(bundled_tasks), fleet=afleet)
    result = await play_episode(env, RecordingPolicy, system_prompt="Be brief.")
    first, second, third = RecordingPolicy.seen
    assert [m["role"] for m in first] == ["system", "user"] and first[0]["content"] == "Be brief."
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_bad"
    assert "not a JSON object" in second[-1]["content"]
    assert third[-1]["role"] == "tool" and "orders" in third[-1]["content"]  # the episode went on
    assert len(result.tool_errors) == 1 and result.tool_errors[0].startswith("list_orders(): ")
    assert result.error is None and result.steps == 3 and result.reward == 0.0  # graded, not errored
    assert env.chat_history[-1] == {"role": "assistant", "content": "I give up."}
    assert all(m["role"] != "system" for m in env.chat_history)  # the prompt is the policy's, not the env's


async def test_the_random_policy_replays_an_episode_id_identically(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    async def calls(episode_id: str) -> list[Any]:
        env = TaskEnv(_task(bundled_tasks), fleet=afleet)
        result = await play_episode(env, RandomPolicy, episode_id=episode_id)
        assert result.error is None and result.reward is not None
        return [
            (c["function"]["name"], c["function"]["arguments"])
            for m in env.chat_history
            for c in m.get("tool_calls") or []
        ]

    first, again, other = await asyncio.gather(calls("slot-7"), calls("slot-7"), calls("slot-8"))
    assert first and first == again and first != other


def test_the_sync_twin_plays_on_a_sync_fleet(fleet: Fleet, bundled_tasks: list[Task]) -> None:
    result = play_episode_sync(TaskEnv(_task(bundled_tasks), fleet=fleet), ScriptedPolicy)
    assert (result.reward, result.error, result.episode_id) == (1.0, None, TASK_KEY)
