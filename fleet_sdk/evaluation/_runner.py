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

``run_evaluation`` makes a ``_ClientRun`` of its arguments and drives it through the phases every
run has (``_run.RunPhases``); one episode, and the row it becomes, is ``_episode``'s.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._client import AsyncFleet
from .._exceptions import EvaluationError, PolicyError
from ..policies import (
    LOCAL_MODELS,
    RANDOM_MODEL,
    SCRIPTED_MODEL,
    ModelEndpoint,
    PolicyFactory,
    SamplingParams,
    close_policy_factory,
    make_policy,
    probe_endpoint,
)
from ..reports import Outcome, ReportEnvelope
from ..tasks import Task, as_task
from ._episode import Played, keep_transcript, lost_episode, play, play_job
from ._run import (
    DEFAULT_CONCURRENCY,
    DEFAULT_K,
    DEFAULT_MAX_STEPS,
    Progress,
    RunPhases,
    new_run_stamp,
    save_transcripts,
)
from ._rundir import RunDir, RunManifest

if TYPE_CHECKING:
    from ..executors import EpisodeExecutor

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_K",
    "DEFAULT_MAX_STEPS",
    "MODEL_API_KEY_ENV",
    "RANDOM_MODEL",
    "SCRIPTED_MODEL",
    "ModelEndpoint",
    "Progress",
    "model_problems",
    "run_evaluation",
    "save_transcripts",
]

MODEL_API_KEY_ENV = "FLEET_EVAL_MODEL_API_KEY"
"""The environment variable a resumed run reads its endpoints' key from (keys are never stored)."""


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


