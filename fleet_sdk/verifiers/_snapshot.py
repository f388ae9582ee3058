"""The database helpers verifiers written for the public SDK call: queries, snapshots and diffs.

``env.db("current").table("orders").eq("id", 1).first()``, ``env.db("seed").diff(env.db("current"),
IgnoreConfig(tables={"audit_log"})).expect_only([...])``: written from the public SDK's documented
behaviour (docs/verifier-runtime.md lists every call and where ours differs), on top of nothing
but a database's ``query(sql, args)``, so the same code serves the sandbox child (read-only SQLite
files opened before its audit hook) and any other :class:`~fleet_sdk.verifiers.Database`.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``, and
nothing here loads ``inspect``, ``dataclasses`` or ``traceback`` (see ``_entry.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "Count",
    "FluentDatabase",
    "IgnoreConfig",
    "QueryBuilder",
    "SnapshotDiff",
]

ADDED = "__added__"
"""The ``after`` of an ``expect_only`` change that allows a whole row to be added."""

REMOVED = "__removed__"
"""The ``after`` of an ``expect_only`` change that allows a whole row to be removed."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_LISTED = 10  # violations spelled out in one AssertionError


class _Rows(Protocol):
    @property
    def columns(self) -> list[str]: ...

    @property
    def rows(self) -> list[list[Any]]: ...


class _Queryable(Protocol):
    def query(self, sql: str, args: Sequence[Any] | None = None) -> _Rows: ...


def _quote(identifier: str) -> str:
    """A name quoted in backticks (a dotted name part by part): safe for any table or column name.

    Backticks, not double quotes: SQLite reads a double-quoted name that matches no column as a
    string literal, so a misspelled column would silently match nothing instead of failing.
    """
    if not isinstance(identifier, str) or not identifier:
        raise ValueError(f"a table or column name must be a non-empty string, not {identifier!r}")
    parts = identifier.split(".") if _IDENTIFIER.fullmatch(identifier) else [identifier]
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def _expression(column: str) -> str:
    """A selected or sorted column: a (dotted) name is quoted, ``*`` and SQL expressions such as
    ``COUNT(*) AS n`` pass as written, as in the public SDK."""
    if not isinstance(column, str) or not column.strip():
        raise ValueError(f"a column must be a non-empty string, not {column!r}")
    return _quote(column) if _IDENTIFIER.fullmatch(column) else column


def _as_dicts(result: _Rows) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, row, strict=False)) for row in result.rows]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _values_equivalent(a: Any, b: Any) -> bool:
    """Equal, or two JSON object/array texts that decode to equal values (key order, spacing)."""
    if a == b:
        return True
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.strip(), b.strip()
        if a[:1] + a[-1:] in ("{}", "[]") and b[:1] + b[-1:] in ("{}", "[]"):
            try:
                return bool(json.loads(a) == json.loads(b))
            except ValueError:
                return False
    return False


