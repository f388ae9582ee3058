"""A run directory played by the server as jobs (``fleet-sdk eval --jobs``), resumable like any run.

The manifest is written before the first job is created, and each session is committed to the run
directory at the first poll that sees it ended, so an interrupted run keeps what finished. The
manifest also keeps which job plays which (task, model, sample) slot (``extra["jobs"]``, the
newest job owning a slot). A resume first records the sessions that ended while nobody watched
(on the platform a job runs on without its client; a local server marks the sessions it stopped as
interrupted, and those are played again), and only then creates jobs, for the slots still missing:
a result once stored, here or on the server, is never played twice. ``retry_errored`` plays the
errored slots again.

A job plays ``pass_k`` samples of each of its tasks for each of its models, so the missing slots
are grouped: one job per (samples missing, tasks), over the models that miss exactly those.

A job names its tasks by key, and the server plays the task it holds under that key. So a new
run first puts its tasks on the server (:func:`import_tasks`): a key the server lacks (a task
file's own task) is imported, one it holds as given is used as is, and one it holds with another
config is refused before any job is made, naming the fields that differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from .._client import AsyncFleet
from .._exceptions import APIStatusError, ConflictError, EvaluationError, EvaluationTimeoutError
from .._runtime import Deadline
from ..reports import Outcome, ReportEnvelope
from ..tasks import Task, as_task
from ._platform import TERMINAL_JOB_STATUSES, group_sessions, ordered_sessions, session_outcome
from ._rundir import RunDir, RunManifest
from ._runner import DEFAULT_K, DEFAULT_MAX_STEPS, Progress, save_transcripts

__all__ = ["JOBS_KEY", "import_tasks", "is_jobs_run", "run_job_evaluation"]

JOBS_KEY = "jobs"
"""``RunManifest.extra`` key of a jobs run: ``[{"job_id", "slots": [[task, model, sample], ...]}]``."""
_OWNERS_KEY = "job_slots"
_LIVE = frozenset({"pending", "running"})
_FINAL_POLL_SECONDS = 10.0
_KEYS_PER_LISTING = 50
"""Task keys asked for in one ``list_tasks`` (each is a query parameter: the URL stays short)."""
_PLAYED_FIELDS = {
    "prompt": "prompt",
    "env_spec": "env_key/env_version",
    "data_spec": "data_key/data_version",
    "env_variables": "env_variables",
    "verifier_code": "verifier_code",
    "task_modality": "task_modality",
    "metadata": "metadata",
}
"""What decides how a task is played and graded (``Task`` attribute: the name a refusal gives it)."""

Slot = tuple[str, str, int]


def is_jobs_run(manifest: RunManifest) -> bool:
    """Whether the run was made with ``--jobs`` (its episodes are played by server jobs)."""
    return JOBS_KEY in manifest.extra


def _slot_id(slot: Slot) -> str:
    return f"{slot[0]}\t{slot[1]}\t{slot[2]}"


def _groups(missing: Sequence[Slot]) -> list[tuple[list[str], list[str], int, list[Slot]]]:
    """The jobs that play exactly ``missing``: ``(models, task keys, pass_k, slots in job order)``."""
    per_model: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for task_key, model, sample in missing:
        per_model[model][task_key].append(sample)
    by_shape: dict[tuple[int, tuple[str, ...]], list[str]] = defaultdict(list)
    for model, tasks in per_model.items():
        by_count: dict[int, list[str]] = defaultdict(list)
        for task_key, samples in tasks.items():
            by_count[len(samples)].append(task_key)
        for count, keys in by_count.items():
            by_shape[(count, tuple(keys))].append(model)
    jobs = []
    for (count, shape), models in by_shape.items():
        keys = list(shape)
        slots = [(key, model, sample) for key in keys for model in models for sample in per_model[model][key]]
        jobs.append((models, keys, count, slots))
    return jobs


def _differences(given: Task, held: Task) -> list[str]:
    return [name for attr, name in _PLAYED_FIELDS.items() if getattr(given, attr) != getattr(held, attr)]


async def _held(fleet: AsyncFleet, keys: Sequence[str]) -> dict[str, Task]:
    """The server's tasks of ``keys`` (those it holds)."""
    held: dict[str, Task] = {}
    for start in range(0, len(keys), _KEYS_PER_LISTING):
        chunk = list(keys[start : start + _KEYS_PER_LISTING])
        listed = (await fleet.api.control_plane.list_tasks(task_keys=chunk)).tasks
        held.update({t.task_key: t for t in map(as_task, listed) if t.task_key in chunk})
    return held


