"""Compiled copies of the code a jailed verifier run imports, made once per server process.

The jail mounts the sandbox's stdlib-only modules and the verifier runtime (``fleet_sdk/verifiers``)
read-only. Where their ``__pycache__`` holds no current bytecode for this interpreter (a checkout
run with ``PYTHONDONTWRITEBYTECODE``, as in CI and many containers, or modules no process outside
the jail ever imported), every run compiled them afresh: about 15-20 ms of CPU of a run's 45 ms,
on every episode. Here each directory's ``.py`` files are copied into a private temporary
directory (mode 0700) together with their bytecode, and the jail mounts those copies (read-only,
at the same inner paths) instead. The interpreter in the jail checks each ``.pyc`` against its
source copy's size and modification time as usual, so a stale cache is never used; the
verifier's own code is compiled per run, as before.

Nothing here weakens the jail: the copies are the same files, mounted the same way; only the
server's user can write the directory. It is removed when the process exits; the copy of a
process that could not remove its own (SIGKILL) is removed by the next process that makes one:
each holds an ``flock`` on a file in its directory for as long as it lives, and a directory
whose lock can be taken has no owner left (a lock, unlike a pid, means the same in every PID
namespace sharing the directory). Every run checks that its files are still there (a
temporary-file cleaner may remove them under a long-running server) and makes them again if not.
When the copy cannot be made (a full or read-only temporary directory), runs mount the source
directories, as before, and only lose the cache.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import py_compile
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["staged"]

PREFIX = "fleet-sandbox-bytecode-"
_lock = threading.Lock()


@dataclass(frozen=True)
class _Copy:
    directories: tuple[Path, ...]
    files: tuple[str, ...]  # every file copied or compiled, to check they are still there
    lock: int  # the descriptor holding the directory's lock while this process lives
    wanted: dict[str, frozenset[str]] = field(init=False)  # ``files`` by their directory

    def __post_init__(self) -> None:
        wanted: dict[str, set[str]] = {}
        for path in self.files:
            folder, name = os.path.split(path)
            wanted.setdefault(folder, set()).add(name)
        object.__setattr__(self, "wanted", {folder: frozenset(names) for folder, names in wanted.items()})

    def complete(self) -> bool:
        """Every file is still there: one directory listing per directory, not a ``stat`` per
        file (this is checked before every run)."""
        try:
            return all(names.issubset(os.listdir(folder)) for folder, names in self.wanted.items())
        except OSError:
            return False


_copies: dict[tuple[Path, ...], _Copy] = {}
_LOCK = "owner.lock"


def _owned(root: Path) -> int:
    """Lock ``root`` for this process: the lock file appears under its final name only once
    locked, so another process never finds it there unlocked while its owner lives."""
    fd = os.open(root / f"{_LOCK}.new", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(root / f"{_LOCK}.new", root / _LOCK)
    except OSError:
        os.close(fd)
        raise
    return fd


def _sweep(parent: Path) -> None:
    """Remove the copies whose owner is gone (its lock can be taken)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if not entry.name.startswith(PREFIX) or not (entry / _LOCK).is_file():
                continue  # not ours, or an owner still between mkdtemp and its lock
            try:
                fd = os.open(entry / _LOCK, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its owner lives
            else:
                shutil.rmtree(entry, ignore_errors=True)
            finally:
                os.close(fd)


def _remove(root: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child leaves its parent's copies alone
        shutil.rmtree(root, ignore_errors=True)


def _copy_compiled(source: Path, target: Path) -> list[str]:
    """Copy ``source``'s ``.py`` files into ``target`` with their bytecode for this interpreter."""
    target.mkdir()
    cache = target / "__pycache__"
    cache.mkdir()
    made = []
    for path in sorted(source.glob("*.py")):
        copy = target / path.name
        compiled = cache / f"{path.stem}.{sys.implementation.cache_tag}.pyc"
        shutil.copy2(path, copy)  # keeps the modification time the bytecode is checked against
        py_compile.compile(
            str(copy),
            cfile=str(compiled),
            dfile=str(copy),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
        )
        made += [str(copy), str(compiled)]
    return made


def _make(directories: tuple[Path, ...]) -> _Copy | None:
    root: Path | None = None
    lock: int | None = None
    try:
        _sweep(Path(tempfile.gettempdir()))
        root = Path(tempfile.mkdtemp(prefix=PREFIX))  # 0700, this user's
        lock = _owned(root)
        copies = tuple(root / str(index) for index in range(len(directories)))
        files: list[str] = []
        for source, copy in zip(directories, copies, strict=True):
            files += _copy_compiled(source, copy)
    except (OSError, py_compile.PyCompileError):
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        if lock is not None:
            os.close(lock)
        return None
    atexit.register(_remove, root, os.getpid())
    return _Copy(copies, tuple(files), lock)


def staged(*directories: Path) -> tuple[Path, ...]:
    """The compiled copies of ``directories`` (each its ``.py`` files and ``__pycache__``).

    Made on the first call of a process and reused after (made again if any file is gone);
    the originals when the copy cannot be made.

    Args:
        directories: Directories of stdlib-only modules the jailed child imports.
    """
    with _lock:
        found = _copies.get(directories)
        if found is not None and found.complete():
            return found.directories
        if found is not None:
            _remove(found.directories[0].parent, os.getpid())
            with contextlib.suppress(OSError):
                os.close(found.lock)
            del _copies[directories]
        made = _make(directories)
        if made is None:
            return directories
        _copies[directories] = made
        return made.directories
