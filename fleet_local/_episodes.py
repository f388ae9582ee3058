"""The episode runner of evaluation jobs: every session of a job, played and graded.

Each session:

1. creates an instance of the task's environment;
2. for a ``browser_use`` or ``computer_use`` task, leases a browser on the instance's web UI
   (:mod:`._job_browser`; a real Chromium per session, at most ``settings.job_browser_concurrency``
   of them per job at once);
3. lets the model's policy (:mod:`fleet_sdk.policies`) act for up to ``max_steps`` turns within
   ``max_duration_minutes``, every tool call going through :func:`._mcp.execute_tool` (or, on a
   browser task, the lease's ``computer`` tool), and records the transcript in OpenAI chat shape
   (system and user prompt, assistant messages with ``tool_calls``, ``tool`` messages with
   ``tool_call_id``; a browser task's screenshots are image blocks);
4. ends the browser lease, then runs the task's verifier (the final answer comes from
   ``submit_final_answer``), also when the time limit cut the episode short
   (docs/wire.md#episodes: an abandoned episode is still graded);
5. stores the outcome and deletes the instance (and the lease, whatever way the session ended).

Session statuses: ``completed`` (the episode ran to its end and was graded; it may still have
scored 0), ``timed_out`` (``max_duration_minutes`` ran out; graded anyway), ``failed`` (the
verifier itself failed to run), ``errored`` (infrastructure or policy failure, e.g. no model
endpoint, or a browser task on a server that cannot start Chromium; no verifier execution, so the
session is an error and never a 0).

Job statuses: ``pending`` → ``running`` → ``completed`` (every session terminal), or ``errored``
when every session errored or the server shut down mid-job; ``failed`` when the job could not run.
Jobs are created by the routes in :mod:`._jobs`, which call :func:`start_job`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio

from fleet_sdk import PolicyError
from fleet_sdk.policies import LOCAL_MODELS, ModelEndpoint, Policy, PolicyContext, PolicyTurn, make_policy
from fleet_sdk.protocol import SUBMIT_FINAL_ANSWER, SUBMIT_TOOL, session_score
from fleet_sdk.tools import Tool
from fleet_sdk.types import env_instance as models

from . import _instances, _job_browser, _verifier_exec
from ._errors import LocalAPIError
from ._job_browser import MULTIMODAL, JobBrowser, JobBrowserError
from ._mcp import InstanceUnavailableError, execute_tool
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

logger = logging.getLogger("fleet_local.jobs")

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


def _modality(job: Mapping[str, Any], task: Mapping[str, Any]) -> str:
    """How a session's agent acts: the job's ``mode`` when set, else the task's own modality."""
    return str(job.get("mode") or task.get("task_modality") or "tool_use")


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


ToolCaller = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, Any]]]
"""Runs one tool call; returns the ``tool`` message content the policy sees and the one stored."""


def _instance_tools(state: LocalState, instance_id: str) -> ToolCaller:
    """Tool calls on the instance's own tools (tool_use tasks): the path MCP clients use."""

    async def call(name: str, arguments: dict[str, Any]) -> tuple[Any, Any]:
        outcome = await execute_tool(state, instance_id, name, arguments)
        text = json.dumps({"error": outcome.error}) if outcome.is_error else outcome.text()
        return text, text

    return call


