"""Running many ``TaskEnv`` episodes: episode specs in, results streamed out as they finish.

An executor takes ``EpisodeSpec`` objects (a task, a policy that picks actions, ``TaskEnv``
options) and yields one ``EpisodeResult`` per spec, in order of completion, writing each to a
``ResultSink`` as it arrives. Two executors share this interface:

- ``AsyncioExecutor``: episodes as tasks on the current loop, one client, a concurrency bound;
- ``fleet_sdk.integrations.ray.RayExecutor``: episodes on Ray actors across a cluster, a failed
  worker's episodes retried on another.

Each spec is recorded exactly once: the sink refuses an id it already holds, and a run skips
the specs its sink already recorded (so a crashed run resumes where it stopped). An episode that
fails on its own (the policy raised, the platform refused) is a result with ``error`` set, not a
retry; only a lost worker is retried.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from .task_env import Observation, TaskEnv

if TYPE_CHECKING:
    from ._client import AsyncFleet

__all__ = [
    "AsyncioExecutor",
    "EpisodeExecutor",
    "EpisodeResult",
    "EpisodeSpec",
    "Job",
    "JsonlResultSink",
    "Policy",
    "ReferencePolicy",
    "ResultSink",
    "collect",
    "pending_specs",
    "run_episode",
    "run_spec",
    "specs_for",
]

T = TypeVar("T")
R = TypeVar("R")

Job = Callable[["AsyncFleet", T, int], Awaitable[R]]
"""One unit of work an executor runs: ``await job(fleet, item, attempt)`` (see ``run_spec``)."""

Policy = Callable[[TaskEnv, Observation], Awaitable[Any]]
"""Picks the next action: ``await policy(env, observation)``; None ends the episode.

