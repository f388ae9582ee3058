"""Session ingest and read-back on the local server (a trace job's sessions)."""

from __future__ import annotations

import datetime as dt

import pytest

from fleet_local import LocalFleet
from fleet_sdk._exceptions import NotFoundError, UnprocessableEntityError
from fleet_sdk.types import sessions_ingest as smodels
from fleet_sdk.types import traces_jobs as tmodels

TASK_KEY = "orderdesk-count-pending-orders"


def chat(*messages: dict[str, object]) -> list[smodels.SessionIngestMessage]:
    return [smodels.SessionIngestMessage.model_validate(m) for m in messages]


async def test_ingest_then_append_then_read_back(local: LocalFleet) -> None:
    async with local.async_fleet() as fleet:
        trace_job = await fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="ingest-test"))
        first = smodels.SessionIngestRequest(
            messages=chat(
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": "How many orders are pending?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "list_orders", "arguments": '{"status": "pending"}'},
                        }
                    ],
                },
            ),
            job_id=trace_job.job_id,
            task_key=TASK_KEY,
            model="anthropic/claude-sonnet-4.5",
            status="running",
            metadata=smodels.SessionMetadata(score=None),
        )
        created = await fleet.api.sessions.ingest_session(first)
        assert created.success and created.created_new_session
        assert created.message_count == 3

        rest = smodels.SessionIngestRequest(
            messages=chat(
                {"role": "tool", "tool_call_id": "call_1", "content": '{"orders": []}'},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Screenshot:"},
                        {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
                    ],
                },
            ),
            session_id=created.session_id,
            job_id=trace_job.job_id,
            task_key=TASK_KEY,
            model="anthropic/claude-sonnet-4.5",
            status="completed",
            metadata=smodels.SessionMetadata.model_validate({"score": 0.5, "turns": 2}),
            verifier_execution_id="vexec_remote_1",
        )
        appended = await fleet.api.sessions.ingest_session(rest)
        assert appended.success and not appended.created_new_session
        assert appended.session_id == created.session_id
        assert appended.message_count == 5  # grows: the session's total

        transcript = await fleet.api.sessions.get_session_transcript(created.session_id)
        assert [m.role for m in transcript.transcript] == ["system", "user", "assistant", "tool", "user"]
        call = transcript.transcript[2].tool_calls
        assert call is not None and call[0].function.name == "list_orders"
        assert transcript.transcript[3].tool_call_id == "call_1"
        blocks = transcript.transcript[4].content
        assert isinstance(blocks, list) and blocks[1].type == "image_url"
        assert transcript.task is not None and transcript.task.task_key == TASK_KEY
        assert transcript.verifier_execution is not None
        assert transcript.verifier_execution.execution_id == "vexec_remote_1"
        assert transcript.verifier_execution.score == 0.5

        results = await fleet.api.sessions.get_job_sessions(trace_job.job_id)
        assert results.job_id == trace_job.job_id and results.total_sessions == 1
        (task,) = results.tasks
        assert task.task_id == TASK_KEY and task.total_sessions == 1
        assert task.passed_sessions == 0 and task.average_score == 0.5
        (session,) = task.sessions
        assert session.model == "claude-sonnet-4.5"
        assert session.status == "completed"
        assert session.error is None
        assert session.step_count == 1


async def test_ungraded_and_passing_sessions_are_told_apart(local: LocalFleet) -> None:
    async with local.async_fleet() as fleet:
        job_id = (await fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="grading"))).job_id

        async def ingest(score: float | None, execution_id: str | None, session_id: str | None = None) -> str:
            # session_id is not nullable: leave it out rather than send null (that is a 422).
            chosen = {"session_id": session_id} if session_id is not None else {}
            body = smodels.SessionIngestRequest(
                messages=chat({"role": "user", "content": "hi"}),
                **chosen,
                job_id=job_id,
                task_key=TASK_KEY,
                model="local-model",
                metadata=smodels.SessionMetadata(score=score),
                verifier_execution_id=execution_id,
            )
            return (await fleet.api.sessions.ingest_session(body)).session_id

        passed = await ingest(1.0, "vexec_a")
        ungraded = await ingest(0.0, None)  # no verifier execution: not graded, never a 0
        chosen = await ingest(None, "vexec_b", session_id="sess_client_chosen")  # unknown id: created
        assert chosen == "sess_client_chosen"
        results = await fleet.api.sessions.get_job_sessions(job_id)
        (task,) = results.tasks
        assert task.total_sessions == 3 and task.passed_sessions == 1
        by_id = {s.session_id: s for s in task.sessions}
        assert by_id[passed].verifier_execution is not None
        assert by_id[ungraded].verifier_execution is None
        assert by_id[chosen].verifier_execution is not None
        assert by_id[chosen].verifier_execution.score is None
        assert by_id[chosen].verifier_execution.success is False
        # Only the passing session is graded: an execution that did not succeed and has no score
        # is unknown (reward None, see fleet_sdk.rewards), like the session without one; a 0.0
        # for either would pull the average down.
        assert task.average_score == pytest.approx(1.0)


async def test_unknown_ids_and_bad_bodies(local: LocalFleet) -> None:
    async with local.async_fleet() as fleet:
        with pytest.raises(NotFoundError):
            await fleet.api.sessions.get_session_transcript("sess_missing")
        with pytest.raises(NotFoundError):
            await fleet.api.sessions.get_job_sessions("job_missing")
        body = smodels.SessionIngestRequest.model_construct(
            messages=[],
            job_id="j",
            task_key=TASK_KEY,
            model="m",
            metadata=smodels.SessionMetadata(score=None),
        )
        with pytest.raises(UnprocessableEntityError):
            await fleet.api.sessions.ingest_session(body)


async def test_timestamps_without_a_zone_are_read_as_utc(local: LocalFleet) -> None:
    """Regression: ``complete_session`` of the public SDK sends ``datetime.now().isoformat()`` (no
    zone); the server answered 422, so every such session stayed ``running``."""
    async with local.async_fleet() as fleet:
        job_id = (await fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="zones"))).job_id
        opened = await fleet.api.sessions.ingest_session(
            messages=chat({"role": "user", "content": "hi"}),
            job_id=job_id,
            task_key=TASK_KEY,
            model="m",
            status="running",
            started_at=dt.datetime(2024, 1, 31, 12, 0, 0),  # naive: sent without a zone
        )
        closed = await fleet.api.sessions.ingest_session(
            messages=chat({"role": "system", "content": "[session completed]"}),
            session_id=opened.session_id,
            status="completed",
            ended_at=dt.datetime(2024, 1, 31, 12, 5, 0, 250000),
        )
        assert closed.session_id == opened.session_id and not closed.created_new_session
        (session,) = (await fleet.api.sessions.get_job_sessions(job_id)).tasks[0].sessions
    assert session.status == "completed"
    assert session.started_at == dt.datetime(2024, 1, 31, 12, 0, 0, tzinfo=dt.UTC)
    assert session.ended_at == dt.datetime(2024, 1, 31, 12, 5, 0, 250000, tzinfo=dt.UTC)