async def import_tasks(fleet: AsyncFleet, tasks: Sequence[Task | Mapping[str, Any]]) -> list[str]:
    """Put ``tasks`` on the server, so that a job naming their keys plays them as given.

    A key the server lacks is imported (``import_task``, with an idempotency key, so a retried
    import stores it once); one it holds with the same config is left alone.

    Args:
        fleet: The client of the server that will run the jobs.
        tasks: The run's tasks (``Task`` or config dicts).

    Returns:
        The keys imported.

    Raises:
        EvaluationError: The server holds a task of the same key with another config, or refused
            to import one (a 4xx other than 429); each names the task. Nothing is changed on the
            server for a task it holds.
    """
    from fleet_generated.env_instance import models as api_models

    given = {t.task_key: t for t in map(as_task, tasks)}
    held = await _held(fleet, list(given))
    problems: list[str] = []
    imported: list[str] = []
    for key, task in given.items():
        if key not in held:
            body = api_models.TaskRequest.model_validate(task.model_dump(mode="json"))
            try:
                await fleet.api.control_plane.import_task(
                    body, idempotency_key=f"eval-import-{uuid.uuid4().hex}"
                )
            except ConflictError:  # imported meanwhile, by someone else: compare with theirs
                held.update(await _held(fleet, [key]))
            except APIStatusError as exc:
                if exc.status_code >= 500 or exc.status_code == 429:
                    raise
                problems.append(f"task {key!r}: the server refused to import it ({exc.status_code}: {exc})")
                continue
            else:
                imported.append(key)
                continue
        differing = _differences(task, held[key]) if key in held else []
        if differing:
            problems.append(
                f"task {key!r}: the server holds another task of that key (differing in "
                f"{', '.join(differing)}), and a job plays the server's task; give yours another key, "
                "or update the server's (fleet.api.control_plane.update_task)"
            )
    if problems:
        raise EvaluationError("; ".join(problems))
    return imported


