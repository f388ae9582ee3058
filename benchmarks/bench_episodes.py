"""Throughput of scripted TaskEnv episodes on the local server, against one-at-a-time."""

from __future__ import annotations

import argparse
import asyncio
import time

from fleet_sdk import AsyncFleet, TaskEnv
from fleet_sdk.local import LocalFleet
from fleet_sdk.tasks import Task


async def episode(fleet: AsyncFleet, task: Task) -> float | None:
    async with TaskEnv(task, fleet=fleet) as env:
        await env.reset_async()
        for step in task.metadata["reference_solution"]:
            _, _, done, _ = await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
            if done:
                break
        if not env.done:
            await env.step_async({"done": True})
        return env.final_reward


async def measure(fleet: AsyncFleet, tasks: list[Task], episodes: int, concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> float | None:
        async with gate:
            return await episode(fleet, tasks[i % len(tasks)])

    started = time.perf_counter()
    rewards = await asyncio.gather(*(one(i) for i in range(episodes)))
    elapsed = time.perf_counter() - started
    assert all(r == 1.0 for r in rewards), rewards
    return episodes / elapsed


async def main(episodes: int, levels: list[int]) -> None:
    async with LocalFleet() as local:
        fleet = local.async_fleet()
        tasks = [
            Task.model_validate(t.model_dump()) for t in (await fleet.api.control_plane.list_tasks()).tasks
        ]
        await measure(fleet, tasks, 4, 4)  # warm up (seed databases, imports)
        baseline = await measure(fleet, tasks, max(8, episodes // 8), 1)
        print(f"baseline (concurrency 1): {baseline:6.2f} episodes/s")
        for level in levels:
            rate = await measure(fleet, tasks, episodes, level)
            print(f"concurrency {level:3d}: {rate:6.2f} episodes/s  = {rate / baseline:5.2f}x baseline")
        await fleet.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--concurrency", default="8,32,64")
    args = parser.parse_args()
    asyncio.run(main(args.episodes, [int(x) for x in args.concurrency.split(",")]))
