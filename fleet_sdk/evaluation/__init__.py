"""Evaluate tasks across models: on the platform as a job, or client-side with a resumable run directory.

* :func:`evaluate_job` (platform path): create a job over ``provider/model`` ids with ``pass_k``,
  poll it under a deadline, score its sessions per model.
* :func:`run_evaluation` (client-side path): play tasks x models x k episodes here, with a
  concurrency bound, each finished episode committed to a run directory (``RunDir``) so an
  interrupted run resumes without repeating an episode; every model is checked first
  (:func:`model_problems`).

Both return a ``fleet_sdk.reports.ReportEnvelope``. The ``*_sync`` functions are the sync twins:
they take a ``Fleet`` and work in scripts, threads and inside a running event loop.
"""

from __future__ import annotations

from .._client import async_fleet_of
from .._public import publish
from .._twin import sync_function
from ._platform import (
    PROVIDER_MODEL,
    TERMINAL_JOB_STATUSES,
    bare_model,
    evaluate_job,
    job_report,
    session_score,
)
from ._rundir import RUN_FILE, TRANSCRIPTS_DIR, RunDir, RunManifest
from ._runner import (
    MODEL_API_KEY_ENV,
    RANDOM_MODEL,
    SCRIPTED_MODEL,
    ModelEndpoint,
    Progress,
    model_problems,
    run_evaluation,
    save_transcripts,
)

__all__ = [
    "MODEL_API_KEY_ENV",
    "PROVIDER_MODEL",
    "RANDOM_MODEL",
    "RUN_FILE",
    "SCRIPTED_MODEL",
    "TERMINAL_JOB_STATUSES",
    "TRANSCRIPTS_DIR",
    "ModelEndpoint",
    "Progress",
    "RunDir",
    "RunManifest",
    "bare_model",
    "evaluate_job",
    "evaluate_job_sync",
    "job_report",
    "model_problems",
    "run_evaluation",
    "run_evaluation_sync",
    "save_transcripts",
    "session_score",
]


run_evaluation_sync = sync_function(run_evaluation, first=async_fleet_of)
"""Sync twin of :func:`run_evaluation`: the same arguments with a sync ``Fleet``."""

evaluate_job_sync = sync_function(evaluate_job, first=async_fleet_of)
"""Sync twin of :func:`evaluate_job`: the same arguments with a sync ``Fleet``."""

publish(__name__, globals(), __all__)
