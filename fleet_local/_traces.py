"""Traces surface of the platform host (``schemas/traces-jobs.yaml``).

- ``POST /v1/traces/jobs`` creates a trace job (stored as kind ``trace_job``).
  Its ``job_id`` is what the orchestrator's ``POST /v1/sessions/ingest`` takes:
  on the real platform both hosts share one job pool, and locally both surfaces
  share one store, so the sessions router can look the job up by id.

``POST /v1/traces/logs`` belongs to the orchestrator's sessions surface (``_session_logs``).
"""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from fleet_sdk.types import traces_jobs as models

from ._state import LocalState, iso, new_id

TRACE_JOB_KIND = "trace_job"


def router(state: LocalState) -> APIRouter:
    """Routes of the traces surface (bearer auth is added by the app)."""
    api = APIRouter(tags=["traces-jobs"])

    @api.post("/v1/traces/jobs", response_model=models.TraceJobResponse)
    async def create_trace_job(
        body: models.TraceJobRequest,
    ) -> models.TraceJobResponse:
        """Create an ``active`` trace job; its id groups the sessions of one run."""
        job_id = new_id("tjob")
        # The schema lets the name out: the server names the job after its id then.
        job = models.TraceJobResponse(job_id=job_id, name=body.name or f"trace-{job_id}", status="active")
        record = {**job.model_dump(), "created_at": iso()}
        # In a worker thread: the store's lock is shared with them, and the loop must never wait on it.
        await anyio.to_thread.run_sync(state.store.put, TRACE_JOB_KIND, job.job_id, record)
        return job

    return api
