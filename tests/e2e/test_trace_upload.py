"""Traces with screenshots end to end on the local server (docs/wire.md#traces).

Screenshots go to the server's S3-compatible endpoint (bucket ``fleet-sessions-images``,
public reads, writes signed with the server's key) through ``ScreenshotStore`` with
path-style addressing; sessions go to the server's ``/v1/sessions/ingest``
and are read back with ``get_session_transcript`` / ``get_job_sessions``.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task
from fleet_sdk.traces import ScreenshotStore

BUCKET = "fleet-sessions-images"


def store_for(server: LocalFleet, **kwargs: Any) -> ScreenshotStore:
    assert server.s3_url, "the e2e server runs with its S3 endpoint"
    store = ScreenshotStore(
        endpoint_url=server.s3_url,
        public_url_base=f"{server.s3_url}/{BUCKET}",
        addressing_style="path",
        aws_access_key_id="fleet-local",
        aws_secret_access_key=server.api_key,  # the local endpoint checks signatures
        **kwargs,
    )
    return store


def unique_png(tag: str) -> bytes:
    """Distinct bytes per test run, so the shared bucket never already holds them."""
    return b"\x89PNG\r\n\x1a\n" + f"{tag}:{uuid.uuid4()}".encode()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def episode_history(shots: list[tuple[bytes, str]]) -> list[dict[str, Any]]:
    """A computer-use style history: screenshots come back as ``user`` messages with a footer."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Book the cheapest flight."}]
    for turn, (shot, mime) in enumerate(shots, 1):
        call_id = f"call_{turn:03d}"
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "computer", "arguments": '{"action": "screenshot"}'},
                    }
                ],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": data_url(shot, mime)}},
                    {"type": "text", "text": f"[Turn {turn}/{len(shots)}]"},
                ],
            }
        )
    return history


