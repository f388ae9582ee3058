"""TaskEnv episodes end to end on the local server: honest rewards, feedback,
episode rules, and the sync twin (docs/wire.md#episodes, #verifiers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _waits import PATIENCE

from fleet_sdk import AsyncFleet, EpisodeError, Fleet
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

ORDERDESK_PROMPT = "Look around the order desk."


def custom_task(verifier_code: str, *, key: str = "custom", prompt: str = ORDERDESK_PROMPT) -> Task:
    return Task(
        task_key=key, prompt=prompt, env_key="orderdesk", env_version="v1.0.0", verifier_code=verifier_code
    )


def reference_actions(task: Task) -> list[dict[str, Any]]:
    return [{"tool": s["tool"], "params": s.get("params") or {}} for s in task.metadata["reference_solution"]]


async def play(env: TaskEnv, actions: list[dict[str, Any]]) -> list[tuple[Any, Any, bool]]:
    trace = []
    for action in actions:
        obs, reward, done, _ = await env.step_async(action)
        trace.append((obs, reward, done))
        if done:
            return trace
    obs, reward, done, _ = await env.step_async({"done": True})
    trace.append((obs, reward, done))
    return trace


async def test_every_bundled_task_scores_1_with_its_reference_and_0_when_empty(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    assert len(bundled_tasks) >= 20
    gate = asyncio.Semaphore(8)

    async def episode(task: Task, actions: list[dict[str, Any]]) -> tuple[str, float | None, str | None]:
        async with gate, TaskEnv(task, fleet=afleet, max_steps=40) as env:
            await env.reset_async()
            await play(env, actions)
            return task.task_key, env.final_reward, env.verifier_error

    solved = await asyncio.gather(*(episode(t, reference_actions(t)) for t in bundled_tasks))
    empty = await asyncio.gather(*(episode(t, []) for t in bundled_tasks))
    assert [(k, r) for k, r, _ in solved] == [(t.task_key, 1.0) for t in bundled_tasks], solved
    assert [(k, r) for k, r, _ in empty] == [(t.task_key, 0.0) for t in bundled_tasks], empty
    assert all(err is None for _, _, err in solved + empty)


async def test_reset_returns_prompt_tools_step_and_key(afleet: AsyncFleet, bundled_tasks: list[Task]) -> None:
    """Regression: tools were fetched outside reset and came back empty for some paths."""
    task = next(t for t in bundled_tasks if "submit_final_answer" in t.prompt)
    async with TaskEnv(task, fleet=afleet) as env:
        obs = await env.reset_async()
        names = [t["function"]["name"] for t in obs["tools"]]
        assert obs["prompt"] == task.prompt
        assert obs["task_key"] == task.task_key
        assert obs["step"] == 0
        assert "submit_final_answer" in names
        assert "computer" not in names
        assert len(names) >= 7


@pytest.mark.parametrize(
    ("code", "reward", "error_type"),
    [
        ("def verify(env:\n    return 1\n", None, "syntax_error"),
        ("def verify(env):\n    raise RuntimeError('boom')\n", None, "exception"),
        ("def verify(env):\n    while True:\n        pass\n", None, "timeout"),
        ("def verify(env):\n    return None\n", 1.0, None),
        ("def helper(env):\n    return 0\n\ndef verify(env):\n    return helper(env) + 1\n", 1.0, None),
        (
            "def verify(env):\n    return 1 if normalized_contains('Hello', 'well, HELLO there') else 0\n",
            1.0,
            None,
        ),
        ("def one(env):\n    return 1\n\ndef two(env):\n    return 1\n", None, "no_entry_point"),
        ("def verify(env):\n    return 'not a score'\n", None, "invalid_result"),
    ],
    ids=[
        "syntax",
        "raises",
        "loops",
        "returns-none",
        "helper-above",
        "namespace-helper",
        "no-entry",
        "bad-result",
    ],
)
async def test_verifier_outcomes_map_to_honest_rewards(
    afleet: AsyncFleet, code: str, reward: float | None, error_type: str | None
) -> None:
    """Regression: verifier failures were silently 0; None must mean unknown, 0.0 graded-and-failed."""
    # A short run limit only where the verifier never ends: the others finish, however loaded the machine.
    limit = 2 if error_type == "timeout" else int(PATIENCE)
    async with TaskEnv(custom_task(code), fleet=afleet, verifier_timeout=limit) as env:
        await env.reset_async()
        _, step_reward, done, info = await env.step_async({"done": True})
        assert done
        assert step_reward == reward
        assert env.final_reward == reward
        if error_type is None:
            assert env.verifier_error is None
        else:
            assert env.verifier_error is not None and env.verifier_error.startswith(error_type)
        assert env.verifier_execution_id is not None
        assert info["verifier_execution_id"] == env.verifier_execution_id


async def test_tool_errors_become_observations_and_the_episode_goes_on(afleet: AsyncFleet) -> None:
    async with TaskEnv(custom_task("def verify(env):\n    return 0\n"), fleet=afleet) as env:
        await env.reset_async()
        obs, reward, done, info = await env.step_async({"tool": "get_order", "params": {"order_id": 999999}})
        assert not done and reward == 0.0
        assert isinstance(obs["content"], dict) and "error" in obs["content"]
        assert info["tool_error"] == env.tool_errors[0]
        assert env.tool_errors[0].startswith("get_order(): ")
        obs, _, done, _ = await env.step_async({"tool": "no_such_tool", "params": {}})
        assert not done
        assert "no_such_tool" in obs["content"]["error"]
        assert len(env.tool_errors) == 2
        await env.step_async({"tool": "list_orders", "params": {}, "done": True})
        assert env.done_reason == "agent"
        with pytest.raises(EpisodeError, match="done"):
            await env.step_async({"tool": "list_orders", "params": {}})
        # feedback resets with the next episode
        await env.reset_async()
        assert env.tool_errors == [] and env.final_reward is None and env.verifier_execution_id is None


async def test_max_steps_ends_the_episode(afleet: AsyncFleet) -> None:
    async with TaskEnv(custom_task("def verify(env):\n    return 0.5\n"), fleet=afleet, max_steps=2) as env:
        await env.reset_async()
        _, _, done, _ = await env.step_async({"tool": "list_orders", "params": {}})
        assert not done
        _, reward, done, info = await env.step_async({"tool": "list_orders", "params": {}})
        assert done and info["done_reason"] == "max_steps" and env.done_reason == "max_steps"
        assert reward == 0.5


async def test_close_on_an_unfinished_episode_runs_the_verifier(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    """Regression: an abandoned episode lost its reward; close must still grade it."""
    task = next(t for t in bundled_tasks if t.task_key == "orderdesk-cancel-pending-order")
    env = TaskEnv(task, fleet=afleet)
    await env.reset_async()
    for action in reference_actions(task):
        await env.step_async(action)
    assert not env.done and env.final_reward is None
    await env.close_async()
    assert env.done_reason == "closed"
    assert env.final_reward == 1.0
    assert env.verifier_execution_id is not None


async def test_close_right_after_reset_grades_the_episode_with_no_final_answer(afleet: AsyncFleet) -> None:
    """An episode abandoned before its first step is still graded, with ``final_answer=None``."""
    code = (
        "def verify(env, final_answer='unset'):\n"
        "    orders = env.db().query('SELECT count(*) FROM orders').rows[0][0]\n"
        "    return 0.25 if final_answer is None and orders > 0 else 0.0\n"
    )
    env = TaskEnv(custom_task(code), fleet=afleet)
    await env.reset_async()
    assert env.step_count == 0 and not env.done
    await env.close_async()
    assert env.done and env.done_reason == "closed"
    assert env.final_reward == 0.25, env.verifier_error
    assert env.verifier_execution_id is not None


async def test_submit_final_answer_passes_the_answer(afleet: AsyncFleet) -> None:
    code = "def verify(env, final_answer=None):\n    return 1 if final_answer == 42 else 0\n"
    task = custom_task(code, prompt="Count things, then call submit_final_answer with the count.")
    async with TaskEnv(task, fleet=afleet) as env:
        await env.reset_async()
        _, reward, done, _ = await env.step_async({"tool": "submit_final_answer", "params": {"answer": 42}})
        assert done and env.done_reason == "submitted" and reward == 1.0


async def test_partial_reward_is_opt_in(afleet: AsyncFleet) -> None:
    code = (
        "def verify(env):\n"
        "    print('>>> ERROR_ACCUMULATOR >>>\\n[\"missed one\"]\\n<<< ERROR_ACCUMULATOR <<<')\n"
        '    print(\'>>> SUCCESS_ACCUMULATOR >>>\\n["a", "b", "c"]\\n<<< SUCCESS_ACCUMULATOR <<<\')\n'
        "    return 0\n"
    )
    for partial, expected in ((False, 0.0), (True, 0.75)):
        async with TaskEnv(custom_task(code), fleet=afleet, partial_reward=partial) as env:
            await env.reset_async()
            _, reward, _, _ = await env.step_async({"done": True})
            assert reward == expected
            assert "SUCCESS_ACCUMULATOR" in (env.verifier_stdout or "")


async def test_sync_reset_inside_a_running_loop(fleet: Fleet, bundled_tasks: list[Task]) -> None:
    """Regression: sync reset() called asyncio.run()/run_until_complete() inside the trainer's loop."""
    env = TaskEnv(bundled_tasks[0], fleet=fleet)
    try:
        obs = env.reset()  # we are inside `async def`, under pytest-asyncio's running loop
        assert obs["task_key"] == bundled_tasks[0].task_key
        assert obs["tools"]
    finally:
        env.close()


