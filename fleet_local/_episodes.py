"""The episode runner of evaluation jobs: every session of a job, played and graded.

A session is played the way any client of this server plays an episode: with ``fleet_sdk``'s
``TaskEnv`` and ``play_episode``, on an ``AsyncFleet`` connected to this server itself over
loopback (:func:`job_client`, with the server's own URL and key). So each session:

1. creates an instance of the task's environment (``run_id`` = the job's id);
2. for a ``browser_use`` or ``computer_use`` task, leases a browser on the instance's web UI with
   the id ``lease_<session_id>`` (:mod:`._job_browser`; a real Chromium per session, at most
   ``settings.job_browser_concurrency`` of them per job at once);
3. lets the model's policy (:mod:`fleet_sdk.policies`) act for up to ``max_steps`` turns within
   ``max_duration_minutes``; the transcript is stored as it grows, in OpenAI chat shape (system
   and user prompt, assistant messages with ``tool_calls``, ``tool`` messages with
   ``tool_call_id``; a browser task's screenshots are image blocks served by the local S3 endpoint);
4. closes the env: the browser lease ends, the verifier grades the instance (the final answer
   comes from ``submit_final_answer``), also when the time limit cut the episode short
   (docs/wire.md#episodes: an abandoned episode is still graded), and the instance is deleted;
5. stores the outcome.

Session statuses: ``completed`` (the episode ran to its end and was graded; it may still have
scored 0), ``timed_out`` (``max_duration_minutes`` ran out; graded anyway), ``failed`` (the
verifier itself failed to run), ``errored`` (infrastructure or policy failure, e.g. no model
endpoint, or a browser task on a server that cannot start Chromium; no verifier execution is
recorded, so the session is an error and never a 0). A session the server stopped before it
ended (it shut down or restarted mid-session) is ``errored`` with ``interrupted`` set: clients read
that flag, not the error's text, to play it again.

Job statuses: ``pending`` → ``running`` → ``completed`` (every session terminal), or ``errored``
when every session errored or the server shut down mid-job; ``failed`` when the job could not run.
Jobs are created by the routes in :mod:`._jobs`, which call :func:`start_job`; the server stops them
with :func:`stop_jobs` while it still answers HTTP, since their sessions close through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

from fleet_sdk import AsyncFleet, PolicyError, Task, TaskEnv
from fleet_sdk.episodes import TIME_LIMIT, EpisodeResult, play_episode
from fleet_sdk.policies import LOCAL_MODELS, ModelEndpoint, PolicyFactory, make_policy
from fleet_sdk.protocol import SUBMIT_FINAL_ANSWER, session_score
from fleet_sdk.remote_verifier import RemoteVerifierOutcome

from . import _instances, _job_browser
from ._errors import LocalAPIError
from ._job_browser import MULTIMODAL, JobBrowserError
from ._records import JobRecord, SessionRecord
from ._state import LocalState, iso
from ._store import Records

__all__ = [
    "DEFAULT_MAX_DURATION_MINUTES",
    "DEFAULT_MAX_STEPS",
    "JOB_KIND",
    "SESSION_KIND",
    "job_client",
    "job_records",
    "lifespan",
    "session_records",
    "session_score",
    "start_job",
    "stop_jobs",
]

logger = logging.getLogger("fleet_local.jobs")

JOB_KIND = "job"
SESSION_KIND = "session"
DEFAULT_MAX_STEPS = 30
DEFAULT_MAX_DURATION_MINUTES = 10
STOP_TIMEOUT = 10.0
"""Seconds the running jobs' sessions get to close their envs when the server stops."""
_TERMINAL_SESSION = frozenset({"completed", "timed_out", "errored", "failed"})
_TERMINAL_JOB = frozenset({"completed", "errored", "failed", "cancelled"})


def session_records(state: LocalState) -> Records[SessionRecord]:
    """The store's session documents as typed records (a job's id is their parent).

    A read-change-write of one holds its named lock (``state.store.locks.hold(SESSION_KIND,
    session_id)``); a runner's progress goes through ``state.store.update`` of the changed fields,
    each one atomic.

    Args:
        state: Server state.
    """
    return Records(state.store, SESSION_KIND, SessionRecord)


