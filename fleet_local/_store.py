"""The local server's state: a small document store in one SQLite file.

Every record (instance, task, job, session, trace job, lease, verifier
execution) is a JSON document of a kind, keyed by id, with a few indexed
columns for the lookups the API needs. State survives a restart because it is
all in ``<data_dir>/fleet.db``.

Instances, browser leases, sessions, evaluation jobs and verifier executions are also handed
out as typed records (:class:`Records`, over a record type such as ``_records.InstanceRecord``);
the other kinds are still plain dicts.

A document holds only what a JSON response can carry: a lone surrogate (``"\\ud800"``, which
Python strings allow and UTF-8 does not; a verifier can return one) is stored as U+FFFD, and
one in a row written before that rule is read back as U+FFFD too.
"""

from __future__ import annotations

import builtins
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar

from ._locks import NamedLocks

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    parent TEXT,
    created REAL NOT NULL,
    doc TEXT NOT NULL,
    updated REAL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS docs_parent ON docs (kind, parent);
CREATE INDEX IF NOT EXISTS docs_live_instances ON docs (created, id)
    WHERE kind = 'instance' AND json_extract(doc, '$.status') IS NOT 'terminated';
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""

# The documents of a kind whose ``status`` is not a given one, found through a partial index
# instead of reading every document of the kind: the TTL reaper's pass over live instances (every
# few seconds) and the live count would otherwise grow with every instance a long run has ended.
# SQLite uses a partial index only for a query naming its condition word for word, so these
# queries are written with it (and INDEXED BY, which fails loudly rather than scan).
_PARTIAL_INDEXES: dict[tuple[str, str], tuple[str, str]] = {
    ("instance", "terminated"): (
        "docs_live_instances",
        "kind = 'instance' AND json_extract(doc, '$.status') IS NOT 'terminated'",
    ),
}

# json.dumps writes every non-ASCII character as \uXXXX and one past U+FFFF as a surrogate pair;
# a lone surrogate stays a lone escape. Matched left to right: an escaped backslash, a pair, or
# (group 1) a lone surrogate.
_ESCAPES = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
_REPLACEMENT = "\\ufffd"


def _storable(text: str) -> str:
    """JSON text (as json.dumps writes it) with each lone surrogate escape made U+FFFD."""
    if "\\ud" not in text and "\\uD" not in text:
        return text
    return _ESCAPES.sub(lambda m: _REPLACEMENT if m.group(1) else m.group(0), text)


def _loads(text: str) -> dict[str, Any]:
    """The document of stored text (already through :func:`_storable`)."""
    return dict(json.loads(text))


def _where(select: str, kind: str, parent: str | None, exclude_status: str | None) -> tuple[str, list[Any]]:
    """``select`` (``SELECT ... FROM docs``) with the filters of :meth:`Store.list`."""
    partial = _PARTIAL_INDEXES.get((kind, exclude_status)) if exclude_status is not None else None
    if partial is not None:
        index, condition = partial
        sql, params = f"{select} INDEXED BY {index} WHERE {condition}", []
    else:
        sql, params = f"{select} WHERE kind=?", [kind]
        if exclude_status is not None:
            sql, params = sql + " AND json_extract(doc, '$.status') IS NOT ?", [*params, exclude_status]
    if parent is not None:
        sql, params = sql + " AND parent=?", [*params, parent]
    return sql, params


class StoredRecord(Protocol):
    """What :class:`Records` needs of a record type: reading one from its stored JSON text, and
    the JSON document to store."""

    @classmethod
    def from_json(cls, text: str) -> Self:
        """The record of a stored document (the server's own writing)."""
        ...

    def to_document(self) -> dict[str, Any]:
        """The JSON document to store."""
        ...


R = TypeVar("R", bound=StoredRecord)


