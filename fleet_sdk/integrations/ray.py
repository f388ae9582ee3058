"""Episodes fanned out over a Ray cluster (``pip install 'fleet-sdk[ray]'``).

``RayExecutor`` implements ``fleet_sdk.executors.EpisodeExecutor``: it starts a pool of async
Ray actors (spread over the nodes), each with its own ``AsyncFleet`` (one connection pool per
actor) running up to ``concurrency_per_actor`` episodes at once on its event loop. Results come
back in order of completion and are written to the sink as they arrive. When an actor dies (its
process killed, its node lost), the episodes it was running are started again on the other
actors and a replacement actor joins the pool; the driver records each episode id once, so
nothing is lost or recorded twice. The instances a dead actor held are reclaimed by the
platform when the episodes were made with a heartbeat (``env_options={"make_kwargs":
{"heartbeat_interval": 60}}``). See ``docs/scaling.md`` for sizing a large run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import anyio

from ._extras import not_installed

try:
    import ray
except ModuleNotFoundError as exc:
    if exc.name != "ray":
        raise
    raise not_installed("ray", extra="ray", adapter=__name__) from exc
from ray.exceptions import RayActorError

from ..executors import EpisodeResult, EpisodeSpec, Job, ResultSink, pending_specs, run_spec

__all__ = ["RayExecutor", "WorkerLost"]

T = TypeVar("T")
R = TypeVar("R")


class EpisodeWorker:
    """A Ray actor (async): runs episode jobs on one ``AsyncFleet`` made in the actor's own loop."""

    def __init__(self, client_options: Mapping[str, Any]) -> None:
        self._options = dict(client_options)
        self._fleet: Any = None

    async def call(self, fn: Job[Any, Any], item: Any, attempt: int) -> Any:
        """Run one job: ``await fn(fleet, item, attempt)``.

        Args:
            fn: The job function (module-level, so it pickles by reference).
            item: Its argument.
            attempt: Which attempt this is.
        """
        if self._fleet is None:
            from .._client import AsyncFleet

            self._fleet = AsyncFleet(**self._options)
        return await fn(self._fleet, item, attempt)

    def pid(self) -> int:
        """The actor's process id."""
        import os

        return os.getpid()


