"""Evaluation jobs on the local server: task selection, policies, sessions, transcripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _fake_model import ModelHandler, serve_model, tool_call_reply
from _jobs_wait import wait_for_job_async

from fleet_local import LocalFleet
from fleet_sdk._exceptions import (
    BadRequestError,
    ConflictError,
    EnvNotFoundError,
    NotFoundError,
    UnprocessableEntityError,
)
from fleet_sdk.evaluation import PROVIDER_MODEL
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels

ENV_KEY = "orderdesk"
TERMINAL_SESSION = {"completed", "timed_out", "errored", "failed"}


def score(session: smodels.SessionInfo) -> float:
    """The score of a graded session (docs/wire.md#jobs)."""
    execution = session.verifier_execution
    assert execution is not None, f"session {session.session_id} has no verifier execution"
    if execution.score is not None:
        return execution.score
    return 1.0 if execution.success else 0.0


def env_task_keys(local: LocalFleet) -> list[str]:
    """Keys of the environment's bundled tasks (other tests may import tasks into it too)."""
    with local.fleet() as fleet:
        tasks = fleet.api.control_plane.list_tasks(env_key=ENV_KEY).tasks
    # browser_use tasks each hold a Chromium: their jobs are tests/local/test_jobs_browser.py's
    return [
        t.task_key
        for t in tasks
        if (t.metadata or {}).get("reference_solution") and (t.task_modality or "tool_use") == "tool_use"
    ]


def other_task_keys(local: LocalFleet) -> list[str]:
    """Keys of the environment's tasks ``env_task_keys`` leaves out: imported by other tests (no
    reference solution) or browser_use (played in tests/local/test_jobs_browser.py)."""
    keep = set(env_task_keys(local))
    with local.fleet() as fleet:
        tasks = fleet.api.control_plane.list_tasks(env_key=ENV_KEY).tasks
    return [t.task_key for t in tasks if t.task_key not in keep]


async def test_scripted_policy_solves_every_task_of_an_environment(local: LocalFleet) -> None:
    task_keys = env_task_keys(local)
    assert task_keys
    async with local.async_fleet() as fleet:
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(
                models=["local/scripted"],
                env_key=ENV_KEY,
                excluded_task_keys=other_task_keys(local) or None,
                name="scripted-eval",
            )
        )
        assert created.status in {"pending", "running"}
        assert created.name == "scripted-eval"
        job = await wait_for_job_async(fleet, created.job_id)
        assert job.status == "completed"
        assert job.error is None
        assert job.models == ["local/scripted"]
        assert sorted(job.task_keys or []) == sorted(task_keys)
        listed = await fleet.api.control_plane.list_jobs()
        assert created.job_id in {j.id for j in listed.jobs}

        results = await fleet.api.sessions.get_job_sessions(created.job_id)
        assert results.total_sessions == len(task_keys)
        assert sorted(t.task_id for t in results.tasks) == sorted(task_keys)
        for task in results.tasks:
            assert task.total_sessions == task.passed_sessions == 1
            assert task.pass_rate == 1.0 and task.average_score == 1.0
            (session,) = task.sessions
            assert session.status == "completed"
            assert session.model == "scripted"  # bare, although the job said local/scripted
            assert session.step_count >= 1
            assert session.started_at is not None and session.ended_at is not None
            assert session.verifier_execution is not None and session.verifier_execution.execution_id
            assert score(session) == 1.0

        # One transcript, in OpenAI chat shape.
        first = results.tasks[0].sessions[0]
        transcript = await fleet.api.sessions.get_session_transcript(first.session_id)
        assert transcript.task is not None and transcript.task.task_key == results.tasks[0].task_id
        assert transcript.instance is not None and transcript.instance.env_key == ENV_KEY
        assert transcript.verifier_execution is not None and transcript.verifier_execution.success
        roles = [m.role for m in transcript.transcript]
        assert roles[:2] == ["system", "user"]
        assert transcript.transcript[1].content == transcript.task.prompt
        calls = {c.id: c for m in transcript.transcript if m.role == "assistant" for c in m.tool_calls or []}
        answers = [m for m in transcript.transcript if m.role == "tool"]
        assert calls and len(answers) == len(calls)
        assert {m.tool_call_id for m in answers} == set(calls)
        assert all(isinstance(json.loads(c.function.arguments), dict) for c in calls.values())
        assert (
            sum(1 for m in transcript.transcript if m.role == "assistant" and m.tool_calls)
            == first.step_count
        )


