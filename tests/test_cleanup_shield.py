"""Cleanup runs to its end in a cancelled task (``fleet_sdk._runtime._cleanup.run_cleanup``), and
an interrupted sync call lets its coroutine unwind before it returns (the loop bridge)."""

from __future__ import annotations

import asyncio
import signal
import threading

import anyio
import pytest

from fleet_sdk._runtime._bridge import run_sync
from fleet_sdk._runtime._cleanup import run_cleanup


async def test_a_second_native_cancel_does_not_cut_the_cleanup_short() -> None:
    """Regression: ``anyio.move_on_after(shield=True)`` holds anyio's scopes but not a native
    ``task.cancel()``; one arriving while a closing episode deleted its instance cut the delete
    off and left the instance running."""
    started, release = asyncio.Event(), asyncio.Event()
    log: list[str] = []

    async def cleanup() -> str:
        started.set()
        await release.wait()
        log.append("deleted")
        return "done"

    async def operation() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await run_cleanup(cleanup, what="deleting")
            log.append("not reached: the held cancellation is raised")

    task = asyncio.create_task(operation())
    await asyncio.sleep(0)
    task.cancel()
    await started.wait()
    for _ in range(3):  # cancelled again and again while the cleanup runs
        task.cancel()
        await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["deleted"]  # then the held cancellation went on


async def test_the_cancellation_is_held_then_raised_so_timeouts_still_fire() -> None:
    log: list[str] = []

    async def cleanup() -> None:
        await asyncio.sleep(0.01)
        log.append("deleted")

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            try:
                await asyncio.sleep(3600)
            finally:
                await run_cleanup(cleanup, what="deleting")
    with anyio.move_on_after(0.01) as scope:  # an anyio scope: the same
        try:
            await asyncio.sleep(3600)
        finally:
            await run_cleanup(cleanup, what="deleting")
    assert scope.cancelled_caught and log == ["deleted", "deleted"]


async def test_a_cleanup_that_hangs_is_bounded_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()

    assert await run_cleanup(hangs, what="deleting instance i-9", seconds=0.05) is None
    assert "deleting instance i-9 did not finish within 0.05s" in caplog.text


async def test_what_the_cleanup_raises_is_raised_when_nothing_was_cancelled() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await run_cleanup(fails, what="deleting")


def test_an_interrupted_sync_call_waits_for_its_coroutine_to_unwind() -> None:
    """Regression: on Ctrl-C the bridge cancelled the coroutine and returned at once, so the
    process could exit before a ``make`` deleted the instance it had just created."""
    unwound = threading.Event()
    running = threading.Event()

    async def cleanup() -> None:
        await asyncio.sleep(0.05)
        unwound.set()

    async def work() -> None:
        try:
            running.set()
            await asyncio.sleep(3600)
        finally:
            await run_cleanup(cleanup, what="deleting")

    def interrupt() -> None:  # a real SIGINT: it wakes the main thread's wait, as Ctrl-C does
        running.wait(60)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_sync(work())
    assert unwound.is_set()  # before run_sync returned, not some time later


def test_a_sync_call_timeout_also_waits_for_the_unwind() -> None:
    unwound = threading.Event()

    async def cleanup() -> None:
        await asyncio.sleep(0.05)
        unwound.set()

    async def work() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await run_cleanup(cleanup, what="deleting")

    with pytest.raises(TimeoutError):
        run_sync(work(), timeout=0.05)
    assert unwound.is_set()
