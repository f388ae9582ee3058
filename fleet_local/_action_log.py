"""The ``action_log`` database of an instance: what was done to its live data, one row an action.

Production instances have a third SQLite resource, ``action_log``, beside ``seed`` and
``current``; verifiers and tooling read it like the others (``/resources/sqlite/action_log/...``,
read-only). Its rows have the fields of the instance manager's ``LogActionRequest``. Here the
server writes them itself:

* ``tool_call``: a tool called on the instance (over MCP or by a job's policy): ``path`` is the
  tool's name, ``args`` its arguments (JSON), ``raw_payload`` ``{"ok": true}`` or
  ``{"error": ...}``;
* ``sql``: a statement written through the manager API (``POST /resources/sqlite/current/query``
  with ``read_only: false``): ``sql``, ``args`` (JSON), ``path`` the route, ``raw_payload`` as
  for a tool call;
* ``reset``: ``POST /reset``: ``raw_payload`` holds its ``seed``.

Writing a row never fails the action it records: a log that cannot be written (the instance was
deleted meanwhile) is skipped with a debug message.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from ._state import LocalState, iso

__all__ = ["ACTION_LOG", "create", "record"]

_log = logging.getLogger(__name__)

ACTION_LOG = "action_log"
"""The resource's name, and its table's."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS action_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    action_type TEXT NOT NULL,
    sql TEXT,
    args TEXT,
    path TEXT,
    raw_payload TEXT
)
"""


@functools.cache
def _empty() -> bytes:
    """The file of an empty action log, built once per process."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(_SCHEMA)
        conn.commit()
        return conn.serialize()


def create(path: Path, *, unseen: bool = False) -> None:
    """Create an empty action log at ``path`` (a no-op when it exists).

    Every instance gets one: writing the bytes of an empty log costs a fraction of having SQLite
    create the file (its journal, schema and commit). The file appears whole or not at all: it
    is written aside, then linked into place, which fails, harmlessly, when it exists.

    Args:
        path: The database file.
        unseen: Nothing can read ``path`` before this returns (the folder of an instance being
            created, which no request reaches before it is stored): written in place, without
            the aside file and link.
    """
    if unseen:
        with contextlib.suppress(FileExistsError), open(path, "xb") as file:
            file.write(_empty())
        return
    if path.exists():
        return
    aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        aside.write_bytes(_empty())
        os.link(aside, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: SQLite makes it in place
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(_SCHEMA)
            conn.commit()
    finally:
        with contextlib.suppress(FileNotFoundError):
            aside.unlink()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, sort_keys=True)


def record(
    state: LocalState,
    instance_id: str,
    action_type: str,
    *,
    sql: str | None = None,
    args: Any = None,
    path: str | None = None,
    raw_payload: Any = None,
) -> None:
    """Append one action to an instance's log (blocking: call from a worker thread).

    Args:
        state: Server state.
        instance_id: The instance acted on.
        action_type: ``tool_call``, ``sql`` or ``reset``.
        sql: The statement of an ``sql`` action.
        args: Its arguments, or the tool's (stored as JSON).
        path: The tool's name, or the manager route.
        raw_payload: What else there is to say (stored as JSON).
    """
    folder = state.instance_dir(instance_id)
    file = folder / f"{ACTION_LOG}.db"
    if not folder.is_dir():
        return  # the instance is gone
    try:
        if not file.is_file():  # instances made before the log existed get one on their first action
            create(file)
        # The instance's log connection is kept open between actions (``_instance_dbs``).
        with state.instance_connections.borrow(instance_id, folder, "log") as conn:
            conn.execute(
                "INSERT INTO action_log (timestamp, action_type, sql, args, path, raw_payload)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (iso(), action_type, sql, _json(args), path, _json(raw_payload)),
            )
            conn.commit()
    except sqlite3.Error as exc:
        _log.debug("action log of %s not written: %s", instance_id, exc)
