"""A session the local server stopped mid-play carries a typed flag (``SessionInfo.interrupted``),
and a resumed ``--jobs`` run plays exactly the flagged sessions again, whatever their error says.

The live test runs a real server twice over one data dir (stopped while a session waits on a gated
fake model, then restarted); the wire test pins the production shape, which has no such field.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

import httpx
from _fake_model import reference_model, serve_model
from _waits import wait_until_async

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation import RunDir, RunManifest
from fleet_sdk.evaluation._jobs_run import JOBS_KEY, _Jobs, run_job_evaluation
from fleet_sdk.evaluation._run import ProgressTally
from fleet_sdk.tasks import Task

KEY = "local-interrupted-sessions"


def _stored(run_dir: Path) -> int:
    if not RunDir.exists(run_dir):
        return 0
    with RunDir(run_dir) as store:
        return len(store.finished())


async def _sessions(fleet: AsyncFleet, run_dir: Path) -> list[dict[str, Any]]:
    with RunDir(run_dir) as store:
        jobs = [entry["job_id"] for entry in store.require_manifest().extra[JOBS_KEY]]
    listings = [await fleet.api.sessions.get_job_sessions(job) for job in jobs]
    return [s.model_dump() for listing in listings for t in listing.tasks for s in t.sessions]


async def test_a_session_the_server_stopped_is_flagged_interrupted_and_played_again_on_resume(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: sessions the local server cut short were told apart only by their error text
    (``error.startswith("interrupted:")``), against the rule that errors are chosen by status and
    structured body; the listing now says ``interrupted: true`` and the resume reads only that."""
    tasks = [t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use"][:2]
    handler = reference_model(tasks, ungated=[tasks[0].task_key])
    run_dir, data = tmp_path / "run", tmp_path / "server-data"
    handler.gate.clear()
    try:
        with serve_model(handler) as url:
            async with LocalFleet(data, api_key=KEY, model_base_url=url) as local:
                fleet = local.async_fleet()
                run = asyncio.create_task(
                    run_job_evaluation(fleet, run_dir, tasks=tasks, models=["fake/gpt"], poll_interval=0.1)
                )
                await wait_until_async(lambda: _stored(run_dir) >= 1, "the ungated session stored")
                run.cancel()  # the client's Ctrl-C; the server then stops with a session in flight
                with contextlib.suppress(asyncio.CancelledError):
                    await run
                await fleet.close()
            handler.gate.set()
            async with LocalFleet(data, api_key=KEY, model_base_url=url) as local:
                fleet = local.async_fleet()
                before = await _sessions(fleet, run_dir)
                resumed = await run_job_evaluation(fleet, run_dir, resume=True, poll_interval=0.1)
                after = await _sessions(fleet, run_dir)
                await fleet.close()
    finally:
        handler.gate.set()
    (cut,) = [s for s in before if s["status"] != "completed"]
    assert cut["status"] == "errored" and cut["interrupted"] is True, before
    assert all(s["interrupted"] is False for s in before if s is not cut)
    assert [r.status for r in resumed.report.results] == ["passed", "passed"]
    # The cut-short slot was played again (a new job's session), the stored one was not.
    assert len(after) == 3 and sum(1 for s in after if s["status"] == "completed") == 2


def _listing(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "job_id": "job-1",
        "total_sessions": len(sessions),
        "tasks": [
            {
                "task_id": "task-a",
                "total_sessions": len(sessions),
                "passed_sessions": 0,
                "pass_rate": 0.0,
                "sessions": sessions,
            }
        ],
    }


def _session(session_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "model": "gpt",
        "status": "errored",
        "created_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:01:00Z",
        "step_count": 1,
        "verifier_execution": None,
        **fields,
    }


async def test_resume_reads_the_interrupted_flag_never_the_error_text(tmp_path: Path) -> None:
    """Regression: a session whose error merely began with ``interrupted:`` was taken for one the
    server stopped and played again, and one flagged with another text was recorded as errored.
    The platform's listing (no ``interrupted`` field: it reads as false) is recorded as sent."""
    sessions = [
        # the production wire: no flag; an error that happens to begin like the local server's
        _session("s-platform", error="interrupted: the model's own words"),
        # a local server's session it stopped, whatever its text says
        _session("s-stopped", error="server went away", interrupted=True),
    ]

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/sessions/job/job-1":
            return httpx.Response(200, json=_listing(sessions))
        assert request.url.path == "/v1/jobs/job-1", request.url
        return httpx.Response(200, json={"id": "job-1", "status": "completed"})

    transport = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    with RunDir(tmp_path / "run") as store:
        store.start(
            RunManifest(
                run_id="r",
                suite_name="s",
                tasks=[{"task_key": "task-a"}],
                models=["openai/gpt"],
                k=2,
                created_at=dt.datetime.now(dt.UTC).isoformat(),
                source="platform",
                extra={
                    JOBS_KEY: [
                        {
                            "job_id": "job-1",
                            "slots": [["task-a", "openai/gpt", 0], ["task-a", "openai/gpt", 1]],
                        }
                    ],
                    "job_slots": {"task-a\topenai/gpt\t0": "job-1", "task-a\topenai/gpt\t1": "job-1"},
                },
            )
        )
        async with AsyncFleet("sk-test-123456", base_url="http://fleet.test", http_client=transport) as fleet:
            assert await _Jobs(fleet, store, ProgressTally(None)).record("job-1", settling=True)
        outcomes = store.outcomes()
    assert [(o.session_id, o.status) for o in outcomes] == [("s-platform", "errored")]