class _Jobs:
    """The run's jobs: creates them, and records their ended sessions into the run directory."""

    def __init__(self, fleet: AsyncFleet, store: RunDir, on_progress: Callable[[Progress], None] | None):
        self.fleet = fleet
        self.store = store
        self.on_progress = on_progress
        self.started = time.monotonic()
        self.done_before = len(store.finished())

    @property
    def manifest(self) -> RunManifest:
        return self.store.require_manifest()

    def _owners(self) -> dict[str, str]:
        return dict(self.manifest.extra.get(_OWNERS_KEY) or {})

    def plan(self) -> list[Slot]:
        manifest = self.manifest
        return [(key, m, s) for key in manifest.task_keys for m in manifest.models for s in range(manifest.k)]

    async def create(self, missing: Sequence[Slot], *, max_steps: int, name: str) -> list[str]:
        """Create the jobs that play ``missing``; their ids."""
        from fleet_generated.env_instance import models as api_models

        created: list[str] = []
        for models, keys, count, slots in _groups(missing):
            request = api_models.JobCreateRequest(
                models=models, pass_k=count, task_keys=keys, max_steps=max_steps, name=name
            )
            job_id = (await self.fleet.api.control_plane.create_job(request)).job_id
            manifest = self.manifest
            jobs = [*manifest.extra.get(JOBS_KEY, []), {"job_id": job_id, "slots": [list(s) for s in slots]}]
            owners = {**self._owners(), **{_slot_id(s): job_id for s in slots}}
            changes: dict[str, Any] = {"extra": {**manifest.extra, JOBS_KEY: jobs, _OWNERS_KEY: owners}}
            changes["job_id"] = manifest.job_id or job_id
            await anyio.to_thread.run_sync(functools.partial(self.store.update, **changes))
            created.append(job_id)
        return created

    async def record(self, job_id: str, *, settling: bool = False) -> bool:
        """Record the ended sessions of ``job_id`` whose slots it still owns; whether the job ended.

        Args:
            job_id: The job.
            settling: Reading a job nobody watched: a session a local server stopped is skipped.
        """
        manifest = self.manifest
        entry = next(j for j in manifest.extra[JOBS_KEY] if j["job_id"] == job_id)
        slots: dict[tuple[str, str], list[int]] = defaultdict(list)
        for task_key, model, sample in entry["slots"]:
            slots[(task_key, model)].append(int(sample))
        owners = self._owners()
        listing = (await self.fleet.api.sessions.get_job_sessions(job_id)).model_dump()
        _, grouped = group_sessions(listing, manifest.models)
        ended: list[Outcome] = []
        for (task_key, model), sessions in grouped.items():
            own = slots.get((task_key, model), [])
            for session, sample in zip(ordered_sessions(sessions), own, strict=False):
                owned = owners.get(_slot_id((task_key, model, sample))) == job_id
                if not owned or session.get("status") in _LIVE:
                    continue
                # A session the server stopped mid-play (a local server that shut down or
                # restarted) never played to its end: it is played again, not recorded as errored.
                # The platform never sends the flag (its jobs run on without the client): false.
                if settling and session.get("interrupted") is True:
                    continue
                ended.append(session_outcome(session, task_key=task_key, model=model, sample=sample))
        if ended:
            await anyio.to_thread.run_sync(lambda: [self.store.record(o) for o in ended])
        job = await self.fleet.api.control_plane.get_job(job_id)
        return job.status in TERMINAL_JOB_STATUSES

    def progress(self) -> None:
        if self.on_progress is None:
            return
        outcomes = self.store.outcomes()
        total = len(self.plan())
        passed = sum(1 for o in outcomes if o.status == "passed")
        graded = sum(1 for o in outcomes if o.status in ("passed", "failed"))
        elapsed = time.monotonic() - self.started
        now = len(outcomes) - self.done_before
        eta = elapsed / now * (total - len(outcomes)) if now > 0 else None
        self.on_progress(Progress(len(outcomes), total, passed, graded, elapsed, eta))

    async def watch(self, jobs: Sequence[str], *, deadline: float, poll_interval: float) -> None:
        """Poll ``jobs`` until each has ended, recording sessions as they end.

        Cancelled (Ctrl-C), it records what ended by then before the cancellation goes on.
        """
        running = list(jobs)
        until = Deadline(deadline)
        try:
            while running:
                running = [job for job in running if not await self.record(job)]
                self.progress()
                if not running:
                    break
                if until.expired():
                    raise EvaluationTimeoutError(
                        f"jobs {', '.join(running)} still running after {deadline:g}s; what ended is "
                        "stored, resume the run to wait for the rest"
                    )
                await anyio.sleep(min(poll_interval, until.remaining() or 0.0))
        except asyncio.CancelledError:
            # The sessions that ended since the last poll are kept: one more read, shielded and bounded.
            final = asyncio.ensure_future(self._record_all(running))
            # Not kept when a second Ctrl-C comes, or the server is gone.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(asyncio.wait_for(final, _FINAL_POLL_SECONDS))
            raise

    async def _record_all(self, jobs: Sequence[str]) -> None:
        for job in jobs:
            await self.record(job)