def job_records(state: LocalState) -> Records[JobRecord]:
    """The store's evaluation job documents as typed records.

    The runner's changes to a job go through ``state.store.update`` of the changed fields, each
    one atomic.

    Args:
        state: Server state.
    """
    return Records(state.store, JOB_KIND, JobRecord)


def _tracked(state: LocalState) -> dict[str, asyncio.Task[None]]:
    return state.jobs


def job_client(state: LocalState) -> AsyncFleet:
    """The client the jobs play their sessions through: this server, over loopback (made on first
    use, in the server's loop; closed by :func:`lifespan`).

    Args:
        state: Server state (``public_url`` set).
    """
    if state.job_client is None:
        # A server without a key takes any bearer key; ``environ={}``: no FLEET_* variable of the
        # server's environment may send a job's traffic elsewhere.
        key = state.settings.api_key or "fleet-local-jobs"
        url = state.public_url
        state.job_client = AsyncFleet(
            api_key=key, base_url=url, platform_url=url, browser_url=url, browser_api_key=key, environ={}
        )
    return state.job_client


# ---------------------------------------------------------------- running


async def _store(state: LocalState, kind: str, id: str, **changes: Any) -> None:
    await anyio.to_thread.run_sync(lambda: state.store.update(kind, id, **changes))


def _modality(job: JobRecord, task: Mapping[str, Any]) -> str:
    """How a session's agent acts: the job's ``mode`` when set, else the task's own modality."""
    return str(job.job.mode or task.get("task_modality") or "tool_use")


def _default_system_prompt(env_name: str, offer_submit: bool) -> str:
    prompt = (
        f"You are an agent operating the {env_name} application through its tools. "
        "Use the tools to complete the user's task; tool errors are reported back to you so you can fix "
        "the call."
    )
    if offer_submit:
        prompt += " When the task asks for an answer, call submit_final_answer with it; that ends the task."
    return prompt


def _system_prompt(state: LocalState, job: JobRecord, model_id: str, task: Task) -> str:
    """The job's prompt for the model, else its system prompt, else one naming the environment."""
    per_model = job.private.model_prompts or {}
    environment = state.environments.get(task.env_key)
    # As TaskEnv offers it: submit_final_answer on tool_use tasks that ask for an answer.
    offer_submit = task.task_modality == "tool_use" and SUBMIT_FINAL_ANSWER in task.prompt
    return str(
        per_model.get(model_id)
        or job.job.system_prompt
        or _default_system_prompt(environment.name if environment else task.env_key, offer_submit)
    )


def _policy(state: LocalState, model_id: str) -> PolicyFactory:
    """The session's policy, or a ``PolicyError`` naming what this server lacks to ask the model."""
    settings = state.settings
    endpoint = (
        ModelEndpoint(settings.model_base_url, settings.model_api_key) if settings.model_base_url else None
    )
    if endpoint is None and model_id not in LOCAL_MODELS:
        raise PolicyError(
            f"model {model_id!r} needs a model endpoint: start the local server with "
            "--model-base-url (an OpenAI-compatible chat-completions URL), "
            f"or use one of {', '.join(LOCAL_MODELS)}"
        )
    return make_policy(model_id, endpoint)


class _Progress:
    """Stores a session's progress as its episode plays: the instance, the transcript, the steps."""

    def __init__(self, state: LocalState, session_id: str) -> None:
        self.state = state
        self.session_id = session_id
        self.instance_id: str | None = None
        self.steps = 0
        self._stored = 0  # messages of the env's history already in the transcript

    async def append(self, *messages: Mapping[str, Any]) -> None:
        """Add messages to the stored transcript, screenshots as local S3 objects."""
        stored = [
            {**m, "content": await _job_browser.stored_content(self.state, m.get("content"))}
            for m in messages
        ]
        await anyio.to_thread.run_sync(self.state.store.append_messages, self.session_id, stored)

    async def update(self, env: TaskEnv) -> None:
        """Store what the episode did since the last call (``play_episode``'s ``on_step``)."""
        changes: dict[str, Any] = {}
        if self.instance_id is None and env.env is not None:
            self.instance_id = env.env.instance_id
            changes.update(instance_id=self.instance_id, instance=env.env.instance.model_dump(mode="json"))
        new = env.chat_history[self._stored :]
        self._stored += len(new)
        # A step is a turn that called tools (the one that only ends the episode is not counted).
        self.steps += sum(1 for m in new if m.get("role") == "assistant" and m.get("tool_calls"))
        if new:
            await self.append(*new)
        await _store(self.state, SESSION_KIND, self.session_id, step_count=self.steps, **changes)


