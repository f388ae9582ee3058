"""Traces surface of the platform host (``schemas/traces-jobs.yaml``).

- ``POST /v1/traces/jobs`` creates a trace job (stored as kind ``trace_job``).
  Its ``job_id`` is what the orchestrator's ``POST /v1/sessions/ingest`` takes:
  on the real platform both hosts share one job pool, and locally both surfaces
  share one store, so the sessions router can look the job up by id.
- ``POST /v1/traces/logs`` is the deprecated Gemini-shape upload. It is served
  only so old traces can be replayed: the trace is stored (kind ``trace_log``,
  keyed by session id, parent the job id) and answered with a ``Deprecation``
  header. Nothing renders it; use the sessions ingest instead.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from fleet_sdk.types import traces_jobs as models

from ._state import LocalState, iso, new_id

TRACE_JOB_KIND = "trace_job"
TRACE_LOG_KIND = "trace_log"


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
        state.store.put(TRACE_JOB_KIND, job.job_id, {**job.model_dump(), "created_at": iso()})
        return job

    @api.post("/v1/traces/logs", response_model=models.TraceLogsResponse, deprecated=True)
    async def upload_trace_logs(
        body: models.TraceLogsRequest, response: Response
    ) -> models.TraceLogsResponse:
        """Store a legacy Gemini-shape trace (deprecated; kept for replaying old traces).

        A known ``session_id`` gets the turns appended; an unknown or missing one
        starts a new session record.
        """
        response.headers["Deprecation"] = "true"
        session_id = body.session_id or new_id("tsess")
        history = [turn.model_dump(mode="json", exclude_none=True) for turn in body.history]
        existing = state.store.get(TRACE_LOG_KIND, session_id)
        doc: dict[str, Any] = existing or {"session_id": session_id, "created_at": iso(), "history": []}
        doc["history"] = [*doc.get("history", []), *history]
        doc.update(
            job_id=body.job_id,
            task_key=body.task_key if body.task_key is not None else doc.get("task_key"),
            model=body.model if body.model is not None else doc.get("model"),
            score=body.score if body.score is not None else doc.get("score"),
            verifier_execution_id=body.verifier_execution_id or doc.get("verifier_execution_id"),
            updated_at=iso(),
        )
        state.store.put(TRACE_LOG_KIND, session_id, doc, parent=body.job_id)
        return models.TraceLogsResponse(success=True, session_id=session_id)

    return api
