"""Named locks for work that spans several store calls (an instance's files and document, a seed
build, an idempotency record, a session's transcript).

Each server's ``Store`` has its own :class:`NamedLocks`, so two servers in one process never wait
on each other, and a name's lock lives only while a thread holds or waits for it: the registry
holds the names in use, not every instance id the server ever saw.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["NamedLocks"]


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # threads holding or waiting for the lock


class NamedLocks:
    """One ``threading.Lock`` per name, made on first use and dropped when its last user leaves."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[tuple[str, ...], _Entry] = {}

    @contextlib.contextmanager
    def hold(self, *name: str) -> Iterator[None]:
        """Hold the lock of ``name`` (e.g. ``("instance", instance_id)``) for the ``with`` block.

        Args:
            *name: The parts of the name.
        """
        with self._guard:
            entry = self._entries.setdefault(name, _Entry())
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if not entry.users:
                    del self._entries[name]

    def __contains__(self, name: object) -> bool:
        with self._guard:
            return name in self._entries

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)
