"""The local server, driven only over HTTP with the generated clients, end to end:
instances, the manager API, real MCP, verifiers, session ingest and harness jobs."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from _jobs_wait import wait_for_job
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fleet_sdk import Fleet, PermissionDeniedError
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier


def verifier_request(code: str, instance_id: str) -> models.VerifiersExecuteRequest:
    return models.VerifiersExecuteRequest(
        key="acceptance",
        sha256=bundle_sha256(code),
        args=models.VerifierArgs(instance_id=instance_id),
        function_name="verify",
        timeout=10,
        bundle=base64.b64encode(bundle_verifier(code)).decode(),
    )


async def mcp_session_calls(url: str, event_id: int) -> tuple[list[str], str, str]:
    # mcp 1.x yields (read, write, get_session_id), 2.x (read, write); results compare in wire form.
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        tools = [t.name for t in (await session.list_tools()).tools]
        read_result = (await session.call_tool("get_event", {"event_id": event_id})).model_dump(by_alias=True)
        write_result = (
            await session.call_tool("update_event", {"event_id": event_id, "title": "Renamed by MCP"})
        ).model_dump(by_alias=True)
        assert not read_result["isError"] and not write_result["isError"]
        return tools, read_result["content"][0]["text"], write_result["content"][0]["text"]


def test_the_local_server_over_http_only(fleet: Fleet) -> None:
    api = fleet.api.control_plane
    instance = api.create_instance(models.InstanceRequest(env_key="calendar", env_version="1.0.0"))
    assert instance.status == "running" and instance.version == "v1.0.0"
    manager = fleet.api.manager(instance.urls.manager.api)
    try:
        assert manager.reset_instance(models.ResetRequest()).success
        tables = {t.name for t in manager.describe_database("current").tables}
        assert "events" in tables
        count = manager.query_database("current", models.QueryRequest(query="SELECT count(*) FROM events"))
        assert count.success and count.rows[0][0] > 0
        with pytest.raises(PermissionDeniedError) as refused:
            manager.query_database("current", models.QueryRequest(query="DELETE FROM events", read_only=True))
        assert refused.value.code == "read_only"
        event_id = manager.query_database(
            "current", models.QueryRequest(query="SELECT min(id) FROM events")
        ).rows[0][0]

        tools, read_text, _ = asyncio.run(mcp_session_calls(f"{instance.urls.root}mcp", event_id))
        assert {"get_event", "update_event", "list_events"} <= set(tools)
        assert json.loads(read_text)["id"] == event_id
        title = manager.query_database(
            "current", models.QueryRequest(query="SELECT title FROM events WHERE id = ?", args=[event_id])
        )
        assert title.rows == [["Renamed by MCP"]]

        passing = (
            "def verify(env):\n    rows = env.db('current').rows('SELECT title FROM events')\n"
            "    return 1 if any(r['title'] == 'Renamed by MCP' for r in rows) else 0\n"
        )
        result = api.execute_verifier(verifier_request(passing, instance.instance_id))
        assert result.success and result.result == 1 and result.execution_id
        failing = "def verify(env):\n    return TASK_FAILED_SCORE\n"
        result = api.execute_verifier(verifier_request(failing, instance.instance_id))
        assert result.success and result.result == 0
    finally:
        api.delete_instance(instance.instance_id)
    assert api.get_instance(instance.instance_id).status == "terminated"

    ingest = fleet.api.sessions.ingest_session(
        smodels.SessionIngestRequest.model_validate(
            {
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                "job_id": "acceptance-job",
                "task_key": "calendar-count-tuesday-meetings",
                "model": "anthropic/claude-sonnet-4.5",
                "metadata": {"score": 0.5},
            }
        )
    )
    transcript = fleet.api.sessions.get_session_transcript(ingest.session_id)
    assert [m.role for m in transcript.transcript] == ["user", "assistant"]

    listed = api.list_tasks(env_key="calendar").tasks
    # Local jobs play tool-use tasks; browser_use ones run through TaskEnv (test_browser_episodes.py).
    task_keys = [t.task_key for t in listed if (t.task_modality or "tool_use") == "tool_use"]
    browser_keys = [t.task_key for t in listed if t.task_key not in task_keys]
    created = api.create_job(
        models.JobCreateRequest(
            models=["local/scripted", "local/random"],
            env_key="calendar",
            excluded_task_keys=browser_keys or None,
            name="acceptance",
        )
    )
    assert wait_for_job(fleet, created.job_id).status == "completed"
    sessions = fleet.api.sessions.get_job_sessions(created.job_id)
    assert sessions.total_sessions == 2 * len(task_keys)
    by_model: dict[str, list[float | None]] = {}
    for task in sessions.tasks:
        for session in task.sessions:
            assert session.verifier_execution is not None, session
            by_model.setdefault(session.model, []).append(session.verifier_execution.score)
    assert set(by_model) == {"scripted", "random"}  # bare model names, as the platform reports them
    assert by_model["scripted"] == [1.0] * len(task_keys)
    assert all(score is not None for score in by_model["random"])
