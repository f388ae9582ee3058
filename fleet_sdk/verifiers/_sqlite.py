"""A local :class:`Environment` backed by SQLite files.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._compat import ErrorBase
from ._snapshot import FluentDatabase

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DatabaseSnapshot",
    "InstanceHandle",
    "QueryResult",
    "ReadOnlyConnection",
    "ReadOnlyCursor",
    "SQLiteDatabase",
    "SQLiteEnvironment",
    "UnknownDatabaseError",
    "harden_connection",
]

# SQL functions that hand out native pointers or load code: never for untrusted SQL.
_DENIED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def harden_connection(connection: sqlite3.Connection) -> None:
    """Refuse ``ATTACH``/``DETACH``, ``fts3_tokenizer()`` and ``load_extension()`` on ``connection``.

    Also sets the attached-database limit to 0. Used for every read-only
    :class:`SQLiteDatabase` and for the local server's query endpoint.

    Args:
        connection: The connection to lock down.
    """
    sqlite3.Connection.set_authorizer(connection, _authorize)
    sqlite3.Connection.setlimit(connection, sqlite3.SQLITE_LIMIT_ATTACHED, 0)


_Request = tuple[str, tuple[Any, ...], dict[str, Any]]
_Outcome = tuple[bool, Any]
_Held = Generator[_Outcome, _Request, None]

# What a verifier may do through a ReadOnlyConnection / ReadOnlyCursor. Anything else is refused.
_CONNECTION_CURSORS = frozenset({"cursor", "execute", "executemany", "executescript"})
_CONNECTION_CALLS = frozenset(
    {
        "commit",
        "rollback",
        "close",
        "interrupt",
        "create_function",
        "create_aggregate",
        "create_collation",
        "set_progress_handler",
        "set_trace_callback",
        "__exit__",
    }
)
_CURSOR_RUNS = frozenset({"execute", "executemany", "executescript"})
_CURSOR_CALLS = frozenset({"fetchone", "fetchmany", "fetchall", "close", "__next__"})
_READABLE = frozenset(
    {
        "description",
        "rowcount",
        "lastrowid",
        "arraysize",
        "row_factory",
        "text_factory",
        "in_transaction",
        "total_changes",
    }
)
_WRITABLE = frozenset({"arraysize", "row_factory", "text_factory"})


class _RowCursor:
    """What a row factory gets as its cursor: the ``description`` alone."""

    __slots__ = ("description",)

    def __init__(self, description: Any) -> None:
        self.description = description


def _hold(target: Any) -> _Held:
    """Do to the connection or cursor ``target`` what each request sent allows; yield ``(ok, value)``.

    This generator's frame is the only holder of ``target``. A sandboxed verifier cannot read
    frames (the audit hook refuses ``gi_frame``, ``tb_frame``, ``gc.get_referents``...), and
    everything the frame uses after its first ``yield`` is one of its own locals, bound before
    the verifier runs: builtins, module globals and classes the verifier could patch are never
    looked up again, and a cursor leaves it as another such generator, never as itself. The
    requests (``(operation, args, kwargs)``) are checked here too, so sending one directly
    allows no more than :class:`ReadOnlyConnection` does.
    """
    getattr_, setattr_, len_, is_cursor = getattr, setattr, len, isinstance(target, sqlite3.Cursor)
    hold, prime, row_cursor, refused, sqlite_row = _hold, next, _RowCursor, PermissionError, sqlite3.Row
    runs, calls = (_CURSOR_RUNS, _CURSOR_CALLS) if is_cursor else (frozenset(), _CONNECTION_CALLS)
    cursors = frozenset() if is_cursor else _CONNECTION_CURSORS
    readable, writable = _READABLE, _WRITABLE

    def row_factory(factory: Any) -> Any:
        if factory is None or factory is sqlite_row:
            return factory

        def build(cursor: Any, row: Any) -> Any:
            return factory(row_cursor(cursor.description), row)

        return build

    operation, args, kwargs = yield (True, None)
    while True:
        try:
            if operation == "get" and args and args[0] in readable:
                value = getattr_(target, args[0])
            elif operation == "set" and len_(args) == 2 and args[0] in writable:
                new = row_factory(args[1]) if args[0] == "row_factory" else args[1]
                value = setattr_(target, args[0], new)
            elif operation in cursors:
                value = hold(getattr_(target, operation)(*args, **kwargs))
                prime(value)
            elif operation in runs:
                getattr_(target, operation)(*args, **kwargs)
                value = None  # the cursor itself stays here
            elif operation in calls:
                value = getattr_(target, operation)(*args, **kwargs)
            else:
                raise refused(f"this database connection does not allow {operation}")
            outcome = (True, value)
        except Exception as exc:
            outcome = (False, exc)
        operation, args, kwargs = yield outcome


class _Proxy:
    """An object whose target only its :func:`_hold` generator holds."""

    __slots__ = ("_held",)

    def __init__(self, held: _Held) -> None:
        self._held = held

    def _do(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        ok, value = self._held.send((operation, args, kwargs))
        if not ok:
            raise value
        return value


def _attribute(name: str, doc: str, *, writable: bool = False) -> Any:
    """A property reading (and setting) the held object's attribute ``name``."""

    def get(proxy: _Proxy) -> Any:
        return proxy._do("get", name)

    def set_(proxy: _Proxy, value: Any) -> None:
        proxy._do("set", name, value)

    return property(get, set_ if writable else None, doc=doc)