def _same_key(a: Any, b: Any) -> bool:
    """Whether two primary keys name the same row: compared as text (``1`` is ``"1"``), element by
    element for composite keys (a list is a tuple)."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b, strict=True))
    return str(a) == str(b)


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

    def __init__(self, database: _Queryable, table: str) -> None:
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
        _quote(column)  # a bad name fails here, where it was written
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
            _quote(name)
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
        table = _quote(self._table)
        parts = [f"SELECT {', '.join(_expression(c) for c in self._columns)} FROM {table}"]
        for other, pairs in self._joins:
            joined = _quote(other)
            condition = " AND ".join(f"{table}.{_quote(a)} = {joined}.{_quote(b)}" for a, b in pairs)
            parts.append(f"JOIN {joined} ON {condition}")
        params: list[Any] = []
        clauses = []
        for column, op, value in self._conditions:
            if op in ("IS NULL", "IS NOT NULL"):
                clauses.append(f"{_quote(column)} {op}")
            elif op in ("IN", "NOT IN"):
                clauses.append(f"{_quote(column)} {op} ({', '.join('?' for _ in value)})")
                params.extend(value)
            else:
                clauses.append(f"{_quote(column)} {op} ?")
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
        return _as_dicts(self._database.query(sql, params))

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
                f"expected no row in {self._table!r}, found {_short(row, 300)}\n{self.explain()}"
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
            raise AssertionError(
                f"{self._table}.{column} is {row.get(column)!r}, expected {value!r} (row {_short(row, 300)})"
            )
        return self

    def __repr__(self) -> str:
        return f"<QueryBuilder {self.explain()}>"


class IgnoreConfig:
    """What a :class:`SnapshotDiff` leaves out.

    Args:
        tables: Tables ignored entirely.
        fields: Columns ignored in every table.
        table_fields: Columns ignored in one table, by table name.
    """

    def __init__(
        self,
        tables: Iterable[str] | None = None,
        fields: Iterable[str] | None = None,
        table_fields: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.tables = set(tables or ())
        self.fields = set(fields or ())
        self.table_fields = {table: set(names) for table, names in (table_fields or {}).items()}

    def should_ignore_table(self, table: str) -> bool:
        """Whether ``table`` is left out.

        Args:
            table: The table name.
        """
        return table in self.tables

    def should_ignore_field(self, table: str, field: str) -> bool:
        """Whether column ``field`` of ``table`` is left out.

        Args:
            table: The table name.
            field: The column name.
        """
        return field in self.fields or field in self.table_fields.get(table, ())

    def __repr__(self) -> str:
        fields = f"tables={self.tables!r}, fields={self.fields!r}, table_fields={self.table_fields!r}"
        return f"IgnoreConfig({fields})"


def _tables(database: _Queryable) -> list[str]:
    result = database.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name", []
    )
    return [str(row[0]) for row in result.rows]


def _primary_key(database: _Queryable, table: str) -> list[str]:
    """The primary-key columns in key order; else ``id`` when the table has one; else ``rowid``."""
    info = _as_dicts(database.query(f"PRAGMA table_info({_quote(table)})", []))
    keyed = sorted((row["pk"], row["name"]) for row in info if row.get("pk"))
    if keyed:
        return [str(name) for _, name in keyed]
    return ["id"] if any(row.get("name") == "id" for row in info) else ["rowid"]


def _keyed_rows(database: _Queryable, table: str, key: list[str]) -> dict[Any, dict[str, Any]]:
    if key == ["rowid"]:
        rows = _as_dicts(database.query(f"SELECT rowid AS __fleet_rowid__, * FROM {_quote(table)}", []))
        return {row.pop("__fleet_rowid__"): row for row in rows}
    rows = _as_dicts(database.query(f"SELECT * FROM {_quote(table)}", []))
    if len(key) == 1:
        return {row.get(key[0]): row for row in rows}
    return {tuple(row.get(column) for column in key): row for row in rows}


def _fields_spec(spec: Mapping[str, Any], name: str, where: str) -> dict[str, tuple[bool, Any]]:
    """``[(field, value), ...]`` as field -> (check the value?, value); ``...`` accepts any value."""
    parsed: dict[str, tuple[bool, Any]] = {}
    for item in spec.get(name) or ():
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ValueError(f"{where}: each entry of {name!r} must be a (field, value) pair, not {item!r}")
        field, value = item
        parsed[str(field)] = (value is not ..., value)
    return parsed


def _normalized(specs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The specs, a list ``pk`` read as a tuple (a composite key)."""
    normalized: list[Mapping[str, Any]] = []
    for spec in specs:
        if not isinstance(spec, Mapping):
            raise ValueError(f"each change spec must be a dict, not {spec!r}")
        pk = spec.get("pk")
        normalized.append({**spec, "pk": tuple(pk)} if isinstance(pk, list) else spec)
    return normalized


