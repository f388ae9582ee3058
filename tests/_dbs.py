"""Small SQLite databases for the verifier tests (the ``databases`` fixture in conftest), and the
local server's own database opened beside it (the typed-record tests plant documents there)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

__all__ = ["make_db", "server_database"]


def make_db(path: Path, users: list[tuple[int, str]]) -> str:
    """A database at ``path`` holding a ``users`` table with these rows; returns its path."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    conn.executemany("INSERT INTO users VALUES (?, ?)", users)
    conn.commit()
    conn.close()
    return str(path)


@contextlib.contextmanager
def server_database(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """The ``fleet.db`` of a server's data dir, in autocommit, closed on exit (safe beside the
    running server: WAL, and a busy timeout as long as the server's)."""
    conn = sqlite3.connect(data_dir / "fleet.db", timeout=30.0, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
