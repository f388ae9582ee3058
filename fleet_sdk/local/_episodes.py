"""The episode runner of evaluation jobs: every session of a job, played and graded.

Each session:

1. creates an instance of the task's environment;
2. lets the model's policy (:mod:`._policies`) act for up to ``max_steps`` turns within
   ``max_duration_minutes``, every tool call going through :func:`._mcp.execute_tool`, and records
   the transcript in OpenAI chat shape (system and user prompt, assistant messages with
   ``tool_calls``, ``tool`` messages with ``tool_call_id``);
3. runs the task's verifier (the final answer comes from ``submit_final_answer``), also when the
   time limit cut the episode short (docs/wire.md#episodes: an abandoned
   episode is still graded);
4. stores the outcome and deletes the instance.

Session statuses: ``completed`` (the episode ran to its end and was graded; it may still have
scored 0), ``timed_out`` (``max_duration_minutes`` ran out; graded anyway), ``failed`` (the
verifier itself failed to run), ``errored`` (infrastructure or policy failure, e.g. no model
endpoint; no verifier execution, so the session is an error and never a 0).

Job statuses: ``pending`` → ``running`` → ``completed`` (every session terminal), or ``errored``
when every session errored or the server shut down mid-job; ``failed`` when the job could not run.
Jobs are created by the routes in :mod:`._jobs`, which call :func:`start_job`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

from .._generated.env_instance import models
from .._protocol import SUBMIT_TOOL, session_score
from ..tools import Tool
from . import _instances, _verifier_exec
from ._errors import LocalAPIError
from ._mcp import InstanceUnavailableError, execute_tool
from ._policies import (
    SUBMIT_FINAL_ANSWER,
    Policy,
    PolicyContext,
    PolicyError,
    PolicyTurn,
    make_policy,
)
from ._state import LocalState, iso

__all__ = [
    "DEFAULT_MAX_DURATION_MINUTES",
    "DEFAULT_MAX_STEPS",
    "JOB_KIND",
    "SESSION_KIND",
    "lifespan",
    "session_score",
    "start_job",
]

logger = logging.getLogger("fleet_sdk.local.jobs")

JOB_KIND = "job"
SESSION_KIND = "session"
DEFAULT_MAX_STEPS = 30
DEFAULT_MAX_DURATION_MINUTES = 10
_TERMINAL_SESSION = frozenset({"completed", "timed_out", "errored", "failed"})
_TERMINAL_JOB = frozenset({"completed", "errored", "failed", "cancelled"})


def _tracked(state: LocalState) -> dict[str, asyncio.Task[None]]:
    return state.jobs


# ---------------------------------------------------------------- running


async def _store(state: LocalState, kind: str, id: str, **changes: Any) -> None:
    await anyio.to_thread.run_sync(lambda: state.store.update(kind, id, **changes))


async def _append(state: LocalState, session_id: str, *messages: dict[str, Any]) -> None:
    await anyio.to_thread.run_sync(state.store.append_messages, session_id, list(messages))


def _default_system_prompt(env_name: str, offer_submit: bool) -> str:
    prompt = (
        f"You are an agent operating the {env_name} application through its tools. "
        "Use the tools to complete the user's task; tool errors are reported back to you so you can fix "
        "the call."
    )
    if offer_submit:
        prompt += " When the task asks for an answer, call submit_final_answer with it; that ends the task."
    return prompt


def _final_answer(arguments: Mapping[str, Any] | None) -> Any:
    if not arguments:
        return None
    for key in ("answer", "final_answer"):
        if key in arguments:
            return arguments[key]
    return dict(arguments)


class _Episode:
    """The agent loop of one session; messages and steps are persisted as they happen."""

    def __init__(self, state: LocalState, session_id: str, instance_id: str, max_steps: int) -> None:
        self.state = state
        self.session_id = session_id
        self.instance_id = instance_id
        self.max_steps = max_steps
        self.messages: list[dict[str, Any]] = []
        self.steps = 0
        self.final_answer: Any = None
        self.submitted = False

    async def record(self, *messages: dict[str, Any]) -> None:
        self.messages.extend(messages)
        await _append(self.state, self.session_id, *messages)

    async def play(self, policy: Policy) -> None:
        while self.steps < self.max_steps and not self.submitted:
            turn: PolicyTurn = await policy.next_turn(self.messages)
            if not turn.tool_calls:
                if turn.content:
                    await self.record({"role": "assistant", "content": turn.content})
                return
            await self.record(
                {
                    "role": "assistant",
                    "content": turn.content,
                    "tool_calls": [c.openai() for c in turn.tool_calls],
                }
            )
            self.steps += 1
            for call in turn.tool_calls:
                if call.name == SUBMIT_FINAL_ANSWER:
                    self.final_answer = _final_answer(call.arguments)
                    self.submitted = True
                    text = "Final answer submitted."
                elif call.arguments is None:
                    text = json.dumps({"error": f"Invalid arguments for {call.name}: not a JSON object"})
                else:
                    outcome = await execute_tool(self.state, self.instance_id, call.name, call.arguments)
                    text = json.dumps({"error": outcome.error}) if outcome.is_error else outcome.text()
                await self.record(
                    {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}
                )
            await _store(self.state, SESSION_KIND, self.session_id, step_count=self.steps)


def _verifier_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The session's ``verifier_execution`` from an ``execute_for_session`` result."""
    score = raw.get("score")
    if not isinstance(score, int | float) or isinstance(score, bool):
        score = None
    elapsed = raw.get("execution_time_ms")
    return {
        "success": bool(raw.get("success")),
        "score": None if score is None else float(score),
        "stdout": raw.get("stdout"),
        "execution_time_ms": int(elapsed) if isinstance(elapsed, int | float) else None,
        "result": raw.get("result"),
        "execution_id": raw.get("execution_id"),
        "error": raw.get("error"),
    }