class RayExecutor:
    """Runs episode specs on Ray actors; a lost worker's episodes are retried on another.

    Args:
        client_options: ``AsyncFleet`` arguments for every actor (``api_key``, ``base_url``...);
            empty: each actor reads ``FLEET_API_KEY`` and friends from its own environment
            (prefer that, or Ray's ``runtime_env``, to keep the key out of task arguments).
        address: The cluster to join (``ray.init(address=...)``, e.g. ``"auto"`` or
            ``"ray://head:10001"``); None starts a local Ray when none is running.
        actors: Actors in the pool (default: one per alive node).
        concurrency_per_actor: Episodes each actor runs at once (its instances and open
            connections); with the default of one actor per node, the bound per node.
        max_attempts: Workers one episode may be started on before it is recorded as failed.
        actor_options: More ``.options()`` of each actor (``num_cpus``, ``resources``...).
        init_options: More ``ray.init`` arguments when this executor starts or joins Ray.

    Attributes:
        workers: The live actors.
    """

    def __init__(
        self,
        client_options: Mapping[str, Any] | None = None,
        *,
        address: str | None = None,
        actors: int | None = None,
        concurrency_per_actor: int = 16,
        max_attempts: int = 3,
        actor_options: Mapping[str, Any] | None = None,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        if concurrency_per_actor < 1:
            raise ValueError(f"concurrency_per_actor must be at least 1, got {concurrency_per_actor}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if actors is not None and actors < 1:
            raise ValueError(f"actors must be at least 1, got {actors}")
        self.client_options = dict(client_options or {})
        self.address = address
        self.actors = actors
        self.concurrency_per_actor = concurrency_per_actor
        self.max_attempts = max_attempts
        self.actor_options = {"num_cpus": 1, **dict(actor_options or {})}
        self.init_options = dict(init_options or {})
        self.workers: list[Any] = []
        self.started_ray = False
        self._actor_cls: Any = None

    # -- the pool ------------------------------------------------------------------------

    def _ensure_ray(self) -> None:
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init_options)
            self.started_ray = True

    def _new_worker(self) -> Any:
        if self._actor_cls is None:
            self._actor_cls = ray.remote(EpisodeWorker)
        return self._actor_cls.options(
            max_concurrency=self.concurrency_per_actor,
            max_restarts=0,  # a dead actor's episodes are re-run by the driver, never by Ray
            scheduling_strategy="SPREAD",
            **self.actor_options,
        ).remote(self.client_options)

    def worker_pids(self) -> list[int]:
        """The process ids of the live actors (for monitoring, and for failure tests)."""
        return list(ray.get([w.pid.remote() for w in self.workers], timeout=60))

    def _pool_size(self) -> int:
        if self.actors is not None:
            return self.actors
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        return max(1, len([node for node in nodes if node.get("Alive")]))

    def shutdown(self) -> None:
        """Stop the actors, and Ray itself when this executor started it."""
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False

    # -- running -------------------------------------------------------------------------

    async def run(
        self, specs: Iterable[EpisodeSpec], sink: ResultSink | None = None
    ) -> AsyncIterator[EpisodeResult]:
        """Run ``specs`` on the pool (see ``fleet_sdk.executors.EpisodeExecutor.run``).

        Args:
            specs: The episodes; ids must be unique.
            sink: Where results are persisted as they arrive.
        """
        todo = pending_specs(specs, sink)
        async for index, outcome in self.map_unordered(run_spec, todo):
            result = outcome if isinstance(outcome, EpisodeResult) else _lost(todo[index], outcome)
            if sink is None or await anyio.to_thread.run_sync(
                sink.write, result
            ):  # write + fsync: off the loop
                yield result

    async def map_unordered(
        self, fn: Job[T, R], items: Sequence[T]
    ) -> AsyncIterator[tuple[int, R | WorkerLost]]:
        """Run ``await fn(fleet, item, attempt)`` for every item on the pool; yield as each finishes.

        A job whose actor dies is started again on another (``attempt`` + 1), up to
        ``max_attempts``; after that its outcome is a ``WorkerLost``. Each item is yielded once.

        Args:
            fn: The job, a module-level async function (it is pickled by reference).
            items: Its arguments (pickled to the actors).

        Yields:
            ``(index in items, what fn returned or WorkerLost)``, in order of completion.
        """
        if not items:  # nothing to do: no cluster needed
            return
        self._ensure_ray()
        if not self.workers:
            self.workers = [self._new_worker() for _ in range(self._pool_size())]
        queue: list[tuple[int, int]] = [(index, 1) for index in reversed(range(len(items)))]
        load = {id(w): 0 for w in self.workers}
        running: dict[asyncio.Future[Any], tuple[Any, int, int]] = {}

        def submit() -> None:
            # Fill every live actor up to its concurrency, least loaded first.
            while queue:
                worker = min(self.workers, key=lambda w: load[id(w)], default=None)
                if worker is None or load[id(worker)] >= self.concurrency_per_actor:
                    return
                index, attempt = queue.pop()
                future = asyncio.wrap_future(worker.call.remote(fn, items[index], attempt).future())
                load[id(worker)] += 1
                running[future] = (worker, index, attempt)

        def lose(worker: Any) -> None:
            # The actor is gone: its other running jobs fail too and come back here.
            if worker in self.workers:
                self.workers.remove(worker)
                replacement = self._new_worker()
                self.workers.append(replacement)
                load[id(replacement)] = 0

        try:
            submit()
            while running:
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for future in finished:
                    worker, index, attempt = running.pop(future)
                    load[id(worker)] -= 1
                    try:
                        outcome: R | WorkerLost = future.result()
                    except RayActorError as exc:
                        lose(worker)
                        if attempt < self.max_attempts:
                            queue.append((index, attempt + 1))  # front of the queue
                            continue
                        outcome = WorkerLost(attempt, type(exc).__name__)
                    yield index, outcome
                submit()
        finally:
            for future in running:
                future.cancel()


class WorkerLost:
    """The outcome of a job whose every worker died.

    Attributes:
        attempts: Workers it was started on.
        error: The last failure's type (``ActorDiedError``...).
    """

    def __init__(self, attempts: int, error: str) -> None:
        self.attempts = attempts
        self.error = error

    def __repr__(self) -> str:
        return f"WorkerLost(attempts={self.attempts}, error={self.error!r})"


def _lost(spec: EpisodeSpec, lost: Any) -> EpisodeResult:
    """The result of an episode whose every worker was lost."""
    attempts = lost.attempts if isinstance(lost, WorkerLost) else 0
    reason = lost.error if isinstance(lost, WorkerLost) else type(lost).__name__
    task_key = str(spec.task.get("task_key") or spec.task.get("key") or "?")
    return EpisodeResult.unplayed(
        spec.episode_id, task_key, f"worker lost {attempts} times: {reason}", attempts=attempts
    )
