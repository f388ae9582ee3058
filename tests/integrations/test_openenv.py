"""The OpenEnv adapter served by OpenEnv's own HTTP server and driven by its own client,
against the local server: a reference episode to reward 1.0, tool errors, list_tools, state; and
the client side importing without OpenEnv's server."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from fleet_local import LocalFleet
from fleet_sdk.integrations.openenv import (
    FleetAction,
    FleetEnvClient,
    FleetTaskEnvironment,
    create_fleet_app,
)

TASK = "orderdesk-cancel-pending-order"


@pytest.fixture
def task_config(local: LocalFleet) -> dict[str, Any]:
    with local.fleet() as fleet:
        return fleet.tasks.get(TASK).model_dump()


@pytest.fixture
def served(local: LocalFleet, task_config: dict[str, Any]) -> Iterator[str]:
    """OpenEnv's app for the task under uvicorn on a loopback port; yields its URL."""
    app = create_fleet_app(task_config, fleet_factory=local.fleet, max_concurrent_envs=2, max_steps=10)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


async def test_reference_episode_through_openenv_http_server_and_client(
    served: str, task_config: dict[str, Any], local: LocalFleet
) -> None:
    async with FleetEnvClient(base_url=served) as client:
        result = await client.reset(episode_id="ep-1")
        obs = result.observation
        assert obs.task_key == TASK and obs.prompt == task_config["prompt"]
        names = {t["function"]["name"] for t in obs.tools}
        assert {"search_customers", "list_orders", "cancel_order"} <= names
        assert result.done is False and result.reward is None and obs.step == 0

        listed = await client.step(FleetAction(type="list_tools"))
        assert listed.observation.tools == obs.tools and listed.observation.step == 0

        bad = await client.step(FleetAction(tool_name="no_such_tool", arguments={}))
        assert bad.done is False and bad.reward == 0.0
        assert bad.observation.error is not None and "no_such_tool" in bad.observation.error

        steps = task_config["metadata"]["reference_solution"]
        for step in steps:
            result = await client.step(FleetAction(tool_name=step["tool"], arguments=step["params"]))
            assert result.observation.tool_name == step["tool"] and result.observation.error is None
            assert result.done is False
        assert "1021" in str(result.observation.result)  # the cancelled order, as the tool returned it

        state = await client.state()
        assert state.episode_id == "ep-1" and state.step_count == len(steps) + 1
        assert state.instance_id and state.tool_errors and "no_such_tool" in state.tool_errors[0]

        final = await client.step(FleetAction(done=True))
        assert final.done is True and final.reward == 1.0
        assert final.observation.done_reason == "agent" and final.observation.verifier_error is None
        assert final.observation.verifier_execution_id

        instance_id = state.instance_id

        # The next episode on the same session may run another task, sent with reset.
        with local.fleet() as fleet:
            other = fleet.tasks.get("orderdesk-count-pending-orders").model_dump(mode="json")
        result = await client.reset(task_config=other)
        assert result.observation.task_key == other["task_key"] and result.observation.step == 0
        assert (await client.state()).instance_id not in (None, instance_id)
        result = await client.step(FleetAction(tool_name="submit_final_answer", arguments={"answer": "6"}))
        assert result.done is True and result.reward == 1.0 and result.observation.done_reason == "submitted"
    # The session ended with the socket: its instance is deleted on the server.
    with local.fleet() as fleet:
        instance = fleet.api.control_plane.get_instance(instance_id)
    assert instance.status in ("terminated", "deleted", "stopped"), instance.status


async def test_two_sessions_get_two_instances_and_an_empty_episode_scores_zero(served: str) -> None:
    async def episode() -> tuple[str | None, float | None]:
        async with FleetEnvClient(base_url=served) as client:
            await client.reset()
            state = await client.state()
            final = await client.step(FleetAction(done=True))
            return state.instance_id, final.reward

    (a, ra), (b, rb) = await asyncio.gather(episode(), episode())
    assert a and b and a != b
    assert ra == rb == 0.0


def test_environment_directly_with_seed_argument_names(
    local: LocalFleet, task_config: dict[str, Any]
) -> None:
    with local.fleet() as fleet:
        env = FleetTaskEnvironment(
            task_config, fleet=fleet, max_steps=2, ttl_seconds=600, partial_reward=True
        )
        try:
            assert env.task_env.max_steps == 2 and env.task_env.ttl_seconds == 600
            assert env.task_env.partial_reward is True
            env.reset()
            first = env.step(FleetAction(tool_name="list_orders", arguments={"status": "pending"}))
            assert first.done is False
            second = env.step(FleetAction(tool_name="list_orders", arguments={"status": "pending"}))
            assert second.done is True and second.done_reason == "max_steps" and second.reward == 0.0
        finally:
            env.close()


def test_api_key_with_a_client_is_refused(local: LocalFleet, task_config: dict[str, Any]) -> None:
    from fleet_sdk import ConfigurationError

    with local.fleet() as fleet, pytest.raises(ConfigurationError, match="api_key"):
        FleetTaskEnvironment(task_config, fleet=fleet, api_key="k")


def test_sync_reset_to_another_task_on_an_async_client_deletes_the_old_instance(
    local: LocalFleet, task_config: dict[str, Any]
) -> None:
    from fleet_sdk._runtime._bridge import run_sync

    afleet = local.async_fleet()
    env = FleetTaskEnvironment(task_config, fleet=afleet)
    try:
        env.reset()
        assert env.task_env.env is not None
        old = env.task_env.env.instance_id
        env.reset(task_config=task_config)
        assert env.task_env.env is not None and env.task_env.env.instance_id != old
        with local.fleet() as fleet:
            assert fleet.api.control_plane.get_instance(old).status == "terminated"
    finally:
        env.close()
        run_sync(afleet.close())


CLIENT_ONLY = """
import sys
from fleet_sdk.integrations.openenv import FleetAction, FleetEnvClient
server = ("gradio", "fastapi", "fastmcp", "openenv.core.env_server.http_server")
print(sorted(name for name in server if name in sys.modules))
import openenv.core  # a user's own OpenEnv import afterwards sees the whole package
print(openenv.core.EnvClient is FleetEnvClient.__mro__[1], openenv.core.env_server.create_app.__name__)
"""


def test_the_client_side_imports_without_openenv_server() -> None:
    """``import fleet_sdk.integrations.openenv`` took 26-90 s, gradio included: OpenEnv's package
    init imports its server even for the client."""
    result = subprocess.run(
        [sys.executable, "-c", CLIENT_ONLY], capture_output=True, text=True, timeout=300, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "True create_app"], result.stdout + result.stderr
