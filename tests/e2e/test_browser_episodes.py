"""browser_use episodes end to end: TaskEnv, a real Chromium behind a local browser lease, the
instance's web pages, the verifier, and the trace upload with real screenshots.

Each test holds at most one browser at a time (Chromium is 100-200 MB).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from fleet_local import LocalFleet
from fleet_local.environments._computer_steps import click
from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk._png import is_blank_png
from fleet_sdk.browser import (
    MULTIMODAL_TTL_SECONDS,
    BrowserSession,
    BrowserStartError,
    computer_use_make_kwargs,
    multimodal_ttl,
)
from fleet_sdk.episodes import play_episode
from fleet_sdk.policies import ScriptedPolicy
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

BUCKET = "fleet-sessions-images"


BROWSER_KEYS = [
    "orderdesk-browser-ship-order",
    "orderdesk-browser-cancel-order",
    "orderdesk-browser-refund-order",
    "calendar-browser-create-event",
    "calendar-browser-move-event",
    "calendar-browser-cancel-event",
]


def _task(bundled_tasks: list[Task], key: str) -> Task:
    (task,) = [t for t in bundled_tasks if t.task_key == key]
    return task


def _png(block: dict[str, Any]) -> bytes:
    assert block["type"] == "image_url"
    prefix, _, data = block["image_url"]["url"].partition(";base64,")
    assert prefix == "data:image/png"
    return base64.b64decode(data)


async def _lease_status(afleet: AsyncFleet, lease_id: str) -> str:
    return (await afleet.api.browser.get_browser_lease(lease_id)).status


def test_every_bundled_environment_has_three_browser_tasks(bundled_tasks: list[Task]) -> None:
    browser = [t for t in bundled_tasks if t.task_modality == "browser_use"]
    assert sorted(t.task_key for t in browser) == sorted(BROWSER_KEYS)


@pytest.mark.parametrize("key", BROWSER_KEYS)
async def test_scripted_browser_policy_scores_one(
    afleet: AsyncFleet, bundled_tasks: list[Task], key: str
) -> None:
    task = _task(bundled_tasks, key)
    result = await play_episode(TaskEnv(task, fleet=afleet, max_steps=30), ScriptedPolicy)
    assert result.error is None
    assert result.reward == 1.0
    assert result.steps == len(task.metadata["reference_solution"]) + 1  # + the final "done" step


async def test_wrong_click_sequence_scores_zero(afleet: AsyncFleet, bundled_tasks: list[Task]) -> None:
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    steps = [dict(step) for step in task.metadata["reference_solution"]]
    assert steps[-1] == click("order.shipped")
    steps[-1] = click("order.delivered")  # a paid order cannot skip to delivered: nothing changes
    async with TaskEnv(task, fleet=afleet, max_steps=30) as env:
        await env.reset_async()
        for step in steps:
            await env.step_async(step)
        _, reward, done, _ = await env.step_async({"done": True})
    assert done and reward == 0.0
    assert env.verifier_error is None


async def test_episode_flow_lease_screenshots_and_cleanup(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    task = _task(bundled_tasks, "calendar-browser-cancel-event")
    env = TaskEnv(task, fleet=afleet, max_steps=20)
    try:
        observation = await env.reset_async()
        assert env.browser is not None and env.env is not None
        lease = await afleet.api.browser.get_browser_lease(env.browser.lease_id)
        web_ui = env.env.instance.urls.app[0]
        assert urlsplit(web_ui).netloc in lease.allowed_hosts
        assert lease.status == "running"
        assert lease.expires_timestamp_ms - lease.created_timestamp_ms == MULTIMODAL_TTL_SECONDS * 1000
        assert [t["function"]["name"] for t in observation["tools"]] == ["computer"]
        first, footer = observation["content"]
        assert not is_blank_png(_png(first))
        assert footer == {"type": "text", "text": "[Turn 0/20]"}

        obs, reward, done, info = await env.step_async(
            {"tool": "computer", "params": {"action": "left_click", "x": 75, "y": 29}}  # the Home link
        )
        image, footer = obs["content"]
        assert not is_blank_png(_png(image)) and footer["text"] == "[Turn 1/20]"
        assert (reward, done, info["tool_error"]) == (0.0, False, None)

        obs, *_ = await env.step_async(
            {"tool": "computer", "params": {"action": "navigate", "url": "http://example.com/"}}
        )
        assert "allowed_hosts" in obs["content"][0]["text"] and obs["content"][1]["text"] == "[Turn 2/20]"
        assert env.tool_errors and env.tool_errors[0].startswith(
            "computer(): navigation to http://example.com/"
        )
        lease_id = env.browser.lease_id
    finally:
        await env.close_async()
    assert env.browser is None
    assert await _lease_status(afleet, lease_id) == "terminated"


async def test_episode_that_raises_deletes_its_lease(afleet: AsyncFleet, bundled_tasks: list[Task]) -> None:
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    lease_id = None
    with pytest.raises(RuntimeError, match="trainer crashed"):
        async with TaskEnv(task, fleet=afleet) as env:
            await env.reset_async()
            assert env.browser is not None
            lease_id = env.browser.lease_id
            raise RuntimeError("trainer crashed")
    assert lease_id is not None and await _lease_status(afleet, lease_id) == "terminated"


async def test_episode_cancelled_mid_step_deletes_its_lease_and_instance(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    """A cancelled task's close runs in a cancelled scope; the deletes are shielded from it."""
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    started = anyio.Event()
    ids: list[str] = []

    async def episode() -> None:
        async with TaskEnv(task, fleet=afleet) as env:
            await env.reset_async()
            assert env.browser is not None and env.env is not None
            ids.extend([env.browser.lease_id, env.env.instance_id])
            started.set()
            await anyio.sleep_forever()  # a step that never ends, until cancelled

    async with anyio.create_task_group() as group:
        group.start_soon(episode)
        await started.wait()
        group.cancel_scope.cancel()
    lease_id, instance_id = ids
    assert await _lease_status(afleet, lease_id) == "terminated"
    instance = await afleet.api.control_plane.get_instance(instance_id)
    assert instance.status == "terminated"


