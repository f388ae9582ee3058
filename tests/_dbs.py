"""Small SQLite databases for the verifier tests (the ``databases`` fixture in conftest)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["make_db"]


def make_db(path: Path, users: list[tuple[int, str]]) -> str:
    """A database at ``path`` holding a ``users`` table with these rows; returns its path."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    conn.executemany("INSERT INTO users VALUES (?, ?)", users)
    conn.commit()
    conn.close()
    return str(path)