class _ClientRun(RunPhases):
    """A run played here: ``run_evaluation``'s arguments, driven phase by phase (``RunPhases``).

    ``check`` refuses a bad argument and, for a new run, makes its manifest (asking every model)
    before the run directory is touched; ``open`` starts the run or takes up the stored one;
    ``play`` plays the missing episodes (here, ``concurrency`` at a time, or on an executor), each
    committed as it ends and then uploaded; ``finish`` sends the uploads still pending, copies the
    transcripts of failures and reads the report.
    """

    def __init__(
        self,
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
        resume: bool,
        upload: bool,
        model_endpoint: ModelEndpoint | None,
        model_endpoints: Mapping[str, ModelEndpoint] | None,
        on_progress: Callable[[Progress], None] | None,
        executor: EpisodeExecutor | None,
        retry_errored: bool,
        preflight: bool,
        server: Mapping[str, Any] | None,
        extra: Mapping[str, Any] | None,
    ) -> None:
        super().__init__(fleet, run_dir, resume=resume, retry_errored=retry_errored, on_progress=on_progress)
        self.tasks = tasks
        self.models = models
        self.k = k
        self.concurrency = concurrency
        self.max_steps = max_steps
        self.suite_name = suite_name
        self.run_id = run_id
        self._upload = upload
        self.model_endpoint = model_endpoint
        self.model_endpoints = model_endpoints
        self.executor = executor
        self.preflight = preflight
        self.server = server
        self.extra = extra
        self.fresh: RunManifest | None = None
        self.endpoints: dict[str, ModelEndpoint] = {}
        self._manifest: RunManifest | None = None
        self._committing = anyio.Lock()  # one SQLite commit at a time on the shared connection

    @property
    def upload(self) -> bool:
        return self._upload

    @property
    def manifest(self) -> RunManifest:
        """The run's manifest, as last read (from ``open`` on)."""
        if self._manifest is None:
            raise RuntimeError("the run has no manifest before it is opened")
        return self._manifest

    @property
    def transcript_concurrency(self) -> int:
        return self.manifest.concurrency or DEFAULT_CONCURRENCY

    async def check(self) -> None:
        """Refuse a bad argument; a new run's manifest, its models asked (nothing is touched yet)."""
        for name, value in (("concurrency", self.concurrency), ("k", self.k), ("max_steps", self.max_steps)):
            if value is not None and value < 1:
                raise EvaluationError(f"{name} must be at least 1, got {value}")
        if self.retry_errored and not self.resume:
            raise EvaluationError("retry_errored: only a resumed run has errored episodes to retry")
        if self.resume:
            return
        models = list(dict.fromkeys(self.models or []))
        self.endpoints = _resolve_endpoints(models, self.model_endpoint, self.model_endpoints)
        self.fresh = await _new_manifest(
            self.fleet,
            self.run_dir,
            tasks=self.tasks,
            models=self.models,
            k=self.k,
            concurrency=self.concurrency,
            max_steps=self.max_steps,
            suite_name=self.suite_name,
            run_id=self.run_id,
            endpoints=self.endpoints,
            preflight=self.preflight,
            server=self.server,
            extra=self.extra,
        )

    async def open(self) -> None:
        """Start the new run, or take up the stored one (checked against what was given again)."""
        store = self.store
        if self.fresh is not None:
            store.start(self.fresh)
            self._manifest = self.fresh
            return
        manifest, self.endpoints = _resumed_manifest(
            store,
            tasks=self.tasks,
            models=self.models,
            k=self.k,
            max_steps=self.max_steps,
            run_id=self.run_id,
            model_endpoint=self.model_endpoint,
            model_endpoints=self.model_endpoints,
        )
        if self.preflight:
            await _require_models(manifest.models, self.endpoints)
        if self.concurrency is not None and self.concurrency != manifest.concurrency:
            manifest = store.update(concurrency=self.concurrency)
        self._manifest = manifest

    async def retry(self) -> None:
        await super().retry()
        self._manifest = self.store.require_manifest()

    def todo(self) -> list[tuple[Task, str, int]]:
        """The run's slots the run directory does not hold yet; the tally counts the others."""
        manifest = self.manifest
        slots = [
            (Task.model_validate(config), model, sample)
            for config in manifest.tasks
            for model in manifest.models
            for sample in range(manifest.k)
        ]
        finished = self.store.finished()
        todo = [(t, m, s) for t, m, s in slots if (t.task_key, m, s) not in finished]
        tally = self.tally
        tally.total = len(slots)
        tally.done_before = tally.done = len(slots) - len(todo)
        tally.grades(self.store.outcomes())
        return todo

    async def play(self) -> None:
        """Play the missing episodes with one policy factory per model, each committed as it ends."""
        store = self.store
        if self.upload and self.manifest.trace_job_id is None:
            job_id = await self.fleet.traces.create_job(f"fleet-sdk eval {self.manifest.run_id}")
            store.set_trace_job(job_id)
            self._manifest = store.require_manifest()
        todo = self.todo()
        # One policy factory per model for the whole run: its model HTTP client is shared by the
        # run's episodes (an executor's other processes get a copy that is not shared).
        factories = {
            model: make_policy(model, endpoint, shared=True) for model, endpoint in self.endpoints.items()
        }
        self.tally.started = time.monotonic()
        self.tally.report()
        try:
            if self.executor is not None:
                await self._play_on(self.executor, todo, factories)
            else:
                await self._play_here(todo, factories)
        finally:
            for factory in factories.values():
                await close_policy_factory(factory)

    @property
    def _steps(self) -> int:
        return self.manifest.max_steps or self.max_steps or DEFAULT_MAX_STEPS

    @property
    def _trace_job_id(self) -> str | None:
        return self.manifest.trace_job_id if self.upload else None

    async def _play_here(
        self, todo: Sequence[tuple[Task, str, int]], factories: Mapping[str, PolicyFactory]
    ) -> None:
        gate = asyncio.Semaphore(self.manifest.concurrency or DEFAULT_CONCURRENCY)

        async def one(task: Task, model: str, sample: int) -> None:
            async with gate:
                played = await play(
                    self.fleet,
                    task,
                    model,
                    sample,
                    max_steps=self._steps,
                    trace_job_id=self._trace_job_id,
                    endpoint=self.endpoints.get(model),
                    factory=factories.get(model),
                )
            await self._record(played)

        async with asyncio.TaskGroup() as group:
            for task, model, sample in todo:
                group.create_task(one(task, model, sample))

    async def _play_on(
        self,
        executor: EpisodeExecutor,
        todo: Sequence[tuple[Task, str, int]],
        factories: Mapping[str, PolicyFactory],
    ) -> None:
        steps, trace = self._steps, self._trace_job_id
        jobs = [(t, m, s, steps, trace, self.endpoints.get(m), factories.get(m)) for t, m, s in todo]
        async for index, played in executor.map_unordered(play_job, jobs):
            if isinstance(played, Played):
                await self._record(played)
            else:  # every worker it was sent to was lost
                await self._record(lost_episode(*todo[index], played))

    async def _record(self, played: Played) -> None:
        """Commit a played episode to the run directory and count it."""
        store = self.store

        def commit() -> tuple[Outcome, bool]:
            outcome = keep_transcript(store, played)
            return outcome, store.record(outcome, played.upload)

        # The SQLite commit blocks: run it off the loop, one at a time on the shared connection.
        # Not cancellable: an episode that finished is stored (its upload follows), so a resume
        # never plays it again; a Ctrl-C landing now waits for the commit.
        async def committed() -> tuple[Outcome, bool]:
            async with self._committing:
                return await anyio.to_thread.run_sync(commit)

        pending = asyncio.ensure_future(committed())
        try:
            outcome, stored = await asyncio.shield(pending)
        except asyncio.CancelledError:
            await pending
            raise
        if stored:
            self.tally.add(outcome)
        self.tally.report()
        trace_job = self.manifest.trace_job_id
        if stored and played.upload is not None and trace_job is not None:
            await self._send_upload(trace_job, outcome=outcome, upload=played.upload)

    async def _send_upload(self, job_id: str, *, outcome: Outcome, upload: Mapping[str, Any]) -> bool:
        """Send one stored episode's pending upload to trace job ``job_id``; whether it was taken (a
        refused one stays pending). Cancelled, it stays pending too: the episode itself is stored."""
        started, ended = (upload.get(name) for name in ("started_at", "ended_at"))
        session_id = await self.fleet.traces.upload_session(
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
        async with self._committing:  # one writer at a time on the run directory's connection
            await anyio.to_thread.run_sync(self.store.uploaded, outcome, session_id)
        return True

    async def _send_pending_uploads(self, job_id: str) -> int:
        """Send every pending upload of the run (those an interruption or a refusal left); how many
        were taken. Each is tried once; what is refused again waits for the next run."""
        pending = await anyio.to_thread.run_sync(self.store.pending_uploads)
        gate = asyncio.Semaphore(self.manifest.concurrency or DEFAULT_CONCURRENCY)

        async def one(outcome: Outcome, upload: Mapping[str, Any]) -> bool:
            async with gate:
                return await self._send_upload(job_id, outcome=outcome, upload=upload)

        async with asyncio.TaskGroup() as group:
            sent = [group.create_task(one(outcome, upload)) for outcome, upload in pending]
        return sum(1 for task in sent if task.result())

    async def finish(self) -> ReportEnvelope:
        """Send the uploads still pending (what an interruption or a refusal left), then as every
        run: copy the transcripts of failures, read the report."""
        if self.upload and self.manifest.trace_job_id is not None:
            await self._send_pending_uploads(self.manifest.trace_job_id)
        return await super().finish()


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
    run = _ClientRun(
        fleet,
        run_dir,
        tasks=tasks,
        models=models,
        k=k,
        concurrency=concurrency,
        max_steps=max_steps,
        suite_name=suite_name,
        run_id=run_id,
        resume=resume,
        upload=upload,
        model_endpoint=model_endpoint,
        model_endpoints=model_endpoints,
        on_progress=on_progress,
        executor=executor,
        retry_errored=retry_errored,
        preflight=preflight,
        server=server,
        extra=extra,
    )
    return await run.drive()


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
    run_id, created_at = new_run_stamp(run_id)
    return RunManifest(
        run_id=run_id,
        suite_name=suite_name,
        tasks=configs,
        models=model_ids,
        k=k or DEFAULT_K,
        created_at=created_at,
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
