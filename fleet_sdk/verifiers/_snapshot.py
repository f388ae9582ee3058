"""Snapshot diffs verifiers written for the public SDK call, and the database helpers around them.

``env.db("seed").diff(env.db("current"), IgnoreConfig(tables={"audit_log"})).expect_only([...])``:
written from the public SDK's documented behaviour (docs/verifier-runtime.md lists every call and
where ours differs), on top of nothing but a database's ``query(sql, args)``, like the query
builder of ``_query.py``.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``, and
nothing here loads ``inspect``, ``dataclasses`` or ``traceback`` (see ``_entry.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._query import Queryable, QueryBuilder, quote_identifier, rows_as_dicts, short_repr

__all__ = ["ADDED", "REMOVED", "FluentDatabase", "IgnoreConfig", "SnapshotDiff"]

ADDED = "__added__"
"""The ``after`` of an ``expect_only`` change that allows a whole row to be added."""

REMOVED = "__removed__"
"""The ``after`` of an ``expect_only`` change that allows a whole row to be removed."""

_MAX_LISTED = 10  # violations spelled out in one AssertionError


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


def _tables(database: Queryable) -> list[str]:
    result = database.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name", []
    )
    return [str(row[0]) for row in result.rows]


def _primary_key(database: Queryable, table: str) -> list[str]:
    """The primary-key columns in key order; else ``id`` when the table has one; else ``rowid``."""
    info = rows_as_dicts(database.query(f"PRAGMA table_info({quote_identifier(table)})", []))
    keyed = sorted((row["pk"], row["name"]) for row in info if row.get("pk"))
    if keyed:
        return [str(name) for _, name in keyed]
    return ["id"] if any(row.get("name") == "id" for row in info) else ["rowid"]


def _keyed_rows(database: Queryable, table: str, key: list[str]) -> dict[Any, dict[str, Any]]:
    if key == ["rowid"]:
        rows = rows_as_dicts(
            database.query(f"SELECT rowid AS __fleet_rowid__, * FROM {quote_identifier(table)}", [])
        )
        return {row.pop("__fleet_rowid__"): row for row in rows}
    rows = rows_as_dicts(database.query(f"SELECT * FROM {quote_identifier(table)}", []))
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
                    return f"{where}: field {field!r} is not in the spec's fields (value {short_repr(value)})"
                continue
            check, expected = wanted[field]
            if check and not _values_equivalent(expected, value):
                return f"{where}: {field} is {short_repr(value)}, expected {short_repr(expected)}"
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
        return [f"{where}: no spec allows it (data {short_repr(row['data'], 200)})"]

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
                before, after = short_repr(change["before"]), short_repr(change["after"])
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
                problems.append(
                    f"{where}: {field} is {short_repr(change['after'])}, expected {short_repr(expected)}"
                )
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
        self, before: Queryable, after: Queryable, ignore_config: IgnoreConfig | None = None
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
                    table, row, "insert", f"row {short_repr(row['row_id'])} added to {table!r}"
                )
            for row in report["removed_rows"]:
                where = f"row {short_repr(row['row_id'])} removed from {table!r}"
                problems += matcher.whole_row(table, row, "delete", where)
            for row in report["modified_rows"]:
                problems += matcher.modified(table, row, f"row {short_repr(row['row_id'])} of {table!r}")
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
            f"expected {spec['type']} of row {short_repr(spec['pk'])} in {spec['table']!r} did not happen"
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
                            f"{table}.{field} changed (row {short_repr(row['row_id'])}) and is forbidden"
                        )
                    elif allowed and (table, field) not in allowed:
                        problems.append(
                            f"{table}.{field} changed (row {short_repr(row['row_id'])}) and is not allowed"
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

    def diff(self, other: Queryable, ignore_config: IgnoreConfig | None = None, **_: Any) -> SnapshotDiff:
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
