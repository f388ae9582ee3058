"""TaskEnv's recording part (``fleet_sdk/task_env/_recording.py``): each turn goes into the
episode's history as the model saw it, tool errors are kept, and the finished episode is
uploaded as one trace session, once, without ever failing the episode.

The orchestrator is an ``httpx.MockTransport`` that pins the ingest body
(``POST /v1/sessions/ingest``); ``tests/e2e/test_trace_upload.py`` uploads to the local server."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from fleet_sdk import AsyncFleet
from fleet_sdk.actions import Action, ToolCall
from fleet_sdk.context import ContextManager
from fleet_sdk.task_env._recording import Recorder
from fleet_sdk.traces import AsyncTraces, ScreenshotSink

API_KEY = "sk-test-recording-0000"
INGEST_PATH = "/v1/sessions/ingest"


class Orchestrator:
    """Stores every ingested session and answers with a session id (or fails with ``status``)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or request.url.path != INGEST_PATH:
            return httpx.Response(404, json={"detail": f"unexpected {request.method} {request.url}"})
        self.bodies.append(json.loads(request.content))
        if self.status != 200:
            return httpx.Response(self.status, json={"detail": "ingest is down"})
        return httpx.Response(
            200,
            json={"success": True, "session_id": "sess-9", "message_count": 4, "created_new_session": True},
        )


def fleet_on(orchestrator: Orchestrator) -> AsyncFleet:
    return AsyncFleet(
        API_KEY, http_client=httpx.AsyncClient(transport=httpx.MockTransport(orchestrator)), environ={}
    )


class Instance:
    instance_id = "inst-recording"


def errored_step(recorder: Recorder) -> list[Any]:
    """One episode's first step: two calls, the first of which failed; what the model was shown."""
    recorder.start()
    recorder.record_user("Find order 7.")
    calls = [
        ToolCall("get_order", {"order_id": -1}, "call_a"),
        ToolCall("search_orders", {}, "call_b", error="arguments are not a JSON object", written="{oops"),
        ToolCall("list_orders", {"limit": 1}, "call_c"),
    ]
    recorder.record_calls(Action(tuple(calls), content="Let me look."), calls)
    return [
        recorder.record_result(calls[0], {"error": "order -1 not found"}, {"error": "order -1 not found"}),
        recorder.record_result(calls[1], {"error": calls[1].error}, {"error": calls[1].error}),
        recorder.record_result(calls[2], [{"id": 7}], [{"id": 7}]),
    ]


async def upload(recorder: Recorder, fleet: AsyncFleet, reward: float | None) -> None:
    await recorder.upload(
        lambda: (fleet.traces, None),
        job_id="job-3",
        model=None,
        task_key="rec-1",
        instance=Instance(),  # type: ignore[arg-type]
        reward=reward,
        done_reason="agent",
        steps=1,
        verifier_error="exception: nope" if reward is None else None,
        verifier_execution_id="exec-5",
    )


def test_an_errored_step_is_recorded_as_the_model_saw_it() -> None:
    recorder = Recorder(ContextManager(offer_tools=False))
    results = errored_step(recorder)
    assert [r["error"] for r in results] == [
        "get_order(): order -1 not found",
        "search_orders(): arguments are not a JSON object",
        None,
    ]
    assert [r["tool_call_id"] for r in results] == ["call_a", "call_b", "call_c"]
    assert recorder.tool_errors == [r["error"] for r in results[:2]]
    history = recorder.context.history
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "tool"]
    assert history[1]["content"] == "Let me look."
    assert [c["function"]["arguments"] for c in history[1]["tool_calls"]] == [
        '{"order_id": -1}',
        "{oops",
        '{"limit": 1}',
    ]
    assert [m["tool_call_id"] for m in history[2:]] == ["call_a", "call_b", "call_c"]
    assert "order -1 not found" in json.dumps(history[2]["content"])


def test_a_long_result_is_cut_for_the_model_and_kept_whole() -> None:
    recorder = Recorder(ContextManager(max_output_chars=800, offer_tools=False))
    recorder.start()
    call = ToolCall("export_ledger", {}, "call_x")
    recorder.record_calls(Action((call,)), [call])
    result = recorder.record_result(call, "x" * 5000, "x" * 5000)
    assert result["truncated"] and result["error"] is None
    assert len(json.dumps(result["content"])) < 5000
    assert recorder.context.outputs[0].text == "x" * 5000


def test_an_action_without_calls_records_only_its_words() -> None:
    recorder = Recorder(ContextManager(offer_tools=False))
    recorder.record_calls(Action((), done=True), [])
    assert recorder.context.history == []
    recorder.record_calls(Action((), done=True, content="All done."), [])
    assert recorder.context.history == [{"role": "assistant", "content": "All done."}]


async def test_the_errored_episode_is_uploaded_once_with_its_errors() -> None:
    orchestrator = Orchestrator()
    recorder = Recorder(ContextManager(offer_tools=False))
    errored_step(recorder)
    async with fleet_on(orchestrator) as fleet:
        await upload(recorder, fleet, None)
        await upload(recorder, fleet, 1.0)  # already uploaded: nothing is sent
    assert recorder.session_id == "sess-9"
    [body] = orchestrator.bodies
    assert (
        body["status"] == "errored" and body["model"] == "unknown" and body["instance_id"] == "inst-recording"
    )
    assert body["verifier_execution_id"] == "exec-5" and body["job_id"] == "job-3"
    assert body["metadata"] == {
        "done_reason": "agent",
        "steps": 1,
        "verifier_error": "exception: nope",
        "tool_errors": [
            "get_order(): order -1 not found",
            "search_orders(): arguments are not a JSON object",
        ],
        "score": None,
    }
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "tool"]
    assert body["started_at"] <= body["ended_at"]


async def test_a_graded_episode_is_uploaded_as_completed() -> None:
    orchestrator = Orchestrator()
    recorder = Recorder(ContextManager(offer_tools=False))
    errored_step(recorder)
    async with fleet_on(orchestrator) as fleet:
        await upload(recorder, fleet, 1.0)
    [body] = orchestrator.bodies
    assert body["status"] == "completed" and body["metadata"]["score"] == 1.0


async def test_a_failed_upload_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    orchestrator = Orchestrator(status=422)
    recorder = Recorder(ContextManager(offer_tools=False))
    errored_step(recorder)
    async with fleet_on(orchestrator) as fleet:
        await upload(recorder, fleet, 1.0)
    assert recorder.session_id is None and len(orchestrator.bodies) == 1
    assert any("rec-1" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)


async def test_a_client_that_cannot_be_made_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fleet_sdk.task_env")

    def nowhere() -> tuple[AsyncTraces, ScreenshotSink | None]:
        raise RuntimeError("no API key")

    recorder = Recorder(ContextManager(offer_tools=False))
    await recorder.upload(
        nowhere,
        job_id="job-3",
        model="m",
        task_key="rec-2",
        instance=None,
        reward=None,
        done_reason="closed",
        steps=0,
        verifier_error=None,
        verifier_execution_id=None,
    )
    assert recorder.session_id is None
    [record] = [r for r in caplog.records if r.name == "fleet_sdk.task_env"]
    assert record.getMessage() == "task rec-2: trace upload failed: RuntimeError"