def _verifier_record(outcome: RemoteVerifierOutcome | None) -> dict[str, Any] | None:
    """The session's ``verifier_execution`` from the env's verifier run (None: it could not run)."""
    if outcome is None:
        return None
    return {
        "success": outcome.success,
        "score": outcome.score,
        "stdout": outcome.stdout,
        "execution_time_ms": int(outcome.execution_time_ms),
        "result": outcome.result,
        "execution_id": outcome.execution_id,
        "error": None if outcome.error is None else outcome.error.model_dump(mode="json"),
    }


def _outcome(result: EpisodeResult, env: TaskEnv, steps: int) -> dict[str, Any]:
    """The session's terminal fields from its episode."""
    if result.error is not None and result.reward is None:  # it failed before it was graded
        return {"status": "errored", "error": result.error, "step_count": steps}
    verifier = _verifier_record(env.verifier_outcome)
    status = "timed_out" if result.done_reason == TIME_LIMIT else "completed"
    if status == "completed" and (verifier is None or not verifier["success"]):
        status = "failed"
    return {
        "status": status,
        "step_count": steps,
        "verifier_execution": verifier,
        "verifier_execution_id": None if verifier is None else verifier["execution_id"],
        "metadata": {"score": session_score(verifier), "final_answer": env.final_answer},
        "error": result.error or result.verifier_error,
    }


async def _delete_instance_quietly(state: LocalState, instance_id: str) -> None:
    """Delete an instance (a no-op once the env deleted it), even while the caller is cancelled."""
    with contextlib.suppress(Exception):
        await asyncio.shield(asyncio.to_thread(_instances.delete_instance, state, instance_id))


async def _run_session(state: LocalState, job: JobRecord, session: SessionRecord) -> str:
    """Run one session to a terminal status (never raises but for cancellation); returns the status."""
    session_id = session.session.session_id
    model_id = str(session.private.model_id)
    task_doc = session.private.task or {}
    changes: dict[str, Any] = {"status": "errored"}
    progress = _Progress(state, session_id)
    await _store(state, SESSION_KIND, session_id, status="running", started_at=iso())
    try:
        task = Task.model_validate(task_doc)
        modality = _modality(job, task_doc)
        if modality != "tool_use" and modality not in MULTIMODAL:
            raise PolicyError(f"task modality {modality!r} is not supported by local jobs")
        no_browser = _job_browser.unavailable(modality) if modality in MULTIMODAL else None
        if no_browser is not None:  # before an instance is made for nothing
            raise JobBrowserError(no_browser)
        policy = _policy(state, model_id)
        minutes = float(job.job.max_duration_minutes or DEFAULT_MAX_DURATION_MINUTES)
        browser: dict[str, Any] | None = None
        if modality in MULTIMODAL:
            # The local server has no desktop images: computer_use is played on a lease as well.
            task = task.model_copy(update={"task_modality": "browser_use"})
            browser = {"lease_id": _job_browser.session_lease_id(session_id)}
            await _store(state, SESSION_KIND, session_id, lease_id=browser["lease_id"])
        else:
            task = task.model_copy(update={"task_modality": "tool_use"})
        env = TaskEnv(
            task,
            fleet=job_client(state),
            max_steps=job.job.max_steps or DEFAULT_MAX_STEPS,
            ttl_seconds=_job_browser.lease_ttl(minutes) if browser is not None else None,
            make_kwargs={"run_id": job.job.id},
            browser_kwargs=browser,
        )
        system_prompt = _system_prompt(state, job, model_id, task)
        await progress.append({"role": "system", "content": system_prompt})
        result = await play_episode(
            env,
            policy,
            episode_id=session_id,
            system_prompt=system_prompt,
            time_limit=minutes * 60,
            on_step=progress.update,
        )
        await progress.update(env)  # the model's last words, when it ended the episode with some
        changes = _outcome(result, env, progress.steps)
    except asyncio.CancelledError:
        changes = {"status": "errored", "error": "interrupted: the server shut down", "interrupted": True}
        raise
    except (PolicyError, JobBrowserError) as exc:
        changes = {"status": "errored", "error": str(exc)}
    except Exception as exc:
        logger.exception("session %s crashed", session_id)
        changes = {"status": "errored", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if progress.instance_id is not None:  # a backstop: the env deletes it when it closes
            await _delete_instance_quietly(state, progress.instance_id)
        changes["ended_at"] = iso()
        state.metrics.sessions_finished.labels("job").inc()
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(state.store.update, SESSION_KIND, session_id, **changes))
    return str(changes["status"])