class _Episode:
    """The agent loop of one session; messages and steps are persisted as they happen."""

    def __init__(self, state: LocalState, session_id: str, call: ToolCaller, max_steps: int) -> None:
        self.state = state
        self.session_id = session_id
        self.call = call
        self.max_steps = max_steps
        self.messages: list[dict[str, Any]] = []
        self.steps = 0
        self.final_answer: Any = None
        self.submitted = False

    async def record(self, *messages: dict[str, Any], stored: list[dict[str, Any]] | None = None) -> None:
        """Add messages to the history; ``stored`` (when given) is what the transcript keeps instead."""
        self.messages.extend(messages)
        await _append(self.state, self.session_id, *(messages if stored is None else stored))

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
                shown: Any
                if call.name == SUBMIT_FINAL_ANSWER:
                    self.final_answer = _final_answer(call.arguments)
                    self.submitted = True
                    shown = kept = "Final answer submitted."
                elif call.arguments is None:
                    shown = kept = json.dumps(
                        {"error": f"Invalid arguments for {call.name}: not a JSON object"}
                    )
                else:
                    shown, kept = await self.call(call.name, call.arguments)
                message = {"role": "tool", "tool_call_id": call.id, "name": call.name}
                await self.record({**message, "content": shown}, stored=[{**message, "content": kept}])
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
    browser: JobBrowser | None = None
    await _store(state, SESSION_KIND, session_id, status="running", started_at=iso())
    try:
        modality = _modality(job, task)
        if modality != "tool_use" and modality not in MULTIMODAL:
            raise PolicyError(f"task modality {modality!r} is not supported by local jobs")
        no_browser = _job_browser.unavailable(modality) if modality in MULTIMODAL else None
        if no_browser is not None:  # before an instance is made for nothing
            raise JobBrowserError(no_browser)
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
        minutes = float(job.get("max_duration_minutes") or DEFAULT_MAX_DURATION_MINUTES)
        # As TaskEnv offers them: submit_final_answer on tool_use tasks that ask for an answer.
        offer_submit = modality == "tool_use" and SUBMIT_FINAL_ANSWER in prompt
        first_screen: tuple[Any, Any] | None = None
        call: ToolCaller
        if modality in MULTIMODAL:
            if instance.urls is None or not instance.urls.app:
                raise JobBrowserError(f"instance {instance_id} has no web UI for the browser to open")
            browser, first_screen = await JobBrowser.open(
                state, session_id, instance.urls.app[0], ttl_seconds=int(minutes * 60) + 120
            )
            await _store(state, SESSION_KIND, session_id, lease_id=browser.lease_id)
            tools = [_job_browser.computer_tool()]
            mcp_tools = [
                {"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in tools
            ]
            call = browser.call
        else:
            # The same tool shapes the SDK gives trainers (fleet_sdk.tools / TaskEnv).
            tools = [
                Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
                for t in env.tools
            ]
            mcp_tools = [t.to_mcp() for t in env.tools]
            call = _instance_tools(state, instance_id)
        openai_tools = [t.to_openai() for t in tools]
        if offer_submit:
            openai_tools.append(SUBMIT_TOOL.to_openai())
        max_steps = int(job.get("max_steps") or DEFAULT_MAX_STEPS)
        context = PolicyContext(
            session_id=session_id,
            model_id=str(session["model_id"]),
            task=task,
            tools=mcp_tools,
            offer_submit=offer_submit,
            max_steps=max_steps,
            openai_tools=openai_tools,
        )
        settings = state.settings
        endpoint = (
            ModelEndpoint(settings.model_base_url, settings.model_api_key)
            if settings.model_base_url
            else None
        )
        if endpoint is None and context.model_id not in LOCAL_MODELS:
            raise PolicyError(
                f"model {context.model_id!r} needs a model endpoint: start the local server with "
                "--model-base-url (an OpenAI-compatible chat-completions URL), "
                f"or use one of {', '.join(LOCAL_MODELS)}"
            )
        policy = make_policy(context, endpoint)
        episode = _Episode(state, session_id, call, max_steps)
        per_model = job.get("model_prompts") or {}
        system_prompt = (
            per_model.get(str(session["model_id"]))
            or job.get("system_prompt")
            or _default_system_prompt(env.name, offer_submit)
        )
        await episode.record(
            {"role": "system", "content": system_prompt}, {"role": "user", "content": prompt}
        )
        if first_screen is not None:  # what the browser shows at the start, as TaskEnv observes it
            shown, kept = first_screen
            await episode.record(
                {"role": "user", "content": shown}, stored=[{"role": "user", "content": kept}]
            )
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
            if browser is not None:  # the verifier reads only the instance
                browser.release()
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
    except (PolicyError, LocalAPIError, InstanceUnavailableError, JobBrowserError) as exc:
        changes = {"status": "errored", "error": str(exc)}
    except Exception as exc:
        logger.exception("session %s crashed", session_id)
        changes = {"status": "errored", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if browser is not None:  # idempotent: a no-op when the episode already ended it
            browser.release()
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
        # Each browser session holds a Chromium (250-400 MiB): a bound of its own, taken first so
        # a session waiting for a browser holds no job or model slot a tool_use session could use.
        browser_slots = asyncio.Semaphore(min(limit, max(1, int(state.settings.job_browser_concurrency))))

        async def guarded(session: dict[str, Any]) -> str:
            slots = model_slots.setdefault(str(session["model_id"]), asyncio.Semaphore(per_model_limit))
            multimodal = _modality(job, session.get("task") or {}) in MULTIMODAL
            async with browser_slots if multimodal else contextlib.nullcontext(), slots, job_slots:
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
                lease_id = session.get("lease_id")
                if isinstance(lease_id, str):  # end its browser now rather than at the lease's TTL
                    _job_browser.release_lease(state, lease_id)
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