class _SpecMatcher:
    """Matches the changed rows of a diff against change specs, remembering which specs matched.

    ``typed``: only ``type``d specs count (``expect_exactly``); otherwise the untyped forms of
    ``expect_only`` (``{"field", "after"}`` and whole-row ``__added__`` / ``__removed__``) too.
    """

    def __init__(self, specs: list[Mapping[str, Any]], ignore: IgnoreConfig, *, typed: bool) -> None:
        self.specs = specs
        self.ignore = ignore
        self.typed = typed
        self.matched: set[int] = set()

    def _for_row(self, table: str, row_id: Any) -> list[int]:
        return [
            index
            for index, spec in enumerate(self.specs)
            if spec.get("table") == table and "pk" in spec and _same_key(spec["pk"], row_id)
        ]

    def _fields_problem(
        self, table: str, data: Mapping[str, Any], spec: Mapping[str, Any], where: str
    ) -> str | None:
        """What in an added row (every field must be listed) or a removed one (the listed fields are
        checked) disagrees with the spec's ``fields``."""
        if spec.get("fields") is None:
            return None
        wanted = _fields_spec(spec, "fields", where)
        whole = spec.get("type") == "insert"
        for field, value in data.items():
            if field == "rowid" or self.ignore.should_ignore_field(table, field):
                continue
            if field not in wanted:
                if whole:
                    return f"{where}: field {field!r} is not in the spec's fields (value {_short(value)})"
                continue
            check, expected = wanted[field]
            if check and not _values_equivalent(expected, value):
                return f"{where}: {field} is {_short(value)}, expected {_short(expected)}"
        missing = [field for field in wanted if field not in data]
        return f"{where}: the row has no field {missing[0]!r}" if missing else None

    def whole_row(self, table: str, row: Mapping[str, Any], kind: str, where: str) -> list[str]:
        """The problems of a row added (``kind`` ``insert``) or removed (``delete``)."""
        candidates = self._for_row(table, row["row_id"])
        typed = [i for i in candidates if self.specs[i].get("type") == kind]
        if typed:
            problem = self._fields_problem(table, row["data"], self.specs[typed[0]], where)
            if problem is not None:
                return [problem]
            self.matched.add(typed[0])
            return []
        marker = ADDED if kind == "insert" else REMOVED
        whole = [] if self.typed else [i for i in candidates if self.specs[i].get("after") == marker]
        if whole and self.specs[whole[0]].get("fields") is None:
            self.matched.add(whole[0])
            return []
        return [f"{where}: no spec allows it (data {_short(row['data'], 200)})"]

    def modified(self, table: str, row: Mapping[str, Any], where: str) -> list[str]:
        """The problems of a row whose columns changed."""
        changes: dict[str, dict[str, Any]] = row["changes"]
        candidates = self._for_row(table, row["row_id"])
        typed = [i for i in candidates if self.specs[i].get("type") == "modify"]
        if typed:
            problems = self._resulting_problems(changes, self.specs[typed[0]], where)
            if not problems:
                self.matched.add(typed[0])
            return problems
        problems = []
        for field, change in changes.items():
            allowed = (
                [] if self.typed else [i for i in candidates if _allows_field(self.specs[i], field, change)]
            )
            self.matched.update(allowed)
            if not allowed:
                before, after = _short(change["before"]), _short(change["after"])
                problems.append(f"{where}: {field} changed from {before} to {after}, and no spec allows it")
        return problems

    @staticmethod
    def _resulting_problems(
        changes: Mapping[str, Mapping[str, Any]], spec: Mapping[str, Any], where: str
    ) -> list[str]:
        """A ``modify`` spec's ``resulting_fields`` (with ``no_other_changes``) against the changes."""
        if spec.get("resulting_fields") is None:
            return []
        strict = spec.get("no_other_changes")
        if not isinstance(strict, bool):
            raise ValueError(
                f"the modify spec of {where} has resulting_fields, so it needs no_other_changes set to "
                f"True or False, not {strict!r}"
            )
        wanted = _fields_spec(spec, "resulting_fields", where)
        problems = []
        for field, change in changes.items():
            if field not in wanted:
                if strict:
                    problems.append(f"{where}: {field} changed, and it is not in resulting_fields")
                continue
            check, expected = wanted[field]
            if check and not _values_equivalent(expected, change["after"]):
                problems.append(f"{where}: {field} is {_short(change['after'])}, expected {_short(expected)}")
        return problems


