"""The platform path: the server runs the episodes as a job, this module waits and scores.

Import tasks (optional), create a job over ``provider/model`` ids with ``pass_k``, poll it with
an async sleep until it is terminal or the deadline passes, read the job's sessions and turn
them into the report. Sessions name their model bare (``claude-x`` for ``anthropic/claude-x``),
so results are matched back to the requested ids by bare name. A session scores its verifier
execution's ``score``, else 1.0 if ``success``; a session with no verifier execution, a failed
one or a judge error was never graded and is ``errored``, never a 0 (``rewards.reward_from_outcome``,
``schemas/sessions-ingest.yaml``).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from .._client import AsyncFleet
from .._exceptions import EvaluationError, EvaluationTimeoutError
from .._runtime import Deadline
from ..protocol import bare_model, session_score
from ..reports import Outcome, ReportEnvelope, Source, Status, build_report, classify
from ..rewards import verifier_feedback
from ..tasks import Task, as_task
from ._run import Progress

__all__ = [
    "PROVIDER_MODEL",
    "TERMINAL_JOB_STATUSES",
    "bare_model",
    "evaluate_job",
    "job_report",
    "session_score",
]

PROVIDER_MODEL = re.compile(r"^[^/]+/[^/]")
"""A ``provider/model`` id as a job takes it: a provider, a slash, a model (``create_job``)."""

TERMINAL_JOB_STATUSES = frozenset({"completed", "errored", "failed", "cancelled"})
_LIVE_SESSION = frozenset({"pending", "running"})


def _duration_ms(session: Mapping[str, Any]) -> int | None:
    started, ended = session.get("started_at"), session.get("ended_at")
    if not isinstance(started, dt.datetime) or not isinstance(ended, dt.datetime):
        return None
    return max(0, int((ended - started).total_seconds() * 1000))


def ordered_sessions(sessions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The sessions of one task and model in sample order (by creation, then id: stable across polls)."""
    return sorted(sessions, key=lambda s: (str(s.get("created_at")), str(s.get("session_id"))))


def session_outcome(session: Mapping[str, Any], *, task_key: str, model: str, sample: int) -> Outcome:
    """The report row of one job session (a ``get_job_sessions`` entry, as a dict).

    Args:
        session: The session.
        task_key: Its task.
        model: The ``provider/model`` id it ran.
        sample: Its sample index.
    """
    verifier = session.get("verifier_execution")
    live = session.get("status") in _LIVE_SESSION
    score = None if live else session_score(verifier)
    status: Status = "pending" if live else classify(score)
    error = session.get("error")
    if status == "errored" and not error:
        error = "no verifier execution"
    stdout = (verifier or {}).get("stdout")
    return Outcome(
        task_key=task_key,
        model=model,
        sample=sample,
        status=status,
        score=score,
        session_id=str(session.get("session_id")),
        verifier_execution_id=(verifier or {}).get("execution_id"),
        error=str(error)[:500] if error else None,
        duration_ms=_duration_ms(session),
        error_kind="verifier" if status == "errored" and verifier else None,
        feedback=verifier_feedback(stdout) if status == "failed" else None,
    )


def group_sessions(
    job_sessions: Mapping[str, Any], models: Sequence[str]
) -> tuple[list[str], dict[tuple[str, str], list[Mapping[str, Any]]]]:
    """The task keys a job listing names, and its sessions by (task key, requested model id).

    Args:
        job_sessions: The ``get_job_sessions`` body, as a dict.
        models: The ``provider/model`` ids the job was created with (sessions name them bare).
    """
    by_bare = {bare_model(m): m for m in models}
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    listed: list[str] = []
    for entry in job_sessions.get("tasks") or []:
        task = entry.get("task") or {}
        key = str(task.get("key") or task.get("task_key") or entry["task_id"])
        listed.append(key)
        for session in entry.get("sessions") or []:
            name = str(session.get("model") or "")
            model = by_bare.get(bare_model(name), by_bare.get(name, name))
            grouped[(key, model)].append(session)
    return listed, grouped


def job_report(
    job_sessions: Mapping[str, Any],
    *,
    models: Sequence[str],
    k: int,
    run_id: str | None = None,
    suite_name: str | None = None,
    task_keys: Sequence[str] | None = None,
    created_at: str | None = None,
) -> ReportEnvelope:
    """The report of a job from its sessions (the ``get_job_sessions`` body, as a dict).

    Args:
        job_sessions: ``{"job_id", "tasks": [{"task_id", "task", "sessions": [...]}]}``.
        models: The ``provider/model`` ids the job was created with (bare names match them).
        k: The job's ``pass_k``.
        run_id: The report's run id (default: ``job-<job id>``).
        suite_name: The suite's name (default: the job id).
        task_keys: Report order of the tasks (default: as the server lists them).
        created_at: When the job was created.
    """
    job_id = str(job_sessions["job_id"])
    listed, grouped = group_sessions(job_sessions, models)
    outcomes: list[Outcome] = []
    for (key, model), sessions in grouped.items():
        for sample, session in enumerate(ordered_sessions(sessions)):
            outcomes.append(session_outcome(session, task_key=key, model=model, sample=sample))
    return build_report(
        run_id=run_id or f"job-{job_id}",
        source=Source(kind="platform", job_id=job_id),
        suite_name=suite_name or job_id,
        task_keys=list(task_keys) if task_keys else listed,
        models=list(models),
        k=k,
        outcomes=outcomes,
        created_at=created_at,
    )


