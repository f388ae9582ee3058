"""Sessions (``schemas/sessions-ingest.yaml``): ingest, transcript read-back, a job's sessions.

Harness sessions (written by :mod:`._episodes`) and ingested sessions share one document kind,
``session``, whose parent is the job id, and one message table (``Store.append_messages``). So
``GET /v1/sessions/job/{job_id}`` works for evaluation jobs and for trace jobs alike.

Design choices where the schema leaves room:

* ``message_count`` of an ingest is the session's total after the call (so an append shows it grow);
* a new ingested session without ``status`` is ``completed``; an append without it keeps the old one;
* ``metadata`` of an append is merged into the stored metadata (``score`` replaced when sent);
* an ingested session has a verifier execution only when it carries ``verifier_execution_id``
  (docs/wire.md#traces: only those count for the pass rate): the stored execution of that id when this
  server ran it, else one made from ``metadata.score``;
* models are reported bare (``anthropic/claude-x`` → ``claude-x``), ingested ones included;
* ``GET /v1/job-session-groups`` aggregates a job's sessions as the platform's dashboard does:
  ``avg_score`` only over graded sessions (a verifier execution, so for an ingested session a
  ``verifier_execution_id``; an inline score alone does not count).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, NamedTuple

import anyio
from fastapi import APIRouter, Query, Request
from pydantic import ValidationError

from fleet_sdk.protocol import bare_model
from fleet_sdk.types import sessions_ingest as smodels

from . import _instances
from ._episodes import SESSION_KIND, job_records, session_records, session_score
from ._errors import not_found
from ._idempotency import IdempotencyKey, idempotent
from ._records import SessionPrivate, SessionRecord, SessionWire
from ._state import LocalState, iso, new_id, utcnow
from ._validation import checked_body, model_refusal
from ._verifier_exec import execution_records

__all__ = ["ingest", "router"]

_TASK_KIND = "task"
_TRACE_JOB_KIND = "trace_job"
_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)  # sorts a job without a creation time last
_OPEN = frozenset({"pending", "running"})  # the statuses of a session that has not finished
_EXECUTION_FIELDS = ("success", "score", "stdout", "execution_time_ms", "result", "execution_id")


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """The moment, a zone-less one read as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=dt.UTC)


def ingest(state: LocalState, body: smodels.SessionIngestRequest) -> smodels.SessionIngestResponse:
    """Create or append to a session (blocking; run in a worker thread)."""
    messages = [{"content": None, **m.model_dump(mode="json", exclude_none=True)} for m in body.messages]
    steps = sum(1 for m in messages if m.get("role") == "assistant")
    metadata = body.metadata.model_dump(mode="json") if body.metadata is not None else {}
    session_id = body.session_id or new_id("sess")
    records = session_records(state)
    # One ingest per session at a time: appends to one session keep their order and count.
    with state.store.locks.hold(SESSION_KIND, session_id):
        finished = False

        def append(existing: SessionRecord) -> None:
            nonlocal finished
            wire, private = existing.session, existing.private
            private.metadata = {**(private.metadata or {}), **metadata}
            wire.step_count += steps
            private.updated_at = iso()
            if body.status is not None:
                finished = wire.status in _OPEN and body.status not in _OPEN
                wire.status = body.status
            if body.ended_at is not None:
                wire.ended_at = _utc(body.ended_at)
            if body.verifier_execution_id is not None:
                private.verifier_execution_id = body.verifier_execution_id
            if body.instance_id is not None and not private.instance_id:
                private.instance_id = body.instance_id

        # Atomic in the store: a job's runner may write this session's progress meanwhile.
        appended = records.update(session_id, append) if body.session_id else None
        if appended is not None:
            if finished:
                state.metrics.sessions_finished.labels("ingest").inc()
            created = False
        else:
            now = utcnow()
            record = SessionRecord(
                SessionWire(
                    session_id=session_id,
                    model=bare_model(body.model or "unknown"),
                    status=body.status or "completed",
                    created_at=now,
                    started_at=_utc(body.started_at),
                    ended_at=_utc(body.ended_at),
                    step_count=steps,
                ),
                SessionPrivate(
                    source="ingest",
                    job_id=body.job_id,
                    task_key=body.task_key,
                    model_id=body.model,
                    updated_at=iso(now),
                    instance_id=body.instance_id,
                    verifier_execution_id=body.verifier_execution_id,
                    metadata=metadata,
                ),
            )
            records.put(session_id, record, parent=body.job_id)
            created = True
            if record.session.status not in _OPEN:
                state.metrics.sessions_finished.labels("ingest").inc()
        total = state.store.append_messages(session_id, messages)
    return smodels.SessionIngestResponse(
        success=True, session_id=session_id, message_count=total, created_new_session=created
    )


