"""Waiting for an evaluation job to end, from async and sync tests alike."""

from __future__ import annotations

import asyncio
import time

from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk.types import env_instance as models

__all__ = ["TERMINAL_JOB", "wait_for_job", "wait_for_job_async"]

TERMINAL_JOB = frozenset({"completed", "errored", "failed", "cancelled"})
_POLL = 0.2


async def wait_for_job_async(fleet: AsyncFleet, job_id: str, timeout: float = 40.0) -> models.Job:
    """Poll ``get_job`` until the job is terminal; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        job = await fleet.api.control_plane.get_job(job_id)
        if job.status in TERMINAL_JOB:
            return job
        assert loop.time() < deadline, f"job {job_id} still {job.status} after {timeout}s"
        await asyncio.sleep(_POLL)


def wait_for_job(fleet: Fleet, job_id: str, timeout: float = 120.0) -> models.Job:
    """The same for a sync client (a blocking sleep: sync tests only)."""
    deadline = time.monotonic() + timeout
    while True:
        job = fleet.api.control_plane.get_job(job_id)
        if job.status in TERMINAL_JOB:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status} after {timeout}s"
        time.sleep(_POLL)
