"""A ``--jobs`` run resumed after its client died records what its jobs finished meanwhile, from
the server, and plays only what no job finished: a result the server stored is never played again.

The runner behind ``fleet-sdk eval --jobs`` (``run_job_evaluation``) against the shared local
server: a finished run loses rows from its run directory, as a client killed between a session's
end and its next poll would, then resumes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation import RunDir
from fleet_sdk.evaluation._jobs_run import run_job_evaluation
from fleet_sdk.tasks import Task


async def test_a_resumed_jobs_run_records_sessions_that_ended_unwatched_and_replays_none(
    tmp_path: Path, afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    tasks = [t for t in bundled_tasks if t.task_modality == "tool_use"][:2]
    run_dir = tmp_path / "run"
    first = await run_job_evaluation(
        afleet, run_dir, tasks=tasks, models=["local/scripted", "local/random"], k=2, poll_interval=0.2
    )
    assert first.report.complete and len(first.report.results) == 8
    with RunDir(run_dir) as store:
        jobs_before = store.require_manifest().extra["jobs"]
    assert len(jobs_before) == 1
    # As if the client died before it saw these sessions end.
    with sqlite3.connect(run_dir / "run.sqlite3") as db:
        db.execute("DELETE FROM episodes WHERE sample = 1")

    resumed = await run_job_evaluation(afleet, run_dir, resume=True, poll_interval=0.2)

    with RunDir(run_dir) as store:
        assert store.require_manifest().extra["jobs"] == jobs_before  # no job was created
    assert [r.model_dump() for r in resumed.report.results] == [r.model_dump() for r in first.report.results]