def _ingest_request(data: Any) -> smodels.SessionIngestRequest:
    """An ingest body the schema accepted, as its model, built a message at a time (blocking).

    Raises:
        RequestValidationError: The model refuses a part of it (naming the field).
    """
    messages = []
    for index, message in enumerate(data["messages"]):
        try:
            messages.append(smodels.SessionIngestMessage.model_validate(message))
        except ValidationError as exc:
            raise model_refusal(exc, "messages", index) from None
    try:
        return smodels.SessionIngestRequest.model_validate({**data, "messages": messages})
    except ValidationError as exc:
        raise model_refusal(exc) from None


def _verifier_execution(state: LocalState, session: SessionRecord) -> dict[str, Any] | None:
    """The session's verifier execution (see the module docstring for ingested sessions)."""
    private = session.private
    stored = private.verifier_execution
    if stored is not None:
        return {name: stored.get(name) for name in _EXECUTION_FIELDS}
    execution_id = private.verifier_execution_id
    if not execution_id:
        return None
    score = (private.metadata or {}).get("score")
    record = execution_records(state).get(execution_id)
    if record is not None:
        ran = record.execution
        execution = {
            "success": ran.success,
            "score": record.private.score,
            "stdout": ran.stdout,
            "execution_time_ms": record.private.execution_time_ms,
            "result": ran.result,
            "execution_id": ran.execution_id,
        }
        if isinstance(score, int | float) and not isinstance(score, bool):
            execution["score"] = float(score)  # the uploader's reward wins (it may be a partial reward)
    else:
        execution = {
            "success": score is not None,
            "score": score,
            "stdout": None,
            "execution_time_ms": None,
            "result": None,
            "execution_id": str(execution_id),
        }
    elapsed = execution.get("execution_time_ms")
    # Required by the schema: an execution this server did not time reports 0 ms.
    execution["execution_time_ms"] = int(elapsed) if isinstance(elapsed, int | float) else 0
    execution["success"] = bool(execution.get("success"))
    return execution


def _public(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if not key.startswith("_")}


def _instance(state: LocalState, session: SessionRecord) -> smodels.Instance | None:
    """The session's instance record; None when this server has no full record of it."""
    instance_id = session.private.instance_id
    stored = _instances.instance_records(state).get(instance_id) if instance_id else None
    recorded = session.private.instance
    if stored is not None:  # its wire model: no field of the server's own
        record: Mapping[str, Any] = stored.instance.model_dump(mode="json")
    elif recorded is not None:
        record = _public(recorded)  # as the session recorded it: ``Instance`` keeps unknown keys
    else:
        return None
    try:
        return smodels.Instance.model_validate(record)
    except ValidationError:
        return None  # e.g. an id ingested for an instance this server never ran


