"""The contract scenarios: one cassette each, recorded by ``contracts.recording``, replayed by
``contracts/test_cassettes.py``.

A scenario drives the SDK the way a user does and checks a little of what comes back, so a
replay proves both sides: the SDK still sends the recorded requests, and still understands the
recorded responses. Everything a scenario sends must be deterministic (ids come from responses,
which are replayed in order); only headers such as ``X-Request-ID`` may vary, and they are not
matched.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import anyio

from contracts.matchers import INSTANCE_HOST_RE, S3_HOST
from fleet_sdk import AsyncFleet
from fleet_sdk.types import browser_lease as bmodels
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels
from fleet_sdk.types import traces_jobs as tmodels

__all__ = ["EPISODE_PNG", "SCENARIOS", "SCREENSHOT_PNG", "ScenarioContext", "screenshot_key"]

ENV_SPEC: Final = "calendar:1.0.0"
JOB_TASK_KEY: Final = "calendar-accept-pending-invites"  # a bundled task the scripted policy solves
TERMINAL_JOB: Final = frozenset({"completed", "errored", "failed", "cancelled"})
S3_BUCKET: Final = "fleet-sessions-images"


@dataclass
class ScenarioContext:
    """What a scenario runs with.

    Attributes:
        fleet: The SDK client, on its production base URLs.
        s3: Builds a boto3 S3 client (the local moto endpoint while recording, production at replay).
        screenshot_store: Builds the SDK's ``ScreenshotStore`` the same way (production defaults
            at replay, only the credentials given).
        poll_interval: Seconds between two polls (0 at replay: the responses come from the cassette).
    """

    fleet: AsyncFleet
    s3: Callable[[], Any]
    screenshot_store: Callable[[], Any]
    poll_interval: float


Scenario = Callable[[ScenarioContext], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(func: Scenario) -> Scenario:
    """Register a scenario under its function name."""
    SCENARIOS[func.__name__] = func
    return func


def _png(width: int = 4, height: int = 3) -> bytes:
    """A small, valid, deterministic PNG (a screenshot stand-in)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    scanlines = b"".join(
        b"\x00" + b"".join(bytes((x * 40 % 256, y * 60 % 256, 200)) for x in range(width))
        for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines, 9))
        + chunk(b"IEND", b"")
    )


SCREENSHOT_PNG: Final = _png()
# Another image for the SDK-driven upload: every scenario shares one bucket while recording, and
# that scenario must find its screenshot missing first.
EPISODE_PNG: Final = _png(6, 4)


def screenshot_key(data: bytes, extension: str = "png") -> str:
    """The object key of docs/wire.md#traces: ``harness/screenshot/<sha256[:24]>.<ext>``."""
    return f"harness/screenshot/{hashlib.sha256(data).hexdigest()[:24]}.{extension}"


def _assert_instance_urls(instance: models.InstanceResponse) -> None:
    assert instance.urls is not None, "a running instance has its URLs"
    host = urlsplit(instance.urls.manager.api).hostname or ""
    assert INSTANCE_HOST_RE.match(host), f"manager API on {host!r}, not an instance host"
    assert instance.urls.manager.api.endswith("/api/v1/env"), instance.urls.manager.api


# ---------------------------------------------------------------- control plane


@scenario
async def instance_lifecycle(ctx: ScenarioContext) -> None:
    """Create an instance (POST /v1/env/instances), get it, list by run_id, heartbeat, delete it."""
    env = await ctx.fleet.make(ENV_SPEC, run_id="contract-run", ttl_seconds=900)
    async with env:
        assert env.instance.version == "v1.0.0" and env.instance.status == "running"
        _assert_instance_urls(env.instance)
        refreshed = await env.refresh()
        assert refreshed.instance_id == env.instance_id
        listed = await ctx.fleet.instances(run_id="contract-run")
        assert [i.instance_id for i in listed] == [env.instance_id]
        beat = await env.heartbeat()
        assert beat.success and beat.instance_id == env.instance_id
    gone = await ctx.fleet.api.control_plane.get_instance(env.instance_id)
    assert gone.status == "terminated"


@scenario
async def instance_reset_and_query(ctx: ScenarioContext) -> None:
    """The manager API of one instance: reset, list resources, describe and query a database."""
    async with await ctx.fleet.make(ENV_SPEC) as env:
        reset = await env.reset(seed=7)
        assert reset.success
        resources = await env.resources()
        assert {r.name for r in resources} >= {"seed", "current"}
        tables = await env.db("seed").describe()
        assert "events" in {t.name for t in tables.tables or []}
        count = await env.db("current").query("SELECT count(*) FROM events WHERE status = ?", ["confirmed"])
        assert count.success and count.rows and count.rows[0][0] >= 0


