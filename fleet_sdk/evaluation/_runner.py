"""The client-side evaluation runner: tasks x models x k episodes, played here, resumable.

Each episode is a ``TaskEnv`` episode played by ``fleet_sdk.episodes.play_episode`` with a
policy: the bundled ``local/scripted`` (the task's reference solution) and ``local/random``
(schema-valid random tool calls), or any other model id, asked through an OpenAI-compatible
chat-completions endpoint with its sampling parameters. Every finished episode is committed to the
run directory at once, then uploaded as a session of the run's trace job, so an interrupted run
resumes where it stopped and the report's numbers can be checked against the sessions the server
stores. The row comes first, with the upload it owes: an interruption during the upload keeps the
episode (a resume never plays it again), and the upload is sent later, by this run or a resumed
one (``RunDir.pending_uploads``).

Before the first episode every model is checked: a local policy that exists, or an endpoint that
answers one small request (``model_problems``), so a wrong URL or key fails the run at once
instead of erroring every episode. A resumed run reads everything from the run directory
(tasks, models, endpoints and sampling, k, max steps); a value given again that differs is
refused. The transcripts of failed and errored episodes are copied into the run directory.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._client import AsyncFleet
from .._exceptions import EvaluationError, FleetError, PolicyError
from ..episodes import EpisodeResult, play_episode
from ..policies import (
    LOCAL_MODELS,
    RANDOM_MODEL,
    SCRIPTED_MODEL,
    ModelEndpoint,
    Policy,
    PolicyContext,
    PolicyFactory,
    PolicyTurn,
    SamplingParams,
    close_policy_factory,
    make_policy,
    probe_endpoint,
)
from ..reports import ErrorKind, Outcome, ReportEnvelope, classify
from ..rewards import verifier_feedback
from ..task_env import TaskEnv
from ..tasks import Task, as_task
from ._rundir import TRANSCRIPTS_DIR, RunDir, RunManifest

if TYPE_CHECKING:
    from ..executors import EpisodeExecutor

__all__ = [
    "MODEL_API_KEY_ENV",
    "RANDOM_MODEL",
    "SCRIPTED_MODEL",
    "ModelEndpoint",
    "Progress",
    "model_problems",
    "run_evaluation",
    "save_transcripts",
]

log = logging.getLogger("fleet_sdk.evaluation")

MODEL_API_KEY_ENV = "FLEET_EVAL_MODEL_API_KEY"
"""The environment variable a resumed run reads its endpoints' key from (keys are never stored)."""

_ERROR_LIMIT = 500
_ACTION_LIMIT = 300
DEFAULT_K = 1
DEFAULT_CONCURRENCY = 4
DEFAULT_MAX_STEPS = 30


@dataclass(frozen=True)
class Progress:
    """Where a run stands, after each finished episode.

    Attributes:
        done: Episodes finished, including those of earlier (resumed) attempts.
        total: Episodes in the run.
        passed: Finished episodes that passed.
        graded: Finished episodes that were graded (passed or failed).
        elapsed: Seconds since this attempt started.
        eta: Estimated seconds left, from this attempt's pace; None before the first episode.
    """

    done: int
    total: int
    passed: int
    graded: int
    elapsed: float
    eta: float | None

    @property
    def pass_rate(self) -> float | None:
        """Passed over graded so far."""
        return self.passed / self.graded if self.graded else None


class _ModelWatch:
    """A policy factory whose policies note when the model itself failed (a ``PolicyError``), so
    an errored episode can be told apart as a model error from an infrastructure one.

    Args:
        factory: The model's policy factory.
    """

    def __init__(self, factory: PolicyFactory) -> None:
        self._factory = factory
        self.failed = False

    def __call__(self, context: PolicyContext) -> Policy:
        return _WatchedPolicy(self._factory(context), self)


class _WatchedPolicy:
    def __init__(self, policy: Policy, watch: _ModelWatch) -> None:
        self._policy = policy
        self._watch = watch

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        try:
            return await self._policy.next_turn(messages)
        except PolicyError:
            self._watch.failed = True
            raise

    async def aclose(self) -> None:
        await self._policy.aclose()


