"""Each episode's verifier runs on the server once: graded by the step that ends it, by ``reset``
when it was abandoned, or by ``close``, and never again by whichever comes after.

Counted at the client's connection pool, so a second run of the same episode would show, however
it came about."""

from __future__ import annotations

import json

import httpx

from fleet_local import LocalFleet
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

CODE = "def verify(env, final_answer=None):\n    return 1.0 if final_answer == '7' else 0.0\n"


async def test_each_episode_is_graded_once_whichever_ends_it(local: LocalFleet) -> None:
    answers: list[object] = []

    async def count(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path == "/v1/verifiers/execute":
            answers.append(json.loads(request.content)["args"]["final_answer"])

    task = Task(
        task_key="graded-once",
        prompt="Find the order, then call submit_final_answer.",
        env_key="orderdesk",
        verifier_code=CODE,
    )
    async with (
        httpx.AsyncClient(event_hooks={"request": [count]}) as pool,
        local.async_fleet(http_client=pool) as fleet,
        TaskEnv(task, fleet=fleet) as env,
    ):
        await env.reset_async()
        _, reward, done, _ = await env.step_async({"tool": "submit_final_answer", "params": {"answer": "7"}})
        assert done and reward == 1.0 and answers == ["7"]  # the step that ended it graded it

        await env.reset_async()  # the finished episode is not graded again
        await env.step_async({"tool": "get_order", "params": {"order_id": 1}})
        assert answers == ["7"]
        await env.reset_async()  # the running one was abandoned: graded now, as closed
        assert answers == ["7", None]

        await env.close_async()  # the third episode, abandoned before its first step
        await env.close_async()  # and the context's exit closes it a third time
        assert answers == ["7", None, None]
        assert env.done_reason == "closed" and env.final_reward == 0.0