def screenshot_keys(server: LocalFleet) -> set[str]:
    """Every object key under ``harness/screenshot/`` in the local bucket (a signed listing)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=server.s3_url,
        region_name="us-east-1",
        aws_access_key_id="fleet-local",
        aws_secret_access_key=server.api_key,
    )
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="harness/screenshot/"):
        keys.update(obj["Key"] for obj in page.get("Contents", []))
    return keys


async def test_session_with_screenshots_reads_back_as_tool_images_at_public_urls(
    afleet: AsyncFleet, server: LocalFleet
) -> None:
    """Seeds 6dc3fd1 (public bucket, OpenAI shape on /v1/sessions/ingest) and "role:'tool' for
    image observations": the stored transcript holds tool messages whose image URLs can be
    fetched anonymously and are named by the sha256 of their bytes."""
    png, jpeg = unique_png("a"), b"\xff\xd8\xff\xe0" + uuid.uuid4().bytes
    history = episode_history([(png, "image/png"), (jpeg, "image/jpeg"), (png, "image/png")])
    store = store_for(server)
    job_id = await afleet.traces.create_job("e2e screenshots")
    session_id = await afleet.traces.upload_session(
        job_id=job_id,
        task_key="flight-booking",
        model="anthropic/claude-x",
        chat_history=history,
        reward=0.0,
        screenshot_store=store,
    )
    assert session_id is not None
    assert history[2]["role"] == "user"  # the caller's history is not touched
    assert history[2]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")

    transcript = (await afleet.api.sessions.get_session_transcript(session_id)).transcript
    tools = [m for m in transcript if m.role == "tool"]
    assert len(tools) == 3
    assert [m.tool_call_id for m in tools] == ["call_001", "call_002", "call_003"]
    assert not [m for m in transcript if m.role == "user" and isinstance(m.content, list)]
    fetched: dict[str, bytes] = {}
    async with httpx.AsyncClient(trust_env=False) as http:
        for message in tools:
            assert isinstance(message.content, list) and len(message.content) == 1  # footer dropped
            block = message.content[0]
            assert block.type == "image_url"
            url = block.image_url.url
            assert url.startswith(f"{server.s3_url}/{BUCKET}/harness/screenshot/")
            response = await http.get(url)  # no credentials: public-read
            assert response.status_code == 200, response.text
            name = url.rsplit("/", 1)[-1]
            digest, ext = name.split(".")
            assert hashlib.sha256(response.content).hexdigest()[:24] == digest
            fetched[ext] = response.content
    assert fetched == {"png": png, "jpeg": jpeg}
    assert store.uploads == 2  # the repeated PNG went up once


async def test_64_turns_with_8_distinct_screenshots_upload_exactly_8_objects(
    afleet: AsyncFleet, server: LocalFleet
) -> None:
    """Seed 6dc3fd1: "Dedup is content-addressed ... re-uploads short-circuit on head_object"."""
    distinct = [unique_png(f"shot{i}") for i in range(8)]
    history = episode_history([(distinct[turn % 8], "image/png") for turn in range(64)])
    store = store_for(server)
    puts: list[str] = []
    client = store._s3()
    original_put = client.put_object

    def counting_put(**params: Any) -> Any:
        puts.append(params["Key"])
        return original_put(**params)

    client.put_object = counting_put
    before = screenshot_keys(server)
    job_id = await afleet.traces.create_job("e2e 64 turns")
    session_id = await afleet.traces.upload_session(
        job_id=job_id, task_key="t64", model="m", chat_history=history, reward=1.0, screenshot_store=store
    )
    assert session_id is not None
    new_keys = screenshot_keys(server) - before
    assert len(new_keys) == 8
    assert sorted(puts) == sorted(new_keys)
    assert store.uploads == 8

    transcript = (await afleet.api.sessions.get_session_transcript(session_id)).transcript
    urls = [
        m.content[0].image_url.url for m in transcript if m.role == "tool" and isinstance(m.content, list)
    ]
    assert len(urls) == 64 and len(set(urls)) == 8

    # A second upload (same store: cache) and a fresh store (head_object) put nothing new.
    again = await afleet.traces.upload_session(
        job_id=job_id, task_key="t64", model="m", chat_history=history, reward=1.0, screenshot_store=store
    )
    fresh = store_for(server)
    third = await afleet.traces.upload_session(
        job_id=job_id, task_key="t64", model="m", chat_history=history, reward=1.0, screenshot_store=fresh
    )
    assert again and third
    assert len(puts) == 8 and fresh.uploads == 0 and fresh.existing == 8
    assert screenshot_keys(server) - before == new_keys


async def test_unreachable_s3_keeps_data_urls_and_still_ingests(
    afleet: AsyncFleet, server: LocalFleet
) -> None:
    """Seed 6dc3fd1: "S3 upload failures degrade gracefully — the block is left alone, the
    session ingest still proceeds"."""
    store = ScreenshotStore(
        endpoint_url="http://127.0.0.1:9",  # discard port: nothing listens
        addressing_style="path",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        connect_timeout=1,
        read_timeout=1,
    )
    shot = unique_png("down")
    job_id = await afleet.traces.create_job("e2e s3 down")
    session_id = await afleet.traces.upload_session(
        job_id=job_id,
        task_key="t",
        model="m",
        chat_history=episode_history([(shot, "image/png")]),
        reward=None,
        screenshot_store=store,
    )
    assert session_id is not None
    transcript = (await afleet.api.sessions.get_session_transcript(session_id)).transcript
    (tool,) = [m for m in transcript if m.role == "tool"]
    assert isinstance(tool.content, list)
    assert tool.content[0].image_url.url == data_url(shot)


def test_sync_twin_creates_job_and_uploads(fleet: Fleet, server: LocalFleet) -> None:
    shot = unique_png("sync")
    fleet.traces.screenshot_store = store_for(server)
    job_id = fleet.traces.create_job("e2e sync")
    session_id = fleet.traces.upload_session(
        job_id=job_id,
        task_key="sync-task",
        model="m",
        chat_history=episode_history([(shot, "image/png")]),
        reward=1.0,
        verifier_execution_id="vex-sync",
    )
    assert session_id is not None
    sessions = fleet.api.sessions.get_job_sessions(job_id)
    (summary,) = [s for t in sessions.tasks for s in t.sessions]
    assert summary.session_id == session_id
    assert summary.verifier_execution is not None
    assert summary.verifier_execution.execution_id == "vex-sync"
    assert summary.verifier_execution.score == 1.0


