"""The TTL reaper and the live count find live instances through an index, not a scan of every
instance a server has ever ended.

Regression: ``Store.list``/``count`` with ``exclude_status="terminated"`` read every instance
document and its ``status`` (``json_extract``): the reaper's pass every few seconds, ``/metrics``
and ``/v1/account`` cost more with each instance a long run had ended (10,000 ended instances: 17
ms a pass; 30,000: 46 ms). A partial index holds the live ones; these tests pin that the queries
use it and answer exactly what the scan answered.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from fleet_local._store import Store, _where


def _plan(store: Store, sql: str, params: list[object]) -> str:
    with store._lock:
        return " ".join(str(row[3]) for row in store._db.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_live_instance_queries_use_the_partial_index(store: Store) -> None:
    """Listing and counting live instances (with and without a parent) must search the index,
    not the instance documents."""
    for parent in (None, "run_1"):
        for select in ("SELECT doc FROM docs", "SELECT COUNT(*) FROM docs"):
            sql, params = _where(select, "instance", parent, "terminated")
            assert "docs_live_instances" in _plan(store, sql, params)


def test_live_instances_are_exactly_those_not_terminated(store: Store) -> None:
    """Every status but ``terminated`` counts as live (no status too), in creation order; a
    document that ends leaves the index, and other kinds never enter it."""
    statuses = {"a": "running", "b": "terminated", "c": "pending", "d": "error", "e": None}
    for instance_id, status in statuses.items():
        store.put("instance", instance_id, {"instance_id": instance_id, "status": status}, parent="run_1")
    store.put("session", "s", {"status": "running"})
    store.put("instance", "f", {"instance_id": "f", "status": "running"})
    live = ["a", "c", "d", "e", "f"]
    assert [doc["instance_id"] for doc in store.list("instance", exclude_status="terminated")] == live
    assert store.count("instance", exclude_status="terminated") == 5
    assert store.count("instance", exclude_status="terminated", parent="run_1") == 4
    store.update("instance", "a", status="terminated")
    assert [doc["instance_id"] for doc in store.list("instance", exclude_status="terminated")] == live[1:]
    assert store.count("session", exclude_status="terminated") == 1  # the plain query for other kinds


def test_a_data_dir_from_before_the_index_gets_it(tmp_path: Path) -> None:
    """A store file written without the index (an older server) is indexed when opened, its live
    instances included."""
    path = tmp_path / "fleet.db"
    Store(path).close()
    with contextlib.closing(sqlite3.connect(path)) as old:
        old.execute("DROP INDEX docs_live_instances")
        old.execute(
            "INSERT INTO docs (kind, id, created, doc) VALUES ('instance', 'old', 0, ?)",
            ('{"status": "running"}',),
        )
        old.commit()
    store = Store(path)
    try:
        assert store.count("instance", exclude_status="terminated") == 1
    finally:
        store.close()
