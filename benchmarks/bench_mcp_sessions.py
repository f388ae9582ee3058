"""Server CPU per scripted episode with the fleet's shared tool listing, against listing every
instance's endpoints, on one server.

Both sides play the same scripted ``TaskEnv`` episode (``orderdesk-refund-late-order``, the
task's reference solution) on one local server, ``--concurrency`` at a time, in alternating
blocks (A/B, then B/A): ``shared`` is a fleet as it comes (an environment version's tools are
listed once, and a later episode opens one MCP session, on the endpoint owning the tools it
calls); ``per instance`` is a second fleet whose shared listing never answers, so every
episode lists both endpoints and opens a session on each, as the SDK did before. One server for
both sides keeps the comparison free of the differences between two server processes, which on
a busy machine are larger than the effect. The server's CPU time (``/proc``, with the children
it waited for) is read around each block; the sessions each side opened are read from ``GET /metrics``
(``fleet_local_mcp_sessions_opened_total``).

``python benchmarks/bench_mcp_sessions.py [--episodes 20] [--rounds 8] [--concurrency 1]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import httpx

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet
from fleet_sdk.mcp import ToolLists

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _side import spread
from bench_episodes import episode, process_cpu, tool_use_tasks

TASK_KEY = "orderdesk-refund-late-order"


class Unshared(ToolLists):
    """A shared listing that never answers: every env lists its own endpoints."""

    def get(self, key: Hashable) -> Any:
        return None


async def sessions_opened(local: LocalFleet) -> float:
    """Every MCP session the server opened on an instance so far."""
    headers = {"Authorization": f"Bearer {local.api_key}"}
    async with httpx.AsyncClient(timeout=30) as http:
        page = await http.get(f"{local.base_url}/metrics", headers=headers)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in page.text.splitlines()
        if line.startswith("fleet_local_mcp_sessions_opened_total{")
    )


async def run(episodes: int, rounds: int, concurrency: int) -> None:
    async with LocalFleet(s3=False) as local:
        fleets: dict[str, AsyncFleet] = {"shared": local.async_fleet(), "per instance": local.async_fleet()}
        fleets["per instance"]._tool_lists = Unshared()
        tasks = [t for t in await tool_use_tasks(fleets["shared"]) if t.task_key == TASK_KEY]
        assert tasks, f"the bundled {TASK_KEY} task is missing"
        gate = asyncio.Semaphore(concurrency)

        async def play(fleet: AsyncFleet) -> None:
            async with gate:
                assert await episode(fleet, tasks[0]) == 1.0

        for fleet in fleets.values():  # warm up: imports, seed copies, the first listing
            await play(fleet)
            await asyncio.gather(*(play(fleet) for _ in range(max(2, concurrency))))
        cpu: dict[str, list[float]] = {name: [] for name in fleets}
        sessions: dict[str, list[float]] = {name: [] for name in fleets}
        for round_ in range(rounds):
            order = list(fleets.items()) if round_ % 2 == 0 else list(reversed(fleets.items()))
            line = []
            for name, fleet in order:
                opened, before = await sessions_opened(local), process_cpu(local.pid)
                await asyncio.gather(*(play(fleet) for _ in range(episodes)))
                cpu[name].append((process_cpu(local.pid) - before) / episodes * 1e3)
                sessions[name].append((await sessions_opened(local) - opened) / episodes)
                line.append(f"{name} {cpu[name][-1]:5.1f} ms {sessions[name][-1]:.1f} sessions")
            print(f"round {round_ + 1}: " + "  ".join(line), flush=True)
        for name in fleets:
            print(
                f"{name:12s}: server CPU per episode {statistics.median(cpu[name]):5.1f} ms (median of"
                f" {rounds} rounds), MCP sessions per episode {statistics.median(sessions[name]):.1f}"
            )
        ratios = [a / b for a, b in zip(cpu["shared"], cpu["per instance"], strict=True)]
        print(f"shared / per instance, server CPU per episode: {spread(ratios)})")
        for fleet in fleets.values():
            await fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(run(args.episodes, args.rounds, args.concurrency))


if __name__ == "__main__":
    main()
