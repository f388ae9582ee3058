"""A closed env refuses further use with ``ClientClosedError`` (its instance is deleted), a closed
``TaskEnv`` with ``EpisodeError`` until ``reset`` starts a new episode, and an env of a closed
client refuses too: nothing is sent to a deleted instance or through a closed pool."""

# Each use is a lambda on purpose: the call itself must happen inside ``pytest.raises``.
# ruff: noqa: PLW0108

from __future__ import annotations

import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, ClientClosedError, EpisodeError
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task


async def test_a_closed_env_refuses_its_tools_databases_and_lifecycle(afleet: AsyncFleet) -> None:
    env = await afleet.make("orderdesk")
    assert await env.list_tools()
    await env.close()
    assert env.closed
    for use in (
        lambda: env.call_tool("list_orders", {}),
        lambda: env.list_tools(refresh=True),
        lambda: env.reset(),
        lambda: env.db().query("SELECT 1"),
        lambda: env.diff(),
        lambda: env.heartbeat(),
        lambda: env.refresh(),
        lambda: env.keep_alive(),
    ):
        with pytest.raises(ClientClosedError):
            await use()
    await env.close()  # idempotent


async def test_a_closed_task_env_steps_no_more_until_reset(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk")
    env = TaskEnv(task, fleet=afleet)
    await env.reset_async()
    await env.close_async()
    with pytest.raises(EpisodeError, match="was closed"):
        await env.step_async({"done": True})
    await env.reset_async()  # a new episode on a new instance
    _, _, done, _ = await env.step_async({"done": True})
    assert done
    await env.close_async()


async def test_an_env_of_a_closed_client_refuses(server: LocalFleet) -> None:
    fleet = server.async_fleet()
    env = await fleet.make("orderdesk")
    instance_id = env.instance_id
    await fleet.close()
    with pytest.raises(ClientClosedError):
        await env.reset()
    with pytest.raises(ClientClosedError):
        await env.call_tool("list_orders", {})
    async with server.async_fleet() as other:  # the trainer's cleanup, on a live client
        await (await other.instance(instance_id)).close()
