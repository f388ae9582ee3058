"""Probing the server while an attack runs: how long each probe took (the loop-attack tests)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import TypeVar

import httpx

T = TypeVar("T")


async def probed(
    client: httpx.AsyncClient, attack: Awaitable[T], paths: Sequence[str], *, every: float = 0.05
) -> tuple[T, list[float]]:
    """``attack``'s outcome, and how long each probe of ``paths`` sent while it ran took.

    The paths are probed in turn every ``every`` seconds, at least once, each answer a 200.
    """
    latencies: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set() or not latencies:
            for path in paths:
                started = time.perf_counter()
                answer = await client.get(path)
                latencies.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
            await asyncio.sleep(every)

    prober = asyncio.ensure_future(probe())
    try:
        outcome = await attack
    finally:
        done.set()
        await prober
    return outcome, latencies