async def _delete_instance_quietly(state: LocalState, instance_id: str) -> None:
    """Delete an instance, even while the caller is being cancelled."""
    with contextlib.suppress(Exception):
        await asyncio.shield(asyncio.to_thread(_instances.delete_instance, state, instance_id))


async def _run_session(state: LocalState, job: Mapping[str, Any], session: Mapping[str, Any]) -> str:
    """Run one session to a terminal status (never raises but for cancellation); returns the status."""
    session_id = str(session["session_id"])
    task: dict[str, Any] = dict(session["task"])
    changes: dict[str, Any] = {"status": "errored"}
    instance_id: str | None = None
    await _store(state, SESSION_KIND, session_id, status="running", started_at=iso())
    try:
        if task.get("task_modality", "tool_use") != "tool_use":
            raise PolicyError(f"task modality {task.get('task_modality')!r} is not supported by local jobs")
        request = models.InstanceRequest(
            env_key=str(task["env_key"]),
            env_version=task.get("env_version"),
            data_key=task.get("data_key"),
            data_version=task.get("data_version"),
            env_variables=task.get("env_variables"),
            created_from="job",
            run_id=str(job["id"]),
        )
        instance = await anyio.to_thread.run_sync(_instances.create_instance, state, request)
        instance_id = instance.instance_id
        await _store(
            state,
            SESSION_KIND,
            session_id,
            instance_id=instance_id,
            instance=instance.model_dump(mode="json"),
        )
        env = state.environments[instance.env_key]
        prompt = str(task.get("prompt") or "")
        offer_submit = SUBMIT_FINAL_ANSWER in prompt
        # The same tool shapes the SDK gives trainers (fleet_sdk.tools / TaskEnv).
        openai_tools = [
            Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema)).to_openai()
            for t in env.tools
        ]
        if offer_submit:
            openai_tools.append(SUBMIT_TOOL.to_openai())
        max_steps = int(job.get("max_steps") or DEFAULT_MAX_STEPS)
        context = PolicyContext(
            session_id=session_id,
            model_id=str(session["model_id"]),
            task=task,
            tools=[t.to_mcp() for t in env.tools],
            offer_submit=offer_submit,
            max_steps=max_steps,
            openai_tools=openai_tools,
        )
        policy = make_policy(state.settings, context)
        episode = _Episode(state, session_id, instance_id, max_steps)
        per_model = job.get("model_prompts") or {}
        system_prompt = (
            per_model.get(str(session["model_id"]))
            or job.get("system_prompt")
            or _default_system_prompt(env.name, offer_submit)
        )
        await episode.record(
            {"role": "system", "content": system_prompt}, {"role": "user", "content": prompt}
        )
        minutes = float(job.get("max_duration_minutes") or DEFAULT_MAX_DURATION_MINUTES)
        status = "completed"
        try:
            async with asyncio.timeout(minutes * 60) as budget:
                await episode.play(policy)
        except TimeoutError:
            if not budget.expired():
                raise
            status = "timed_out"
        finally:
            await policy.aclose()
        raw = await _verifier_exec.execute_for_session(state, task, instance_id, episode.final_answer)
        verifier = _verifier_record(raw)
        if not verifier["success"] and status == "completed":
            status = "failed"
        changes = {
            "status": status,
            "step_count": episode.steps,
            "verifier_execution": verifier,
            "verifier_execution_id": verifier["execution_id"],
            "metadata": {"score": session_score(verifier), "final_answer": episode.final_answer},
            "error": None if verifier["success"] else _error_text(verifier.get("error")),
        }
    except asyncio.CancelledError:
        changes = {"status": "errored", "error": "interrupted: the server shut down"}
        raise
    except (PolicyError, LocalAPIError, InstanceUnavailableError) as exc:
        changes = {"status": "errored", "error": str(exc)}
    except Exception as exc:
        logger.exception("session %s crashed", session_id)
        changes = {"status": "errored", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if instance_id is not None:
            await _delete_instance_quietly(state, instance_id)
        changes["ended_at"] = iso()
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(state.store.update, SESSION_KIND, session_id, **changes))
    return str(changes["status"])


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, Mapping):
        return f"{error.get('type') or 'Error'}: {error.get('message') or ''}".strip()
    return str(error)


