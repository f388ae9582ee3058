"""Process groups that die with this process, however it dies (SIGKILL included).

The children that outlive a request (a lease's Chromium, a verifier sandbox) run in process
groups of their own, so ending one is a single ``killpg``. That covers every way this process
ends but one: killed with SIGKILL (or by the OOM killer) it runs no clean-up, and the groups
would live on as orphans. So each such group is registered here with a watchdog: one small
process (``_group_watchdog``, started on first use, in a session of its own) reading a pipe
that only this process writes. When this process dies the kernel closes the pipe, the
watchdog reads end of file and SIGKILLs every group still registered. A group is released once
it has been killed and reaped, so the watchdog never kills an id that may have been reused.

Why a pipe and not ``PR_SET_PDEATHSIG``: the death signal is tied to the *thread* that forked
(Chromium starts from worker threads, which may end while the server lives on), it reaches one
process rather than its group, and it is Linux only. The pipe needs nothing but POSIX, so the
guard works the same on macOS; where there is no ``killpg`` (Windows) it does nothing.

A group is registered only once its leader exists. After a synchronous ``subprocess.Popen``
that leaves microseconds unguarded. After ``asyncio.create_subprocess_exec`` it leaves a few
turns of the event loop, long enough under load for the child to start its own children:
:func:`gated` closes that window by holding the child in ``/bin/sh`` until its parent sends a
line on its stdin (after registering it); a parent that dies first closes the pipe, and the
child exits without starting anything. Left to chance: the watchdog itself being SIGKILLed
(it is restarted on the next registration, with every live group).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["GATE_OPEN", "gated", "guard_group", "release_group"]

_WATCHDOG = Path(__file__).with_name("_group_watchdog.py")

# ``read`` consumes stdin a byte at a time up to the newline, so what follows the line is left
# for the program ``exec`` starts (``tests/sandbox/test_group_guard.py``).
_GATE = ("/bin/sh", "-c", 'read -r _ || exit 125; exec "$@"', "fleet-gate")

GATE_OPEN = b"\n"
"""What to write first on a :func:`gated` child's stdin, once it is registered, to let it start."""


def gated(argv: list[str]) -> list[str]:
    """``argv`` held back until its parent writes :data:`GATE_OPEN` on its stdin.

    Until then the child is a shell waiting on that pipe; if the pipe closes first (the parent
    died before registering it) it exits with status 125 and ``argv`` never runs.

    Args:
        argv: The command line to start once the gate opens.
    """
    return [*_GATE, *argv]


class _Guard:
    """The registered groups and the watchdog of this process (one per process: ``_GUARD``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._watchdog: subprocess.Popen[bytes] | None = None

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            line = f"+{pgid}\n".encode()
            if not (self._alive() and self._write(line)):
                self._restart()

    def discard(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                if self._alive():
                    self._write(f"-{pgid}\n".encode())  # a watchdog gone has nothing to forget

    def _alive(self) -> bool:
        return self._watchdog is not None and self._watchdog.poll() is None

    def _restart(self) -> None:
        """Start a watchdog (the first, or after the last was killed) and give it every group."""
        if self._watchdog is not None and self._watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                self._watchdog.stdin.close()  # the pipe of the one that is gone
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WATCHDOG)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            self._watchdog = None
            return
        self._write(b"".join(f"+{group}\n".encode() for group in sorted(self._groups)))

    def _write(self, data: bytes) -> bool:
        """Write to the watchdog's pipe; False when it has gone (a broken pipe)."""
        assert self._watchdog is not None and self._watchdog.stdin is not None
        try:
            # Unbuffered: a line still in our buffer when we are killed would never reach it.
            os.write(self._watchdog.stdin.fileno(), data)
        except OSError:
            return False
        return True

    def end_if_idle(self, timeout: float) -> bool:
        """Close the pipe of a watchdog that guards nothing, so it exits now, and reap it.

        Returns:
            Whether no watchdog is left running.
        """
        with self._lock:
            if self._groups or self._watchdog is None:
                return not self._groups
            watchdog, self._watchdog = self._watchdog, None
            if watchdog.stdin is not None:
                with contextlib.suppress(OSError):
                    watchdog.stdin.close()  # end of file: it kills nothing (no group) and exits
        try:
            watchdog.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def forget(self) -> None:
        """After a plain ``fork``, in the child: it must neither keep the pipe open (the watchdog
        would wait for it too) nor speak for the parent's groups."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._watchdog is not None and self._watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                self._watchdog.stdin.close()
        self._watchdog = None
        self._groups.clear()


_GUARD = _Guard()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_GUARD.forget)


def guard_group(pgid: int) -> None:
    """Have the process group ``pgid`` SIGKILLed when this process dies.

    Never raises: a guard that cannot start leaves the group as it was (killed by the normal
    shutdown only).

    Args:
        pgid: The group id (the pid of a child started with ``start_new_session=True``).
    """
    if hasattr(os, "killpg"):
        _GUARD.add(pgid)


def release_group(pgid: int) -> None:
    """Forget ``pgid``: its processes are killed and reaped, so the id may be reused.

    Args:
        pgid: A group passed to :func:`guard_group` before.
    """
    _GUARD.discard(pgid)


def end_idle_watchdog(timeout: float = 5.0) -> bool:
    """End the watchdog now if no group is registered (an owner such as ``LocalFleet`` calls this
    when it stops, so the watchdog does not outlive it until the interpreter exits). The next
    :func:`guard_group` starts a new one.

    Args:
        timeout: Seconds to wait for it to exit.

    Returns:
        Whether no watchdog is left running (False while groups are still registered).
    """
    return _GUARD.end_if_idle(timeout)