Executors that ship specs to other processes (Ray) pickle the policy with the spec, so it
should be a module-level function or a small object, not a closure over a live client.
"""


class ReferencePolicy:
    """Replays the task's ``metadata["reference_solution"]`` (``[{"tool", "params"}]``), then ends.

    For smoke runs, benchmarks and tests: it scores 1.0 on every bundled task.
    """

    async def __call__(self, env: TaskEnv, observation: Observation) -> Any:
        """The next reference step, or None when they are all done.

        Args:
            env: The episode.
            observation: The last observation (unused).
        """
        steps = env.task.metadata.get("reference_solution") or []
        if env.step_count >= len(steps):
            return None
        step = steps[env.step_count]
        return {"tool": step["tool"], "params": step.get("params") or {}}


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run.

    Attributes:
        episode_id: Unique in the run; what "recorded exactly once" is checked against.
        task: The task config (a JSON-able mapping, so it travels to other processes).
        policy: Picks actions (see ``Policy``).
        env_options: ``TaskEnv`` arguments (``max_steps``, ``partial_reward``...).
    """

    episode_id: str
    task: Mapping[str, Any]
    policy: Policy = field(default_factory=ReferencePolicy)
    env_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode came to.

    Attributes:
        episode_id: The spec's id.
        task_key: The task.
        reward: The verifier's reward (None: unknown, or the episode failed).
        done_reason: Why the episode ended (None when it failed before ending).
        steps: Steps used.
        tool_errors: The episode's tool errors.
        verifier_error: Why the verifier could not grade, when it could not.
        verifier_execution_id: The platform's id of the verifier run.
        error: Why the episode itself failed (``"TypeName: message"``), None when it ran.
        attempts: Workers it was started on (more than 1 after a lost worker).
        worker: Where it ran (``pid@host``).
        duration_s: Wall-clock seconds of the last attempt.
    """

    episode_id: str
    task_key: str
    reward: float | None
    done_reason: str | None
    steps: int
    tool_errors: list[str]
    verifier_error: str | None
    verifier_execution_id: str | None
    error: str | None = None
    attempts: int = 1
    worker: str | None = None
    duration_s: float = 0.0

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> EpisodeResult:
        """Read a line written by ``to_json``.

        Args:
            line: The JSON line.
        """
        return cls(**json.loads(line))


def _worker_name() -> str:
    return f"{os.getpid()}@{os.uname().nodename}"


async def run_episode(spec: EpisodeSpec, fleet: AsyncFleet, *, attempt: int = 1) -> EpisodeResult:
    """Run one episode to its end on ``fleet`` and return its result (never raises for the episode).

    Args:
        spec: The episode.
        fleet: The client (its loop is the current one).
        attempt: Which attempt this is (kept in the result).
    """
    started = time.monotonic()
    task_key = str(spec.task.get("task_key") or spec.task.get("key") or "?")
    env: TaskEnv | None = None
    try:
        env = TaskEnv(spec.task, fleet=fleet, **dict(spec.env_options))
        async with env:
            observation = await env.reset_async()
            while not env.done:
                action = await spec.policy(env, observation)
                observation, *_ = await env.step_async({"done": True} if action is None else action)
        error = None
    except Exception as exc:  # the episode failed on its own: a result, not a retry
        error = f"{type(exc).__name__}: {exc}"
    return EpisodeResult(
        episode_id=spec.episode_id,
        task_key=env.task.task_key if env is not None else task_key,
        reward=env.final_reward if env is not None and error is None else None,
        done_reason=env.done_reason if env is not None else None,
        steps=env.step_count if env is not None else 0,
        tool_errors=list(env.tool_errors) if env is not None else [],
        verifier_error=env.verifier_error if env is not None else None,
        verifier_execution_id=env.verifier_execution_id if env is not None else None,
        error=error,
        attempts=attempt,
        worker=_worker_name(),
        duration_s=round(time.monotonic() - started, 4),
    )


async def run_spec(fleet: AsyncFleet, spec: EpisodeSpec, attempt: int) -> EpisodeResult:
    """``run_episode`` as a ``Job`` (what executors run for ``EpisodeSpec`` items).

    Args:
        fleet: The client.
        spec: The episode.
        attempt: Which attempt this is.
    """
    return await run_episode(spec, fleet, attempt=attempt)


class ResultSink(Protocol):
    """Where results are persisted as they arrive."""

    def recorded(self) -> set[str]:
        """The episode ids already recorded."""
        ...

    def write(self, result: EpisodeResult) -> bool:
        """Persist ``result``; False (and nothing written) when its id is already recorded.

        Args:
            result: The result.
        """
        ...


class JsonlResultSink:
    """Results as JSON lines in one file, each flushed and fsynced before ``write`` returns.

    Args:
        path: The file; lines already in it count as recorded (a rerun resumes).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ids: set[str] = {r.episode_id for r in self.read()}

    def read(self) -> list[EpisodeResult]:
        """Every result in the file, in the order written (a torn last line is skipped)."""
        if not self.path.exists():
            return []
        results = []
        for line in self.path.read_text().splitlines():
            try:
                results.append(EpisodeResult.from_json(line))
            except (json.JSONDecodeError, TypeError):
                continue  # a line cut by a crash mid-write; its episode is rerun
        return results

    def recorded(self) -> set[str]:
        """The episode ids already recorded."""
        with self._lock:
            return set(self._ids)

    def write(self, result: EpisodeResult) -> bool:
        """Append ``result`` unless its id is recorded; durable when this returns True.

        Args:
            result: The result.
        """
        with self._lock:
            if result.episode_id in self._ids:
                return False
            with self.path.open("a") as file:
                file.write(result.to_json() + "\n")
                file.flush()
                os.fsync(file.fileno())
            self._ids.add(result.episode_id)
            return True