async def evaluate_job(
    fleet: AsyncFleet,
    *,
    models: Sequence[str],
    env_key: str | None = None,
    task_keys: Sequence[str] | None = None,
    import_tasks: Sequence[Task | Mapping[str, Any]] | None = None,
    pass_k: int = 1,
    max_steps: int | None = None,
    name: str | None = None,
    run_id: str | None = None,
    deadline: float = 3600.0,
    poll_interval: float = 2.0,
    on_progress: Callable[[Progress], None] | None = None,
) -> ReportEnvelope:
    """Evaluate models as a platform job and return the report.

    Args:
        fleet: The client.
        models: ``provider/model`` ids, e.g. ``local/scripted`` or ``openai/gpt-4o``.
        env_key: Run every task of this environment.
        task_keys: Run exactly these tasks (with or instead of ``env_key``).
        import_tasks: Task configs to import first; their keys are run.
        pass_k: Sessions per task and model (the ``k`` of pass@k).
        max_steps: Step budget per session (the server's default when None).
        name: The job's name.
        run_id: The report's run id (default: ``job-<job id>``).
        deadline: Seconds to wait for the job; past it ``EvaluationTimeoutError`` (the job runs on).
        poll_interval: Seconds between two polls.
        on_progress: Called after each poll with the finished sessions so far.

    Raises:
        EvaluationError: No models, or no task selector.
        EvaluationTimeoutError: The job was not terminal by the deadline.
    """
    from fleet_generated.env_instance import models as api_models

    if not models:
        raise EvaluationError("models: give at least one provider/model id")
    bare = [m for m in models if not PROVIDER_MODEL.match(m)]
    if bare:
        raise EvaluationError(
            f"models: {bare} are not provider/model ids (e.g. openai/gpt-4o, local/scripted)"
        )
    if pass_k < 1:
        raise EvaluationError(f"pass_k must be at least 1, got {pass_k}")
    control = fleet.api.control_plane
    keys = list(task_keys or [])
    for config in import_tasks or []:
        task = as_task(config)
        body = api_models.TaskRequest.model_validate(task.model_dump(mode="json", by_alias=False))
        stored = await control.import_task(body, idempotency_key=f"eval-import-{task.task_key}")
        keys.append(stored.task_key)
    if not keys and not env_key:
        raise EvaluationError("env_key, task_keys or import_tasks: give at least one task selector")
    request = api_models.JobCreateRequest(
        models=list(models),
        pass_k=pass_k,
        env_key=env_key,
        task_keys=keys or None,
        max_steps=max_steps,
        name=name,
    )
    created = await control.create_job(request)
    job_id = created.job_id
    started = time.monotonic()
    until = Deadline(deadline)
    job = await control.get_job(job_id)
    while job.status not in TERMINAL_JOB_STATUSES:
        if until.expired():
            raise EvaluationTimeoutError(f"job {job_id} is still {job.status} after {deadline:g}s")
        if on_progress is not None:
            listing = (await fleet.api.sessions.get_job_sessions(job_id)).model_dump()
            on_progress(_progress(listing, model_count=len(models), k=pass_k, started=started))
        await anyio.sleep(min(poll_interval, until.remaining() or 0.0))
        job = await control.get_job(job_id)
    listing = (await fleet.api.sessions.get_job_sessions(job_id)).model_dump()
    report = job_report(
        listing,
        models=models,
        k=pass_k,
        run_id=run_id,
        suite_name=name or env_key or job_id,
        created_at=job.created_at.isoformat() if job.created_at else None,
    )
    if on_progress is not None:  # from the sessions just read, not a second fetch
        on_progress(_progress(listing, model_count=len(models), k=pass_k, started=started))
    return report


def _progress(listing: Mapping[str, Any], *, model_count: int, k: int, started: float) -> Progress:
    """The progress shown by a ``get_job_sessions`` listing (a dict)."""
    sessions = [s for t in listing.get("tasks") or [] for s in t.get("sessions") or []]
    total = max(len(sessions), len(listing.get("tasks") or []) * model_count * k)
    done = [s for s in sessions if s.get("status") not in _LIVE_SESSION]
    scores = [session_score(s.get("verifier_execution")) for s in done]
    graded = [s for s in scores if s is not None]
    passed = sum(1 for s in graded if s >= 1.0)
    elapsed = time.monotonic() - started
    eta = elapsed / len(done) * (total - len(done)) if done else None
    return Progress(len(done), total, passed, len(graded), elapsed, eta)