def _last_action(env: TaskEnv) -> str | None:
    """The episode's last tool call, as ``tool({...arguments})``."""
    for message in reversed(env.chat_history):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            function = calls[-1].get("function") or {}
            return f"{function.get('name')}({function.get('arguments') or ''})"[:_ACTION_LIMIT]
    return None


def _outcome(
    model: str, sample: int, result: EpisodeResult, *, env: TaskEnv | None = None, model_failed: bool = False
) -> Outcome:
    """An episode's report row: the result, and what the played ``env`` shows of how it went
    (what the verifier said, the last action)."""
    error = result.error or result.verifier_error
    error_kind: ErrorKind | None = None
    if result.reward is None:
        error_kind = "model" if model_failed else "infrastructure" if result.error else "verifier"
    passed = result.reward is not None and result.reward >= 1.0
    return Outcome(
        task_key=result.task_key,
        model=model,
        sample=sample,
        status=classify(result.reward),
        score=result.reward,
        session_id=result.session_id,
        verifier_execution_id=result.verifier_execution_id,
        error=error[:_ERROR_LIMIT] if error else None,
        duration_ms=int(result.duration_s * 1000),
        error_kind=error_kind,
        done_reason=result.done_reason,
        feedback=None if env is None or passed else verifier_feedback(env.verifier_stdout),
        tool_errors=len(result.tool_errors),
        last_tool_error=result.tool_errors[-1][:_ERROR_LIMIT] if result.tool_errors else None,
        last_action=None if env is None else _last_action(env),
    )


async def _play(
    fleet: AsyncFleet,
    task: Task,
    model: str,
    sample: int,
    *,
    max_steps: int,
    trace_job_id: str | None,
    endpoint: ModelEndpoint | None,
    factory: PolicyFactory | None = None,
) -> _Played:
    """One episode; never raises (a crash is an errored outcome). ``factory``: the run's policy
    factory of ``model`` (one model HTTP client for the whole run), else one is made here."""
    episode_id = f"{task.task_key}:{model}:{sample}"  # seeds the random policy: a slot replays identically
    try:
        policy = factory or make_policy(model, endpoint)
    except PolicyError as exc:  # no instance is made for a model that cannot be asked
        error = f"{type(exc).__name__}: {exc} (run_evaluation's model_endpoint)"
        result = EpisodeResult.unplayed(episode_id, task.task_key, error)
        return _Played(_outcome(model, sample, result, model_failed=True))
    watch = _ModelWatch(policy)
    # No trace job on the env: the runner uploads the episode after storing it (module docstring).
    env = TaskEnv(task, fleet=fleet, max_steps=max_steps)
    seen = _Seen()
    result = await play_episode(env, watch, episode_id=episode_id, on_step=seen.note)
    outcome = _outcome(model, sample, result, env=env, model_failed=watch.failed)
    # A failed episode is not uploaded (as ``play_episode`` has it): its reward would read as graded.
    failed = result.error is not None and result.reward is None
    if trace_job_id is not None and not failed:
        return _Played(outcome, upload=_upload_of(model, result, env, seen))
    if outcome.status == "errored":  # no session will hold its transcript: it travels with it
        return _Played(outcome, [dict(m) for m in env.chat_history])
    return _Played(outcome)


class _Seen:
    """What an episode shows only while it runs: its instance and when it started."""

    def __init__(self) -> None:
        self.started_at = dt.datetime.now(dt.UTC)
        self.instance_id: str | None = None

    async def note(self, env: TaskEnv) -> None:
        if env.env is not None:
            self.instance_id = env.env.instance_id


def _upload_of(model: str, result: EpisodeResult, env: TaskEnv, seen: _Seen) -> dict[str, Any]:
    """What uploading the episode sends (``AsyncTraces.upload_session``'s arguments, JSON-ready),
    as ``TaskEnv`` would send it with a trace job."""
    return {
        "task_key": result.task_key,
        "model": model,
        "chat_history": [dict(m) for m in env.chat_history],
        "reward": result.reward,
        "instance_id": seen.instance_id,
        "metadata": {
            "done_reason": result.done_reason,
            "steps": result.steps,
            "verifier_error": result.verifier_error,
            "tool_errors": list(result.tool_errors),
        },
        "verifier_execution_id": result.verifier_execution_id,
        "status": "completed" if result.reward is not None else "errored",
        "started_at": seen.started_at.isoformat(),
        "ended_at": dt.datetime.now(dt.UTC).isoformat(),
    }