def _task(state: LocalState, session: SessionRecord) -> dict[str, Any] | None:
    """The session's task as ``TaskInfo``: our names and the orchestrator's, side by side."""
    task = session.private.task
    if task is None:
        key = session.private.task_key
        task = state.store.get(_TASK_KIND, key) if key else None
    if task is None:
        return None
    key = task.get("task_key") or task.get("key")
    env = task.get("env_key") or task.get("env_id")
    if not key or not env:
        return None
    return {
        **task,
        "key": key,
        "task_key": key,
        "env_id": env,
        "env_key": env,
        "prompt": task.get("prompt") or "",
        "version": task.get("env_version") or task.get("version"),
        "verifier_func": task.get("verifier_code") or task.get("verifier_func"),
    }


def _transcript(state: LocalState, session_id: str) -> smodels.SessionTranscriptResponse:
    session = session_records(state).get(session_id)
    if session is None:
        raise not_found("session", session_id)
    task = _task(state, session)
    execution = _verifier_execution(state, session)
    return smodels.SessionTranscriptResponse(
        task=None if task is None else smodels.TaskInfo.model_validate(task),
        instance=_instance(state, session),
        verifier_execution=None
        if execution is None
        else smodels.VerifierExecutionResult.model_validate(execution),
        transcript=[
            smodels.TranscriptMessage.model_validate({"content": None, **m})
            for m in state.store.messages(session_id)
        ],
    )


def _summary(state: LocalState, session: SessionRecord) -> tuple[smodels.SessionInfo, float | None]:
    execution = _verifier_execution(state, session)
    # ``__dict__``: the wire fields as they are, without a Python-level walk of the model.
    summary = smodels.SessionInfo.model_validate(
        {
            **session.session.__dict__,
            "instance": _instance(state, session),
            "verifier_execution": execution,
        }
    )
    return summary, session_score(execution)


def _job_sessions(state: LocalState, job_id: str) -> smodels.JobSessionsResponse:
    docs = session_records(state).list(parent=job_id)
    if not docs and _job(state, job_id) is None:
        raise not_found("job", job_id)
    groups: dict[str, list[SessionRecord]] = {}
    for doc in docs:
        groups.setdefault(doc.private.task_key or "", []).append(doc)
    tasks: list[smodels.TaskSessionGroup] = []
    for task_key, members in groups.items():
        summaries: list[smodels.SessionInfo] = []
        scores: list[float] = []
        for doc in members:
            summary, score = _summary(state, doc)
            summaries.append(summary)
            if score is not None:
                scores.append(score)
        passed = sum(1 for score in scores if score >= 1.0)
        tasks.append(
            smodels.TaskSessionGroup(
                task_id=task_key,
                task=_task(state, members[0]),
                total_sessions=len(members),
                passed_sessions=passed,
                pass_rate=passed / len(members),
                average_score=sum(scores) / len(scores) if scores else None,
                sessions=summaries,
            )
        )
    return smodels.JobSessionsResponse(job_id=job_id, total_sessions=len(docs), tasks=tasks)


class _JobHead(NamedTuple):
    """What a job's session group tells of the job itself (an evaluation job or a trace job)."""

    job_id: str
    name: str | None
    created_at: dt.datetime | None


def _trace_head(job_id: str, doc: Mapping[str, Any]) -> _JobHead:
    created = doc.get("created_at")
    name = doc.get("name")
    return _JobHead(
        job_id,
        None if name is None else str(name),
        dt.datetime.fromisoformat(created) if isinstance(created, str) else None,
    )


def _group(state: LocalState, job: _JobHead) -> smodels.JobSessionGroup:
    """One job's aggregates: only graded sessions count towards ``avg_score`` (module docstring)."""
    docs = session_records(state).list(parent=job.job_id)
    scores = [score for doc in docs if (score := session_score(_verifier_execution(state, doc))) is not None]
    return smodels.JobSessionGroup(
        job_id=job.job_id,
        name=job.name,
        created_at=job.created_at,
        session_count=len(docs),
        graded_sessions=len(scores),
        passed_sessions=sum(1 for score in scores if score >= 1.0),
        avg_score=sum(scores) / len(scores) if scores else None,
        task_count=len({doc.private.task_key for doc in docs}),
    )