def _allows_field(spec: Mapping[str, Any], field: str, change: Mapping[str, Any]) -> bool:
    """Whether a ``{"field", "after"[, "before"]}`` spec allows this change of one column."""
    if spec.get("field") != field or not _values_equivalent(spec.get("after"), change["after"]):
        return False
    return "before" not in spec or _values_equivalent(spec["before"], change["before"])


class SnapshotDiff:
    """The changes from one database to another, matched row by row by primary key.

    Made by ``before.diff(after, ignore_config)``. :attr:`changes` holds them per table;
    :meth:`expect_only`, :meth:`expect_only_v2`, :meth:`expect_exactly` and :meth:`expect`
    raise ``AssertionError`` (listing every violation, up to ten) unless the changes are the ones
    allowed. A row's key is its primary key (a tuple for a composite one), else its ``id`` column,
    else its ``rowid``; keys in specs compare as text, so ``1`` and ``"1"`` name the same row.
    Two JSON object or array texts that decode to the same value are not a change.

    Args:
        before: The database before (normally ``env.db("seed")``).
        after: The database after (normally ``env.db("current")``).
        ignore_config: Tables and columns to leave out.
    """

    def __init__(
        self, before: _Queryable, after: _Queryable, ignore_config: IgnoreConfig | None = None
    ) -> None:
        self.before = before
        self.after = after
        self.ignore_config = ignore_config if ignore_config is not None else IgnoreConfig()
        self._changes: dict[str, dict[str, Any]] | None = None

    @property
    def changes(self) -> dict[str, dict[str, Any]]:
        """Per table not ignored: ``table_name``, ``primary_key`` (columns), ``added_rows`` and
        ``removed_rows`` (``{"row_id", "data"}``), ``modified_rows`` (``{"row_id", "changes":
        {field: {"before", "after"}}, "data"}``, ``data`` being the row after), ``unchanged_count``
        and ``total_changes``. Computed on first use."""
        if self._changes is None:
            self._changes = self._collect()
        return self._changes

    def _collect(self) -> dict[str, dict[str, Any]]:
        ignore = self.ignore_config
        before_tables, after_tables = set(_tables(self.before)), set(_tables(self.after))
        found: dict[str, dict[str, Any]] = {}
        for table in sorted(before_tables | after_tables):
            if ignore.should_ignore_table(table):
                continue
            key = _primary_key(self.after if table in after_tables else self.before, table)
            old = _keyed_rows(self.before, table, key) if table in before_tables else {}
            new = _keyed_rows(self.after, table, key) if table in after_tables else {}
            modified = []
            unchanged = 0
            for row_id in (k for k in old if k in new):
                changed = {
                    field: {"before": old[row_id].get(field), "after": new[row_id].get(field)}
                    for field in dict.fromkeys([*old[row_id], *new[row_id]])
                    if not ignore.should_ignore_field(table, field)
                    and not _values_equivalent(old[row_id].get(field), new[row_id].get(field))
                }
                if changed:
                    modified.append({"row_id": row_id, "changes": changed, "data": new[row_id]})
                else:
                    unchanged += 1
            added = [{"row_id": k, "data": row} for k, row in new.items() if k not in old]
            removed = [{"row_id": k, "data": row} for k, row in old.items() if k not in new]
            found[table] = {
                "table_name": table,
                "primary_key": key,
                "added_rows": added,
                "removed_rows": removed,
                "modified_rows": modified,
                "unchanged_count": unchanged,
                "total_changes": len(added) + len(removed) + len(modified),
            }
        return found

    def _violations(self, specs: list[Mapping[str, Any]], *, typed: bool) -> tuple[list[str], set[int]]:
        """Every change no spec allows, and the indexes of the specs some change matched."""
        matcher = _SpecMatcher(specs, self.ignore_config, typed=typed)
        problems: list[str] = []
        for table, report in self.changes.items():
            for row in report["added_rows"]:
                problems += matcher.whole_row(
                    table, row, "insert", f"row {_short(row['row_id'])} added to {table!r}"
                )
            for row in report["removed_rows"]:
                where = f"row {_short(row['row_id'])} removed from {table!r}"
                problems += matcher.whole_row(table, row, "delete", where)
            for row in report["modified_rows"]:
                problems += matcher.modified(table, row, f"row {_short(row['row_id'])} of {table!r}")
        return problems, matcher.matched

    @staticmethod
    def _fail(problems: list[str], heading: str) -> None:
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems[:_MAX_LISTED])
            more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
            raise AssertionError(f"{heading} ({len(problems)}):\n{listed}{more}")

    # -- the checks -----------------------------------------------------------------------------

    def expect_only(self, allowed_changes: Iterable[Mapping[str, Any]]) -> SnapshotDiff:
        """Raise ``AssertionError`` unless every change is one of ``allowed_changes``.

        Each allowed change is ``{"table", "pk", "field", "after"}`` (optionally ``"before"``) for
        one column of one row, or ``{"table", "pk", "field": None, "after": "__added__"}`` /
        ``"__removed__"`` for a whole row. The typed specs of :meth:`expect_only_v2` work too. An
        empty list means nothing may have changed. Changes allowed but absent are fine.

        Args:
            allowed_changes: The changes allowed.
        """
        problems, _ = self._violations(_normalized(allowed_changes), typed=False)
        self._fail(problems, "unexpected database changes")
        return self

    def expect_only_v2(self, allowed_changes: Iterable[Mapping[str, Any]]) -> SnapshotDiff:
        """Like :meth:`expect_only`, with typed specs that check values.

        ``{"table", "pk", "type": "insert", "fields": [(field, value), ...]}``: the added row must
        have exactly these fields (``...`` accepts any value, ``None`` means SQL NULL);
        ``{"type": "modify", "resulting_fields": [...], "no_other_changes": bool}``: the changed
        columns must end with these values (and, with ``no_other_changes``, be only these);
        ``{"type": "delete"}`` (optionally with ``fields`` to check the removed row). Specs without
        ``type`` are read as in :meth:`expect_only`.

        Args:
            allowed_changes: The changes allowed.

        Raises:
            AssertionError: A change no spec allows.
            ValueError: A malformed spec (a modify spec with ``resulting_fields`` needs
                ``no_other_changes``).
        """
        return self.expect_only(allowed_changes)

    def expect_exactly(self, expected_changes: Iterable[Mapping[str, Any]]) -> SnapshotDiff:
        """Raise ``AssertionError`` unless the changes are exactly ``expected_changes``.

        Every spec needs ``type`` (``insert``, ``modify`` or ``delete``), ``table`` and ``pk``, read
        as in :meth:`expect_only_v2`; every change must match a spec and every spec a change.

        Args:
            expected_changes: The changes that must have happened, and no others.

        Raises:
            AssertionError: A change no spec allows, or a spec no change matches.
            ValueError: A spec without ``type``, ``table`` or ``pk``.
        """
        specs = _normalized(expected_changes)
        for index, spec in enumerate(specs):
            if (
                spec.get("type") not in ("insert", "modify", "delete")
                or "table" not in spec
                or "pk" not in spec
            ):
                raise ValueError(
                    f"spec {index} needs type ('insert', 'modify' or 'delete'), table and pk: {spec!r}"
                )
        problems, matched = self._violations(specs, typed=True)
        problems += [
            f"expected {spec['type']} of row {_short(spec['pk'])} in {spec['table']!r} did not happen"
            for index, spec in enumerate(specs)
            if index not in matched
        ]
        self._fail(problems, "database changes differ from the expected ones")
        return self

    def expect(
        self,
        *,
        allow: Iterable[Mapping[str, Any]] | None = None,
        forbid: Iterable[Mapping[str, Any]] | None = None,
    ) -> SnapshotDiff:
        """Check changed columns against ``{"table", "field"}`` lists.

        A modified column listed in ``forbid`` fails; when ``allow`` is given, a modified column
        not listed there fails; ``{"table": t}`` (no field) in ``forbid`` also forbids adding or
        removing rows of ``t``.

        Args:
            allow: The only columns that may change, if given.
            forbid: Columns (or, without ``field``, whole tables) that must not change.
        """
        allowed = {(c["table"], c.get("field")) for c in allow or ()}
        forbidden = {(c["table"], c.get("field")) for c in forbid or ()}
        problems = []
        for table, report in self.changes.items():
            for row in report["modified_rows"]:
                for field in row["changes"]:
                    if (table, field) in forbidden:
                        problems.append(
                            f"{table}.{field} changed (row {_short(row['row_id'])}) and is forbidden"
                        )
                    elif allowed and (table, field) not in allowed:
                        problems.append(
                            f"{table}.{field} changed (row {_short(row['row_id'])}) and is not allowed"
                        )
            if (table, None) in forbidden and (report["added_rows"] or report["removed_rows"]):
                problems.append(f"rows were added to or removed from {table!r}, which is forbidden")
        self._fail(problems, "forbidden database changes")
        return self

    def __repr__(self) -> str:
        return f"<SnapshotDiff {self.before!r} -> {self.after!r}>"