_ROW_FACTORY_DOC = (
    "How rows are made (a factory other than ``sqlite3.Row`` gets a cursor holding only ``description``)."
)


class ReadOnlyCursor(_Proxy):
    """A cursor of a :class:`ReadOnlyConnection`: ``sqlite3.Cursor``'s reading and running
    methods, with ``connection`` being the read-only connection."""

    __slots__ = ("_connection",)

    def __init__(self, connection: ReadOnlyConnection, held: _Held) -> None:
        super().__init__(held)
        self._connection = connection

    @property
    def connection(self) -> ReadOnlyConnection:
        """The connection this cursor belongs to."""
        return self._connection

    def execute(self, sql: str, parameters: Any = (), /) -> ReadOnlyCursor:
        """Run one statement (see ``sqlite3.Cursor.execute``)."""
        self._do("execute", sql, parameters)
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> ReadOnlyCursor:
        """Run one statement for each set of parameters."""
        self._do("executemany", sql, seq_of_parameters)
        return self

    def executescript(self, sql_script: str, /) -> ReadOnlyCursor:
        """Run several statements."""
        self._do("executescript", sql_script)
        return self

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        return self._do("fetchone")

    def fetchmany(self, size: int = 1) -> list[Any]:
        """Up to ``size`` more rows."""
        rows: list[Any] = self._do("fetchmany", size)
        return rows

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        rows: list[Any] = self._do("fetchall")
        return rows

    def close(self) -> None:
        """Close the cursor."""
        self._do("close")

    def setinputsizes(self, sizes: Any, /) -> None:
        """Does nothing (DB-API)."""

    def setoutputsize(self, size: Any, column: Any = None, /) -> None:
        """Does nothing (DB-API)."""

    description = _attribute("description", "Column names of the last query (DB-API 7-tuples).")
    rowcount = _attribute("rowcount", "Rows changed by the last statement, or -1.")
    lastrowid = _attribute("lastrowid", "The rowid of the last inserted row.")
    arraysize = _attribute("arraysize", "Rows ``fetchmany`` returns by default.", writable=True)
    row_factory = _attribute("row_factory", _ROW_FACTORY_DOC, writable=True)

    def __iter__(self) -> ReadOnlyCursor:
        return self

    def __next__(self) -> Any:
        return self._do("__next__")