async def _run_job(state: LocalState, job_id: str) -> None:
    """Run every pending session of a job, bounded per model and per job."""
    job = await anyio.to_thread.run_sync(state.store.get, JOB_KIND, job_id)
    if job is None:
        return
    try:
        sessions = await anyio.to_thread.run_sync(lambda: state.store.list(SESSION_KIND, parent=job_id))
        await _store(state, JOB_KIND, job_id, status="running", updated_at=iso())
        limit = max(1, int(state.settings.job_concurrency))
        per_model_limit = min(limit, int(job.get("max_concurrent_per_model") or limit))
        job_slots = asyncio.Semaphore(limit)
        model_slots = {model: asyncio.Semaphore(per_model_limit) for model in job.get("models") or []}

        async def guarded(session: dict[str, Any]) -> str:
            slots = model_slots.setdefault(str(session["model_id"]), asyncio.Semaphore(per_model_limit))
            async with slots, job_slots:
                return await _run_session(state, job, session)

        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(guarded(s)) for s in sessions if s.get("status") == "pending"]
        statuses = [run.result() for run in runs]
        final = "errored" if statuses and all(s == "errored" for s in statuses) else "completed"
        error = "every session errored" if final == "errored" else None
        await _store(state, JOB_KIND, job_id, status=final, error=error, updated_at=iso())
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        logger.exception("job %s crashed", job_id)
        await _store(
            state, JOB_KIND, job_id, status="failed", error=f"{type(exc).__name__}: {exc}", updated_at=iso()
        )


def start_job(state: LocalState, job_id: str) -> None:
    """Run a stored ``pending`` job in the background (once; tracked in ``state.jobs``)."""
    tasks = _tracked(state)
    if job_id in tasks:
        return
    task = asyncio.create_task(_run_job(state, job_id), name=f"fleet-local-job-{job_id}")
    tasks[job_id] = task
    task.add_done_callback(lambda _: tasks.pop(job_id, None))


def _interrupt_unfinished(state: LocalState, reason: str) -> None:
    """Mark every non-terminal job and session errored and release the sessions' instances
    (blocking; startup and shutdown)."""
    now = iso()
    for job in state.store.list(JOB_KIND):
        if job.get("status") in _TERMINAL_JOB:
            continue
        for session in state.store.list(SESSION_KIND, parent=str(job["id"])):
            if session.get("status") not in _TERMINAL_SESSION:
                state.store.update(
                    SESSION_KIND, str(session["session_id"]), status="errored", error=reason, ended_at=now
                )
                instance_id = session.get("instance_id")
                if isinstance(instance_id, str):  # release it now rather than at its TTL
                    with contextlib.suppress(LocalAPIError):
                        _instances.delete_instance(state, instance_id)
        state.store.update(JOB_KIND, str(job["id"]), status="errored", error=reason, updated_at=now)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Settle jobs a previous process left running; cancel running jobs on shutdown."""
    await anyio.to_thread.run_sync(_interrupt_unfinished, state, "interrupted: the server restarted")
    try:
        yield
    finally:
        running = list(_tracked(state).values())
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=10)
        await anyio.to_thread.run_sync(_interrupt_unfinished, state, "interrupted: the server shut down")
