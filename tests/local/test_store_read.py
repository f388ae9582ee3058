"""``Store.read``: the store's lock-free lookup (a read-only connection in WAL mode) sees exactly
what is committed, never waits for the writer, and ends with the store."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from fleet_local._store import Store


def test_read_sees_every_write_that_returned(store: Store) -> None:
    assert store.read("instance", "a") is None
    store.put("instance", "a", {"status": "running"})
    assert store.read("instance", "a") == {"status": "running"}
    store.update("instance", "a", status="terminated")
    assert store.read("instance", "a") == {"status": "terminated"}
    assert store.read("lease", "a") is None  # another kind, same id
    store.delete("instance", "a")
    assert store.read("instance", "a") is None


def test_read_answers_during_a_write_with_the_last_committed_document(store: Store) -> None:
    """A write in progress (the store's lock held, a SQLite write transaction open on its
    connection) neither blocks the read nor shows it the half-done change."""
    store.put("instance", "a", {"status": "running"})
    with store._lock:
        store._db.execute("BEGIN IMMEDIATE")
        store._db.execute("UPDATE docs SET doc=? WHERE kind='instance' AND id='a'", ('{"status": "x"}',))
        seen: list[dict[str, object] | None] = []
        reader = threading.Thread(target=lambda: seen.append(store.read("instance", "a")))
        reader.start()
        reader.join(60)  # a bound for a failing test only: the read does not wait for the lock
        assert seen == [{"status": "running"}]
        store._db.execute("COMMIT")
    assert store.read("instance", "a") == {"status": "x"}


def test_read_replaces_a_lone_surrogate_as_get_does(store: Store) -> None:
    store.put("instance", "a", {"name": "\ud800"})
    assert store.read("instance", "a") == store.get("instance", "a") == {"name": "\ufffd"}


def test_read_connections_end_with_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "fleet.db")
    store.put("instance", "a", {"status": "running"})
    assert store.read("instance", "a") is not None
    readers = list(store._readers)
    assert readers  # the idle connection kept for the next read
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        readers[0].execute("SELECT 1")  # closed with the store
    with pytest.raises(sqlite3.ProgrammingError):
        store.read("instance", "a")


def test_a_read_connection_cannot_write(store: Store) -> None:
    store.read("instance", "a")
    with pytest.raises(sqlite3.OperationalError):
        store._readers[0].execute("DELETE FROM docs")