class ReadOnlyConnection(_Proxy):
    """What a read-only :class:`SQLiteDatabase` hands out: ``sqlite3.Connection``'s methods for
    reading and running SQL, never the connection itself.

    The connection behind it refuses ``ATTACH`` (see :func:`harden_connection`), and nothing
    here can change that: ``set_authorizer``, ``setlimit``, loading extensions, ``backup``,
    ``iterdump`` and cursor factories are refused, and the real connection is never handed out
    (a subclass of ``sqlite3.Connection`` would be: ``sqlite3.Connection.set_authorizer(conn,
    None)`` reaches the C method whatever the subclass says).

    Args:
        connection: The hardened connection; pass the only reference (see :func:`_hold`).
    """

    __slots__ = ()

    def __init__(self, connection: sqlite3.Connection) -> None:
        held = _hold(connection)
        next(held)
        super().__init__(held)

    def _refuse(self, what: str) -> PermissionError:
        return PermissionError(f"this database connection does not allow {what}")

    def cursor(self) -> ReadOnlyCursor:
        """A new cursor (no ``factory``: it would be handed the real connection)."""
        return ReadOnlyCursor(self, self._do("cursor"))

    def execute(self, sql: str, parameters: Any = (), /) -> ReadOnlyCursor:
        """Run one statement on a new cursor (see ``sqlite3.Connection.execute``)."""
        return ReadOnlyCursor(self, self._do("execute", sql, parameters))

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> ReadOnlyCursor:
        """Run one statement for each set of parameters on a new cursor."""
        return ReadOnlyCursor(self, self._do("executemany", sql, seq_of_parameters))

    def executescript(self, sql_script: str, /) -> ReadOnlyCursor:
        """Run several statements on a new cursor."""
        return ReadOnlyCursor(self, self._do("executescript", sql_script))

    def commit(self) -> None:
        """Commit (nothing to commit on a read-only database)."""
        self._do("commit")

    def rollback(self) -> None:
        """Roll back."""
        self._do("rollback")

    def close(self) -> None:
        """Close the connection."""
        self._do("close")

    def interrupt(self) -> None:
        """Stop the running statement."""
        self._do("interrupt")

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        """Define an SQL function (see ``sqlite3.Connection.create_function``)."""
        self._do("create_function", *args, **kwargs)

    def create_aggregate(self, name: str, n_arg: int, aggregate_class: Any, /) -> None:
        """Define an SQL aggregate."""
        self._do("create_aggregate", name, n_arg, aggregate_class)

    def create_collation(self, name: str, callback: Any, /) -> None:
        """Define a collation."""
        self._do("create_collation", name, callback)

    def set_progress_handler(self, handler: Any, n: int, /) -> None:
        """Call ``handler`` every ``n`` SQLite instructions."""
        self._do("set_progress_handler", handler, n)

    def set_trace_callback(self, callback: Any, /) -> None:
        """Call ``callback`` with each statement run."""
        self._do("set_trace_callback", callback)

    in_transaction = _attribute("in_transaction", "Whether a transaction is open.")
    total_changes = _attribute("total_changes", "Rows changed since the connection opened.")
    row_factory = _attribute("row_factory", _ROW_FACTORY_DOC, writable=True)
    text_factory = _attribute("text_factory", "How TEXT values are made.", writable=True)

    def set_authorizer(self, *args: Any, **kwargs: Any) -> None:
        """Refused: the authorizer is what keeps ``ATTACH`` out."""
        raise self._refuse("changing its authorizer")

    def setlimit(self, *args: Any, **kwargs: Any) -> int:
        """Refused."""
        raise self._refuse("changing its limits")

    def enable_load_extension(self, *args: Any, **kwargs: Any) -> None:
        """Refused."""
        raise self._refuse("loading extensions")

    def load_extension(self, *args: Any, **kwargs: Any) -> None:
        """Refused."""
        raise self._refuse("loading extensions")

    def backup(self, *args: Any, **kwargs: Any) -> None:
        """Refused (its target would be written from here)."""
        raise self._refuse("backups")

    def __enter__(self) -> ReadOnlyConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._do("__exit__", *exc_info)

    def __repr__(self) -> str:
        return "<ReadOnlyConnection>"


class UnknownDatabaseError(LookupError, ErrorBase):
    """``env.db(name)`` was asked for a database the environment does not have.

    Attributes:
        name: The name asked for.
        known: The names the environment does have, sorted.
    """

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(repr(k) for k in self.known) or "none"
        super().__init__(f"no database named {name!r}; known databases: {listed}")

    def __str__(self) -> str:
        return str(self.args[0])


