"""Waiting in tests: on a condition, with a deadline sized for a loaded machine.

A test never sleeps for a margin and then asserts: it polls for what it waits for and fails
once :data:`PATIENCE` has passed without it. Only a test that is failing anyway waits that long,
so the deadline costs nothing when things work.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

__all__ = ["PATIENCE", "wait_until", "wait_until_async"]

T = TypeVar("T")

PATIENCE = 120.0
"""Seconds a test gives anything that takes a moment on a quiet machine (a process to exit, a
server to start, a reaper pass, a verifier run). CI shares a 2-core machine whose load average
reaches 50, which makes such steps about 25 times slower than on a quiet one."""

_POLL = 0.05


def wait_until(condition: Callable[[], T], what: str, *, within: float = PATIENCE) -> T:
    """Poll ``condition`` until it returns something truthy, and return that.

    Args:
        condition: Checked every 50 ms (a blocking sleep: sync tests only).
        what: What is waited for, for the failure message.
        within: Seconds before the test fails.
    """
    deadline = time.monotonic() + within
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {within:g}s: {what}"
        time.sleep(_POLL)
    return value


async def wait_until_async(
    condition: Callable[[], T | Awaitable[T]], what: str, *, within: float = PATIENCE
) -> T:
    """The same inside a running loop; ``condition`` may be a coroutine function.

    Args:
        condition: Checked every 50 ms; its result is awaited when it is awaitable.
        what: What is waited for, for the failure message.
        within: Seconds before the test fails.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return cast(T, value)
        assert loop.time() < deadline, f"not within {within:g}s: {what}"
        await asyncio.sleep(_POLL)
