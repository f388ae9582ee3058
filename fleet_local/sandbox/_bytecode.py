"""Compiled copies of the code a jailed verifier run imports, made once per server process.

The jail mounts the sandbox's stdlib-only modules and the verifier runtime (``fleet_sdk/verifiers``)
read-only. Where their ``__pycache__`` holds no bytecode for this interpreter (a checkout, or
``PYTHONDONTWRITEBYTECODE``), every run compiled them afresh: about 15-20 ms of CPU of the 45 ms a
run costs, on every episode. Here each directory's ``.py`` files are copied, once per process, into
a private temporary directory (mode 0700) together with their bytecode, and the jail mounts those
copies (read-only, at the same inner paths) instead. The interpreter in the jail checks each
``.pyc`` against its source copy's size and modification time as usual, so a stale cache is never
used; the verifier's own code is compiled per run, as before.

Nothing here weakens the jail: the copies are the same files, mounted the same way; only the
server's user can write the directory, and it is removed when the process exits. When the copy
cannot be made (a full or read-only temporary directory), runs mount the source directories, as
before, and only lose the cache.
"""

from __future__ import annotations

import atexit
import os
import py_compile
import shutil
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["staged"]

_PREFIX = "fleet-verifier-code-"
_lock = threading.Lock()
_staged: dict[tuple[str, ...], tuple[Path, ...]] = {}


def _remove(root: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child leaves its parent's copies alone
        shutil.rmtree(root, ignore_errors=True)


def _copy_compiled(source: Path, target: Path) -> None:
    """Copy ``source``'s ``.py`` files into ``target`` with their bytecode for this interpreter."""
    target.mkdir()
    cache = target / "__pycache__"
    cache.mkdir()
    for path in sorted(source.glob("*.py")):
        copy = target / path.name
        shutil.copy2(path, copy)  # keeps the modification time the bytecode is checked against
        py_compile.compile(
            str(copy),
            cfile=str(cache / f"{path.stem}.{sys.implementation.cache_tag}.pyc"),
            dfile=str(copy),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
        )


def staged(*directories: Path) -> tuple[Path, ...]:
    """The compiled copies of ``directories`` (each its ``.py`` files and ``__pycache__``).

    Made on the first call of a process and reused after; the originals when the copy fails.

    Args:
        directories: Directories of stdlib-only modules the jailed child imports.
    """
    key = tuple(str(d) for d in directories)
    with _lock:
        found = _staged.get(key)
        if found is not None:
            return found
        result: tuple[Path, ...] = tuple(directories)
        if sys.implementation.cache_tag is not None:
            root: Path | None = None
            try:
                root = Path(tempfile.mkdtemp(prefix=_PREFIX))  # 0700, this user's
                copies = tuple(root / f"{index}" for index in range(len(directories)))
                for source, copy in zip(directories, copies, strict=True):
                    _copy_compiled(source, copy)
            except (OSError, py_compile.PyCompileError):
                if root is not None:
                    shutil.rmtree(root, ignore_errors=True)
            else:
                atexit.register(_remove, root, os.getpid())
                result = copies
        _staged[key] = result
        return result