class Store:
    """Thread-safe JSON document store over SQLite (WAL mode).

    Each call is atomic; work that spans several (read a document, then write it or files beside
    it) holds a named lock of ``locks`` meanwhile. Every call but :meth:`read` goes through one
    connection and one lock; :meth:`read` takes a read-only connection of its own and never waits
    for that lock (see its docstring).

    Args:
        path: The database file; created with its tables when missing.

    Attributes:
        locks: This store's named locks (``locks.hold(kind, id)``).
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.locks = NamedLocks()
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # The WAL file is truncated back to this size after a checkpoint, instead of keeping the
        # size of its largest burst for the life of the server.
        self._db.execute("PRAGMA journal_size_limit=67108864")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(docs)")}
        if "updated" not in columns:  # a data dir from before retention: its rows count from creation
            self._db.execute("ALTER TABLE docs ADD COLUMN updated REAL")
        self._ro_uri = f"{path.resolve().as_uri()}?mode=ro"
        self._readers: builtins.list[sqlite3.Connection] = []  # idle read-only connections
        self._readers_guard = threading.Lock()  # held for a list pop or append only, never for SQL
        self._closed = False

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
        with self._readers_guard:
            self._closed = True
            readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()

    def read(self, kind: str, id: str) -> dict[str, Any] | None:
        """The document as last committed, or None, read without waiting for the store's lock.

        For lookups that must answer while a slow store call holds the lock (an instance's
        ``/health``). It runs on a read-only connection of its own: in WAL mode a reader never
        waits for the writer, and each read starts a fresh read transaction, so it sees every
        write that returned before it began (writes commit as they return) and none half-done.

        Args:
            kind: Record type, e.g. ``"instance"``.
            id: Record id.
        """
        text = self._read_text(kind, id)
        return None if text is None else _loads(text)

    def _read_text(self, kind: str, id: str) -> str | None:
        with self._readers_guard:
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            reader = self._readers.pop() if self._readers else None
        if reader is None:
            reader = sqlite3.connect(self._ro_uri, uri=True, check_same_thread=False, isolation_level=None)
            reader.execute("PRAGMA query_only = ON")
        try:
            # fetchall() runs the statement to its end, which ends its read transaction: an idle
            # connection holds no snapshot that a later read would see instead of newer writes.
            rows = reader.execute("SELECT doc FROM docs WHERE kind=? AND id=?", (kind, id)).fetchall()
        finally:
            with self._readers_guard:
                idle = not self._closed
                if idle:
                    self._readers.append(reader)
            if not idle:
                reader.close()
        return _storable(rows[0][0]) if rows else None

    def put(self, kind: str, id: str, doc: dict[str, Any], *, parent: str | None = None) -> dict[str, Any]:
        """Insert or replace a document; returns it as stored (``doc`` itself unless a lone
        surrogate had to be replaced).

        Args:
            kind: Record type, e.g. ``"instance"``.
            id: Record id, unique within the kind.
            doc: The JSON-serialisable document.
            parent: Optional owner id for listing (e.g. a session's job id).
        """
        written = json.dumps(doc, default=str)
        text = self._put_text(kind, id, written, parent)
        return doc if text == written else _loads(text)

    def _put_text(self, kind: str, id: str, written: str, parent: str | None) -> str:
        """Store ``json.dumps`` text; returns the text as stored."""
        text = _storable(written)
        with self._lock:
            now = time.time()
            # One statement: a new document is created now, a replaced one keeps its creation time.
            self._db.execute(
                "INSERT INTO docs (kind, id, parent, created, updated, doc) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (kind, id) DO UPDATE SET"
                " parent = excluded.parent, updated = excluded.updated, doc = excluded.doc",
                (kind, id, parent, now, now, text),
            )
        return text

    def get(self, kind: str, id: str) -> dict[str, Any] | None:
        """The document, or None."""
        text = self._get_text(kind, id)
        return None if text is None else _loads(text)

    def _get_text(self, kind: str, id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT doc FROM docs WHERE kind=? AND id=?", (kind, id)).fetchone()
        return None if row is None else _storable(row[0])

    def delete(self, kind: str, id: str) -> bool:
        """Remove a document; True if it existed."""
        with self._lock:
            cursor = self._db.execute("DELETE FROM docs WHERE kind=? AND id=?", (kind, id))
        return cursor.rowcount > 0

    def list(
        self, kind: str, *, parent: str | None = None, exclude_status: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """All documents of a kind, oldest first.

        Args:
            kind: Record type.
            parent: Only the documents of this owner.
            exclude_status: Leave out the documents whose ``status`` is this (read in SQL, so
                the reaper's pass over live instances does not load every terminated one).
        """
        return [_loads(text) for text in self._list_texts(kind, parent, exclude_status)]

    def _list_texts(self, kind: str, parent: str | None, exclude_status: str | None) -> builtins.list[str]:
        sql, params = _where("SELECT doc FROM docs", kind, parent, exclude_status)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created, id", params).fetchall()
        return [_storable(row[0]) for row in rows]

    def count(self, kind: str, *, exclude_status: str | None = None, parent: str | None = None) -> int:
        """How many documents of a kind there are (``exclude_status`` and ``parent`` as for :meth:`list`).

        Args:
            kind: Record type.
            exclude_status: Leave out the documents whose ``status`` is this.
            parent: Only the documents of this owner.
        """
        sql, params = _where("SELECT COUNT(*) FROM docs", kind, parent, exclude_status)
        with self._lock:
            (count,) = self._db.execute(sql, params).fetchone()
        return int(count)

    def prune(
        self,
        kind: str,
        before: float,
        *,
        live_statuses: frozenset[str] | None = None,
        batch: int = 500,
    ) -> builtins.list[str]:
        """Delete up to ``batch`` documents of a kind last written before ``before``; returns their ids.

        Args:
            kind: Record type.
            before: A ``time.time()``: documents written (created or last updated) earlier go.
            live_statuses: Keep documents whose ``status`` is one of these, however old.
            batch: The most documents deleted in one call (the store's lock is held meanwhile).
        """
        with self._lock:
            ids = [id for id, _ in self.stale(kind, before, live_statuses=live_statuses, limit=batch)]
            # Age checked again as each goes: another process (``fleet-sdk prune``) may share the file.
            return self.delete_stale(kind, ids, before)

    def stale(
        self,
        kind: str,
        before: float,
        *,
        live_statuses: frozenset[str] | None = None,
        limit: int | None = None,
    ) -> builtins.list[tuple[str, str | None]]:
        """The ids and parents of the documents :meth:`prune` would delete, deleting none.

        Args:
            kind: Record type.
            before: A ``time.time()``: documents written (created or last updated) earlier qualify.
            live_statuses: Leave out documents whose ``status`` is one of these.
            limit: At most this many (None: all).
        """
        sql = "SELECT id, parent FROM docs WHERE kind=? AND COALESCE(updated, created) < ?"
        params: builtins.list[Any] = [kind, before]
        if live_statuses:
            marks = ", ".join("?" for _ in live_statuses)
            sql += f" AND COALESCE(json_extract(doc, '$.status'), '') NOT IN ({marks})"
            params += sorted(live_statuses)
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, limit]
        with self._lock:
            return [(row[0], row[1]) for row in self._db.execute(sql, params).fetchall()]

    def delete_stale(self, kind: str, ids: builtins.list[str], before: float) -> builtins.list[str]:
        """Delete these documents unless one was written since ``before``; returns those deleted.

        For a caller that chose them on more than their age (:meth:`stale`, then a check of its
        own): one written again meanwhile is in use after all and stays.

        Args:
            kind: Record type.
            ids: The documents.
            before: A ``time.time()``: only documents last written earlier go.
        """
        deleted = []
        with self._lock:
            for id in ids:
                cursor = self._db.execute(
                    "DELETE FROM docs WHERE kind=? AND id=? AND COALESCE(updated, created) < ?",
                    (kind, id, before),
                )
                if cursor.rowcount > 0:
                    deleted.append(id)
        return deleted

    def delete_messages(self, session_ids: builtins.list[str]) -> None:
        """Delete the transcripts of these sessions.

        Args:
            session_ids: The sessions.
        """
        with self._lock:
            self._db.executemany("DELETE FROM messages WHERE session_id=?", [(id,) for id in session_ids])

    def orphan_transcripts(self) -> builtins.list[str]:
        """The ids of the sessions that have messages but no document (their deletion was cut
        short between the two)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT session_id FROM messages WHERE session_id NOT IN "
                "(SELECT id FROM docs WHERE kind='session')"
            ).fetchall()
        return [row[0] for row in rows]

    def messages_containing(self, needles: tuple[str, ...], *, batch: int = 500) -> Iterator[tuple[str, str]]:
        """The session id and stored JSON text of every transcript message containing one of
        ``needles``, a batch at a time (the store's lock is free between batches).

        Args:
            needles: Substrings looked for.
            batch: Messages read per hold of the lock.
        """
        if not needles:
            return
        where = " OR ".join("instr(doc, ?) > 0" for _ in needles)
        after = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT rowid, session_id, doc FROM messages WHERE rowid > ? AND ({where}) "
                    "ORDER BY rowid LIMIT ?",
                    [after, *needles, batch],
                ).fetchall()
            yield from ((row[1], row[2]) for row in rows)
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def update(self, kind: str, id: str, **changes: Any) -> dict[str, Any] | None:
        """Merge ``changes`` into a document atomically; returns the new document or None."""
        with self._lock:
            doc = self.get(kind, id)
            if doc is None:
                return None
            row = self._db.execute("SELECT parent FROM docs WHERE kind=? AND id=?", (kind, id)).fetchone()
            doc.update(changes)
            return self.put(kind, id, doc, parent=row[0])

    def append_messages(self, session_id: str, messages: builtins.list[dict[str, Any]]) -> int:
        """Append chat messages to a session's transcript; returns the new total."""
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id=?", (session_id,)
            ).fetchone()
            self._db.executemany(
                "INSERT INTO messages (session_id, seq, doc) VALUES (?, ?, ?)",
                [(session_id, count + i, _storable(json.dumps(m))) for i, m in enumerate(messages)],
            )
            return int(count) + len(messages)

    def messages(self, session_id: str) -> Iterator[dict[str, Any]]:
        """A session's transcript in order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT doc FROM messages WHERE session_id=? ORDER BY seq", (session_id,)
            ).fetchall()
        for (doc,) in rows:
            yield _loads(_storable(doc))


class Records(Generic[R]):
    """One kind of a store's documents, handed out as records of a model instead of dicts.

    The store keeps the same JSON documents (the dict methods of :class:`Store` still read them).
    A record is validated where it is made (its model's constructor, from a validated request);
    reads parse the stored text with the model's ``from_json``, which for a pydantic model
    (``model_validate_json``, in Rust) costs less than ``json.loads`` of the same text alone, so
    a trusted read needs no unvalidated shortcut. Each read returns a fresh record: the caller
    may change it and :meth:`put` it back, holding the record's named lock (``store.locks``)
    from the read to the write.

    Args:
        store: The store.
        kind: The kind of document, e.g. ``"instance"``.
        record: The record type.
    """

    def __init__(self, store: Store, kind: str, record: type[R]) -> None:
        self.store = store
        self.kind = kind
        self._record = record

    def read(self, id: str) -> R | None:
        """The record as last committed, or None, without waiting for the store's lock
        (:meth:`Store.read`).

        Args:
            id: Record id.
        """
        text = self.store._read_text(self.kind, id)
        return None if text is None else self._record.from_json(text)

    def get(self, id: str) -> R | None:
        """The record, or None.

        Args:
            id: Record id.
        """
        text = self.store._get_text(self.kind, id)
        return None if text is None else self._record.from_json(text)

    def put(self, id: str, record: R, *, parent: str | None = None) -> R:
        """Insert or replace a record; returns it as stored (``record`` itself unless a lone
        surrogate had to be replaced).

        Args:
            id: Record id, unique within the kind.
            record: The record.
            parent: Optional owner id for listing.
        """
        written = json.dumps(record.to_document(), default=str)
        text = self.store._put_text(self.kind, id, written, parent)
        return record if text == written else self._record.from_json(text)

    def update(self, id: str, change: Callable[[R], None]) -> R | None:
        """Change a record atomically, as :meth:`Store.update` merges into a document: read,
        ``change`` it in place, write it back (its parent kept), all under the store's lock, so
        no other store write (a runner's :meth:`Store.update` of the same document) falls between.

        Args:
            id: Record id.
            change: Changes the record in place; quick, and no store call of its own.

        Returns:
            The record as stored, or None when there is none.
        """
        with self.store._lock:
            text = self.store._get_text(self.kind, id)
            if text is None:
                return None
            record = self._record.from_json(text)
            change(record)
            row = self.store._db.execute(
                "SELECT parent FROM docs WHERE kind=? AND id=?", (self.kind, id)
            ).fetchone()
            return self.put(id, record, parent=row[0])

    def list(self, *, parent: str | None = None, exclude_status: str | None = None) -> builtins.list[R]:
        """All records of the kind, oldest first (the arguments as for :meth:`Store.list`).

        Args:
            parent: Only the records of this owner.
            exclude_status: Leave out the records whose ``status`` is this.
        """
        return [
            self._record.from_json(text) for text in self.store._list_texts(self.kind, parent, exclude_status)
        ]
