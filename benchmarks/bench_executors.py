"""Episodes/s of the Ray executor against plain asyncio on this machine, interleaved A/B/A/B.

Both run the same reference episodes on the same local server at the same total concurrency;
asyncio in this process on one client, Ray on ``--actors`` actors of a local Ray (each with its
own client and ``concurrency / actors`` episodes at once). Printed as ratios to asyncio, pair by
pair, so a noisy neighbour shows up as spread rather than as a wrong answer.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import ray

from fleet_local import LocalFleet
from fleet_sdk.executors import AsyncioExecutor, EpisodeExecutor, collect, specs_for
from fleet_sdk.integrations.ray import RayExecutor


async def measure(executor: EpisodeExecutor, tasks: list[dict[str, Any]], episodes: int, tag: str) -> float:
    specs = specs_for(tasks, repeats=episodes // len(tasks) + 1)[:episodes]
    specs = [type(s)(f"{tag}/{s.episode_id}", s.task, s.policy, s.env_options) for s in specs]
    started = time.perf_counter()
    results = await collect(executor.run(specs))
    elapsed = time.perf_counter() - started
    assert len(results) == episodes and all(r.reward == 1.0 for r in results), results
    return episodes / elapsed


async def main(episodes: int, rounds: int, concurrency: int, actors: int) -> None:
    async with LocalFleet() as local:
        fleet = local.async_fleet()
        tasks = [t.model_dump(mode="json") for t in await fleet.tasks.list()]
        url = local.base_url
        options = {
            "api_key": local.api_key,
            "base_url": url,
            "platform_url": url,
            "browser_url": url,
            "environ": {},
        }
        ray.init(
            num_cpus=actors, object_store_memory=100 * 1024**2, include_dashboard=False, log_to_driver=False
        )
        plain = AsyncioExecutor(fleet, concurrency=concurrency)
        on_ray = RayExecutor(options, actors=actors, concurrency_per_actor=max(1, concurrency // actors))
        try:
            await measure(plain, tasks, 8, "warm-a")  # imports, seeded databases
            await measure(on_ray, tasks, 8, "warm-r")  # actors started, their imports
            ratios = []
            for n in range(rounds):
                a = await measure(plain, tasks, episodes, f"a{n}")
                r = await measure(on_ray, tasks, episodes, f"r{n}")
                ratios.append(r / a)
                print(f"round {n}: asyncio {a:6.2f} ep/s   ray {r:6.2f} ep/s   ray/asyncio = {r / a:4.2f}x")
            print(f"median ray/asyncio over {rounds} rounds: {statistics.median(ratios):4.2f}x")
        finally:
            on_ray.shutdown()
            ray.shutdown()
            await fleet.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--actors", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.episodes, args.rounds, args.concurrency, args.actors))
