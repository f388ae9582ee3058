"""A ``--jobs`` run records a session that ends between its two reads of a job.

What went wrong: each poll listed the job's sessions, then read the job's status. A session that
ended after the listing, in a job that then ended, was in neither read as ended: the poll saw the
job ended, stopped watching, and the run's report came back incomplete (about one run in ten
under load). The status is now read first; a job seen ended has no session left to end.

The race is forced here on the real local server: each listing, once fetched, is held back until
the job has ended, so the status read after it (the old order) always sees the job ended."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation._jobs_run import run_job_evaluation
from fleet_sdk.evaluation._platform import TERMINAL_JOB_STATUSES
from fleet_sdk.tasks import Task


async def test_a_session_ending_between_the_listing_and_the_status_is_recorded(
    tmp_path: Any, afleet: AsyncFleet, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = [t for t in bundled_tasks if t.task_modality == "tool_use"][:2]
    sessions = afleet.api.sessions
    list_sessions = sessions.get_job_sessions
    held = 0

    async def listing_then_the_job_ends(job_id: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal held
        listing = await list_sessions(job_id, *args, **kwargs)
        with anyio.fail_after(60):
            while (await afleet.api.control_plane.get_job(job_id)).status not in TERMINAL_JOB_STATUSES:
                held += 1
                await anyio.sleep(0.05)
        return listing

    monkeypatch.setattr(sessions, "get_job_sessions", listing_then_the_job_ends)
    run = await run_job_evaluation(
        afleet, tmp_path / "run", tasks=tasks, models=["local/scripted"], k=2, poll_interval=0.05
    )

    assert held > 0, "no listing was taken while the job ran: the race was not forced"
    assert run.report.complete
    assert len(run.report.results) == 4
