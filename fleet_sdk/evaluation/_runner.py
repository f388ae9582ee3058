"""The client-side evaluation runner: tasks x models x k episodes, played here, resumable.

Each episode is a ``TaskEnv`` episode played by ``fleet_sdk.episodes.play_episode`` with a
policy: the bundled ``local/scripted`` (the task's reference solution) and ``local/random``
(schema-valid random tool calls), or any other model id, asked through an OpenAI-compatible
chat-completions endpoint. Every finished episode is uploaded as a session of the run's trace job
and committed to the run directory at once, so an interrupted run resumes where it stopped and the
report's numbers can be checked against the sessions the server stores.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._client import AsyncFleet
from .._exceptions import EvaluationError, PolicyError
from ..episodes import EpisodeResult, play_episode
from ..policies import RANDOM_MODEL, SCRIPTED_MODEL, ModelEndpoint, make_policy
from ..reports import Outcome, ReportEnvelope, classify
from ..task_env import TaskEnv
from ..tasks import Task, as_task
from ._rundir import RunDir, RunManifest

if TYPE_CHECKING:
    from ..executors import EpisodeExecutor

__all__ = ["RANDOM_MODEL", "SCRIPTED_MODEL", "ModelEndpoint", "Progress", "run_evaluation"]

_ERROR_LIMIT = 500


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


def _outcome(model: str, sample: int, result: EpisodeResult) -> Outcome:
    """An episode's report row."""
    error = result.error or result.verifier_error
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
) -> Outcome:
    """One episode; never raises (a crash is an errored outcome)."""
    episode_id = f"{task.task_key}:{model}:{sample}"  # seeds the random policy: a slot replays identically
    try:
        policy = make_policy(model, endpoint)
    except PolicyError as exc:  # no instance is made for a model that cannot be asked
        error = f"{type(exc).__name__}: {exc} (run_evaluation's model_endpoint)"
        return _outcome(model, sample, EpisodeResult.unplayed(episode_id, task.task_key, error))
    env = TaskEnv(task, fleet=fleet, max_steps=max_steps, trace_job_id=trace_job_id, trace_model=model)
    return _outcome(model, sample, await play_episode(env, policy, episode_id=episode_id))


async def _play_job(fleet: AsyncFleet, job: tuple[Any, ...], attempt: int) -> Outcome:
    """``_play`` as an executor ``Job`` (module-level, so executors in other processes can ship it)."""
    task, model, sample, max_steps, trace_job_id, endpoint = job
    return await _play(
        fleet, task, model, sample, max_steps=max_steps, trace_job_id=trace_job_id, endpoint=endpoint
    )


async def run_evaluation(
    fleet: AsyncFleet,
    run_dir: str | Path,
    *,
    tasks: Sequence[Task | Mapping[str, Any]] | None = None,
    models: Sequence[str] | None = None,
    k: int = 1,
    concurrency: int = 4,
    max_steps: int = 30,
    suite_name: str = "tasks",
    run_id: str | None = None,
    resume: bool = False,
    upload: bool = True,
    model_endpoint: ModelEndpoint | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    executor: EpisodeExecutor | None = None,
) -> ReportEnvelope:
    """Play every (task, model, sample) episode not yet in ``run_dir`` and return the report.

    A new run needs ``tasks`` and ``models``; a resumed one reads them from the run directory
    (given ones must match). Episodes run ``concurrency`` at a time; each is committed to the
    run directory as soon as it finishes.

    Args:
        fleet: The client (``LocalFleet.async_fleet()`` or ``AsyncFleet(api_key=...)``).
        run_dir: The run directory.
        tasks: The tasks (``Task`` or config dicts) of a new run.
        models: Model ids of a new run: ``local/scripted``, ``local/random`` or endpoint models.
        k: Samples per task and model.
        concurrency: Episodes at once (at least 1).
        max_steps: Step budget per episode.
        suite_name: What the report calls the suite.
        run_id: The run id (default: ``run-<timestamp>-<random>``).
        resume: Continue the run in ``run_dir`` instead of starting one.
        upload: Upload each episode as a session of the run's trace job.
        model_endpoint: Where non-bundled models are asked.
        on_progress: Called after each finished episode (and once at the start).
        executor: Where the episodes run (``fleet_sdk.executors``): None plays them here on
            ``fleet``, ``concurrency`` at a time; a ``RayExecutor`` plays them on its actors,
            with their own clients and concurrency. Either way each is committed here.

    Raises:
        EvaluationError: A bad argument (naming it), a run directory that holds a run when
            ``resume`` is false, or none when it is true, or a resume with different tasks/models.
    """
    if concurrency < 1:
        raise EvaluationError(f"concurrency must be at least 1, got {concurrency}")
    if k < 1:
        raise EvaluationError(f"k must be at least 1, got {k}")
    with RunDir(run_dir) as store:
        manifest = store.manifest()
        if resume:
            if manifest is None:
                raise EvaluationError(f"resume: {run_dir} holds no run to resume")
            if models is not None and list(models) != manifest.models:
                raise EvaluationError(
                    f"resume: models {list(models)} differ from the run's {manifest.models}"
                )
        else:
            if manifest is not None:
                raise EvaluationError(f"{run_dir} already holds run {manifest.run_id!r}; resume it instead")
            if not tasks:
                raise EvaluationError("tasks: a new run needs at least one task")
            if not models:
                raise EvaluationError("models: a new run needs at least one model")
            now = dt.datetime.now(dt.UTC)
            manifest = RunManifest(
                run_id=run_id or f"run-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
                suite_name=suite_name,
                tasks=[as_task(t).model_dump(mode="json") for t in tasks],
                models=list(dict.fromkeys(models)),
                k=k,
                created_at=now.isoformat(timespec="seconds").replace("+00:00", "Z"),
            )
            store.start(manifest)
        if upload and manifest.trace_job_id is None:
            job_id = await fleet.traces.create_job(f"fleet-sdk eval {manifest.run_id}")
            store.set_trace_job(job_id)
            manifest = store.require_manifest()
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

        gate = asyncio.Semaphore(concurrency)

        committing = anyio.Lock()

        async def record(outcome: Outcome) -> None:
            nonlocal passed, graded, done_now
            # The SQLite commit blocks: run it off the loop, one at a time on the shared connection.
            async with committing:
                stored = await anyio.to_thread.run_sync(store.record, outcome)
            if stored:
                done_now += 1
                passed += outcome.status == "passed"
                graded += outcome.status in ("passed", "failed")
            report_progress()

        async def one(task: Task, model: str, sample: int) -> None:
            async with gate:
                outcome = await _play(
                    fleet,
                    task,
                    model,
                    sample,
                    max_steps=max_steps,
                    trace_job_id=manifest.trace_job_id if upload else None,
                    endpoint=model_endpoint,
                )
            await record(outcome)

        report_progress()
        if executor is not None:
            trace = manifest.trace_job_id if upload else None
            jobs = [(t, m, s, max_steps, trace, model_endpoint) for t, m, s in todo]
            async for index, played in executor.map_unordered(_play_job, jobs):
                if isinstance(played, Outcome):
                    await record(played)
                    continue
                task, model, sample = todo[index]  # every worker it was sent to was lost
                await record(
                    Outcome(
                        task_key=task.task_key,
                        model=model,
                        sample=sample,
                        status=classify(None),
                        score=None,
                        error=f"worker lost: {played!r}"[:_ERROR_LIMIT],
                    )
                )
            return store.envelope()
        async with asyncio.TaskGroup() as group:
            for task, model, sample in todo:
                group.create_task(one(task, model, sample))
        return store.envelope()
