"""Run a command's coroutine so that SIGTERM stops it the way Ctrl-C does.

``asyncio.run`` turns the first Ctrl-C into a cancellation of the main task (its ``finally``
blocks run: episodes stop, the embedded server stops, what finished stays stored), then raises
``KeyboardInterrupt``. SIGTERM, what a scheduler, ``timeout`` or ``docker stop`` sends, would end
the process at once with nothing said (exit 143). :func:`run` gives SIGTERM the same clean stop
and raises :class:`Terminated`; a second SIGTERM while stopping ends the process at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Terminated", "run"]

_T = TypeVar("_T")


class Terminated(Exception):
    """The command was stopped by SIGTERM after a clean stop.

    Attributes:
        exit_code: 128 + the signal number, as shells report it (143).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, with SIGTERM cancelling ``main`` like Ctrl-C.

    Args:
        main: The command's coroutine.

    Raises:
        KeyboardInterrupt: Ctrl-C, once ``main`` has stopped.
        Terminated: SIGTERM, once ``main`` has stopped.
    """
    received: list[int] = []

    async def guarded() -> _T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop() -> None:
            received.append(signal.SIGTERM)
            loop.remove_signal_handler(signal.SIGTERM)  # a second SIGTERM is not so patient
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, stop)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if received:
            raise Terminated(received[0]) from None
        raise
