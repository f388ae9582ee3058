"""Open SQLite connections to live instances' databases, reused from one tool call to the next.

A tool call opened the instance's ``current.db`` and then its ``action_log.db`` afresh, and a new
SQLite connection reads and parses the database's schema before its first statement: about two
thirds of a small tool call's SQLite time. Here a call borrows an idle connection of the
instance (opened as before: ``current`` ``mode=ro`` with ``query_only`` for a read-only tool,
``mode=rw`` otherwise, never creating the file; the log in place) and hands it back when done.

Nothing is held between calls but the open file: each call commits (or rolls back) before it
hands the connection back, and in SQLite's rollback-journal mode an idle connection holds no
lock and no snapshot, so other connections (the manager's SQL routes, ``reset``'s backup, the
verifier's) see and make changes as before; a connection notices another's change at its next
transaction. An instance's connections are closed when it ends (its end hook), and one handed
back after that (a call racing the delete, whose folder goes before its hooks run) is closed
instead of kept. At most ``max_idle`` connections stay open across all instances (the least
recently used go first), so memory and descriptors stay bounded whatever the number of
instances.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

__all__ = ["MAX_IDLE", "WRITER_PRAGMA", "InstanceConnections", "Kind", "default_max_idle"]

Kind = Literal["ro", "rw", "log"]
"""``current.db`` read-only or read-write, or the instance's ``action_log.db``."""

MAX_IDLE = 288
"""Idle connections kept across all instances: three per instance in use at a time (``ro``,
``rw`` and ``log``), 96 instances' worth, so that a trainer's 64 episodes at once keep theirs.
With room for fewer (it was 32 instances' worth), tool calls taking turns across more instances
than that evict each other's connections least recently used first, so nearly every call opened
its connections afresh again exactly when the server was busiest. One descriptor each (the
rollback journal is opened only inside a write) and up to about 0.15 MB of memory (a bundled
database read whole: its schema and pages), so 30-45 MB at most with every slot in use, given
back as the instances end; :func:`default_max_idle` keeps them to a part of the process's
descriptor limit."""

_FD_SHARE = 4
"""At most one in this many of the process's descriptors is held by idle connections."""


def default_max_idle() -> int:
    """:data:`MAX_IDLE`, or a quarter of the process's descriptor limit when that is lower (a
    1024-descriptor limit leaves the server's sockets and verifier pipes room)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # not POSIX
        return MAX_IDLE
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_IDLE
    return max(3, min(MAX_IDLE, soft // _FD_SHARE))


_FILES: dict[Kind, str] = {"ro": "current.db", "rw": "current.db", "log": "action_log.db"}


WRITER_PRAGMA = "PRAGMA synchronous = OFF"
"""What a writing connection (``rw``, ``log``, ``_instances.open_db``'s) sets: no ``fsync``.

An instance's databases are scratch that ends with it: a crash of the machine (not of the
server process, whose writes the kernel still holds) may lose its last changes, which no
episode survives anyway. Each commit of ``current.db`` cost four ``fdatasync`` calls (the
journal twice, the database, the folder), each blocking a worker thread on the disk.

The journal stays in SQLite's default mode (``DELETE``). ``PERSIST`` would keep one journal
file instead of making and removing one per commit, but then every read-only connection
(``mode=ro``) finds a journal at each read, and one read between a writer's lock and its first
journal write takes it for a crash to roll back, which it cannot: ``attempt to write a readonly
database``. The new inodes it would save cost little once instance folders are spread over the
file system (``_folder_spread``)."""


def _open(folder: Path, kind: Kind) -> sqlite3.Connection:
    uri = (folder.absolute() / _FILES[kind]).as_uri()
    # ``mode=rw`` never creates the file: a delete that got there first makes this fail instead.
    if kind == "log":
        # A log line per tool call: a crash may lose the last lines.
        conn = sqlite3.connect(f"{uri}?mode=rw", uri=True, check_same_thread=False, timeout=10.0)
    else:
        conn = sqlite3.connect(
            f"{uri}?mode={kind}", uri=True, check_same_thread=False, isolation_level=None, timeout=10.0
        )
        if kind == "ro":
            conn.execute("PRAGMA query_only = ON")
            return conn
    conn.execute(WRITER_PRAGMA)
    return conn


class InstanceConnections:
    """Idle connections by (instance id, kind), thread-safe; a connection is used by one
    thread at a time (borrowed with :meth:`borrow`).

    Args:
        max_idle: The most idle connections kept open across all instances (None:
            :func:`default_max_idle`).
    """

    def __init__(self, max_idle: int | None = None) -> None:
        self._max_idle = default_max_idle() if max_idle is None else max_idle
        self._idle: OrderedDict[tuple[str, Kind], list[sqlite3.Connection]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def borrow(self, instance_id: str, folder: Path, kind: Kind) -> Iterator[sqlite3.Connection]:
        """An open connection to one of the instance's databases, for the ``with`` block.

        The block must end with no transaction open (commit or roll back what it began); a
        connection whose block raised is closed, not kept.

        Args:
            instance_id: The instance (live, as the caller found it).
            folder: Its folder (``LocalState.instance_dir``).
            kind: Which database, and how it is opened.

        Raises:
            sqlite3.Error: The database could not be opened (the instance was deleted).
        """
        conn = self._take(instance_id, kind) or _open(folder, kind)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        self._give_back(instance_id, folder, kind, conn)

    def _take(self, instance_id: str, kind: Kind) -> sqlite3.Connection | None:
        with self._lock:
            idle = self._idle.get((instance_id, kind))
            if not idle:
                return None
            self._count -= 1
            return idle.pop()

    def _give_back(self, instance_id: str, folder: Path, kind: Kind, conn: sqlite3.Connection) -> None:
        evicted: list[sqlite3.Connection] = []
        with self._lock:
            # Checked under the lock the end hook takes: the folder goes before the hook runs, so
            # a connection handed back after the hook sees it gone and is not kept.
            keep = not conn.in_transaction and folder.is_dir()
            if keep:
                self._idle.setdefault((instance_id, kind), []).append(conn)
                self._idle.move_to_end((instance_id, kind))
                self._count += 1
                while self._count > self._max_idle:
                    key, oldest = next(iter(self._idle.items()))
                    evicted.append(oldest.pop(0))
                    self._count -= 1
                    if not oldest:
                        del self._idle[key]
        for old in evicted:
            old.close()
        if not keep:
            conn.close()

    def forget(self, instance_id: str) -> None:
        """Close every idle connection of an instance that ended (an instance end hook).

        Args:
            instance_id: The instance.
        """
        closing: list[sqlite3.Connection] = []
        with self._lock:
            for kind in _FILES:
                idle = self._idle.pop((instance_id, kind), [])
                self._count -= len(idle)
                closing += idle
        for conn in closing:
            conn.close()

    def __len__(self) -> int:
        return self._count
