"""Running SQL for a request: off the event loop, bounded in number and in time.

Every statement a client sends (``/resources/sqlite/{name}/query``, ``describe``, the
structured diff) runs in a worker thread under a limiter of its own, so SQL can neither block
the event loop nor take the thread pool that FastAPI's other sync routes use. Each request
gets a deadline (``LocalSettings.query_timeout``): waiting for a worker counts against it,
and a SQLite progress handler interrupts the statement once it has passed, so a runaway
query (a recursive CTE without end) stops even after its client has gone. SQLite releases the
GIL while it works; the handler runs rarely (every ``_PROGRESS_OPS`` virtual-machine steps) so
that dozens of runaway statements do not starve the loop of the GIL either.

Expiry answers 400 ``query_timeout`` (the same statement would run as long again: not
retryable); no free worker within the deadline answers 503 ``busy`` (retryable).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

import anyio

from ._errors import LocalAPIError
from ._state import LocalState

__all__ = ["QUERY_TIMEOUT_CODE", "run_sql", "timed_out"]

QUERY_TIMEOUT_CODE = "query_timeout"
_PROGRESS_OPS = 200_000
_T = TypeVar("_T")


def _limiters(state: LocalState) -> tuple[anyio.CapacityLimiter, anyio.CapacityLimiter]:
    """The gate a request waits at (with its deadline), and the threads' own limiter.

    The second has the same capacity, so it never makes anyone wait; it only keeps SQL off the
    default thread limiter that FastAPI's sync routes share.
    """
    if state.sql_limiters is None:  # made on first use: a limiter binds to the running loop
        size = state.settings.query_concurrency
        state.sql_limiters = (anyio.CapacityLimiter(size), anyio.CapacityLimiter(size))
    return state.sql_limiters


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

    gate, threads = _limiters(state)
    try:
        with anyio.fail_after(seconds):
            await gate.acquire()
    except TimeoutError:
        raise LocalAPIError(
            503,
            "the server is busy running other SQL statements; retry shortly",
            code="busy",
            retryable=True,
            headers={"Retry-After": "1"},
        ) from None
    try:
        return await anyio.to_thread.run_sync(guarded, limiter=threads)
    finally:
        gate.release()