async def test_random_policy_with_pass_k_gives_k_graded_sessions_per_task(local: LocalFleet) -> None:
    keys = env_task_keys(local)[:2]
    async with local.async_fleet() as fleet:
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(
                models=["local/random"], task_keys=keys, pass_k=2, max_concurrent_per_model=2
            )
        )
        job = await wait_for_job_async(fleet, created.job_id)
        assert job.status == "completed"
        results = await fleet.api.sessions.get_job_sessions(created.job_id)
        assert results.total_sessions == 4
        assert sorted(t.task_id for t in results.tasks) == sorted(keys)
        for task in results.tasks:
            assert task.total_sessions == 2
            assert len({s.session_id for s in task.sessions}) == 2
            for session in task.sessions:
                assert session.status == "completed"
                assert session.model == "random"
                assert 0.0 <= score(session) <= 1.0
            assert task.average_score is not None
            assert task.passed_sessions == sum(1 for s in task.sessions if score(s) >= 1.0)


async def test_models_without_an_endpoint_error_clearly_and_report_bare_names(local: LocalFleet) -> None:
    keys = env_task_keys(local)
    async with local.async_fleet() as fleet:
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(
                models=["anthropic/claude-sonnet-4.5"],
                env_key=ENV_KEY,
                excluded_task_keys=keys[1:] + other_task_keys(local),
            )
        )
        job = await wait_for_job_async(fleet, created.job_id)
        assert job.status == "errored"  # every session errored: nothing was graded
        assert job.error == "every session errored"
        results = await fleet.api.sessions.get_job_sessions(created.job_id)
        ((session,),) = [t.sessions for t in results.tasks]
        assert results.tasks[0].task_id == keys[0]
        assert session.model == "claude-sonnet-4.5"
        assert session.status == "errored"
        assert session.error  # why it errored (no model endpoint), not just the status
        assert session.verifier_execution is None  # an error, never a 0
        assert results.tasks[0].average_score is None


