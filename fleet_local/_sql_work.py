"""Running SQL for a request: off the event loop, bounded in number and in time.

Every statement a client sends (``/resources/sqlite/{name}/query``, ``describe``, the
structured diff) runs in a thread of a pool of its own, so SQL can neither block the event loop
nor take the thread pool that FastAPI's other sync routes use. Each request
gets a deadline (``LocalSettings.query_timeout``): waiting for a worker counts against it,
and a SQLite progress handler interrupts the statement once it has passed, so a runaway
query (a recursive CTE without end) stops even after its client has gone. SQLite releases the
GIL while it works; the handler runs rarely (every ``_PROGRESS_OPS`` virtual-machine steps) so
that dozens of runaway statements do not starve the loop of the GIL either. Nor of the CPU:
the SQL threads are a pool of their own whose threads run at the lowest priority (``NICENESS``;
Linux, elsewhere at the server's), so two dozen runaways on two cores leave the event loop and
the rest of the server the CPU to answer everyone else (``tests/local/test_loop_under_attack.py``).

Expiry answers 400 ``query_timeout`` (the same statement would run as long again: not
retryable); no free worker within the deadline answers 503 ``busy`` (retryable).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ._errors import LocalAPIError
from ._state import LocalState

__all__ = ["NICENESS", "QUERY_TIMEOUT_CODE", "run_sql", "timed_out"]

QUERY_TIMEOUT_CODE = "query_timeout"
NICENESS = 19
"""How far below the server's priority SQL threads run: nice 19, the lowest, weighs 1/70 of the
server's nice 0, so SQL gets the CPU the rest of the server leaves (two dozen runaway statements
beside 64 episodes: the episodes took 31 s at the same priority, 11-19 s below it)."""
_PROGRESS_OPS = 200_000
_T = TypeVar("_T")


def _lower_priority() -> None:
    # Linux keeps a nice value per thread (setpriority with a thread id); elsewhere this fails
    # and the thread keeps the server's priority.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)


def _workers(state: LocalState) -> tuple[asyncio.Semaphore, ThreadPoolExecutor]:
    """The gate a request waits at (with its deadline), and the SQL threads.

    Both hold ``query_concurrency``: the gate is given back when a statement's thread is done,
    so no more statements run than there are threads, even after their clients have gone.
    """
    if state.sql_workers is None:  # made on first use, inside the running loop
        size = state.settings.query_concurrency
        pool = ThreadPoolExecutor(size, thread_name_prefix="fleet-sql", initializer=_lower_priority)
        state.sql_workers = (asyncio.Semaphore(size), pool)
    return state.sql_workers


def timed_out(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite's "interrupted" (the progress handler stopped the statement)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT


def _timeout_error(seconds: float) -> LocalAPIError:
    return LocalAPIError(
        400,
        f"the statement ran longer than the server's {seconds:g}s query limit and was stopped",
        code=QUERY_TIMEOUT_CODE,
        retryable=False,
    )


async def run_sql(state: LocalState, work: Callable[[Callable[[sqlite3.Connection], None]], _T]) -> _T:
    """Run ``work(arm)`` in an SQL worker thread within the request's deadline.

    ``work`` must call ``arm(conn)`` on every connection it opens before running statements:
    that installs the deadline's progress handler.

    Raises:
        LocalAPIError: 400 ``query_timeout`` when a statement outlived the deadline; 503
            ``busy`` when no worker was free before it.
    """
    seconds = float(state.settings.query_timeout)
    deadline = time.monotonic() + seconds

    def arm(conn: sqlite3.Connection) -> None:
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_OPS)

    def guarded() -> _T:
        if time.monotonic() > deadline:
            raise _timeout_error(seconds)
        try:
            return work(arm)
        except sqlite3.Error as exc:
            if timed_out(exc):
                raise _timeout_error(seconds) from None
            raise

    gate, pool = _workers(state)
    try:
        await asyncio.wait_for(gate.acquire(), seconds)
    except TimeoutError:
        raise LocalAPIError(
            503,
            "the server is busy running other SQL statements; retry shortly",
            code="busy",
            retryable=True,
            headers={"Retry-After": "1"},
        ) from None
    loop = asyncio.get_running_loop()
    running = pool.submit(guarded)
    running.add_done_callback(lambda _: loop.call_soon_threadsafe(gate.release))
    return await asyncio.wrap_future(running)
