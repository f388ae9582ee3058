"""Running many ``TaskEnv`` episodes: episode specs in, results streamed out as they finish.

An executor takes ``EpisodeSpec`` objects (a task, a policy factory, ``TaskEnv`` options) and
yields one ``EpisodeResult`` per spec, in order of completion, writing each to a ``ResultSink`` as
it arrives; every episode is played by ``fleet_sdk.episodes.play_episode``. Two executors share
this interface:

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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from .episodes import EpisodeResult, play_episode
from .policies import PolicyFactory, ScriptedPolicy
from .task_env import TaskEnv

if TYPE_CHECKING:
    from ._client import AsyncFleet

__all__ = [
    "AsyncioExecutor",
    "EpisodeExecutor",
    "EpisodeResult",
    "EpisodeSpec",
    "Job",
    "JsonlResultSink",
    "ResultSink",
    "collect",
    "pending_specs",
    "run_spec",
    "specs_for",
]

T = TypeVar("T")
R = TypeVar("R")

Job = Callable[["AsyncFleet", T, int], Awaitable[R]]
"""One unit of work an executor runs: ``await job(fleet, item, attempt)`` (see ``run_spec``)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run.

    Attributes:
        episode_id: Unique in the run; what "recorded exactly once" is checked against.
        task: The task config (a JSON-able mapping, so it travels to other processes).
        policy: Makes the episode's policy (``fleet_sdk.policies.PolicyFactory``; pickled with the
            spec by executors in other processes). Default: the scripted reference solution.
        env_options: ``TaskEnv`` arguments (``max_steps``, ``partial_reward``...).
    """

    episode_id: str
    task: Mapping[str, Any]
    policy: PolicyFactory = ScriptedPolicy
    env_options: Mapping[str, Any] = field(default_factory=dict)


def _worker_name() -> str:
    return f"{os.getpid()}@{os.uname().nodename}"


async def run_spec(fleet: AsyncFleet, spec: EpisodeSpec, attempt: int = 1) -> EpisodeResult:
    """Play one spec to its end on ``fleet`` (``play_episode``; never raises for the episode).

    The ``Job`` executors run for ``EpisodeSpec`` items, hence its argument order.

    Args:
        fleet: The client (its loop is the current one).
        spec: The episode.
        attempt: Which attempt this is (kept in the result).
    """
    worker = _worker_name()
    try:
        env = TaskEnv(spec.task, fleet=fleet, **dict(spec.env_options))
    except Exception as exc:  # a bad task or option: the episode's failure, not the run's
        task_key = str(spec.task.get("task_key") or spec.task.get("key") or "?")
        error = f"{type(exc).__name__}: {exc}"
        return EpisodeResult.unplayed(spec.episode_id, task_key, error, attempts=attempt, worker=worker)
    result = await play_episode(env, spec.policy, episode_id=spec.episode_id)
    return replace(result, attempts=attempt, worker=worker)


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
    tasks: Sequence[Mapping[str, Any]],
    *,
    repeats: int = 1,
    policy: PolicyFactory | None = None,
    **env_options: Any,
) -> list[EpisodeSpec]:
    """One spec per task and repeat, ids ``<task_key>#<n>`` (each id seeds its episode's policy).

    Args:
        tasks: Task configs.
        repeats: Episodes per task.
        policy: The policy factory of every spec (default ``ScriptedPolicy``).
        **env_options: ``TaskEnv`` arguments of every spec.
    """
    chosen = policy or ScriptedPolicy
    return [
        EpisodeSpec(f"{task.get('task_key') or task.get('key')}#{n}", task, chosen, env_options)
        for n in range(repeats)
        for task in tasks
    ]
