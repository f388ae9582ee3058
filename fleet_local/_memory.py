"""Asking glibc's allocator to give freed memory back (the server process only).

glibc gives each thread that allocates its own arena, up to eight per core, and keeps what is
freed in them for reuse. The server's worker threads (SQL, verifier runs, request bodies) come
and go, so a long run spreads its heap over many arenas whose free pages stay resident. Two
arenas are enough for a server whose Python code holds one lock anyway, and after the TTL
reaper ends instances (the moment a run's working set shrinks) ``malloc_trim`` hands the free
pages back; when nothing is live any more, after a full garbage collection. Elsewhere (musl,
macOS) the allocator calls are no-ops.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from typing import Any

__all__ = ["limit_arenas", "trim"]

_M_ARENA_MAX = -8  # mallopt(3)
_ARENAS = 2


def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _glibc()


def limit_arenas() -> None:
    """Cap the allocator's arenas at two, unless ``MALLOC_ARENA_MAX`` already says how many."""
    if _LIBC is not None and "MALLOC_ARENA_MAX" not in os.environ:
        _LIBC.mallopt(_M_ARENA_MAX, _ARENAS)


def trim(collect: bool = False) -> None:
    """Return the allocator's free pages to the system (blocking: a few milliseconds).

    Args:
        collect: Run a full garbage collection first (tens of milliseconds holding the
            interpreter's lock: for an idle server), so that cyclic garbage the last episodes
            left is freed too instead of waiting for allocations that an idle server no longer makes.
    """
    if collect:
        gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