async def test_failed_start_deletes_the_lease(
    faulty_afleet: AsyncFleet, faulty_server: LocalFleet, bundled_tasks: list[Task]
) -> None:
    """Every MCP call to the lease fails (a 500 from the browser host): the start gives up and deletes it."""
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    faulty_server.inject_fault("/browser/*/mcp*", status=500, count=50)
    env = TaskEnv(task, fleet=faulty_afleet, call_deadline=3.0)
    try:
        with pytest.raises(BrowserStartError):
            await env.reset_async()
        assert env.browser is None
        leases = [f for f in faulty_server.fired_faults() if f[1].startswith("/browser/")]
    finally:
        faulty_server.clear_faults()
        await env.close_async()
    assert leases, "the lease's MCP endpoint was called"
    lease_id = leases[0][1].split("/")[2]
    assert await _lease_status(faulty_afleet, lease_id) == "terminated"


def test_multimodal_defaults() -> None:
    assert (
        multimodal_ttl("computer_use", None)
        == multimodal_ttl("browser_use", None)
        == MULTIMODAL_TTL_SECONDS
        == 1800
    )
    assert multimodal_ttl("browser_use", 600) == 600
    assert multimodal_ttl("tool_use", None) is None
    assert computer_use_make_kwargs("computer_use", {}) == {"image_type": "mcp"}
    assert computer_use_make_kwargs("computer_use", {"image_type": "standard"}) == {"image_type": "standard"}
    assert computer_use_make_kwargs("browser_use", {"region": "x"}) == {"region": "x"}


async def test_trace_upload_stores_the_real_screenshots(
    afleet: AsyncFleet, server: LocalFleet, bundled_tasks: list[Task]
) -> None:
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    job_id = await afleet.traces.create_job("browser screenshots")
    store = server.screenshot_store()  # the server's S3 endpoint, signed with its key
    async with TaskEnv(
        task, fleet=afleet, trace_job_id=job_id, trace_model="local/scripted", screenshot_store=store
    ) as env:
        await env.reset_async()
        for step in task.metadata["reference_solution"][:2]:
            await env.step_async(dict(step))
        _, reward, _, _ = await env.step_async({"done": True})
        history = list(env.chat_history)
    assert reward == 0.0  # two clicks do not ship the order
    assert env.trace_session_id is not None
    shots = [
        _png(block)
        for message in history
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "image_url"
    ]
    assert len(shots) == 3  # reset + two steps

    transcript = (await afleet.api.sessions.get_session_transcript(env.trace_session_id)).transcript
    tools = [m for m in transcript if m.role == "tool" and isinstance(m.content, list)]
    fetched = []
    async with httpx.AsyncClient(trust_env=False) as http:
        for message in tools:
            for block in message.content:
                assert block.type == "image_url"
                assert block.image_url.url.startswith(f"{server.s3_url}/{BUCKET}/harness/screenshot/")
                response = await http.get(block.image_url.url)
                assert response.status_code == 200
                fetched.append(response.content)
    assert fetched == shots


async def test_browser_session_refuses_an_ended_lease(afleet: AsyncFleet, bundled_tasks: list[Task]) -> None:
    """A lease deleted under the session: its computer tool answers with an error, not an image."""
    task = _task(bundled_tasks, "orderdesk-browser-ship-order")
    env = await afleet.make(task.env_spec, data_key=task.data_spec)
    try:
        session = await BrowserSession.open(afleet, env, ttl_seconds=60)
        await afleet.api.browser.delete_browser_lease(session.lease_id)
        with pytest.raises(Exception):  # noqa: B017 - the endpoint is gone (404): any MCP failure
            await session.call_tool("computer", {"action": "screenshot"}, deadline=2.0)
        await session.close()  # 410 is fine
    finally:
        await env.close()


def test_sync_twin_plays_a_browser_task(fleet: Fleet, bundled_tasks: list[Task]) -> None:
    task = _task(bundled_tasks, "calendar-browser-cancel-event")
    with TaskEnv(task, fleet=fleet, max_steps=20) as env:
        observation = env.reset()
        assert observation["content"][-1]["text"] == "[Turn 0/20]"
        for step in task.metadata["reference_solution"]:
            env.step(dict(step))
        _, reward, done, _ = env.step({"done": True})
        assert env.browser is not None
        lease_id = env.browser.lease_id
    assert done and reward == 1.0
    assert fleet.api.browser.get_browser_lease(lease_id).status == "terminated"
