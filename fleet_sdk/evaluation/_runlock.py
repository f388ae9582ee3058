"""One process at a time per run directory: ``<run dir>/run.lock``, held while a run plays.

A second ``eval`` on a directory whose run is being played would start a second server on the
same data and race it for the same slots. The lock is an advisory ``flock`` on a file that
names the holder's pid, so the refusal can say who holds it; the kernel drops it when the
holder exits, however it exits, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

__all__ = ["LOCK_FILE", "RunBusyError", "RunLock", "lock_holder"]

LOCK_FILE = "run.lock"


class RunBusyError(Exception):
    """Another process holds the run directory.

    Attributes:
        pid: Its process id (None when it could not be read).
    """

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"{path} is being run by {holder}")
        self.pid = pid


def _pid_in(handle: IO[str]) -> int | None:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else None


def lock_holder(run_dir: str | Path) -> int | bool:
    """The pid of the process running ``run_dir`` (True when it could not be read); False when none.

    Args:
        run_dir: The run directory.
    """
    path = Path(run_dir) / LOCK_FILE
    if not path.is_file():
        return False
    with path.open("r+", encoding="ascii") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(handle)
            return True if pid is None else pid
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


class RunLock:
    """Hold ``run_dir`` for this process (``with RunLock(path):``); the directory is created.

    Args:
        run_dir: The run directory.

    Raises:
        RunBusyError: On entry, when another process holds it.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir)
        self._handle: IO[str] | None = None

    def __enter__(self) -> RunLock:
        self.path.mkdir(parents=True, exist_ok=True)
        handle = (self.path / LOCK_FILE).open("a+", encoding="ascii")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(handle)
            handle.close()
            raise RunBusyError(self.path, pid) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        # Emptied, not removed: removing it would race a process that has just opened it.
        with contextlib.suppress(OSError):
            handle.seek(0)
            handle.truncate()
        handle.close()
