"""Evaluation jobs over browser_use (and computer_use) tasks, end to end: the local server leases
a real Chromium per session, the policy drives the lease's ``computer`` tool, the verifier grades
the instance, and no browser outlives its session (success, policy failure, server stop, missing
Chromium).

Each test runs its own server, so the Chromium processes it starts can be told apart by data dir.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from _fake_model import ModelHandler, serve_model, tool_call_reply
from _jobs_wait import TERMINAL_JOB
from _procs import alive_in, chromium_groups
from _waits import PATIENCE

from fleet_local import LocalFleet
from fleet_local._job_browser import session_lease_id
from fleet_sdk import AsyncFleet
from fleet_sdk._png import is_blank_png
from fleet_sdk.traces import is_turn_footer
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels

BROWSER_KEYS = [
    "orderdesk-browser-ship-order",
    "orderdesk-browser-cancel-order",
    "orderdesk-browser-refund-order",
]
TOOL_KEY = "orderdesk-count-pending-orders"
COMPUTER_KEY = "jobs-computer-use-ship-order"
JOB_TIMEOUT = 300.0


async def _run_watching_browsers(
    fleet: AsyncFleet, local: LocalFleet, job_id: str
) -> tuple[models.Job, set[int]]:
    """Wait for the job to end, sampling its server's Chromium process groups meanwhile.

    Returns:
        The finished job and every browser process group seen.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + JOB_TIMEOUT
    seen: set[int] = set()
    while True:
        seen |= chromium_groups(local.data_dir)
        job = await fleet.api.control_plane.get_job(job_id)
        if job.status in TERMINAL_JOB:
            return job, seen
        assert loop.time() < deadline, f"job {job_id} still {job.status} after {JOB_TIMEOUT}s"
        await asyncio.sleep(0.2)


