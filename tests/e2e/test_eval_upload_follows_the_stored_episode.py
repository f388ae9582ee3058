"""A local evaluation run stores each episode before its trace upload: interrupted during the upload,
the run keeps the episode, a resume never plays it again, and the upload it owed is sent then.

Against the shared fault-injection server: its ``hang`` fault holds the upload (``POST
/v1/sessions/ingest``) while the run is cancelled, as Ctrl-C cancels ``fleet-sdk eval``."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
from _waits import wait_until_async

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation import RunDir, RunManifest, run_evaluation
from fleet_sdk.reports import Outcome
from fleet_sdk.tasks import Task


async def test_a_run_interrupted_during_a_trace_upload_keeps_the_episode_and_uploads_it_on_resume(
    tmp_path: Path, faulty_server: LocalFleet, faulty_afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    """Regression: the episode's row was written only after ``play_episode`` returned, and the trace
    upload ran inside it, so a Ctrl-C during the upload lost an episode whose reward was already
    known, and the resumed run played it again."""
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use")
    run_dir = tmp_path / "run"
    fired = len(faulty_server.fired_faults())
    faulty_server.inject_fault("/v1/sessions/ingest", method="POST", mode="hang", delay=120)

    run = asyncio.create_task(run_evaluation(faulty_afleet, run_dir, tasks=[task], models=["local/scripted"]))
    await wait_until_async(lambda: len(faulty_server.fired_faults()) > fired, "the upload held by the server")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    with RunDir(run_dir) as store:
        (stored,) = store.outcomes()
        pending = store.pending_uploads()
        trace_job = store.require_manifest().trace_job_id
    assert (stored.status, stored.score, stored.session_id) == ("passed", 1.0, None)
    assert [(o.task_key, upload["reward"]) for o, upload in pending] == [(task.task_key, 1.0)]
    assert trace_job is not None

    resumed = await run_evaluation(faulty_afleet, run_dir, resume=True)

    with RunDir(run_dir) as store:
        (after,) = store.outcomes()
        assert store.pending_uploads() == []
    assert after.session_id is not None
    assert after == stored.model_copy(
        update={"session_id": after.session_id}
    )  # the same episode, not replayed
    assert [r.session_id for r in resumed.report.results] == [after.session_id]
    listing = await faulty_afleet.api.sessions.get_job_sessions(trace_job)
    # One session: the stored episode's upload, sent once; a replay would have uploaded another.
    assert [s.session_id for t in listing.tasks for s in t.sessions] == [after.session_id]


def test_retrying_an_errored_episode_drops_the_upload_it_owed(tmp_path: Path) -> None:
    """The errored row is dropped with its pending upload, so the replayed episode's upload is the
    only one sent for the slot and no stale upload sets the new row's session."""
    with RunDir(tmp_path / "run") as store:
        store.start(
            RunManifest(
                run_id="r",
                suite_name="s",
                tasks=[{"task_key": "t"}],
                models=["m"],
                k=2,
                created_at=dt.datetime.now(dt.UTC).isoformat(),
            )
        )
        errored = Outcome(task_key="t", model="m", sample=0, status="errored", error="verifier could not run")
        passed = Outcome(task_key="t", model="m", sample=1, status="passed", score=1.0)
        assert store.record(errored, {"reward": None}) and store.record(passed, {"reward": 1.0})
        assert not store.record(passed, {"reward": 0.0})  # a slot is stored once, its upload too

        assert store.forget_errored() == 1

        assert [(o.sample, u) for o, u in store.pending_uploads()] == [(1, {"reward": 1.0})]
        assert store.uploaded(errored, "session-stale") is None
        updated = store.uploaded(passed, "session-1")
        assert updated is not None and updated.session_id == "session-1"
        assert store.pending_uploads() == []
        assert [o.session_id for o in store.outcomes()] == ["session-1"]