async def _run_job(state: LocalState, job_id: str) -> None:
    """Run every pending session of a job, bounded per model and per job."""
    job = await anyio.to_thread.run_sync(job_records(state).get, job_id)
    if job is None:
        return
    try:
        sessions = await anyio.to_thread.run_sync(lambda: session_records(state).list(parent=job_id))
        await _store(state, JOB_KIND, job_id, status="running", updated_at=iso())
        limit = max(1, int(state.settings.job_concurrency))
        per_model_limit = min(limit, job.job.max_concurrent_per_model or limit)
        job_slots = asyncio.Semaphore(limit)
        model_slots = {model: asyncio.Semaphore(per_model_limit) for model in job.job.models or []}
        # Each browser session holds a Chromium (250-400 MiB): a bound of its own, taken first so
        # a session waiting for a browser holds no job or model slot a tool_use session could use.
        browser_slots = asyncio.Semaphore(min(limit, max(1, int(state.settings.job_browser_concurrency))))

        async def guarded(session: SessionRecord) -> str:
            slots = model_slots.setdefault(str(session.private.model_id), asyncio.Semaphore(per_model_limit))
            multimodal = _modality(job, session.private.task or {}) in MULTIMODAL
            async with browser_slots if multimodal else contextlib.nullcontext(), slots, job_slots:
                return await _run_session(state, job, session)

        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(guarded(s)) for s in sessions if s.session.status == "pending"]
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
    (blocking; startup and shutdown).

    It reads the stored documents, not typed records: it must end every unfinished session and
    release what it held, even one whose document a crash or an older server left incomplete
    (a record that no longer validates would otherwise stop the server from starting)."""
    now = iso()
    for job in state.store.list(JOB_KIND):
        job_id = str(job["id"])
        if job.get("status") in _TERMINAL_JOB:
            continue
        for session in state.store.list(SESSION_KIND, parent=job_id):
            if session.get("status") not in _TERMINAL_SESSION:
                state.store.update(
                    SESSION_KIND,
                    str(session["session_id"]),
                    status="errored",
                    error=reason,
                    interrupted=True,  # what clients read (``SessionInfo.interrupted``), not ``error``
                    ended_at=now,
                )
                lease_id = session.get("lease_id")
                if lease_id is not None:  # end its browser now rather than at the lease's TTL
                    _job_browser.release_lease(state, str(lease_id))
                instance_id = session.get("instance_id")
                if instance_id is not None:  # release it now rather than at its TTL
                    with contextlib.suppress(LocalAPIError):
                        _instances.delete_instance(state, instance_id)
        # Instances a session made but had not recorded yet carry the job's id as their run_id.
        _instances.delete_instances_batch(state, run_id=job_id, profile_id=None)
        state.store.update(JOB_KIND, job_id, status="errored", error=reason, updated_at=now)


async def stop_jobs(state: LocalState) -> None:
    """Cancel the running jobs and wait (bounded) while their sessions close their envs.

    The sessions close through this server's own HTTP API, so the server calls this while it still
    answers (``fleet_local._server``), before it stops listening.

    Args:
        state: Server state.
    """
    running = list(_tracked(state).values())
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=STOP_TIMEOUT)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Settle jobs a previous process left running; on shutdown, stop the running ones (if the
    server has not already) and settle what they left, then close the jobs' client."""
    await anyio.to_thread.run_sync(_interrupt_unfinished, state, "interrupted: the server restarted")
    try:
        yield
    finally:
        await stop_jobs(state)
        await anyio.to_thread.run_sync(_interrupt_unfinished, state, "interrupted: the server shut down")
        client, state.job_client = state.job_client, None
        if client is not None:
            await client.close()