@scenario
async def verifier_execute(ctx: ScenarioContext) -> None:
    """A remote verifier run (POST /v1/verifiers/execute) against a live instance."""
    from fleet_sdk.remote_verifier import run_remote

    code = (
        "def verify(env, final_answer=None):\n"
        "    rows = env.db('current').rows('SELECT count(*) AS n FROM events')\n"
        "    print('events:', rows[0]['n'])\n"
        "    return TASK_SUCCESSFUL_SCORE if rows[0]['n'] > 0 else TASK_FAILED_SCORE\n"
    )
    async with await ctx.fleet.make(ENV_SPEC) as env:
        outcome = await run_remote(
            ctx.fleet, code, key="contract-verifier", instance_id=env.instance_id, final_answer="42"
        )
        assert outcome.success and outcome.score == 1.0, outcome
        assert outcome.execution_id


@scenario
async def task_import(ctx: ScenarioContext) -> None:
    """Import one task (POST /v1/tasks?project_key=...), read it back, list it by key."""
    api = ctx.fleet.api.control_plane
    key = "contract-count-events"
    task = models.TaskRequest(
        task_key=key,
        prompt="How many events are on the calendar? Call submit_final_answer with the number.",
        env_key="calendar",
        env_version="v1.0.0",
        data_key="calendar",
        data_version="v1.0.0",
        env_variables={"CURRENT_DATE": "2026-11-02", "LOGGED_IN_USER": "maya.chen@northwind.example"},
        verifier_code="def verify(env, final_answer):\n    return 1 if final_answer else 0\n",
        task_modality="tool_use",
        metadata={"tags": ["contract"]},
    )
    stored = await api.import_task(task, project_key="contracts")
    assert stored.task_key == key
    fetched = await api.get_task(key)
    assert fetched.prompt == task.prompt
    listed = await api.list_tasks(project_key="contracts", task_keys=[key])
    assert [t.task_key for t in listed.tasks] == [key]


@scenario
async def job_run(ctx: ScenarioContext) -> None:
    """An evaluation job: create it (POST /v1/jobs), poll it to the end, read its sessions."""
    api = ctx.fleet.api.control_plane
    task_key = JOB_TASK_KEY
    created = await api.create_job(
        models.JobRequest(
            models=["local/scripted"],
            name="contract-job",
            pass_k=1,
            env_key="calendar",
            task_keys=[task_key],
            max_steps=20,
        )
    )
    job = await api.get_job(created.job_id)
    with anyio.fail_after(120):
        while job.status not in TERMINAL_JOB:
            await anyio.sleep(ctx.poll_interval)
            job = await api.get_job(created.job_id)
    assert job.status == "completed", job
    sessions = await ctx.fleet.api.sessions.get_job_sessions(created.job_id)
    assert sessions.total_sessions == 1
    (session,) = sessions.tasks[0].sessions
    assert session.model == "scripted"  # bare model name (docs/wire.md#instances)
    assert session.verifier_execution is not None


# ---------------------------------------------------------------- traces, sessions, S3


@scenario
async def trace_job_create(ctx: ScenarioContext) -> None:
    """A trace job on the platform host (POST /v1/traces/jobs)."""
    job = await ctx.fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="contract-traces"))
    assert job.job_id and job.name == "contract-traces"


def _upload_screenshot(s3: Any, data: bytes) -> tuple[str, bool]:
    """docs/wire.md#traces: HEAD first, PUT only when missing; returns (public URL, uploaded)."""
    from botocore.exceptions import ClientError

    key = screenshot_key(data)
    try:
        s3.head_object(Bucket=S3_BUCKET, Key=key)
        uploaded = False
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
            raise
        s3.put_object(Bucket=S3_BUCKET, Key=key, Body=data, ContentType="image/png")
        uploaded = True
    return f"https://{S3_HOST}/{key}", uploaded


@scenario
async def screenshot_upload_s3(ctx: ScenarioContext) -> None:
    """A screenshot to S3 with boto3: HEAD (404), PUT, then HEAD (200) and no second PUT."""
    s3 = ctx.s3()
    url, uploaded = _upload_screenshot(s3, SCREENSHOT_PNG)
    assert uploaded and url.endswith(".png")
    again, uploaded_again = _upload_screenshot(s3, SCREENSHOT_PNG)
    assert again == url and not uploaded_again