async def run_job_evaluation(
    fleet: AsyncFleet,
    run_dir: str | Path,
    *,
    tasks: Sequence[Task | Mapping[str, Any]] | None = None,
    models: Sequence[str] | None = None,
    k: int | None = None,
    max_steps: int | None = None,
    suite_name: str = "tasks",
    run_id: str | None = None,
    resume: bool = False,
    retry_errored: bool = False,
    deadline: float = 3600.0,
    poll_interval: float = 2.0,
    on_progress: Callable[[Progress], None] | None = None,
    endpoints: Mapping[str, str] | None = None,
    server: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ReportEnvelope:
    """Play the run's missing slots as server jobs, each ended session committed at once.

    Args:
        fleet: The client of the server that runs the jobs.
        run_dir: The run directory.
        tasks: The tasks of a new run (their keys are what the jobs run).
        models: ``provider/model`` ids of a new run.
        k: Samples per task and model of a new run (default 1).
        max_steps: Step budget per session of a new run (default 30).
        suite_name: What the report calls the suite (a new run).
        run_id: The run id of a new run (default: ``run-<time>-<random>``).
        resume: Continue the jobs run in ``run_dir``.
        retry_errored: With ``resume``, play the errored slots again (counted as retried).
        deadline: Seconds to wait for this attempt's jobs; past it ``EvaluationTimeoutError``
            (what ended is stored; the jobs run on).
        poll_interval: Seconds between two polls.
        on_progress: Called after each poll.
        endpoints: The chat-completions URL of each endpoint model, kept with a new run.
        server: Where the jobs run (``RunManifest.server``).
        extra: Anything else to keep with a new run.

    Raises:
        EvaluationError: No run to resume, a run that is not a jobs run, or a new run without tasks.
        EvaluationTimeoutError: The jobs had not ended by the deadline.
    """
    if not resume:
        if not tasks or not models:
            raise EvaluationError("tasks and models: a new jobs run needs at least one of each")
        await import_tasks(fleet, tasks)  # before the run directory is touched: a refused run leaves none
    with RunDir(run_dir) as store:
        if resume:
            manifest = store.require_manifest()
            if not is_jobs_run(manifest):
                raise EvaluationError(f"{store.path}: the run was not made with --jobs")
        else:
            now = dt.datetime.now(dt.UTC)
            store.start(
                RunManifest(
                    run_id=run_id or f"run-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
                    suite_name=suite_name,
                    tasks=[as_task(t).model_dump(mode="json") for t in tasks or []],
                    models=list(dict.fromkeys(models or [])),
                    k=k or DEFAULT_K,
                    created_at=now.isoformat(timespec="seconds").replace("+00:00", "Z"),
                    source="platform",
                    max_steps=max_steps or DEFAULT_MAX_STEPS,
                    endpoints={m: {"base_url": url, "sampling": {}} for m, url in (endpoints or {}).items()},
                    server=dict(server or {}),
                    extra={**(extra or {}), JOBS_KEY: [], _OWNERS_KEY: {}},
                )
            )
        jobs = _Jobs(fleet, store, on_progress)
        still_running = []
        for entry in jobs.manifest.extra[JOBS_KEY]:  # what ended while nobody watched
            if not await jobs.record(entry["job_id"], settling=True):
                still_running.append(entry["job_id"])
        if retry_errored:
            await anyio.to_thread.run_sync(store.forget_errored)
        owners = jobs._owners()
        finished = store.finished()
        missing = [
            slot
            for slot in jobs.plan()
            if slot not in finished and owners.get(_slot_id(slot)) not in still_running
        ]
        manifest = jobs.manifest
        jobs.done_before = len(finished)
        created = await jobs.create(
            missing, max_steps=manifest.max_steps or DEFAULT_MAX_STEPS, name=manifest.suite_name
        )
        jobs.progress()
        await jobs.watch([*still_running, *created], deadline=deadline, poll_interval=poll_interval)
        await save_transcripts(fleet, store, store.outcomes())
        return store.envelope()
