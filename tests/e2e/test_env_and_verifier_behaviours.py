"""Behaviours of envs and verifiers that earlier SDKs got wrong: the create body, the request
timeout, reset with a seed, verifier globals, a missing ``verify``, retries through a warming
instance and judge errors, and per-episode feedback. Each docstring says what is guarded."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, EnvNotFoundError, RetryPolicy, Timeout
from fleet_sdk.remote_verifier import run_remote
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task
from fleet_sdk.types import env_instance as models

FAST = RetryPolicy(max_retries=2, backoff_base=0.05, backoff_max=0.1)


def task_with(code: str) -> Task:
    return Task(task_key="seed-regression", prompt="p", env_key="orderdesk", verifier_code=code)


async def test_make_sends_no_image_type_by_default() -> None:
    """Guards: "MCP images don't exist for all environment versions ... changing the default to None"."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(404, json={"detail": "env_key not found", "code": "env_not_found"})

    fleet = AsyncFleet(
        "sk-test-000000", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    with pytest.raises(EnvNotFoundError, match="env_key not found"):
        await fleet.make("fira:1.2.3")
    assert "image_type" not in seen[0]
    assert seen[0]["env_key"] == "fira" and seen[0]["env_version"] == "v1.2.3"


async def test_requests_get_a_60s_timeout_by_default() -> None:
    """A 15 s default timed out while environments initialised; calls now allow 60 s (on the wire)."""
    seen: list[dict[str, float]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json=[])

    fleet = AsyncFleet(
        "sk-test-000000", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    await fleet.api.control_plane.list_envs()
    assert seen and seen[0]["read"] == 60.0
    assert Timeout().total == 60.0


async def test_reset_with_a_seed_restores_the_data(afleet: AsyncFleet) -> None:
    """``reset(seed=...)`` sends the seed and really restores the instance's data."""
    async with await afleet.make("orderdesk") as env:
        count = "SELECT count(*) FROM orders"
        before = (await env.manager.query_database("current", models.QueryRequest(query=count))).rows
        await env.manager.query_database(
            "current", models.QueryRequest(query="DELETE FROM orders", read_only=False)
        )
        emptied = (await env.manager.query_database("current", models.QueryRequest(query=count))).rows
        assert emptied != before
        response = await env.reset(seed=7)
        assert response.success
        after = (await env.manager.query_database("current", models.QueryRequest(query=count))).rows
        assert after == before


async def test_verifier_annotated_with_environment_type(afleet: AsyncFleet) -> None:
    """Guards: "fixes 'name Environment is not defined' errors during verifier execution"."""
    code = "def verify(env: Environment) -> float:\n    return TASK_SUCCESSFUL_SCORE\n"
    async with TaskEnv(task_with(code), fleet=afleet) as env:
        await env.reset_async()
        _, reward, _, _ = await env.step_async({"done": True})
        assert reward == 1.0, env.verifier_error


async def test_verifier_defining_a_dataclass_runs_on_the_server(afleet: AsyncFleet) -> None:
    """A verifier's ``@dataclass`` failed in the server's sandbox: its module was not in
    ``sys.modules`` (``AttributeError: 'NoneType' object has no attribute '__dict__'``)."""
    code = (
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Count:\n"
        "    orders: int\n"
        "def verify(env: Environment) -> float:\n"
        "    count = Count(env.db('current').query('SELECT count(*) FROM orders').rows[0][0])\n"
        "    return TASK_SUCCESSFUL_SCORE if count.orders > 0 else TASK_FAILED_SCORE\n"
    )
    async with TaskEnv(task_with(code), fleet=afleet) as env:
        await env.reset_async()
        _, reward, _, _ = await env.step_async({"done": True})
        assert reward == 1.0, env.verifier_error


async def test_missing_verify_names_the_functions_found(afleet: AsyncFleet) -> None:
    """Guards: "Show which functions were found if 'verify' is missing"."""
    code = "def check_a(env):\n    return 1\n\ndef check_b(env):\n    return 0\n"
    async with TaskEnv(task_with(code), fleet=afleet) as env:
        await env.reset_async()
        await env.step_async({"done": True})
        assert env.final_reward is None
        assert env.verifier_error is not None
        assert "check_a" in env.verifier_error and "check_b" in env.verifier_error


async def test_verifier_is_retried_through_502_from_a_warming_instance(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet
) -> None:
    """Guards: "Fresh instances occasionally return 502 before they finish warming up; the next attempt
    succeeds" and the execution_id must still come back."""
    async with await faulty_afleet.make("orderdesk") as env:
        faulty_server.inject_fault("/v1/verifiers/execute", method="POST", status=502, count=2)
        outcome = await run_remote(
            faulty_afleet,
            "def verify(env):\n    return 1\n",
            key="k",
            instance_id=env.instance_id,
            retry=FAST,
        )
        assert outcome.score == 1.0
        assert outcome.attempts == 3
        assert outcome.execution_id


async def test_judge_error_is_retried_then_unknown(afleet: AsyncFleet) -> None:
    """Guards: retry on stdout lines starting `JUDGE ERROR:`; a judge failure is no grade, not a 0."""
    code = "def verify(env):\n    print('JUDGE ERROR: upstream 529')\n    return 0\n"
    async with await afleet.make("orderdesk") as env:
        outcome = await run_remote(afleet, code, key="k", instance_id=env.instance_id, retry=FAST)
        assert outcome.attempts == 3
        assert outcome.transient and outcome.score is None
        assert outcome.execution_id  # the last run's id is kept for the trace


async def test_feedback_properties_do_not_leak_across_episodes(afleet: AsyncFleet) -> None:
    """Guards: "All feedback properties reset in reset_async() to prevent cross-episode leakage"."""
    code = "def verify(env):\n    print('graded')\n    raise ValueError('nope')\n"
    async with TaskEnv(task_with(code), fleet=afleet) as env:
        await env.reset_async()
        await env.step_async({"tool": "get_order", "params": {"order_id": -1}})
        await env.step_async({"done": True})
        assert env.tool_errors and env.verifier_error and env.verifier_stdout
        await env.reset_async()
        assert (env.tool_errors, env.verifier_error, env.verifier_stdout, env.final_reward) == (
            [],
            None,
            None,
            None,
        )


async def test_the_first_reset_sends_the_seed(local: LocalFleet) -> None:
    """``reset_async(seed=...)`` dropped the seed on the reset that provisions the instance: only
    later resets sent it to the instance."""
    sent: list[tuple[str, bytes]] = []

    async def record(request: httpx.Request) -> None:
        sent.append((request.url.path, request.content))

    async with (
        httpx.AsyncClient(event_hooks={"request": [record]}) as pool,
        local.async_fleet(http_client=pool) as fleet,
        TaskEnv(task_with("def verify(env):\n    return 1\n"), fleet=fleet) as env,
    ):
        await env.reset_async(seed=7)
        assert env.env is not None
        instance = env.env.instance_id

        def resets() -> list[object]:
            return [json.loads(body) for path, body in sent if instance in path and path.endswith("/reset")]

        assert resets() == [{"seed": 7}]
        await env.reset_async()  # no seed: none is sent, as before
        assert resets() == [{"seed": 7}, {}]


async def test_a_failed_verifier_is_logged_with_a_preview_of_its_code(
    afleet: AsyncFleet, caplog: pytest.LogCaptureFixture
) -> None:
    """The log said which task failed and why, but not which code: the first lines now come
    with it (bounded, however long the verifier)."""
    body = "".join(f"    step_{n} = {n}\n" for n in range(40))
    code = f"def verify(env):\n{body}    raise ValueError('nope')\n"
    caplog.set_level(logging.WARNING, logger="fleet_sdk.task_env")
    async with TaskEnv(task_with(code), fleet=afleet) as env:
        await env.reset_async()
        await env.step_async({"done": True})
    [record] = [r for r in caplog.records if r.name == "fleet_sdk.task_env"]
    message = record.getMessage()
    assert "seed-regression" in message and "nope" in message
    assert "| def verify(env):" in message and "|     step_0 = 0" in message
    assert "step_39" not in message and "more lines)" in message
    assert len(message) < 2000
