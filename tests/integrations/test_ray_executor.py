"""Ray fan-out on a local 2-CPU Ray: 32 reference episodes against the local server, one worker
killed mid-run, every episode recorded exactly once (and again nothing twice on a rerun)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from fleet_local import LocalFleet
from fleet_sdk.executors import JsonlResultSink, specs_for
from fleet_sdk.integrations.ray import RayExecutor

TASKS = ["orderdesk-cancel-pending-order", "orderdesk-count-pending-orders", "calendar-cancel-vendor-prep"]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(
        num_cpus=2,
        object_store_memory=100 * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


def client_options(local: LocalFleet) -> dict[str, Any]:
    url = local.base_url
    return {"api_key": local.api_key, "base_url": url, "platform_url": url, "browser_url": url, "environ": {}}


def task_configs(local: LocalFleet) -> list[dict[str, Any]]:
    with local.fleet() as fleet:
        return [fleet.tasks.get(key).model_dump(mode="json") for key in TASKS]


async def test_32_episodes_with_a_worker_killed_are_each_recorded_once(
    local_ray: None, local: LocalFleet, tmp_path: Path
) -> None:
    specs = specs_for(task_configs(local), repeats=11, max_steps=10)[:32]
    assert len(specs) == 32
    sink = JsonlResultSink(tmp_path / "results.jsonl")
    executor = RayExecutor(client_options(local), actors=2, concurrency_per_actor=4)
    killed: int | None = None
    streamed = []
    try:
        async for result in executor.run(specs, sink):
            streamed.append(result)
            if killed is None and len(streamed) == 4:
                # A worker dies with episodes in flight (each actor runs up to 4).
                killed = executor.worker_pids()[0]
                os.kill(killed, signal.SIGKILL)
        pids_after = executor.worker_pids()
    finally:
        executor.shutdown()

    recorded = sink.read()
    ids = [r.episode_id for r in recorded]
    assert sorted(ids) == sorted(s.episode_id for s in specs)  # none lost
    assert len(ids) == len(set(ids)) == 32  # none twice
    assert [r.episode_id for r in streamed] == ids  # streamed in the order persisted
    assert all(r.error is None and r.reward == 1.0 for r in recorded), [
        r for r in recorded if r.reward != 1.0
    ]
    retried = [r for r in recorded if r.attempts > 1]
    assert retried, "the killed worker had episodes in flight; they must have been run again"
    assert all(r.worker is not None and not r.worker.startswith(f"{killed}@") for r in retried)
    assert killed not in pids_after and len(pids_after) == 2  # a replacement joined the pool

    # A rerun on the same sink has nothing left to do and records nothing twice.
    rerun = RayExecutor(client_options(local), actors=1, concurrency_per_actor=2)
    try:
        again = [r async for r in rerun.run(specs, sink)]
    finally:
        rerun.shutdown()
    assert again == [] and len(sink.read()) == 32


async def test_evaluation_runner_plays_its_episodes_on_ray(
    local_ray: None, local: LocalFleet, tmp_path: Path
) -> None:
    from fleet_sdk.evaluation import RunDir, run_evaluation

    fleet = local.async_fleet()
    executor = RayExecutor(client_options(local), actors=2, concurrency_per_actor=2)
    try:
        envelope = await run_evaluation(
            fleet,
            tmp_path / "run",
            tasks=task_configs(local)[:2],
            models=["local/scripted"],
            k=2,
            upload=False,
            executor=executor,
        )
        assert executor.workers  # the episodes went to the actors
    finally:
        executor.shutdown()
        await fleet.close()
    (summary,) = envelope.report.models
    assert (summary.passed, summary.failed, summary.errored) == (4, 0, 0)
    with RunDir(tmp_path / "run") as store:
        assert len(store.outcomes()) == 4
