"""A local :class:`Environment` backed by SQLite files.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
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


class _GuardedConnection(sqlite3.Connection):
    """A connection whose authorizer, limits and extension loading cannot be changed through it.

    (``sqlite3.Connection.set_authorizer(conn, None)`` still reaches the C method: in the
    sandbox the OS jail is what keeps every other database file out of reach.)
    """

    def _refuse(self, what: str) -> PermissionError:
        return PermissionError(f"this database connection does not allow {what}")

    def set_authorizer(self, *args: Any, **kwargs: Any) -> None:
        raise self._refuse("changing its authorizer")

    def setlimit(self, *args: Any, **kwargs: Any) -> int:
        raise self._refuse("changing its limits")

    def enable_load_extension(self, *args: Any, **kwargs: Any) -> None:
        raise self._refuse("loading extensions")

    def load_extension(self, *args: Any, **kwargs: Any) -> None:
        raise self._refuse("loading extensions")


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
            connection also refuses ``ATTACH`` and changes to its authorizer (see
            :func:`harden_connection`).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, name: str = "current", read_only: bool = True
    ) -> None:
        self._path = os.fspath(path)
        self.name = name
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None

    @property
    def path(self) -> Path:
        """The database file."""
        from pathlib import Path  # not at import: see _file_uri

        return Path(self._path)

    @property
    def db_path(self) -> str:
        """The database file, as a string (the public SDK's name for it)."""
        return self._path

    def connect(self) -> sqlite3.Connection:
        """Open the file if that was not done yet, and return the ``sqlite3`` connection.

        Raises:
            FileNotFoundError: The file does not exist.
        """
        if self._conn is None:
            if not os.path.isfile(self._path):
                raise FileNotFoundError(f"database {self.name!r}: no such file: {self._path}")
            if self.read_only:
                uri = f"{_file_uri(os.path.realpath(self._path))}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, factory=_GuardedConnection)
                harden_connection(self._conn)
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
