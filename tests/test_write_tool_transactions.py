"""A write tool takes the database's write lock before its handler's first read.

Regression: a write tool ran in a deferred transaction (a bare ``SAVEPOINT``): its handler read
first, then wrote. When another connection began writing the same instance in between (another
tool call of the same instance, a SQL write through the manager), SQLite refused the tool's write
at once with "database is locked" instead of waiting its turn, since waiting there could
deadlock: 8 threads calling a write tool on one instance lost 7-15 of 40 calls. The call now
opens its transaction ``BEGIN IMMEDIATE``, which waits (up to the connection's timeout) for the
lock before anything is read.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _waits import PATIENCE

from fleet_local.environments import ToolDefinition, get_environment


def test_another_writer_waits_for_the_tool_not_the_other_way_round(tmp_path: Path) -> None:
    env = get_environment("orderdesk")
    seed = env.build_seed(tmp_path / "seed.db")
    read, go = threading.Event(), threading.Event()

    def read_then_write(conn: sqlite3.Connection, args: dict[str, Any]) -> Any:
        stock = conn.execute("SELECT stock FROM products WHERE sku = ?", (args["sku"],)).fetchone()[0]
        read.set()
        assert go.wait(PATIENCE)
        conn.execute("UPDATE products SET stock = ? WHERE sku = ?", (stock + 1, args["sku"]))
        return stock + 1

    tool = ToolDefinition(
        "restock", "Reads, then writes.", env.tool("update_product").input_schema, read_then_write, False
    )
    with (
        contextlib.closing(sqlite3.connect(seed, timeout=PATIENCE, check_same_thread=False)) as mine,
        contextlib.closing(sqlite3.connect(seed, timeout=0, isolation_level=None)) as other,
        ThreadPoolExecutor(1) as pool,
    ):
        before = mine.execute("SELECT stock FROM products WHERE sku = 'DOCK-TB4'").fetchone()[0]
        call = pool.submit(tool.call, mine, {"sku": "DOCK-TB4"})
        assert read.wait(PATIENCE)
        # The tool holds the write lock from its start: another writer cannot begin meanwhile.
        # (Before, it could, and the tool's own write then failed with "database is locked".)
        try:
            other.execute("BEGIN IMMEDIATE")
            began = True
        except sqlite3.OperationalError:
            began = False
        go.set()
        assert call.result(PATIENCE) == before + 1
        if began:
            other.execute("ROLLBACK")
        assert not began
        other.execute("UPDATE products SET stock = stock + 1 WHERE sku = 'DOCK-TB4'")  # its turn now
        assert other.execute("SELECT stock FROM products WHERE sku = 'DOCK-TB4'").fetchone()[0] == before + 2


def test_write_tools_called_at_once_on_one_database_all_succeed(tmp_path: Path) -> None:
    env = get_environment("orderdesk")
    seed = env.build_seed(tmp_path / "seed.db")
    note = env.tool("add_order_note")

    def work(n: int) -> None:
        for i in range(5):
            with contextlib.closing(sqlite3.connect(seed, timeout=PATIENCE, isolation_level=None)) as conn:
                env.tool("get_order").call(conn, {"order_id": 1008})
                note.call(conn, {"order_id": 1008, "body": f"note {n}-{i}"})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    with contextlib.closing(sqlite3.connect(seed)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM order_notes WHERE body LIKE 'note %'").fetchone() == (40,)
