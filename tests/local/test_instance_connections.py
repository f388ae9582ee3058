"""Tool calls reuse an instance's open SQLite connections, and that changes nothing anyone sees.

``_instance_dbs.InstanceConnections`` keeps an instance's ``current.db`` and ``action_log.db``
connections open between tool calls. These tests pin what that must not change: every other
connection (the manager's SQL, ``reset``'s backup) sees a call's write at once and can write
right after it, a call sees their changes, a read-only tool's connection cannot write, every call
is logged, and an instance's connections end with it (also when a call races its delete), with
at most ``max_idle`` open in all. Writing connections commit without ``fsync``, in SQLite's
default journal mode. Server state is built in this process over real files.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_local import _instances, _mcp
from fleet_local._instance_dbs import InstanceConnections
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    yield state
    state.store.close()


def _instance(state: LocalState) -> str:
    return _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk")).instance_id


def _call(state: LocalState, instance_id: str, name: str, **arguments: Any) -> Any:
    tool = next(t for t in state.environments["orderdesk"].tools if t.name == name)
    return _mcp._run_tool_sync(state, instance_id, tool, arguments)


def _fresh(state: LocalState, instance_id: str, name: str = "current") -> sqlite3.Connection:
    return sqlite3.connect(state.instance_dir(instance_id) / f"{name}.db", timeout=0)


def _status(conn: sqlite3.Connection) -> str:
    return str(conn.execute("SELECT status FROM orders WHERE id = 1008").fetchone()[0])


def test_calls_reuse_one_connection_per_kind(state: LocalState) -> None:
    """Four calls of two kinds open two connections to ``current.db`` and one to the log, kept
    between calls: the point of the pool."""
    instance_id = _instance(state)
    for _ in range(2):
        _call(state, instance_id, "get_order", order_id=1008)
        _call(state, instance_id, "add_order_note", order_id=1008, body="checked")
    assert len(state.instance_connections) == 3  # ro, rw and the log, each back in the pool


def test_a_calls_write_is_committed_and_holds_no_lock(state: LocalState) -> None:
    """A write tool's change must be visible to any other connection once the call returns,
    and another writer must get the database at once (``timeout=0``): the pooled connection
    may keep no transaction open."""
    instance_id = _instance(state)
    _call(state, instance_id, "cancel_order", order_id=1021, reason="ordered by mistake")
    with contextlib.closing(_fresh(state, instance_id)) as other:
        assert other.execute("SELECT status FROM orders WHERE id = 1021").fetchone()[0] == "cancelled"
        other.execute("UPDATE orders SET status = 'shipped' WHERE id = 1008")
        other.commit()


def test_writers_skip_fsync_and_keep_the_default_journal(state: LocalState) -> None:
    """The connections that write an instance's databases (the pool's ``rw`` and ``log``, and
    ``open_db``'s for the SQL routes and ``reset``) commit without ``fsync`` and in SQLite's
    default journal mode: a read-only connection reading during a write must never find a
    journal file to take for a crash (``test_concurrent_calls_on_one_instance_each_get_a_connection``).
    After the writes no journal is left, and a fresh connection sees them all."""
    instance_id = _instance(state)
    folder = state.instance_dir(instance_id)
    for body in ("one", "two", "three"):
        _call(state, instance_id, "add_order_note", order_id=1008, body=body)
    assert not (folder / "current.db-journal").exists()
    assert not (folder / "action_log.db-journal").exists()
    with contextlib.closing(_fresh(state, instance_id)) as other:
        bodies = other.execute("SELECT body FROM order_notes WHERE order_id = 1008 ORDER BY id").fetchall()
        assert [b for (b,) in bodies][-3:] == ["one", "two", "three"]
    for kind in ("rw", "log"):
        with state.instance_connections.borrow(instance_id, folder, kind) as conn:
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 0
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    with contextlib.closing(_instances.open_db(state, instance_id, "current", read_only=False)) as writer:
        assert writer.execute("PRAGMA synchronous").fetchone()[0] == 0
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_call_sees_what_other_connections_changed(state: LocalState) -> None:
    """Between two calls through the same pooled connection, a change by another connection and
    ``reset``'s backup from the seed must both be seen by the next call, not a cached page."""
    instance_id = _instance(state)
    before = _call(state, instance_id, "get_order", order_id=1008)["status"]
    with contextlib.closing(_fresh(state, instance_id)) as other:
        other.execute("UPDATE orders SET status = 'shipped' WHERE id = 1008")
        other.commit()
    assert _call(state, instance_id, "get_order", order_id=1008)["status"] == "shipped"
    _instances.reset_instance(state, instance_id)
    assert _call(state, instance_id, "get_order", order_id=1008)["status"] == before