class QueryResult:
    """The answer to one SQL statement (immutable, compared by value).

    Attributes:
        columns: The column names, in order (empty for statements that return no rows).
        rows: The rows, each a list in the order of ``columns``.
    """

    # A plain class, not a frozen dataclass: the sandbox child imports this module on every
    # verifier run, and ``dataclasses`` (with the ``inspect`` it imports) is a large share of
    # that start-up.

    columns: list[str]
    rows: list[list[Any]]

    def __init__(self, columns: list[str], rows: list[list[Any]] | None = None) -> None:
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "rows", [] if rows is None else rows)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a QueryResult is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a QueryResult is immutable")

    def __repr__(self) -> str:
        return f"QueryResult(columns={self.columns!r}, rows={self.rows!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not QueryResult:
            return NotImplemented
        return (self.columns, self.rows) == (other.columns, other.rows)

    __hash__ = None  # type: ignore[assignment]  # holds lists

    def as_dicts(self) -> list[dict[str, Any]]:
        """Return the rows as dicts keyed by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _file_uri(path: str) -> str:
    """``pathlib.Path(path).as_uri()`` for an absolute path, without importing pathlib.

    The sandbox child imports this module on every verifier run, and pathlib (with the
    ``urllib.parse`` and ``ipaddress`` it imports) was a tenth of that start-up.
    """
    if os.name != "posix":
        from pathlib import Path

        return Path(path).as_uri()
    return "file://" + "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))


class SQLiteDatabase(FluentDatabase):
    """One SQLite file, opened lazily and (by default) read-only.

    Besides :meth:`query`, :meth:`rows` and :meth:`scalar` it has the public SDK's helpers
    (``table(...)`` queries, ``tables()``, ``diff(other, IgnoreConfig(...))``, ``expect_row``...;
    see :class:`~fleet_sdk.verifiers.QueryBuilder`, :class:`~fleet_sdk.verifiers.SnapshotDiff` and
    docs/verifier-runtime.md).

    Args:
        path: The database file.
        name: The name the environment knows it by, used in messages.
        read_only: Open with the ``mode=ro`` URI so the verifier cannot change the data; the
            connection also refuses ``ATTACH``, and is handed out as a
            :class:`ReadOnlyConnection`, which cannot undo that (see :func:`harden_connection`).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, name: str = "current", read_only: bool = True
    ) -> None:
        self._path = os.fspath(path)
        self.name = name
        self.read_only = read_only
        self._conn: sqlite3.Connection | ReadOnlyConnection | None = None

    @property
    def path(self) -> Path:
        """The database file."""
        from pathlib import Path  # not at import: see _file_uri

        return Path(self._path)

    @property
    def db_path(self) -> str:
        """The database file, as a string (the public SDK's name for it)."""
        return self._path

    def connect(self) -> sqlite3.Connection | ReadOnlyConnection:
        """Open the file if that was not done yet, and return its connection.

        A read-only database hands out a :class:`ReadOnlyConnection` (``sqlite3.Connection``'s
        methods for running SQL, with ``ATTACH`` refused for good); a writable one, the
        ``sqlite3.Connection`` itself.

        Raises:
            FileNotFoundError: The file does not exist.
        """
        if self._conn is None:
            if not os.path.isfile(self._path):
                raise FileNotFoundError(f"database {self.name!r}: no such file: {self._path}")
            if self.read_only:
                uri = f"{_file_uri(os.path.realpath(self._path))}?mode=ro"
                connection = sqlite3.connect(uri, uri=True)
                harden_connection(connection)
                self._conn = ReadOnlyConnection(connection)
                del connection  # the proxy's generator is its only holder now
            else:
                self._conn = sqlite3.connect(self._path)
        return self._conn

    def query(self, sql: str, args: Sequence[Any] | None = None) -> QueryResult:
        """Run one SQL statement and return its columns and rows.

        Args:
            sql: The statement, with ``?`` (or ``:name``) placeholders.
            args: Values for the placeholders.

        Raises:
            sqlite3.Error: The statement failed (including any write on a read-only database).
        """
        conn = self.connect()
        cursor = conn.execute(sql, tuple(args) if args is not None else ())
        try:
            columns = [d[0] for d in cursor.description] if cursor.description else []
            rows = [list(row) for row in cursor.fetchall()]
        finally:
            cursor.close()
        if not self.read_only:
            conn.commit()
        return QueryResult(columns=columns, rows=rows)

    def rows(self, sql: str, args: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Run a query and return its rows as dicts keyed by column name.

        Args:
            sql: The statement.
            args: Values for the placeholders.
        """
        return self.query(sql, args).as_dicts()

    def scalar(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        """Run a query and return the first column of the first row, or ``None`` without rows.

        Args:
            sql: The statement.
            args: Values for the placeholders.
        """
        result = self.query(sql, args)
        return result.rows[0][0] if result.rows and result.rows[0] else None

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDatabase(name={self.name!r}, path={self._path!r}, read_only={self.read_only})"


class DatabaseSnapshot(SQLiteDatabase):
    """A read-only SQLite file, made the way the public SDK's verifiers make one.

    The same object as ``env.db(name)`` (a read-only :class:`SQLiteDatabase`), with the public
    SDK's constructor. In the sandbox only the databases the run was given can be opened.

    Args:
        db_path: The database file.
        name: The name used in messages.
    """

    def __init__(self, db_path: str | os.PathLike[str], *, name: str | None = None) -> None:
        super().__init__(db_path, name=name or "snapshot", read_only=True)


class InstanceHandle:
    """What ``env.instance`` is for a verifier: the public SDK's verifiers call
    ``env.instance.load()`` before reading, and here the databases are already there.

    Args:
        env: The environment it belongs to.
    """

    def __init__(self, env: SQLiteEnvironment) -> None:
        self._env = env

    def load(self) -> None:
        """Nothing to do: the databases open on first use."""

    def db(self, name: str = "current") -> SQLiteDatabase:
        """The environment's database called ``name`` (see :meth:`SQLiteEnvironment.db`).

        Args:
            name: ``"current"`` by default.
        """
        return self._env.db(name)

    def __repr__(self) -> str:
        return f"InstanceHandle({self._env!r})"


class SQLiteEnvironment:
    """An :class:`Environment` whose databases are local SQLite files.

    Typical use is a verifier that compares ``env.db("seed")`` with ``env.db("current")``.
    Each database opens on first use and stays open until :meth:`close` (or the end of a
    ``with`` block).

    Args:
        databases: Name to file, e.g. ``{"seed": "seed.db", "current": "current.db"}``.
        read_only: Open every file read-only (``mode=ro``).
    """

    def __init__(self, databases: Mapping[str, str | os.PathLike[str]], *, read_only: bool = True) -> None:
        self._paths = {name: os.fspath(path) for name, path in databases.items()}
        self.read_only = read_only
        self._open: dict[str, SQLiteDatabase] = {}

    @property
    def instance(self) -> InstanceHandle:
        """The instance, as the public SDK's verifiers use it (``env.instance.load()``)."""
        return InstanceHandle(self)

    @property
    def database_names(self) -> list[str]:
        """The names this environment knows, sorted."""
        return sorted(self._paths)

    def db(self, name: str = "current") -> SQLiteDatabase:
        """Return the database called ``name``.

        Args:
            name: ``"current"`` by default.

        Raises:
            UnknownDatabaseError: No database has that name; the message lists the known names.
        """
        if name not in self._paths:
            raise UnknownDatabaseError(name, list(self._paths))
        database = self._open.get(name)
        if database is None:
            database = SQLiteDatabase(self._paths[name], name=name, read_only=self.read_only)
            self._open[name] = database
        return database

    def close(self) -> None:
        """Close every database opened so far."""
        for database in self._open.values():
            database.close()
        self._open.clear()

    def __enter__(self) -> SQLiteEnvironment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteEnvironment(databases={self.database_names!r}, read_only={self.read_only})"