async def _send_upload(
    fleet: AsyncFleet,
    store: RunDir,
    lock: anyio.Lock,
    job_id: str,
    *,
    outcome: Outcome,
    upload: Mapping[str, Any],
) -> bool:
    """Send one stored episode's pending upload to trace job ``job_id``; whether it was taken (a
    refused one stays pending). Cancelled, it stays pending too: the episode itself is stored."""
    started, ended = (upload.get(name) for name in ("started_at", "ended_at"))
    session_id = await fleet.traces.upload_session(
        job_id=job_id,
        task_key=str(upload["task_key"]),
        model=str(upload["model"]),
        chat_history=list(upload["chat_history"]),
        reward=upload.get("reward"),
        instance_id=upload.get("instance_id"),
        metadata=dict(upload.get("metadata") or {}),
        verifier_execution_id=upload.get("verifier_execution_id"),
        status=upload.get("status"),
        started_at=dt.datetime.fromisoformat(started) if started else None,
        ended_at=dt.datetime.fromisoformat(ended) if ended else None,
    )
    if session_id is None:
        return False
    async with lock:  # one writer at a time on the run directory's connection
        await anyio.to_thread.run_sync(store.uploaded, outcome, session_id)
    return True


async def _send_pending_uploads(
    fleet: AsyncFleet, store: RunDir, lock: anyio.Lock, job_id: str, *, concurrency: int
) -> int:
    """Send every pending upload of the run (those an interruption or a refusal left); how many
    were taken. Each is tried once; what is refused again waits for the next run."""
    pending = await anyio.to_thread.run_sync(store.pending_uploads)
    gate = asyncio.Semaphore(concurrency)

    async def one(outcome: Outcome, upload: Mapping[str, Any]) -> bool:
        async with gate:
            return await _send_upload(fleet, store, lock, job_id, outcome=outcome, upload=upload)

    async with asyncio.TaskGroup() as group:
        sent = [group.create_task(one(outcome, upload)) for outcome, upload in pending]
    return sum(1 for task in sent if task.result())


@dataclass(frozen=True)
class _Played:
    """A played episode: its row, the transcript of an errored one no session will hold, and the
    trace upload it owes (sent once the row is stored)."""

    outcome: Outcome
    messages: list[dict[str, Any]] | None = None
    upload: dict[str, Any] | None = None


async def _play_job(fleet: AsyncFleet, job: tuple[Any, ...], attempt: int) -> _Played:
    """``_play`` as an executor ``Job`` (module-level, so executors in other processes can ship it)."""
    task, model, sample, max_steps, trace_job_id, endpoint, factory = job
    return await _play(
        fleet,
        task,
        model,
        sample,
        max_steps=max_steps,
        trace_job_id=trace_job_id,
        endpoint=endpoint,
        factory=factory,
    )


def _keep_transcript(store: RunDir, played: _Played) -> Outcome:
    """Write an errored episode's own transcript into the run directory; its row naming the file."""
    outcome = played.outcome
    if played.messages is None:
        return outcome
    name = _UNSAFE.sub("_", f"{outcome.task_key}.{outcome.model}.{outcome.sample}")
    relative = f"{TRANSCRIPTS_DIR}/episode-{name}.json"
    # The shape of a session's transcript (``transcript`` holds the messages), and why it errored.
    document = {
        "task": {"key": outcome.task_key},
        "model": outcome.model,
        "sample": outcome.sample,
        "error": outcome.error,
        "transcript": played.messages,
    }
    store.transcripts.mkdir(exist_ok=True)
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
    (store.path / relative).write_text(text, encoding="utf-8")
    return outcome.model_copy(update={"transcript": relative})


def _endpoint_record(endpoint: ModelEndpoint) -> dict[str, Any]:
    """What a run directory keeps of an endpoint: its URL and sampling, never its key."""
    return {"base_url": endpoint.base_url, "sampling": endpoint.sampling.to_dict()}