async def _still_alive(groups: set[int]) -> list[int]:
    """Live processes of ``groups`` once they had :data:`PATIENCE` seconds to exit (a killed
    Chromium's processes take a moment to die; the test only needs them gone, not instantly)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while alive_in(groups) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return alive_in(groups)


def _sessions(results: smodels.JobSessionsResponse) -> dict[str, smodels.TaskSessionGroup]:
    return {str(group.task_id): group for group in results.tasks}


def _image_urls(content: Any) -> list[str]:
    blocks = content if isinstance(content, list) else []
    return [b.image_url.url for b in blocks if getattr(b, "type", None) == "image_url"]


async def test_a_job_plays_browser_tasks_on_real_chromium_and_scores_them(tmp_path: Path) -> None:
    # One browser at a time: the bound under test, and the lightest load for a small machine.
    with LocalFleet(tmp_path / "server", job_browser_concurrency=1) as local:
        async with local.async_fleet() as fleet:
            # A computer_use task: the local server plays it on a browser lease too.
            tasks = (await fleet.api.control_plane.list_tasks(env_key="orderdesk")).tasks
            (ship,) = [t for t in tasks if t.task_key == BROWSER_KEYS[0]]
            await fleet.api.control_plane.import_task(
                models.TaskRequest(
                    task_key=COMPUTER_KEY,
                    prompt=ship.prompt,
                    env_key=ship.env_key,
                    data_key=ship.data_key,
                    data_version=ship.data_version,
                    verifier_code=ship.verifier_code,
                    task_modality="computer_use",
                    metadata=ship.metadata,
                )
            )
            every = [*BROWSER_KEYS, COMPUTER_KEY, TOOL_KEY]
            browser_keys = [*BROWSER_KEYS, COMPUTER_KEY]
            created = await fleet.api.control_plane.create_job(
                models.JobCreateRequest(models=["local/scripted"], task_keys=every)
            )
            job, groups = await _run_watching_browsers(fleet, local, created.job_id)
            assert job.status == "completed" and job.error is None
            # Every browser is gone once the job is, while the server still runs.
            assert len(groups) >= 1 and await _still_alive(groups) == []

            results = await fleet.api.sessions.get_job_sessions(created.job_id)
            by_task = _sessions(results)
            assert sorted(by_task) == sorted(every)
            for key in every:
                group = by_task[key]
                (session,) = group.sessions
                assert session.status == "completed", (key, session.error)
                assert group.average_score == 1.0 and group.passed_sessions == 1, key
                assert session.verifier_execution is not None and session.verifier_execution.success
                if key in browser_keys:
                    lease = await fleet.api.browser.get_browser_lease(session_lease_id(session.session_id))
                    assert lease.status == "terminated"
                    assert lease.allowed_hosts == [urlsplit(local.base_url).netloc]

            # job_browser_concurrency=1: the browser sessions ran one after another, while the
            # tool_use session (no browser) did not wait for them.
            spans = sorted((s.started_at, s.ended_at) for key in browser_keys for s in by_task[key].sessions)
            assert all(start is not None and end is not None for start, end in spans)
            for (_, earlier_end), (later_start, _) in itertools.pairwise(spans):
                assert earlier_end is not None and later_start is not None
                assert later_start >= earlier_end
            (tool_session,) = by_task[TOOL_KEY].sessions
            assert tool_session.started_at is not None and spans[0][1] is not None
            assert tool_session.started_at < spans[0][1]

            # The transcript: prompt, the web UI's first screenshot, then computer calls answered
            # with screenshots stored on the local S3 endpoint.
            (session,) = by_task["orderdesk-browser-refund-order"].sessions
            transcript = await fleet.api.sessions.get_session_transcript(session.session_id)
            (task,) = [t for t in tasks if t.task_key == "orderdesk-browser-refund-order"]
            solution = (task.metadata or {})["reference_solution"]
            messages = transcript.transcript
            assert [m.role for m in messages[:3]] == ["system", "user", "user"]
            calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls or []]
            assert {c.function.name for c in calls} == {"computer"}
            assert session.step_count == len(calls) == len(solution)
            assert [json.loads(c.function.arguments) for c in calls] == [s["params"] for s in solution]
            answers = [m for m in messages if m.role == "tool"]
            assert [m.tool_call_id for m in answers] == [c.id for c in calls]
            urls = _image_urls(messages[2].content) + [u for m in answers for u in _image_urls(m.content)]
            assert len(urls) == len(answers) + 1
            assert local.s3_url is not None and all(u.startswith(local.s3_url) for u in urls)
            async with httpx.AsyncClient(trust_env=False) as http:
                first = (await http.get(urls[0])).content
                last = (await http.get(urls[-1])).content
            assert first.startswith(b"\x89PNG") and not is_blank_png(first)
            assert last.startswith(b"\x89PNG") and first != last  # the refund changed the page


async def test_without_chromium_browser_sessions_error_naming_it_and_the_job_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-chromium"
    monkeypatch.setenv("FLEET_CHROMIUM", str(missing))  # the server inherits it
    with LocalFleet(tmp_path / "server") as local:
        async with local.async_fleet() as fleet:
            created = await fleet.api.control_plane.create_job(
                models.JobCreateRequest(models=["local/scripted"], task_keys=[BROWSER_KEYS[0], TOOL_KEY])
            )
            job, groups = await _run_watching_browsers(fleet, local, created.job_id)
            assert job.status == "completed"
            assert groups == set()
            by_task = _sessions(await fleet.api.sessions.get_job_sessions(created.job_id))
            (browser_session,) = by_task[BROWSER_KEYS[0]].sessions
            assert browser_session.status == "errored"
            assert browser_session.error is not None
            assert "browser_use" in browser_session.error and "Chromium" in browser_session.error
            assert f"FLEET_CHROMIUM='{missing}'" in browser_session.error
            assert browser_session.verifier_execution is None
            assert by_task[BROWSER_KEYS[0]].average_score is None  # an error, never a 0
            assert by_task[BROWSER_KEYS[0]].passed_sessions == 0
            (tool_session,) = by_task[TOOL_KEY].sessions
            assert tool_session.status == "completed" and by_task[TOOL_KEY].average_score == 1.0


# ---------------------------------------------------------------- a model that fails mid-episode


class _FailingModel(ModelHandler):
    """Asks for one screenshot, then fails for good (400); with ``hold`` set, the second answer
    waits for that event first (a model mid-turn)."""

    asked_again = threading.Event()
    hold: threading.Event | None = None

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return 200, tool_call_reply("call_shot", "computer", {"action": "screenshot"})
        type(self).asked_again.set()
        if self.hold is not None:
            self.hold.wait(timeout=60)
        return 400, {"error": {"message": "this model gives up", "type": "invalid_request_error"}}


@pytest.fixture
def failing_model() -> Iterator[str]:
    """Base URL of ``_FailingModel`` on loopback."""
    _FailingModel.asked_again = threading.Event()
    _FailingModel.hold = None
    try:
        with serve_model(_FailingModel) as url:
            yield url
    finally:
        if _FailingModel.hold is not None:  # let a held request end before the server stops
            _FailingModel.hold.set()


def _data_png(content: Any) -> bytes:
    """The PNG a screenshot shows the model: one image block with a data URL, followed by the
    turn footer every image observation of ``TaskEnv`` carries."""
    block, footer = content
    assert footer["type"] == "text" and is_turn_footer(footer["text"])
    prefix, _, data = block["image_url"]["url"].partition(";base64,")
    assert prefix == "data:image/png"
    return base64.b64decode(data)


async def test_a_session_whose_model_fails_mid_episode_releases_its_browser(
    tmp_path: Path, failing_model: str
) -> None:
    with LocalFleet(tmp_path / "server", model_base_url=failing_model) as local:
        async with local.async_fleet() as fleet:
            created = await fleet.api.control_plane.create_job(
                models.JobCreateRequest(models=["openai/failing"], task_keys=[BROWSER_KEYS[0]])
            )
            job, groups = await _run_watching_browsers(fleet, local, created.job_id)
            assert job.status == "errored"  # its only session errored
            assert await _still_alive(groups) == [] and chromium_groups(local.data_dir) == set()
            (group,) = (await fleet.api.sessions.get_job_sessions(created.job_id)).tasks
            (session,) = group.sessions
            assert session.status == "errored" and session.error is not None
            assert "400" in session.error
            assert session.verifier_execution is None and group.average_score is None
            lease = await fleet.api.browser.get_browser_lease(session_lease_id(session.session_id))
            assert lease.status == "terminated"

    # What the model saw: only the computer tool, the web UI's screenshot after the prompt, and
    # its screenshot call answered with a PNG (data URLs: the model cannot reach loopback S3).
    first, second = (r["body"] for r in _FailingModel.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["computer"]
    assert [m["role"] for m in first["messages"]] == ["system", "user", "user"]
    assert not is_blank_png(_data_png(first["messages"][2]["content"]))
    tool = second["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_shot"
    assert _data_png(tool["content"]).startswith(b"\x89PNG")


async def test_a_server_stopped_mid_session_leaves_no_browser_and_settles_the_session(
    tmp_path: Path, failing_model: str
) -> None:
    _FailingModel.hold = threading.Event()
    data_dir = tmp_path / "server"
    with LocalFleet(data_dir, model_base_url=failing_model) as local:
        async with local.async_fleet() as fleet:
            created = await fleet.api.control_plane.create_job(
                models.JobCreateRequest(models=["openai/held"], task_keys=[BROWSER_KEYS[0]])
            )
            # The model holds its second turn: the session is mid-episode with a live browser.
            assert await asyncio.to_thread(_FailingModel.asked_again.wait, 120)
            groups = chromium_groups(data_dir)
            assert groups and alive_in(groups)
    _FailingModel.hold.set()
    assert await _still_alive(groups) == []
    with LocalFleet(data_dir, model_base_url=failing_model) as local:
        async with local.async_fleet() as fleet:
            job = await fleet.api.control_plane.get_job(created.job_id)
            assert job.status == "errored"
            (group,) = (await fleet.api.sessions.get_job_sessions(created.job_id)).tasks
            (session,) = group.sessions
            assert session.status == "errored" and session.error is not None
            assert session.interrupted is True  # what a client reads; the text is for people
            assert group.average_score is None
            lease = await fleet.api.browser.get_browser_lease(session_lease_id(session.session_id))
            assert lease.status == "terminated"  # ended by the session, not left to its TTL
            assert chromium_groups(data_dir) == set()
