"""The sync bridge (``run_sync``): from scripts, threads and inside a running loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from fleet_sdk._runtime._bridge import run_sync


async def _which_loop() -> int:
    await asyncio.sleep(0)
    return id(asyncio.get_running_loop())


def test_bridge_from_a_plain_script_and_threads() -> None:
    loops = {run_sync(_which_loop())}
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(run_sync(_which_loop()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 4
    assert set(results) == loops  # one SDK loop, whoever calls


async def test_bridge_inside_a_running_loop_does_not_raise() -> None:
    """Regression: sync wrappers called asyncio.run()/run_until_complete() inside a running loop."""
    caller = id(asyncio.get_running_loop())
    assert run_sync(_which_loop()) != caller


def test_bridge_timeout_cancels() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match=r"0\.2s"):
        run_sync(forever(), timeout=0.2)
    # The cancel is delivered on the bridge's own loop thread, so it may land just after the raise.
    assert cancelled.wait(10), "the timed-out coroutine was cancelled, not left running"


def test_bridge_propagates_exceptions() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        run_sync(boom())
