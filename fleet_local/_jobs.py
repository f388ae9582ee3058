"""Evaluation job routes (``/v1/jobs``): run tasks x models x ``pass_k`` sessions and grade them.

``POST /v1/jobs`` selects tasks (``task_keys``, else ``project_key``, else ``env_key``, less
``excluded_task_keys``), stores a ``job`` document and one ``pending`` session per run, and starts
the job with :func:`._episodes.start_job`, which plays and grades every session. Model ids are
checked first: the schema refuses a bare name, and a ``local/...`` id must be a bundled policy
(both 422 naming ``models.N``), so a job never runs only to error every session.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio
from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from fleet_sdk.policies import LOCAL_MODELS
from fleet_sdk.protocol import bare_model
from fleet_sdk.types import env_instance as models

from . import _control, _instances
from ._episodes import job_records, session_records, start_job
from ._errors import LocalAPIError, not_found
from ._idempotency import IdempotencyKey, idempotent
from ._records import JobPrivate, JobRecord, SessionPrivate, SessionRecord, SessionWire
from ._state import LocalState, new_id, utcnow

__all__ = ["router"]


# ---------------------------------------------------------------- task selection


def _select_tasks(state: LocalState, req: models.JobCreateRequest) -> list[dict[str, Any]]:
    """The task documents a job runs (blocking store reads).

    Raises:
        LocalAPIError: 404 for unknown task keys, environment or project; 400 without a selector or
            when the exclusions leave nothing (the schema accepts such bodies, so not a 422).
    """
    docs = state.store.list(_control.TASK_KIND)
    if req.task_keys:
        by_key = {doc.get("task_key"): doc for doc in docs}
        missing = [key for key in req.task_keys if key not in by_key]
        if missing:
            raise LocalAPIError(
                404, f"task(s) not found: {', '.join(missing)}", code="not_found", retryable=False
            )
        selected = [by_key[key] for key in dict.fromkeys(req.task_keys)]
    elif req.project_key:
        selected = [doc for doc in docs if doc.get("project_key") == req.project_key]
        if not selected:
            raise LocalAPIError(
                404, f"project {req.project_key!r} has no tasks", code="not_found", retryable=False
            )
    elif req.env_key:
        selected = [doc for doc in docs if doc.get("env_key") == req.env_key]
        if not selected:
            _instances.environment(state, req.env_key)  # 400 env_not_found for an unknown key
            raise LocalAPIError(
                404, f"environment {req.env_key!r} has no tasks", code="not_found", retryable=False
            )
    else:
        raise LocalAPIError(
            400,
            "no task selected: give task_keys, project_key or env_key",
            code="bad_request",
            retryable=False,
        )
    excluded = set(req.excluded_task_keys or ())
    selected = [doc for doc in selected if doc.get("task_key") not in excluded]
    if not selected:
        raise LocalAPIError(
            400, "excluded_task_keys leave no task to run", code="bad_request", retryable=False
        )
    return selected


def _create_job(state: LocalState, req: models.JobCreateRequest) -> models.JobCreateResponse:
    """Store the job and its pending sessions (blocking); the runner is started by the route."""
    tasks = _select_tasks(state, req)
    job_id = new_id("job")
    created = utcnow()
    name = req.name or f"local-eval-{job_id[4:12]}"
    session_ids: list[str] = []
    sessions = session_records(state)
    for task in tasks:
        for model_id in req.models:
            for attempt in range(req.pass_k):
                session_id = new_id("sess")
                session_ids.append(session_id)
                session = SessionRecord(
                    SessionWire(
                        session_id=session_id,
                        model=bare_model(model_id),
                        status="pending",
                        created_at=created,
                        step_count=0,
                    ),
                    SessionPrivate(
                        source="job",
                        job_id=job_id,
                        task_key=task["task_key"],
                        task=task,
                        model_id=model_id,
                        pass_index=attempt,
                        metadata={"score": None},
                    ),
                )
                sessions.put(session_id, session, parent=job_id)
    job = JobRecord(
        models.Job(
            id=job_id,
            name=name,
            status="pending",
            created_at=created,
            updated_at=created,
            workflow_job_id=f"local-{job_id}",
            models=list(req.models),
            pass_k=req.pass_k,
            env_key=req.env_key,
            project_key=req.project_key,
            task_keys=[task["task_key"] for task in tasks],
            excluded_task_keys=req.excluded_task_keys,
            max_steps=req.max_steps,
            max_duration_minutes=req.max_duration_minutes,
            max_concurrent_per_model=req.max_concurrent_per_model,
            mode=req.mode,
            system_prompt=req.system_prompt,
            error=None,
        ),
        JobPrivate(model_prompts=req.model_prompts, session_ids=session_ids),
    )
    job_records(state).put(job_id, job)
    return models.JobCreateResponse(
        job_id=job_id, workflow_job_id=job.job.workflow_job_id, status="pending", name=name
    )


def _check_local_models(req: models.JobCreateRequest) -> None:
    """A ``local/...`` model this server has no policy for is a 422 naming it."""
    unknown = [
        {
            "loc": ("body", "models", index),
            "msg": f"{model!r} is not a local policy (this server runs {', '.join(LOCAL_MODELS)})",
            "type": "value_error",
        }
        for index, model in enumerate(req.models)
        if model.startswith("local/") and model not in LOCAL_MODELS
    ]
    if unknown:
        raise RequestValidationError(unknown)


def _fingerprint(req: models.JobCreateRequest) -> dict[str, Any]:
    """The body the idempotency store compares, with ``byok_keys`` reduced to a digest.

    Bring-your-own keys are secrets: they are never stored, only whether they changed.
    """
    payload = req.model_dump(mode="json", exclude_none=True)
    if "byok_keys" in payload:
        raw = json.dumps(payload["byok_keys"], sort_keys=True).encode()
        payload["byok_keys"] = hashlib.sha256(raw).hexdigest()
    return payload


def _create_job_once(
    state: LocalState, req: models.JobCreateRequest, key: str | None
) -> models.JobCreateResponse:
    """:func:`_create_job`, once per ``Idempotency-Key`` (the same key and body replays the answer)."""
    return idempotent(
        state.store,
        scope="create_job",
        key=key,
        payload=_fingerprint(req),
        model=models.JobCreateResponse,
        create=lambda: _create_job(state, req),
    )


# ---------------------------------------------------------------- routes


def router(state: LocalState) -> APIRouter:
    """Routes of ``/v1/jobs``."""
    api = APIRouter(tags=["control-plane"])

    @api.post("/v1/jobs", response_model=models.JobCreateResponse)
    async def create_job(
        body: models.JobCreateRequest, idempotency_key: IdempotencyKey = None
    ) -> models.JobCreateResponse:
        """Create a job and start running it."""
        _check_local_models(body)
        created = await anyio.to_thread.run_sync(_create_job_once, state, body, idempotency_key)
        job = await anyio.to_thread.run_sync(job_records(state).get, created.job_id)
        if job is not None and job.job.status == "pending":
            start_job(state, created.job_id)
        return created

    @api.get("/v1/jobs", response_model=models.JobListResponse)
    async def list_jobs() -> models.JobListResponse:
        """Every job, oldest first."""
        records = await anyio.to_thread.run_sync(lambda: job_records(state).list())
        jobs = [
            models.JobResponse(
                id=record.job.id,
                name=record.job.name,
                created_at=record.job.created_at,
                status=record.job.status,
            )
            for record in records
        ]
        return models.JobListResponse(jobs=jobs, total=len(jobs))

    @api.get("/v1/jobs/{job_id}", response_model=models.Job)
    async def get_job(job_id: str) -> models.Job:
        """One job with its status."""
        record = await anyio.to_thread.run_sync(job_records(state).get, job_id)
        if record is None:
            raise not_found("job", job_id)
        return record.job

    return api