class FluentDatabase:
    """The public SDK's database helpers, for a class that has ``query(sql, args)``.

    ``db.table(name)`` starts a :class:`QueryBuilder`, ``db.tables()`` lists the tables,
    ``db.diff(other, ignore_config)`` compares with another database (this one is *before*),
    ``db.snapshot()`` is the database itself (a verifier's databases do not change while it
    runs), and ``expect_row`` / ``expect_rows`` / ``expect_absent_row`` assert on rows.
    """

    def query(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        """Run one SQL statement (provided by the class this is mixed into).

        Args:
            sql: The statement.
            args: Values for its placeholders.
        """
        raise NotImplementedError

    def table(self, table: str) -> QueryBuilder:
        """A query on ``table``.

        Args:
            table: The table name.
        """
        return QueryBuilder(self, table)

    def tables(self) -> list[str]:
        """The names of the user tables, sorted."""
        return _tables(self)

    def snapshot(self, name: str | None = None) -> FluentDatabase:
        """This database: it does not change while a verifier runs, so it is its own snapshot.

        Args:
            name: Ignored (the public SDK names its snapshots).
        """
        return self

    def diff(self, other: _Queryable, ignore_config: IgnoreConfig | None = None, **_: Any) -> SnapshotDiff:
        """The changes from this database (before) to ``other`` (after).

        Args:
            other: The database after.
            ignore_config: Tables and columns to leave out.
            _: Other keywords of the public SDK (``use_structured_diff``), ignored: the diff is
                always computed here.
        """
        return SnapshotDiff(self, other, ignore_config)

    def expect_row(self, table: str, where: Mapping[str, Any], expect: Mapping[str, Any]) -> FluentDatabase:
        """Raise ``AssertionError`` unless a row matches ``where`` and has the ``expect`` values.

        Args:
            table: The table.
            where: Column to value, all equal.
            expect: Column to the value the first matching row must have.
        """
        query = self.table(table).where(where)
        query.assert_exists()
        for column, value in expect.items():
            query.assert_eq(column, value)
        return self

    def expect_rows(
        self,
        table: str,
        where: Mapping[str, Any],
        *,
        count: int | None = None,
        contains: Iterable[Mapping[str, Any]] | None = None,
    ) -> FluentDatabase:
        """Raise ``AssertionError`` unless the rows matching ``where`` number ``count`` and include
        a row like each of ``contains``.

        Args:
            table: The table.
            where: Column to value, all equal.
            count: How many rows must match, if given.
            contains: Partial rows (column to value) each matched by some row.
        """
        query = self.table(table).where(where)
        if count is not None:
            query.count().assert_eq(count)
        if contains:
            rows = query.all()
            for wanted in contains:
                if not any(all(row.get(k) == v for k, v in wanted.items()) for row in rows):
                    raise AssertionError(f"no row of {table!r} matching {dict(where)!r} has {dict(wanted)!r}")
        return self

    def expect_absent_row(self, table: str, where: Mapping[str, Any]) -> FluentDatabase:
        """Raise ``AssertionError`` if a row matches ``where``.

        Args:
            table: The table.
            where: Column to value, all equal.
        """
        self.table(table).where(where).assert_none()
        return self