@scenario
async def session_ingest_with_image(ctx: ScenarioContext) -> None:
    """Trace job (platform host), then a session with an image and tool calls ingested on the
    orchestrator (POST /v1/sessions/ingest), read back as a transcript."""
    job = await ctx.fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="contract-ingest"))
    image_url = f"https://{S3_HOST}/{screenshot_key(SCREENSHOT_PNG)}"
    request = smodels.SessionIngestRequest.model_validate(
        {
            "job_id": job.job_id,
            "task_key": "calendar-contract",
            "model": "anthropic/claude-sonnet-4.5",
            "status": "completed",
            "metadata": {"score": 1.0, "harness": "contracts"},
            "started_at": "2026-11-02T09:00:00+00:00",
            "ended_at": "2026-11-02T09:01:30+00:00",
            "messages": [
                {"role": "system", "content": "You operate a calendar app."},
                {"role": "user", "content": "Take a screenshot, then say what you see."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_contract_1",
                            "type": "function",
                            "function": {"name": "computer", "arguments": '{"action": "screenshot"}'},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_contract_1",
                    "content": [
                        {"type": "image_url", "image_url": {"url": image_url}},
                        {"type": "text", "text": "Screenshot taken."},
                    ],
                },
                {"role": "assistant", "content": "A week view of the calendar."},
            ],
        }
    )
    ingested = await ctx.fleet.api.sessions.ingest_session(request)
    assert ingested.success and ingested.created_new_session and ingested.message_count == 5
    transcript = await ctx.fleet.api.sessions.get_session_transcript(ingested.session_id)
    assert [m.role for m in transcript.transcript] == ["system", "user", "assistant", "tool", "assistant"]


# ---------------------------------------------------------------- browser leases


@scenario
async def browser_lease(ctx: ScenarioContext) -> None:
    """A browser lease on the platform host: create, get, its MCP tools, delete."""
    api = ctx.fleet.api.browser
    lease = await api.create_browser_lease(
        bmodels.BrowserLeaseRequest(ttl_seconds=1800, allowed_hosts=["inst-contract.env.fleetai.com"])
    )
    assert lease.status in ("pending", "running"), lease
    fetched = await api.get_browser_lease(lease.lease_id)
    assert fetched.lease_id == lease.lease_id
    tools = await api.get_browser_lease_mcp_tools(lease.lease_id)
    assert tools is not None
    await api.delete_browser_lease(lease.lease_id)


# ---------------------------------------------------------------- the SDK's trace upload


def _episode(image_data_url: str) -> list[dict[str, Any]]:
    """A computer-use episode as a harness keeps it: a screenshot in a user message, turn footers."""
    return [
        {"role": "system", "content": "You operate a calendar app with the computer tool."},
        {"role": "user", "content": "Open the calendar and tell me what is on Monday."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_contract_screenshot",
                    "type": "function",
                    "function": {"name": "computer", "arguments": '{"action": "screenshot"}'},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": image_data_url}},
                {"type": "text", "text": "[Turn 1/8]"},
            ],
        },
        {"role": "assistant", "content": "Monday holds the planning sync."},
    ]


@scenario
async def traces_upload_session(ctx: ScenarioContext) -> None:
    """``fleet.traces``: a trace job (platform host), then two sessions sharing one screenshot:
    HEAD 404 + PUT to S3 and an ingest (orchestrator), then HEAD 200 (no PUT) and an ingest."""
    import base64

    data_url = "data:image/png;base64," + base64.b64encode(EPISODE_PNG).decode()
    traces = ctx.fleet.traces
    job_id = await traces.create_job("contract-traces-upload")
    session_ids = []
    for number, reward in enumerate((1.0, None)):
        store = ctx.screenshot_store()  # a fresh store: its cache is empty, so HEAD decides
        session_id = await traces.upload_session(
            job_id=job_id,
            task_key="calendar-contract-screenshot",
            model="anthropic/claude-sonnet-4.5",
            chat_history=_episode(data_url),
            reward=reward,
            metadata={"episode": number},
            status="completed",
            screenshot_store=store,
        )
        assert session_id, "upload_session returned None (see the log for why)"
        assert (store.uploads, store.existing) == ((1, 0) if number == 0 else (0, 1))
        session_ids.append(session_id)
    assert len(set(session_ids)) == 2
