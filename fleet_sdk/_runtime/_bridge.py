"""Run async SDK code from sync code, anywhere: a script, a thread, or inside a
running event loop (a notebook cell, an async trainer).

The sync classes are thin twins of the async ones. They never call
``asyncio.run`` or ``run_until_complete`` on the caller's loop (which raises
inside a running loop, and deadlocks when it doesn't); instead the coroutine
runs on one SDK-owned loop in a daemon thread, and the caller waits for its
result with a bound. Async resources (httpx pools, MCP sessions) created by a
sync object live on that loop for their whole life, so they are never used
from two loops.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


class LoopBridge:
    """One background event loop that sync wrappers submit coroutines to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():  # after fork the thread is gone; start afresh
                self._loop, self._thread, self._pid = None, None, os.getpid()
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                import asyncio  # with the first sync call, not with the import (~30 ms)

                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="fleet-sdk-loop", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The bridge's loop (started on first use)."""
        return self._ensure()

    def in_bridge_thread(self) -> bool:
        """True when called from the bridge's own loop thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the bridge loop and return its result.

        Args:
            coro: The coroutine to run.
            timeout: Seconds to wait before cancelling it and raising ``TimeoutError``;
                the SDK's own calls carry deadlines, so None is safe for them.
        """
        if self.in_bridge_thread():
            coro.close()
            raise RuntimeError("a sync fleet_sdk method was called from inside an async fleet_sdk callback")

        loop = self._ensure()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        finished = threading.Event()  # set once the coroutine has unwound (or never started)
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:
            if not future.set_running_or_notify_cancel():  # cancelled before it started
                coro.close()
                finished.set()
                return
            task = loop.create_task(coro)
            tasks.append(task)

            def done(task: asyncio.Task[T]) -> None:
                finished.set()
                if task.cancelled():
                    future.set_exception(concurrent.futures.CancelledError())
                elif (error := task.exception()) is not None:
                    future.set_exception(error)
                else:
                    future.set_result(task.result())

            task.add_done_callback(done)

        def stop() -> None:
            # Cancel the coroutine and let it delete what it made (an instance mid-``make``)
            # before the caller goes on; bounded, and a second Ctrl-C stops the wait.
            if future.cancel():  # not started: ``start``, if it ever runs, closes it unrun
                return
            # Running: ``start`` has made the task by the time this runs.
            loop.call_soon_threadsafe(lambda: tasks[0].cancel())  # noqa: PLW0108
            finished.wait(STOP_WAIT)

        try:
            # Scheduled inside the ``try``: a Ctrl-C that lands while it is being scheduled
            # (the coroutine may already be running) still stops and waits for it.
            loop.call_soon_threadsafe(start)
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            stop()
            raise TimeoutError(f"fleet_sdk call did not finish within {timeout}s") from None
        except BaseException:
            if not future.done():  # KeyboardInterrupt in the waiting thread: stop the work too
                stop()
            raise


STOP_WAIT = 35.0
"""Seconds an interrupted sync call waits for its coroutine to unwind (each cleanup in it is
bounded by 30 s: ``fleet_sdk._runtime._cleanup``)."""


_BRIDGE = LoopBridge()


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run an SDK coroutine from sync code (see ``LoopBridge.run``).

    Args:
        coro: The coroutine.
        timeout: Optional bound in seconds.
    """
    return _BRIDGE.run(coro, timeout)
