"""An instance's action log file: made whole from a prebuilt empty log, never over one in use."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from fleet_local import _action_log


def _rows(path: Path) -> list[tuple[str, str | None]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.execute("SELECT action_type, path FROM action_log ORDER BY id"))


def test_a_new_log_is_an_empty_action_log_sqlite_can_write(tmp_path: Path) -> None:
    """The file written from the prebuilt bytes must be a real database with the log's table."""
    path = tmp_path / "action_log.db"
    _action_log.create(path)
    assert _rows(path) == []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("INSERT INTO action_log (timestamp, action_type, path) VALUES ('t', 'tool_call', 'x')")
        conn.commit()
    assert _rows(path) == [("tool_call", "x")]
    assert [p.name for p in tmp_path.iterdir()] == ["action_log.db"]  # nothing left aside


def test_creating_a_log_that_exists_keeps_its_rows(tmp_path: Path) -> None:
    """``create`` runs again for instances whose log may already hold actions: it must not
    replace the file."""
    path = tmp_path / "action_log.db"
    _action_log.create(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("INSERT INTO action_log (timestamp, action_type, path) VALUES ('t', 'reset', NULL)")
        conn.commit()
    _action_log.create(path)
    assert _rows(path) == [("reset", None)]
