"""Cleanup that runs to its end in a task being cancelled: deleting what an operation made.

``anyio.CancelScope(shield=True)`` keeps anyio's own cancel scopes out, but not a native
``task.cancel()`` (what ``asyncio.timeout``, ``asyncio.wait_for``, a ``TaskGroup`` and the sync
bridge on Ctrl-C send): one arriving while the cleanup awaits breaks through the shield, and the
instance or lease it was deleting stays behind. ``run_cleanup`` runs the work in a task of its
own, waits for it through any number of cancellations, bounded by a deadline of its own, then
lets the first cancellation go on (``tests/test_cleanup_shield.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ["CLEANUP_DEADLINE", "run_cleanup"]

T = TypeVar("T")

CLEANUP_DEADLINE = 30.0
"""Seconds a cleanup (deleting an instance or a lease) may take, in a cancelled task too."""

log = logging.getLogger("fleet_sdk.cleanup")


async def run_cleanup(
    work: Callable[[], Awaitable[T]], *, what: str, seconds: float = CLEANUP_DEADLINE
) -> T | None:
    """Run ``work`` to its end even while the calling task is cancelled, at most ``seconds``.

    A cancellation that arrives meanwhile is held until the work is over, then raised. What the
    work raises is raised; running out of time is logged and returns None.

    Args:
        work: The cleanup (deleting what an operation created).
        what: The cleanup, for the log (``"deleting instance i-1"``).
        seconds: The bound on the cleanup.
    """

    import asyncio  # with the first cleanup, not with the import (``import fleet_sdk`` stays light)

    async def bounded() -> T | None:
        with anyio.move_on_after(seconds):
            return await work()
        log.warning("%s did not finish within %gs; left to its TTL", what, seconds)
        return None

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): anyio's shield holds every cancellation there
        with anyio.CancelScope(shield=True):
            return await bounded()
    task = asyncio.get_running_loop().create_task(bounded(), name=f"fleet-cleanup: {what}")
    held: asyncio.CancelledError | None = None
    # The anyio shield keeps anyio's scopes from re-sending their cancellation on every loop turn
    # while this waits; native cancellations still arrive and are held below.
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.wait((task,))
            except asyncio.CancelledError as exc:
                held = held or exc
    if held is not None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s failed: %s", what, type(task.exception()).__name__)
        raise held
    return task.result()
