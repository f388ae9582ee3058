"""Evaluate tasks across models: on the platform as a job, or client-side with a resumable run directory.

* :func:`evaluate_job` (platform path): create a job over ``provider/model`` ids with ``pass_k``,
  poll it under a deadline, score its sessions per model.
* :func:`run_evaluation` (client-side path): play tasks x models x k episodes here, with a
  concurrency bound, each finished episode committed to a run directory (``RunDir``) so an
  interrupted run resumes without repeating an episode.

Both return a ``fleet_sdk.reports.ReportEnvelope``. The ``*_sync`` functions are the sync twins:
they take a ``Fleet`` and work in scripts, threads and inside a running event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._runtime._bridge import run_sync
from ._platform import TERMINAL_JOB_STATUSES, bare_model, evaluate_job, job_report, session_score
from ._rundir import RUN_FILE, RunDir, RunManifest
from ._runner import RANDOM_MODEL, SCRIPTED_MODEL, ModelEndpoint, Progress, run_evaluation

if TYPE_CHECKING:
    from .._client import Fleet
    from ..executors import EpisodeExecutor
    from ..reports import ReportEnvelope
    from ..tasks import Task

__all__ = [
    "RANDOM_MODEL",
    "RUN_FILE",
    "SCRIPTED_MODEL",
    "TERMINAL_JOB_STATUSES",
    "ModelEndpoint",
    "Progress",
    "RunDir",
    "RunManifest",
    "bare_model",
    "evaluate_job",
    "evaluate_job_sync",
    "job_report",
    "run_evaluation",
    "run_evaluation_sync",
    "session_score",
]


def run_evaluation_sync(
    fleet: Fleet,
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
    """Sync twin of :func:`run_evaluation` (same arguments, a sync ``Fleet``).

    Args:
        fleet: The sync client.
        run_dir: The run directory.
        tasks: The tasks of a new run.
        models: Model ids of a new run.
        k: Samples per task and model.
        concurrency: Episodes at once.
        max_steps: Step budget per episode.
        suite_name: What the report calls the suite.
        run_id: The run id.
        resume: Continue the run in ``run_dir``.
        upload: Upload each episode as a session of the run's trace job.
        model_endpoint: Where non-bundled models are asked.
        on_progress: Called after each finished episode (on the SDK's loop thread).
        executor: Where the episodes run (``fleet_sdk.executors``; None: here, on ``fleet``).
    """
    return run_sync(
        run_evaluation(
            fleet.async_fleet,
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
            on_progress=on_progress,
            executor=executor,
        )
    )


def evaluate_job_sync(
    fleet: Fleet,
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
    """Sync twin of :func:`evaluate_job` (same arguments, a sync ``Fleet``).

    Args:
        fleet: The sync client.
        models: ``provider/model`` ids.
        env_key: Run every task of this environment.
        task_keys: Run exactly these tasks.
        import_tasks: Task configs to import first.
        pass_k: Sessions per task and model.
        max_steps: Step budget per session.
        name: The job's name.
        run_id: The report's run id.
        deadline: Seconds to wait for the job.
        poll_interval: Seconds between two polls.
        on_progress: Called after each poll.
    """
    return run_sync(
        evaluate_job(
            fleet.async_fleet,
            models=models,
            env_key=env_key,
            task_keys=task_keys,
            import_tasks=import_tasks,
            pass_k=pass_k,
            max_steps=max_steps,
            name=name,
            run_id=run_id,
            deadline=deadline,
            poll_interval=poll_interval,
            on_progress=on_progress,
        )
    )