def test_a_read_only_tools_connection_cannot_write(state: LocalState) -> None:
    """The pooled connection of read-only tools is opened ``mode=ro`` with ``query_only``, as the
    fresh one was."""
    instance_id = _instance(state)
    _call(state, instance_id, "get_order", order_id=1008)
    folder = state.instance_dir(instance_id)
    with (
        state.instance_connections.borrow(instance_id, folder, "ro") as conn,
        pytest.raises(sqlite3.OperationalError),
    ):
        conn.execute("UPDATE orders SET status = 'x' WHERE id = 1008")


def test_every_call_is_logged_also_a_failing_one(state: LocalState) -> None:
    """The log's pooled connection commits each row: a fresh reader sees every call, the one a
    tool refused included, in order."""
    instance_id = _instance(state)
    _call(state, instance_id, "get_order", order_id=1008)
    with pytest.raises(Exception, match="not found"):
        _call(state, instance_id, "get_order", order_id=999999)
    _call(state, instance_id, "get_order", order_id=1008)
    with contextlib.closing(_fresh(state, instance_id, "action_log")) as log:
        rows = log.execute("SELECT path, raw_payload FROM action_log ORDER BY id").fetchall()
    assert [path for path, _ in rows] == ["get_order"] * 3
    assert '"error"' in rows[1][1] and rows[0][1] == rows[2][1] == '{"ok": true}'


def test_an_instances_connections_end_with_it(state: LocalState) -> None:
    """Deleting an instance closes its idle connections (its end hook); another instance's stay."""
    gone, kept = _instance(state), _instance(state)
    for instance_id in (gone, kept):
        _call(state, instance_id, "get_order", order_id=1008)
    assert len(state.instance_connections) == 4
    _instances.delete_instance(state, gone)
    assert len(state.instance_connections) == 2
    assert _call(state, kept, "get_order", order_id=1008)["id"] == 1008


def test_a_connection_handed_back_after_the_delete_is_closed(state: LocalState) -> None:
    """A call that borrowed a connection before the delete and hands it back after must not
    leave it in the pool (the end hook already ran): it is closed instead."""
    instance_id = _instance(state)
    folder = state.instance_dir(instance_id)
    with state.instance_connections.borrow(instance_id, folder, "rw") as conn:
        _instances.delete_instance(state, instance_id)
    assert len(state.instance_connections) == 0
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        conn.execute("SELECT 1")


def test_a_deleted_instances_current_db_is_not_recreated(state: LocalState) -> None:
    """A call arriving after the delete must fail, not make an empty ``current.db``."""
    instance_id = _instance(state)
    _instances.delete_instance(state, instance_id)
    with pytest.raises(sqlite3.OperationalError):
        _call(state, instance_id, "add_order_note", order_id=1008, body="late")
    assert not state.instance_dir(instance_id).exists()


def test_idle_connections_are_bounded_across_instances(tmp_path: Path) -> None:
    """At most ``max_idle`` stay open, the least recently used closed first."""
    pool = InstanceConnections(max_idle=2)
    folders = []
    for n in range(3):
        folder = tmp_path / f"inst_{n}"
        folder.mkdir()
        sqlite3.connect(folder / "current.db").close()
        folders.append(folder)
    borrowed = []
    for n, folder in enumerate(folders):
        with pool.borrow(f"inst_{n}", folder, "ro") as conn:
            borrowed.append(conn)
    assert len(pool) == 2
    with pytest.raises(sqlite3.ProgrammingError):  # the first one, closed
        borrowed[0].execute("SELECT 1")
    with pool.borrow("inst_2", folders[2], "ro") as conn:
        assert conn is borrowed[2]


def test_concurrent_calls_on_one_instance_each_get_a_connection(state: LocalState) -> None:
    """Calls running at once on one instance never share a connection: each borrows its own (a
    connection is used by one thread at a time), every call succeeds and is logged, and the
    writes all land (each write waits its turn: ``tests/test_write_tool_transactions.py``)."""
    from concurrent.futures import ThreadPoolExecutor

    instance_id = _instance(state)

    def work(n: int) -> None:
        for i in range(5):
            _call(state, instance_id, "get_order", order_id=1008)
            _call(state, instance_id, "add_order_note", order_id=1008, body=f"note {n}-{i}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    with contextlib.closing(_fresh(state, instance_id, "action_log")) as log:
        assert log.execute(
            "SELECT COUNT(*) FROM action_log WHERE raw_payload = '{\"ok\": true}'"
        ).fetchone() == (80,)
    with contextlib.closing(_fresh(state, instance_id)) as current:
        notes = current.execute("SELECT COUNT(*) FROM order_notes WHERE body LIKE 'note %'").fetchone()
    assert notes == (40,)
    assert len(state.instance_connections) <= 8 * 3
