"""The query builder verifiers written for the public SDK call: ``db.table("orders").eq("id", 1).first()``.

Written from the public SDK's documented behaviour (docs/verifier-runtime.md lists every call and
where ours differs), on top of nothing but a database's ``query(sql, args)``, so the same code
serves the sandbox child (read-only SQLite files opened before its audit hook) and any other
:class:`~fleet_sdk.verifiers.Database`.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``, and
nothing here loads ``inspect``, ``dataclasses`` or ``traceback`` (see ``_entry.py``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["Count", "QueryBuilder", "Queryable", "quote_identifier", "rows_as_dicts", "short_repr"]


@functools.cache
def _identifier() -> re.Pattern[str]:
    """A (dotted) plain name; compiled on first use: the sandbox child imports this module on
    every verifier run."""
    return re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


class _Rows(Protocol):
    """What ``query`` returns: ``.columns`` and ``.rows``."""

    @property
    def columns(self) -> list[str]: ...

    @property
    def rows(self) -> list[list[Any]]: ...


class Queryable(Protocol):
    """Anything with ``query(sql, args)``: what the builder and the diffs read through."""

    def query(self, sql: str, args: Sequence[Any] | None = None) -> _Rows: ...


def quote_identifier(identifier: str) -> str:
    """A name quoted in backticks (a dotted name part by part): safe for any table or column name.

    Backticks, not double quotes: SQLite reads a double-quoted name that matches no column as a
    string literal, so a misspelled column would silently match nothing instead of failing.
    """
    if not isinstance(identifier, str) or not identifier:
        raise ValueError(f"a table or column name must be a non-empty string, not {identifier!r}")
    parts = identifier.split(".") if _identifier().fullmatch(identifier) else [identifier]
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def _expression(column: str) -> str:
    """A selected or sorted column: a (dotted) name is quoted, ``*`` and SQL expressions such as
    ``COUNT(*) AS n`` pass as written, as in the public SDK."""
    if not isinstance(column, str) or not column.strip():
        raise ValueError(f"a column must be a non-empty string, not {column!r}")
    return quote_identifier(column) if _identifier().fullmatch(column) else column


def rows_as_dicts(result: _Rows) -> list[dict[str, Any]]:
    """The rows of a query result as dicts keyed by column name.

    Args:
        result: What ``query`` returned.
    """
    return [dict(zip(result.columns, row, strict=False)) for row in result.rows]


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message.

    Args:
        value: The value.
        limit: The longest text returned.
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Count(int):
    """What ``QueryBuilder.count()`` returns: an ``int`` that can also assert on itself.

    Attributes:
        value: The count (the int itself).
    """

    @property
    def value(self) -> int:
        """The count as a plain ``int``."""
        return int(self)

    def assert_eq(self, expected: int) -> Count:
        """Raise ``AssertionError`` unless the count is ``expected``.

        Args:
            expected: The count wanted.
        """
        if self != expected:
            raise AssertionError(f"expected a count of {expected}, got {int(self)}")
        return self

    def assert_gt(self, threshold: int) -> Count:
        """Raise ``AssertionError`` unless the count is greater than ``threshold``.

        Args:
            threshold: The count must exceed it.
        """
        if not self > threshold:
            raise AssertionError(f"expected a count above {threshold}, got {int(self)}")
        return self

    def assert_between(self, low: int, high: int) -> Count:
        """Raise ``AssertionError`` unless ``low <= count <= high``.

        Args:
            low: The smallest count accepted.
            high: The largest count accepted.
        """
        if not low <= self <= high:
            raise AssertionError(f"expected a count from {low} to {high}, got {int(self)}")
        return self


class QueryBuilder:
    """A ``SELECT`` on one table, built by chaining; every call returns a new builder.

    Conditions are joined with ``AND`` and their values bound as parameters (``eq(col, None)``
    compares with ``= NULL``, which matches nothing, as in SQL: use :meth:`is_null`). Run it with
    :meth:`all`, :meth:`first` or :meth:`count`, or assert with :meth:`assert_exists`,
    :meth:`assert_none` and :meth:`assert_eq`.

    Args:
        database: Anything with ``query(sql, args)`` returning ``.columns`` and ``.rows``.
        table: The table to read.
    """

    def __init__(self, database: Queryable, table: str) -> None:
        self._database = database
        self._table = table
        self._columns: tuple[str, ...] = ("*",)
        self._conditions: tuple[tuple[str, str, Any], ...] = ()
        self._joins: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
        self._limit: int | None = None
        self._order: tuple[str, bool] | None = None

    def _with(self, **changes: Any) -> QueryBuilder:
        twin = QueryBuilder(self._database, self._table)
        twin.__dict__.update(self.__dict__)
        for name, value in changes.items():
            setattr(twin, f"_{name}", value)
        return twin

    def _where(self, column: str, op: str, value: Any = None) -> QueryBuilder:
        quote_identifier(column)  # a bad name fails here, where it was written
        return self._with(conditions=(*self._conditions, (column, op, value)))

    # -- shape ----------------------------------------------------------------------------------

    def select(self, *columns: str) -> QueryBuilder:
        """Read only these columns (or SQL expressions such as ``"COUNT(*) AS n"``); none: all.

        Args:
            columns: Column names or expressions.
        """
        for column in columns:
            _expression(column)
        return self._with(columns=tuple(columns) or ("*",))

    def limit(self, n: int | None) -> QueryBuilder:
        """Return at most ``n`` rows (``None``: no limit).

        Args:
            n: The largest number of rows, at least 0.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"limit must be a non-negative int or None, not {n!r}")
        return self._with(limit=n)

    def sort(self, column: str, desc: bool = False) -> QueryBuilder:
        """Order the rows by ``column``.

        Args:
            column: The column (or expression) to order by.
            desc: Largest first.
        """
        _expression(column)
        return self._with(order=(column, bool(desc)))

    def join(self, other_table: str, on: Mapping[str, str]) -> QueryBuilder:
        """Inner-join ``other_table`` where ``this_table.<key> = other_table.<value>``.

        Args:
            other_table: The table to join.
            on: Column of this table to column of the other, e.g. ``{"customer_id": "id"}``.
        """
        pairs = tuple((str(local), str(remote)) for local, remote in on.items())
        if not pairs:
            raise ValueError("join needs at least one pair of columns in 'on'")
        for name in (other_table, *(column for pair in pairs for column in pair)):
            quote_identifier(name)
        return self._with(joins=(*self._joins, (other_table, pairs)))

    # -- conditions -----------------------------------------------------------------------------

    def eq(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column = value``.

        Args:
            column: The column.
            value: The value (bound as a parameter).
        """
        return self._where(column, "=", value)

    def neq(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column != value``.

        Args:
            column: The column.
            value: The value.
        """
        return self._where(column, "!=", value)

    def gt(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column > value``.

        Args:
            column: The column.
            value: The value.
        """
        return self._where(column, ">", value)

    def gte(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column >= value``.

        Args:
            column: The column.
            value: The value.
        """
        return self._where(column, ">=", value)

    def lt(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column < value``.

        Args:
            column: The column.
            value: The value.
        """
        return self._where(column, "<", value)

    def lte(self, column: str, value: Any) -> QueryBuilder:
        """Keep rows where ``column <= value``.

        Args:
            column: The column.
            value: The value.
        """
        return self._where(column, "<=", value)

    def in_(self, column: str, values: Iterable[Any]) -> QueryBuilder:
        """Keep rows whose ``column`` is one of ``values``.

        Args:
            column: The column.
            values: The accepted values (none: no row).
        """
        return self._where(column, "IN", tuple(values))

    def not_in(self, column: str, values: Iterable[Any]) -> QueryBuilder:
        """Keep rows whose ``column`` is none of ``values``.

        Args:
            column: The column.
            values: The refused values.
        """
        return self._where(column, "NOT IN", tuple(values))

    def is_null(self, column: str) -> QueryBuilder:
        """Keep rows where ``column IS NULL``.

        Args:
            column: The column.
        """
        return self._where(column, "IS NULL")

    def not_null(self, column: str) -> QueryBuilder:
        """Keep rows where ``column IS NOT NULL``.

        Args:
            column: The column.
        """
        return self._where(column, "IS NOT NULL")

    def ilike(self, column: str, pattern: str) -> QueryBuilder:
        """Keep rows where ``column LIKE pattern`` (``%`` and ``_`` wildcards; SQLite's ``LIKE``
        ignores ASCII case).

        Args:
            column: The column.
            pattern: The pattern.
        """
        return self._where(column, "LIKE", pattern)

    def where(self, conditions: Mapping[str, Any] | None = None, **equal: Any) -> QueryBuilder:
        """Keep rows where every given column equals its value (:meth:`eq` for each).

        Args:
            conditions: Column to value.
            equal: More columns and values, as keywords.
        """
        builder = self
        for column, value in {**(conditions or {}), **equal}.items():
            builder = builder.eq(column, value)
        return builder

    # -- running --------------------------------------------------------------------------------

    def sql(self) -> tuple[str, list[Any]]:
        """The statement and its parameters, as they will be run."""
        table = quote_identifier(self._table)
        parts = [f"SELECT {', '.join(_expression(c) for c in self._columns)} FROM {table}"]
        for other, pairs in self._joins:
            joined = quote_identifier(other)
            condition = " AND ".join(
                f"{table}.{quote_identifier(a)} = {joined}.{quote_identifier(b)}" for a, b in pairs
            )
            parts.append(f"JOIN {joined} ON {condition}")
        params: list[Any] = []
        clauses = []
        for column, op, value in self._conditions:
            if op in ("IS NULL", "IS NOT NULL"):
                clauses.append(f"{quote_identifier(column)} {op}")
            elif op in ("IN", "NOT IN"):
                clauses.append(f"{quote_identifier(column)} {op} ({', '.join('?' for _ in value)})")
                params.extend(value)
            else:
                clauses.append(f"{quote_identifier(column)} {op} ?")
                params.append(value)
        if clauses:
            parts.append("WHERE " + " AND ".join(clauses))
        if self._order is not None:
            parts.append(f"ORDER BY {_expression(self._order[0])} {'DESC' if self._order[1] else 'ASC'}")
        if self._limit is not None:
            parts.append(f"LIMIT {self._limit}")
        return " ".join(parts), params

    def explain(self) -> str:
        """The statement and its parameters as text, for messages."""
        sql, params = self.sql()
        return f"SQL: {sql}\nParams: {params}"

    def all(self) -> list[dict[str, Any]]:
        """Run the query: every row as a dict keyed by column name."""
        sql, params = self.sql()
        return rows_as_dicts(self._database.query(sql, params))

    def first(self) -> dict[str, Any] | None:
        """Run the query with ``LIMIT 1``: the first row, or ``None``."""
        rows = self.limit(1).all()
        return rows[0] if rows else None

    def count(self) -> Count:
        """The number of rows the query matches (its limit and order left out)."""
        sql, params = self._with(columns=("COUNT(*)",), limit=None, order=None).sql()
        rows = self._database.query(sql, params).rows
        return Count(rows[0][0] if rows and rows[0] else 0)

    def assert_exists(self) -> QueryBuilder:
        """Raise ``AssertionError`` (naming the query) unless some row matches."""
        if self.first() is None:
            raise AssertionError(f"expected a row in {self._table!r}, found none\n{self.explain()}")
        return self

    def assert_none(self) -> QueryBuilder:
        """Raise ``AssertionError`` (naming the first match) if any row matches."""
        row = self.first()
        if row is not None:
            raise AssertionError(
                f"expected no row in {self._table!r}, found {short_repr(row, 300)}\n{self.explain()}"
            )
        return self

    def assert_eq(self, column: str, value: Any) -> QueryBuilder:
        """Raise ``AssertionError`` unless the first matching row has ``column == value``.

        Args:
            column: The column to check.
            value: The value it must have.
        """
        row = self.first()
        if row is None:
            raise AssertionError(
                f"expected a row in {self._table!r} with {column}={value!r}, found none\n{self.explain()}"
            )
        if row.get(column) != value:
            found = f"{self._table}.{column} is {row.get(column)!r}"
            raise AssertionError(f"{found}, expected {value!r} (row {short_repr(row, 300)})")
        return self

    def __repr__(self) -> str:
        return f"<QueryBuilder {self.explain()}>"