def test_sync_and_async_episodes_are_identical(server: Any, bundled_tasks: list[Task]) -> None:
    task = next(t for t in bundled_tasks if t.task_key == "orderdesk-refund-late-order")
    actions = reference_actions(task)

    with server.fleet() as sync_fleet:
        env = TaskEnv(task, fleet=sync_fleet)
        sync_trace = [env.reset()]
        for action in [*actions, {"done": True}]:
            obs, reward, done, _ = env.step(action)
            sync_trace.append((obs, reward, done))
            if done:
                break
        env.close()

    async def run_async() -> list[Any]:
        client = server.async_fleet()
        try:
            async with TaskEnv(task, fleet=client) as aenv:
                trace: list[Any] = [await aenv.reset_async()]
                trace += await play(aenv, actions)
                return trace
        finally:
            await client.close()

    async_trace = asyncio.run(run_async())
    assert sync_trace == async_trace
    assert sync_trace[-1][1] == 1.0


async def test_64_concurrent_episodes_complete(afleet: AsyncFleet, bundled_tasks: list[Task]) -> None:
    tasks = [bundled_tasks[i % len(bundled_tasks)] for i in range(64)]

    async def episode(task: Task) -> float | None:
        async with TaskEnv(task, fleet=afleet) as env:
            await env.reset_async()
            await play(env, reference_actions(task))
            return env.final_reward

    rewards = await asyncio.wait_for(asyncio.gather(*(episode(t) for t in tasks)), timeout=240)
    assert rewards == [1.0] * 64


async def test_a_client_made_by_the_episode_is_closed_with_it(
    server: Any, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_API_KEY", server.api_key)
    monkeypatch.setenv("FLEET_BASE_URL", server.base_url)
    env = TaskEnv(bundled_tasks[0])  # no fleet: one is made from the environment
    await env.reset_async()
    made = env._fleet
    assert made is not None and made.config.base_url == server.base_url
    await env.close_async()
    assert env._fleet is None
    assert made.http_client.is_closed
