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
from ._run import DEFAULT_K, DEFAULT_MAX_STEPS, Progress, ProgressTally, RunPhases, new_run_stamp
from ._rundir import RunDir, RunManifest

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

    def __init__(self, fleet: AsyncFleet, store: RunDir, tally: ProgressTally):
        self.fleet = fleet
        self.store = store
        self.tally = tally
        tally.started = time.monotonic()
        tally.done_before = len(store.finished())

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
        # The job's status is read before its sessions: a job seen ended has no session left to
        # end, so the listing after it is complete. Read after, a session ending between the two
        # reads would be missing from the listing of a job already seen ended, and never recorded.
        job = await self.fleet.api.control_plane.get_job(job_id)
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
        return job.status in TERMINAL_JOB_STATUSES

    def progress(self) -> None:
        tally = self.tally
        if tally.on_progress is None:
            return
        outcomes = self.store.outcomes()
        tally.total = len(self.plan())
        tally.done = len(outcomes)
        tally.grades(outcomes)
        tally.report()

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


class _JobsRun(RunPhases):
    """A run played by server jobs, driven phase by phase (``RunPhases``): ``open`` starts the run or
    takes up the stored jobs run, ``settle`` records what ended while nobody watched, ``play``
    creates the jobs of the missing slots and watches them, ``finish`` copies the transcripts."""

    def __init__(
        self,
        fleet: AsyncFleet,
        run_dir: str | Path,
        *,
        tasks: Sequence[Task | Mapping[str, Any]] | None,
        models: Sequence[str] | None,
        k: int | None,
        max_steps: int | None,
        suite_name: str,
        run_id: str | None,
        resume: bool,
        retry_errored: bool,
        deadline: float,
        poll_interval: float,
        on_progress: Callable[[Progress], None] | None,
        endpoints: Mapping[str, str] | None,
        server: Mapping[str, Any] | None,
        extra: Mapping[str, Any] | None,
    ) -> None:
        super().__init__(fleet, run_dir, resume=resume, retry_errored=retry_errored, on_progress=on_progress)
        self.tasks = tasks
        self.models = models
        self.k = k
        self.max_steps = max_steps
        self.suite_name = suite_name
        self.run_id = run_id
        self.deadline = deadline
        self.poll_interval = poll_interval
        self.endpoints = endpoints
        self.server = server
        self.extra = extra
        self.still_running: list[str] = []
        self._jobs: _Jobs | None = None

    @property
    def jobs(self) -> _Jobs:
        """The run's jobs (from ``open`` on)."""
        if self._jobs is None:
            raise RuntimeError("the run has no jobs before it is opened")
        return self._jobs

    async def check(self) -> None:
        """A new run needs tasks and models, and its tasks put on the server (``import_tasks``):
        before the run directory is touched, so a refused run leaves none."""
        if self.resume:
            return
        if not self.tasks or not self.models:
            raise EvaluationError("tasks and models: a new jobs run needs at least one of each")
        await import_tasks(self.fleet, self.tasks)

    async def open(self) -> None:
        """Take up the stored jobs run, or start a new one (its tasks and models checked by ``check``)."""
        store = self.store
        if self.resume:
            manifest = store.require_manifest()
            if not is_jobs_run(manifest):
                raise EvaluationError(f"{store.path}: the run was not made with --jobs")
        else:
            run_id, created_at = new_run_stamp(self.run_id)
            store.start(
                RunManifest(
                    run_id=run_id,
                    suite_name=self.suite_name,
                    tasks=[as_task(t).model_dump(mode="json") for t in self.tasks or []],
                    models=list(dict.fromkeys(self.models or [])),
                    k=self.k or DEFAULT_K,
                    created_at=created_at,
                    source="platform",
                    max_steps=self.max_steps or DEFAULT_MAX_STEPS,
                    endpoints={
                        m: {"base_url": url, "sampling": {}} for m, url in (self.endpoints or {}).items()
                    },
                    server=dict(self.server or {}),
                    extra={**(self.extra or {}), JOBS_KEY: [], _OWNERS_KEY: {}},
                )
            )
        self._jobs = _Jobs(self.fleet, store, self.tally)

    async def settle(self) -> None:
        """Record the sessions that ended while nobody watched; the jobs still running are kept."""
        jobs = self.jobs
        for entry in jobs.manifest.extra[JOBS_KEY]:
            if not await jobs.record(entry["job_id"], settling=True):
                self.still_running.append(entry["job_id"])

    async def play(self) -> None:
        """Create the jobs of the slots no job plays yet, and watch them with the running ones."""
        jobs, store = self.jobs, self.store
        owners = jobs._owners()
        finished = store.finished()
        missing = [
            slot
            for slot in jobs.plan()
            if slot not in finished and owners.get(_slot_id(slot)) not in self.still_running
        ]
        manifest = jobs.manifest
        self.tally.done_before = len(finished)
        created = await jobs.create(
            missing, max_steps=manifest.max_steps or DEFAULT_MAX_STEPS, name=manifest.suite_name
        )
        jobs.progress()
        await jobs.watch(
            [*self.still_running, *created], deadline=self.deadline, poll_interval=self.poll_interval
        )


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
    run = _JobsRun(
        fleet,
        run_dir,
        tasks=tasks,
        models=models,
        k=k,
        max_steps=max_steps,
        suite_name=suite_name,
        run_id=run_id,
        resume=resume,
        retry_errored=retry_errored,
        deadline=deadline,
        poll_interval=poll_interval,
        on_progress=on_progress,
        endpoints=endpoints,
        server=server,
        extra=extra,
    )
    return await run.drive()