def _endpoint_of(record: Mapping[str, Any], api_key: str | None) -> ModelEndpoint:
    return ModelEndpoint(str(record["base_url"]), api_key, SamplingParams.from_dict(record.get("sampling")))


async def model_problems(
    models: Sequence[str], endpoints: Mapping[str, ModelEndpoint]
) -> list[tuple[str, str]]:
    """What stops each model from being played: ``(model, problem)`` pairs, none when all can.

    A ``local/...`` model must be a bundled policy (a close name is suggested); any other model
    needs an endpoint, which is asked one small request (``fleet_sdk.policies.probe_endpoint``),
    all endpoints at once.

    Args:
        models: The model ids of the run.
        endpoints: The endpoint of each model that is not a local policy.
    """
    problems: list[tuple[str, str]] = []
    probes: list[tuple[str, ModelEndpoint]] = []
    for model in dict.fromkeys(models):
        if model in LOCAL_MODELS:
            continue
        if model.startswith("local/"):
            close = difflib.get_close_matches(model, LOCAL_MODELS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"local policies are {', '.join(LOCAL_MODELS)}"
            problems.append((model, f"no such local policy; {hint}"))
        elif model not in endpoints:
            problems.append((model, "needs a chat-completions endpoint (or use a local policy)"))
        else:
            probes.append((model, endpoints[model]))

    async def probe(model: str, endpoint: ModelEndpoint) -> tuple[str, str] | None:
        try:
            await probe_endpoint(model, endpoint)
        except PolicyError as exc:
            return model, str(exc)
        return None

    answers = await asyncio.gather(*(probe(model, endpoint) for model, endpoint in probes))
    problems += [answer for answer in answers if answer is not None]
    return problems


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


async def save_transcripts(
    fleet: AsyncFleet, store: RunDir, outcomes: Sequence[Outcome], *, concurrency: int = 4
) -> int:
    """Copy the transcripts of failed and errored episodes that have none yet into the run directory.

    Each is read from the session the episode was uploaded as and written to
    ``transcripts/<session id>.json``; the episode's row then names the file. A transcript that
    cannot be read is skipped (logged): the report names the session instead.

    Args:
        fleet: The client of the server holding the sessions.
        store: The run directory.
        outcomes: The episodes to consider.
        concurrency: Transcripts read at once.

    Returns:
        How many were written.
    """
    wanted = [
        o for o in outcomes if o.status in ("failed", "errored") and o.session_id and o.transcript is None
    ]
    if not wanted:
        return 0
    store.transcripts.mkdir(exist_ok=True)
    gate = asyncio.Semaphore(concurrency)
    written = 0

    async def one(outcome: Outcome) -> None:
        nonlocal written
        assert outcome.session_id is not None
        async with gate:
            try:
                transcript = await fleet.api.sessions.get_session_transcript(outcome.session_id)
            except FleetError as exc:
                log.warning("transcript of session %s not saved: %s", outcome.session_id, type(exc).__name__)
                return
        relative = f"{TRANSCRIPTS_DIR}/{_UNSAFE.sub('_', outcome.session_id)}.json"
        text = json.dumps(transcript.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        await anyio.to_thread.run_sync((store.path / relative).write_text, text, "utf-8")
        await anyio.to_thread.run_sync(store.set_transcript, outcome, relative)
        written += 1

    async with asyncio.TaskGroup() as group:
        for outcome in wanted:
            group.create_task(one(outcome))
    return written


def _resolve_endpoints(
    models: Sequence[str],
    model_endpoint: ModelEndpoint | None,
    model_endpoints: Mapping[str, ModelEndpoint] | None,
) -> dict[str, ModelEndpoint]:
    """The endpoint of each model that is not a local policy: its own, else the shared one."""
    found: dict[str, ModelEndpoint] = {}
    for model in models:
        endpoint = (model_endpoints or {}).get(model) or (None if model in LOCAL_MODELS else model_endpoint)
        if endpoint is not None:
            found[model] = endpoint
    return found


def _resumed_manifest(
    store: RunDir,
    *,
    tasks: Sequence[Task | Mapping[str, Any]] | None,
    models: Sequence[str] | None,
    k: int | None,
    max_steps: int | None,
    run_id: str | None,
    model_endpoint: ModelEndpoint | None,
    model_endpoints: Mapping[str, ModelEndpoint] | None,
) -> tuple[RunManifest, dict[str, ModelEndpoint]]:
    """The stored manifest and its endpoints (keys from those given, else the environment), after
    checking that nothing given contradicts the run."""
    manifest = store.manifest()
    if manifest is None:
        raise EvaluationError(f"resume: {store.path} holds no run to resume")
    given = None
    if model_endpoint is not None or model_endpoints:
        given = _resolve_endpoints(models or manifest.models, model_endpoint, model_endpoints)
        if not manifest.endpoints:  # a run from before endpoints were kept learns them now
            manifest = store.update(endpoints={m: _endpoint_record(e) for m, e in given.items()})
    differences = manifest.differences(
        task_keys=[as_task(t).task_key for t in tasks] if tasks else None,
        models=list(models) if models is not None else None,
        k=k,
        max_steps=max_steps if manifest.max_steps is not None else None,
        run_id=run_id,
        endpoints=None if given is None else {m: _endpoint_record(e) for m, e in given.items()},
    )
    if differences:
        name, value, stored = differences[0]
        raise EvaluationError(f"resume: {name} {value!r} contradicts the run's {stored!r}")
    key = next((e.api_key for e in (given or {}).values() if e.api_key), None)
    key = key or os.environ.get(MODEL_API_KEY_ENV) or None
    return manifest, {model: _endpoint_of(record, key) for model, record in manifest.endpoints.items()}


async def run_evaluation(
    fleet: AsyncFleet,
    run_dir: str | Path,
    *,
    tasks: Sequence[Task | Mapping[str, Any]] | None = None,
    models: Sequence[str] | None = None,
    k: int | None = None,
    concurrency: int | None = None,
    max_steps: int | None = None,
    suite_name: str = "tasks",
    run_id: str | None = None,
    resume: bool = False,
    upload: bool = True,
    model_endpoint: ModelEndpoint | None = None,
    model_endpoints: Mapping[str, ModelEndpoint] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    executor: EpisodeExecutor | None = None,
    retry_errored: bool = False,
    preflight: bool = True,
    server: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ReportEnvelope:
    """Play every (task, model, sample) episode not yet in ``run_dir`` and return the report.

    A new run needs ``tasks`` and ``models``; a resumed one reads everything from the run
    directory (tasks, models, endpoints with their sampling parameters, k, max steps, the last
    concurrency), and a value given that differs from the stored one is refused. Endpoint keys are
    never stored: a resumed run takes them from the endpoints given again, else from
    ``FLEET_EVAL_MODEL_API_KEY``. Episodes run ``concurrency`` at a time; each is committed to the
    run directory as soon as it finishes.

    Args:
        fleet: The client (``LocalFleet.async_fleet()`` or ``AsyncFleet(api_key=...)``).
        run_dir: The run directory.
        tasks: The tasks (``Task`` or config dicts) of a new run.
        models: Model ids of a new run: ``local/scripted``, ``local/random`` or endpoint models.
        k: Samples per task and model (default 1).
        concurrency: Episodes at once (at least 1; default 4, or the resumed run's).
        max_steps: Step budget per episode (default 30).
        suite_name: What the report calls the suite.
        run_id: The run id (default: ``run-<timestamp>-<random>``).
        resume: Continue the run in ``run_dir`` instead of starting one.
        upload: Upload each episode as a session of the run's trace job (and copy the transcripts
            of failed and errored ones into ``run_dir/transcripts``).
        model_endpoint: Where every model that is not a local policy is asked.
        model_endpoints: Where each named model is asked (before ``model_endpoint``), with its
            own sampling parameters.
        on_progress: Called after each finished episode (and once at the start).
        executor: Where the episodes run (``fleet_sdk.executors``): None plays them here on
            ``fleet``, ``concurrency`` at a time; a ``RayExecutor`` plays them on its actors,
            with their own clients and concurrency. Either way each is committed here.
        retry_errored: With ``resume``, play the errored episodes again (graded ones are kept);
            the report's ``retried`` counts them.
        preflight: Check every model before the first episode (``model_problems``); a caller
            that already did may skip it.
        server: What to record about where the episodes ran (``RunManifest.server``); default:
            the client's base URL.
        extra: Anything else to keep with a new run (``RunManifest.extra``).

    Raises:
        EvaluationError: A bad argument (naming it), a model that cannot be played (naming it
            and why), a run directory that holds a run when ``resume`` is false, or none when it
            is true, or a resume given a value that contradicts the stored run.
    """
    for name, value in (("concurrency", concurrency), ("k", k), ("max_steps", max_steps)):
        if value is not None and value < 1:
            raise EvaluationError(f"{name} must be at least 1, got {value}")
    if retry_errored and not resume:
        raise EvaluationError("retry_errored: only a resumed run has errored episodes to retry")
    fresh = None
    if not resume:  # everything is checked before the run directory is touched
        endpoints = _resolve_endpoints(list(dict.fromkeys(models or [])), model_endpoint, model_endpoints)
        fresh = await _new_manifest(
            fleet,
            run_dir,
            tasks=tasks,
            models=models,
            k=k,
            concurrency=concurrency,
            max_steps=max_steps,
            suite_name=suite_name,
            run_id=run_id,
            endpoints=endpoints,
            preflight=preflight,
            server=server,
            extra=extra,
        )
    with RunDir(run_dir) as store:
        if fresh is None:
            manifest, endpoints = _resumed_manifest(
                store,
                tasks=tasks,
                models=models,
                k=k,
                max_steps=max_steps,
                run_id=run_id,
                model_endpoint=model_endpoint,
                model_endpoints=model_endpoints,
            )
            if preflight:
                await _require_models(manifest.models, endpoints)
            if concurrency is not None and concurrency != manifest.concurrency:
                manifest = store.update(concurrency=concurrency)
        else:
            store.start(fresh)
            manifest = fresh
        if retry_errored:
            store.forget_errored()
            manifest = store.require_manifest()
        if upload and manifest.trace_job_id is None:
            job_id = await fleet.traces.create_job(f"fleet-sdk eval {manifest.run_id}")
            store.set_trace_job(job_id)
            manifest = store.require_manifest()
        steps = manifest.max_steps or max_steps or DEFAULT_MAX_STEPS
        width = manifest.concurrency or DEFAULT_CONCURRENCY
        plan = [
            (Task.model_validate(config), model, sample)
            for config in manifest.tasks
            for model in manifest.models
            for sample in range(manifest.k)
        ]
        finished = store.finished()
        todo = [(t, m, s) for t, m, s in plan if (t.task_key, m, s) not in finished]
        outcomes = store.outcomes()
        passed = sum(1 for o in outcomes if o.status == "passed")
        graded = sum(1 for o in outcomes if o.status in ("passed", "failed"))
        done_before = len(plan) - len(todo)
        done_now = 0
        started = time.monotonic()

        def report_progress() -> None:
            if on_progress is None:
                return
            elapsed = time.monotonic() - started
            eta = elapsed / done_now * (len(todo) - done_now) if done_now else None
            on_progress(Progress(done_before + done_now, len(plan), passed, graded, elapsed, eta))

        gate = asyncio.Semaphore(width)

        committing = anyio.Lock()

        def commit(played: _Played) -> tuple[Outcome, bool]:
            outcome = _keep_transcript(store, played)
            return outcome, store.record(outcome, played.upload)

        async def record(played: _Played) -> None:
            nonlocal passed, graded, done_now

            # The SQLite commit blocks: run it off the loop, one at a time on the shared connection.
            # Not cancellable: an episode that finished is stored (its upload follows), so a resume
            # never plays it again; a Ctrl-C landing now waits for the commit.
            async def committed() -> tuple[Outcome, bool]:
                async with committing:
                    return await anyio.to_thread.run_sync(commit, played)

            pending = asyncio.ensure_future(committed())
            try:
                outcome, stored = await asyncio.shield(pending)
            except asyncio.CancelledError:
                await pending
                raise
            if stored:
                done_now += 1
                passed += outcome.status == "passed"
                graded += outcome.status in ("passed", "failed")
            report_progress()
            if stored and played.upload is not None and manifest.trace_job_id is not None:
                trace_job = manifest.trace_job_id
                await _send_upload(fleet, store, committing, trace_job, outcome=outcome, upload=played.upload)

        async def one(task: Task, model: str, sample: int) -> None:
            async with gate:
                played = await _play(
                    fleet,
                    task,
                    model,
                    sample,
                    max_steps=steps,
                    trace_job_id=manifest.trace_job_id if upload else None,
                    endpoint=endpoints.get(model),
                    factory=factories.get(model),
                )
            await record(played)

        # One policy factory per model for the whole run: its model HTTP client is shared by the
        # run's episodes (an executor's other processes get a copy that is not shared).
        factories = {
            model: make_policy(model, endpoint, shared=True) for model, endpoint in endpoints.items()
        }
        report_progress()
        try:
            if executor is not None:
                trace = manifest.trace_job_id if upload else None
                jobs = [(t, m, s, steps, trace, endpoints.get(m), factories.get(m)) for t, m, s in todo]
                async for index, played in executor.map_unordered(_play_job, jobs):
                    if isinstance(played, _Played):
                        await record(played)
                        continue
                    task, model, sample = todo[index]  # every worker it was sent to was lost
                    lost = _Played(
                        Outcome(
                            task_key=task.task_key,
                            model=model,
                            sample=sample,
                            status=classify(None),
                            score=None,
                            error=f"worker lost: {played!r}"[:_ERROR_LIMIT],
                            error_kind="infrastructure",
                        )
                    )
                    await record(lost)
            else:
                async with asyncio.TaskGroup() as group:
                    for task, model, sample in todo:
                        group.create_task(one(task, model, sample))
        finally:
            for factory in factories.values():
                await close_policy_factory(factory)
        if upload and manifest.trace_job_id is not None:  # what an interruption or a refusal left
            await _send_pending_uploads(fleet, store, committing, manifest.trace_job_id, concurrency=width)
        if upload:
            await save_transcripts(fleet, store, store.outcomes(), concurrency=width)
        return store.envelope()


async def _new_manifest(
    fleet: AsyncFleet,
    run_dir: str | Path,
    *,
    tasks: Sequence[Task | Mapping[str, Any]] | None,
    models: Sequence[str] | None,
    k: int | None,
    concurrency: int | None,
    max_steps: int | None,
    suite_name: str,
    run_id: str | None,
    endpoints: Mapping[str, ModelEndpoint],
    preflight: bool,
    server: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None,
) -> RunManifest:
    """The manifest of a new run, once its arguments and models have passed every check."""
    if RunDir.exists(run_dir):
        with RunDir(run_dir) as existing:
            held = existing.manifest()
        if held is not None:
            raise EvaluationError(f"{run_dir} already holds run {held.run_id!r}; resume it instead")
    if not tasks:
        raise EvaluationError("tasks: a new run needs at least one task")
    if not models:
        raise EvaluationError("models: a new run needs at least one model")
    configs = [as_task(t).model_dump(mode="json") for t in tasks]
    model_ids = list(dict.fromkeys(models))
    if preflight:
        await _require_models(model_ids, endpoints)
    now = dt.datetime.now(dt.UTC)
    return RunManifest(
        run_id=run_id or f"run-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
        suite_name=suite_name,
        tasks=configs,
        models=model_ids,
        k=k or DEFAULT_K,
        created_at=now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        max_steps=max_steps or DEFAULT_MAX_STEPS,
        concurrency=concurrency or DEFAULT_CONCURRENCY,
        endpoints={model: _endpoint_record(e) for model, e in endpoints.items()},
        server=dict(server) if server is not None else {"base_url": str(fleet.config.base_url)},
        extra=dict(extra or {}),
    )


async def _require_models(models: Sequence[str], endpoints: Mapping[str, ModelEndpoint]) -> None:
    problems = await model_problems(models, endpoints)
    if problems:
        raise EvaluationError("models: " + "; ".join(f"{model}: {problem}" for model, problem in problems))