def _job(state: LocalState, job_id: str) -> _JobHead | None:
    record = job_records(state).get(job_id)
    if record is not None:
        return _JobHead(job_id, record.job.name, record.job.created_at)
    doc = state.store.get(_TRACE_JOB_KIND, job_id)
    return None if doc is None else _trace_head(job_id, doc)


def _job_session_group(state: LocalState, job_id: str) -> smodels.JobSessionGroup:
    job = _job(state, job_id)
    if job is None:
        raise not_found("job", job_id)
    return _group(state, job)


def _job_session_groups(
    state: LocalState, job_id: str | None, limit: int
) -> smodels.JobSessionGroupsResponse:
    if job_id is not None:
        job = _job(state, job_id)
        return smodels.JobSessionGroupsResponse(groups=[] if job is None else [_group(state, job)])
    jobs = [
        *(_JobHead(r.job.id, r.job.name, r.job.created_at) for r in job_records(state).list()),
        *(
            _trace_head(str(doc.get("job_id") or doc.get("id")), doc)
            for doc in state.store.list(_TRACE_JOB_KIND)
        ),
    ]
    jobs.sort(key=lambda job: job.created_at or _NEVER, reverse=True)
    return smodels.JobSessionGroupsResponse(groups=[_group(state, job) for job in jobs[:limit]])


def router(state: LocalState) -> APIRouter:
    """Routes of the sessions surface."""
    api = APIRouter(tags=["sessions"])

    # The body is read from the request gate's check, not as a FastAPI body parameter: FastAPI
    # would build the model of up to 10,000 messages in one call on the event loop.
    @api.post("/v1/sessions/ingest", response_model=smodels.SessionIngestResponse)
    async def ingest_session(
        request: Request, idempotency_key: IdempotencyKey = None
    ) -> smodels.SessionIngestResponse:
        """Create a session, or append messages to an existing one (once per ``Idempotency-Key``)."""
        data = checked_body(request)

        def ingest_once() -> smodels.SessionIngestResponse:
            body = _ingest_request(data)
            payload = {
                **body.model_dump(mode="json", exclude={"messages"}),
                "messages": [message.model_dump(mode="json") for message in body.messages],
            }
            return idempotent(
                state.store,
                scope="ingest_session",
                key=idempotency_key,
                payload=payload,
                model=smodels.SessionIngestResponse,
                create=lambda: ingest(state, body),
            )

        return await anyio.to_thread.run_sync(ingest_once)

    @api.get("/v1/sessions/job/{job_id}", response_model=smodels.JobSessionsResponse)
    async def get_job_sessions(job_id: str) -> smodels.JobSessionsResponse:
        """A job's sessions grouped by task, with pass counts and average scores."""
        return await anyio.to_thread.run_sync(_job_sessions, state, job_id)

    @api.get("/v1/job-session-groups", response_model=smodels.JobSessionGroupsResponse)
    async def list_job_session_groups(
        job_id: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> smodels.JobSessionGroupsResponse:
        """Jobs, newest first, with their session counts and ``avg_score`` over graded sessions."""
        return await anyio.to_thread.run_sync(_job_session_groups, state, job_id, limit)

    @api.get("/v1/job-session-groups/{job_id}", response_model=smodels.JobSessionGroup)
    async def get_job_session_group(job_id: str) -> smodels.JobSessionGroup:
        """One job's session aggregates (404 for an unknown job)."""
        return await anyio.to_thread.run_sync(_job_session_group, state, job_id)

    # Unset fields stay out: a stored message has only the keys it was sent with, and an optional
    # field such as an image's ``detail`` is not nullable in the schema.
    @api.get(
        "/v1/sessions/{session_id}/transcript",
        response_model=smodels.SessionTranscriptResponse,
        response_model_exclude_unset=True,
    )
    async def get_session_transcript(session_id: str) -> smodels.SessionTranscriptResponse:
        """A session's task, instance, verifier execution and messages."""
        return await anyio.to_thread.run_sync(_transcript, state, session_id)

    return api