async def test_job_requests_are_validated(local: LocalFleet) -> None:
    async with local.async_fleet() as fleet:
        jobs = fleet.api.control_plane
        with pytest.raises(NotFoundError, match="no-such-task"):
            await jobs.create_job(
                models.JobCreateRequest(models=["local/scripted"], task_keys=["no-such-task"])
            )
        with pytest.raises(EnvNotFoundError):
            await jobs.create_job(models.JobCreateRequest(models=["local/scripted"], env_key="no-such-env"))
        # Schema-valid bodies the server cannot carry out are 400s; 422 is for schema violations.
        with pytest.raises(BadRequestError, match="no task selected") as unselected:
            await jobs.create_job(models.JobCreateRequest(models=["local/scripted"]))
        assert unselected.value.code == "bad_request"
        keys = [t.task_key for t in (await jobs.list_tasks(env_key=ENV_KEY)).tasks]
        bundled = env_task_keys(local)
        with pytest.raises(BadRequestError, match="leave no task"):
            await jobs.create_job(
                models.JobCreateRequest(models=["local/scripted"], env_key=ENV_KEY, excluded_task_keys=keys)
            )
        with pytest.raises(NotFoundError):
            await jobs.get_job("job_missing")
        # Regression: a bare model id was accepted and the job errored after running every session.
        # The SDK checks the same pattern before it creates a job (evaluate_job, fleet-sdk eval --jobs).
        schema = yaml.safe_load((Path(__file__).parents[2] / "schemas" / "env-instance.yaml").read_text())
        request = schema["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert request["properties"]["models"]["items"]["pattern"] == PROVIDER_MODEL.pattern
        for bad, why in (("gpt-4o", "does not match"), ("local/scripted-v2", "not a local policy")):
            with pytest.raises(UnprocessableEntityError) as refused:
                await jobs.create_job(
                    models.JobCreateRequest(models=["local/scripted", bad], task_keys=bundled[:1])
                )
            (issue,) = refused.value.body["detail"]
            assert issue["loc"] == ["body", "models", 1] and why in issue["msg"]

        # The same Idempotency-Key replays the first job; another body with it is a conflict.
        body = models.JobCreateRequest(models=["local/scripted"], task_keys=bundled[:1])
        first = await jobs.create_job(body, idempotency_key="job-key-1")
        again = await jobs.create_job(body, idempotency_key="job-key-1")
        assert again.job_id == first.job_id
        with pytest.raises(ConflictError):
            await jobs.create_job(body.model_copy(update={"pass_k": 2}), idempotency_key="job-key-1")
        assert (await wait_for_job_async(fleet, first.job_id)).status == "completed"
        assert (await fleet.api.sessions.get_job_sessions(first.job_id)).total_sessions == 1


# ---------------------------------------------------------------- a chat-completions model


class _FakeModel(ModelHandler):
    """Lists pending orders, then answers with their count."""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        if not tool_results:
            return 200, tool_call_reply("call_0", "list_orders", {"status": "pending"})
        pending = json.loads(tool_results[-1]["content"])
        count = len(pending["orders"]) if isinstance(pending, dict) and "orders" in pending else 0
        return 200, tool_call_reply(
            f"call_{len(tool_results)}", "submit_final_answer", {"answer": str(count)}
        )


@pytest.fixture
def fake_model() -> Iterator[str]:
    """Base URL of a fake OpenAI-compatible model endpoint on loopback."""
    with serve_model(_FakeModel) as url:
        yield url


async def test_chat_completions_policy_drives_the_tools(fake_model: str) -> None:
    async with LocalFleet(s3=False, model_base_url=fake_model) as local, local.async_fleet() as fleet:
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(
                models=["openai/fake-model"], task_keys=["orderdesk-count-pending-orders"]
            )
        )
        job = await wait_for_job_async(fleet, created.job_id)
        assert job.status == "completed"
        results = await fleet.api.sessions.get_job_sessions(created.job_id)
        (session,) = results.tasks[0].sessions
        assert session.model == "fake-model"
        assert session.status == "completed" and session.step_count == 2
        assert score(session) == 1.0
        transcript = await fleet.api.sessions.get_session_transcript(session.session_id)
        names = [c.function.name for m in transcript.transcript for c in m.tool_calls or []]
        assert names == ["list_orders", "submit_final_answer"]

    first = _FakeModel.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["body"]["model"] == "openai/fake-model"
    tools = {t["function"]["name"]: t for t in first["body"]["tools"]}
    assert tools["list_orders"]["type"] == "function"
    assert tools["list_orders"]["function"]["parameters"]["type"] == "object"
    assert "submit_final_answer" in tools  # the prompt mentions it
    assert [m["role"] for m in first["body"]["messages"]] == ["system", "user"]


async def test_a_job_mode_overrides_each_task_modality(local: LocalFleet) -> None:
    # mode=tool_use plays a browser_use task with the instance's tools and no browser: its
    # reference solution's computer actions are tools TaskEnv does not offer there (it answers
    # each with an error and runs nothing), so it is graded 0.
    key = "orderdesk-browser-ship-order"
    async with local.async_fleet() as fleet:
        (task,) = (await fleet.api.control_plane.list_tasks(task_keys=[key])).tasks
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(models=["local/scripted"], task_keys=[key], mode="tool_use")
        )
        job = await wait_for_job_async(fleet, created.job_id)
        assert job.status == "completed" and job.mode == "tool_use"
        (group,) = (await fleet.api.sessions.get_job_sessions(created.job_id)).tasks
        (session,) = group.sessions
        assert session.status == "completed" and score(session) == 0.0
        assert session.step_count == len((task.metadata or {})["reference_solution"])
        transcript = await fleet.api.sessions.get_session_transcript(session.session_id)
        answers = [m.content for m in transcript.transcript if m.role == "tool"]
        assert len(answers) == session.step_count
        assert all("tool 'computer' not found" in str(a) for a in answers)