class EpisodeExecutor(Protocol):
    """Runs episode specs (or any ``Job``); yields each result once, in order of completion."""

    def run(
        self, specs: Iterable[EpisodeSpec], sink: ResultSink | None = None
    ) -> AsyncIterator[EpisodeResult]:
        """Run ``specs`` (those already in ``sink`` are skipped), writing each result to ``sink``.

        Args:
            specs: The episodes; ids must be unique.
            sink: Where results are persisted as they arrive.
        """
        ...

    def map_unordered(self, fn: Job[T, R], items: Sequence[T]) -> AsyncIterator[tuple[int, Any]]:
        """Run ``await fn(fleet, item, attempt)`` for every item; yield ``(index, outcome)`` as each ends.

        Args:
            fn: The job, a module-level async function (executors in other processes pickle it).
            items: Its arguments.
        """
        ...


def pending_specs(specs: Iterable[EpisodeSpec], sink: ResultSink | None) -> list[EpisodeSpec]:
    """The specs still to run: ids checked unique, the sink's recorded ones left out.

    Args:
        specs: The episodes.
        sink: The run's sink.

    Raises:
        ValueError: Two specs share an id.
    """
    specs = list(specs)
    seen: set[str] = set()
    for spec in specs:
        if spec.episode_id in seen:
            raise ValueError(f"episode_id {spec.episode_id!r} appears twice; ids must be unique in a run")
        seen.add(spec.episode_id)
    done = sink.recorded() if sink is not None else set()
    return [s for s in specs if s.episode_id not in done]


class AsyncioExecutor:
    """Episodes as tasks on the running loop, sharing one client, at most ``concurrency`` at once.

    Args:
        fleet: The client (an ``AsyncFleet`` of this loop).
        concurrency: Episodes (instances) at once.
    """

    def __init__(self, fleet: AsyncFleet, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.fleet = fleet
        self.concurrency = concurrency

    async def run(
        self, specs: Iterable[EpisodeSpec], sink: ResultSink | None = None
    ) -> AsyncIterator[EpisodeResult]:
        """Run ``specs`` (see ``EpisodeExecutor.run``).

        Args:
            specs: The episodes; ids must be unique.
            sink: Where results are persisted as they arrive.
        """
        async for _, result in self.map_unordered(run_spec, pending_specs(specs, sink)):
            # write + fsync blocks: off the loop, so running episodes keep going meanwhile
            if sink is None or await anyio.to_thread.run_sync(sink.write, result):
                yield result

    async def map_unordered(self, fn: Job[T, R], items: Sequence[T]) -> AsyncIterator[tuple[int, R]]:
        """Run ``await fn(fleet, item, 1)`` for every item, ``concurrency`` at a time.

        Args:
            fn: The job.
            items: Its arguments.

        Yields:
            ``(index in items, what fn returned)``, in order of completion.
        """
        gate = asyncio.Semaphore(self.concurrency)

        async def one(index: int) -> tuple[int, R]:
            async with gate:
                return index, await fn(self.fleet, items[index], 1)

        tasks = [asyncio.ensure_future(one(index)) for index in range(len(items))]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def collect(results: AsyncIterator[EpisodeResult]) -> Awaitable[list[EpisodeResult]]:
    """Every result of a run, as a list (``await collect(executor.run(specs))``).

    Args:
        results: An executor's ``run``.
    """

    async def gather() -> list[EpisodeResult]:
        return [r async for r in results]

    return gather()


def specs_for(
    tasks: Sequence[Mapping[str, Any]], *, repeats: int = 1, policy: Policy | None = None, **env_options: Any
) -> list[EpisodeSpec]:
    """One spec per task and repeat, ids ``<task_key>#<n>``.

    Args:
        tasks: Task configs.
        repeats: Episodes per task.
        policy: The policy of every spec (default ``ReferencePolicy``).
        **env_options: ``TaskEnv`` arguments of every spec.
    """
    chosen = policy or ReferencePolicy()
    return [
        EpisodeSpec(f"{task.get('task_key') or task.get('key')}#{n}", task, chosen, env_options)
        for n in range(repeats)
        for task in tasks
    ]