def reference_actions(task: Task) -> list[dict[str, Any]]:
    return [{"tool": s["tool"], "params": s.get("params") or {}} for s in task.metadata["reference_solution"]]


async def test_task_env_uploads_each_finished_episode_with_reward_and_verifier_id(
    afleet: AsyncFleet, server: LocalFleet, bundled_tasks: list[Task]
) -> None:
    """The episode's verifier ``execution_id`` reaches the uploaded session: the dashboard's
    pass rate only counts sessions that carry it (docs/wire.md#traces)."""
    task = bundled_tasks[0]
    job_id = await afleet.traces.create_job("e2e task env")
    async with TaskEnv(
        task,
        fleet=afleet,
        max_steps=40,
        trace_job_id=job_id,
        trace_model="local/scripted",
        screenshot_store=store_for(server),
    ) as env:
        await env.reset_async()
        for action in reference_actions(task):
            _, _, done, _ = await env.step_async(action)
            if done:
                break
        if not env.done:
            await env.step_async({"done": True})
        assert env.final_reward == 1.0
        assert env.verifier_execution_id
        assert env.trace_session_id is not None
        first_session, first_execution = env.trace_session_id, env.verifier_execution_id

        # A second episode on the same env: empty, scores 0.0, uploads its own session.
        await env.reset_async()
        await env.step_async({"done": True})
        assert env.final_reward == 0.0
        assert env.trace_session_id not in (None, first_session)
        assert env.chat_history == [{"role": "user", "content": task.prompt}]

    sessions = await afleet.api.sessions.get_job_sessions(job_id)
    assert sessions.total_sessions == 2
    (group,) = sessions.tasks
    by_id = {s.session_id: s for s in group.sessions}
    first = by_id[first_session]
    assert first.verifier_execution is not None
    assert first.verifier_execution.execution_id == first_execution
    assert first.verifier_execution.score == 1.0
    assert first.model == "scripted"  # reported bare
    assert group.passed_sessions == 1

    transcript = (await afleet.api.sessions.get_session_transcript(first_session)).transcript
    assert transcript[0].role == "user" and transcript[0].content == task.prompt
    calls = [m for m in transcript if m.role == "assistant"]
    results = [m for m in transcript if m.role == "tool"]
    assert len(calls) == len(results) == len(reference_actions(task))
    for call, result in zip(calls, results, strict=True):
        assert call.tool_calls and result.tool_call_id == call.tool_calls[0].id


async def test_abandoned_episode_is_uploaded_on_close(
    afleet: AsyncFleet, server: LocalFleet, bundled_tasks: list[Task]
) -> None:
    task = bundled_tasks[0]
    job_id = await afleet.traces.create_job("e2e abandoned")
    env = TaskEnv(task, fleet=afleet, trace_job_id=job_id, trace_model="m")
    await env.reset_async()
    await env.step_async(reference_actions(task)[0])
    await env.close_async()
    assert env.done_reason == "closed"
    assert env.trace_session_id is not None
    sessions = await afleet.api.sessions.get_job_sessions(job_id)
    (summary,) = [s for t in sessions.tasks for s in t.sessions]
    assert summary.verifier_execution is not None
    assert summary.verifier_execution.execution_id == env.verifier_execution_id


@pytest.mark.parametrize("status", [500, 422])
async def test_failed_ingest_never_fails_the_episode(
    faulty_afleet: AsyncFleet, faulty_server: LocalFleet, bundled_tasks: list[Task], status: int
) -> None:
    """docs/wire.md#traces: "Upload never fails a rollout"."""
    task = bundled_tasks[0]
    job_id = await faulty_afleet.traces.create_job("e2e failing ingest")
    faulty_server.inject_fault("/v1/sessions/ingest", status=status, count=1, method="POST")
    async with TaskEnv(task, fleet=faulty_afleet, max_steps=40, trace_job_id=job_id, trace_model="m") as env:
        await env.reset_async()
        for action in reference_actions(task):
            _, _, done, _ = await env.step_async(action)
            if done:
                break
        if not env.done:
            _, reward, done, _ = await env.step_async({"done": True})
            assert done and reward == 1.0
        assert env.final_reward == 1.0
        assert env.trace_session_id is None
