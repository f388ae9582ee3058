"""Small helpers shared by the bundled environments: schema builders, row fetching, SQL rendering."""

from __future__ import annotations

import datetime as _dt
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from ._definition import JSONSchema, ToolError

# -- JSON Schema builders ---------------------------------------------------------------------------


def obj_schema(properties: dict[str, JSONSchema], required: Sequence[str] = ()) -> JSONSchema:
    """A closed object schema, the shape every tool's ``input_schema`` has."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def int_prop(description: str, *, minimum: int | None = 1, maximum: int | None = None) -> JSONSchema:
    schema: JSONSchema = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def str_prop(description: str, *, enum: Sequence[str] | None = None, max_length: int = 500) -> JSONSchema:
    schema: JSONSchema = {"type": "string", "description": description}
    if enum is not None:
        schema["enum"] = list(enum)
    else:
        schema["minLength"] = 1
        schema["maxLength"] = max_length
    return schema


def bool_prop(description: str) -> JSONSchema:
    return {"type": "boolean", "description": description}


def limit_prop(default: int = 25) -> JSONSchema:
    return int_prop(f"Maximum number of results (default {default}).", minimum=1, maximum=100)


# -- database access --------------------------------------------------------------------------------


def fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows as dicts, whatever ``conn.row_factory`` the caller set."""
    cursor = conn.cursor()
    cursor.row_factory = None
    cursor.execute(sql, tuple(params))
    columns = [d[0] for d in cursor.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def fetch_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
    rows = fetch_all(conn, sql, params)
    return rows[0] if rows else None


def scalar(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    cursor = conn.cursor()
    cursor.row_factory = None
    row = cursor.execute(sql, tuple(params)).fetchone()
    return None if row is None else row[0]


def execute(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one write statement; return ``lastrowid`` (0 when none)."""
    cursor = conn.execute(sql, tuple(params))
    return int(cursor.lastrowid or 0)


def setting(conn: sqlite3.Connection, key: str) -> str:
    """A value of the ``app_settings`` table (``current_date``, ``logged_in_user``)."""
    value = scalar(conn, "SELECT value FROM app_settings WHERE key = ?", (key,))
    if value is None:
        raise RuntimeError(f"app_settings has no {key!r}")
    return str(value)


def like_pattern(text: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``text`` anywhere, case-insensitively."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# -- argument parsing -------------------------------------------------------------------------------

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2})(?::00)?$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def parse_date(name: str, value: str) -> str:
    """Validate a ``YYYY-MM-DD`` argument and return it."""
    if not _DATE_RE.match(value):
        raise ToolError(f"Invalid argument '{name}': expected a date as YYYY-MM-DD, got {value!r}")
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"Invalid argument '{name}': {value!r} is not a real date") from None
    return value


def parse_datetime(name: str, value: str) -> str:
    """Validate a ``YYYY-MM-DD HH:MM`` argument (``T`` and ``:00`` seconds accepted); return it normalised."""
    match = _DATETIME_RE.match(value.strip())
    if not match:
        raise ToolError(
            f"Invalid argument '{name}': expected a date and time as 'YYYY-MM-DD HH:MM', got {value!r}"
        )
    normalised = f"{match.group(1)} {match.group(2)}"
    try:
        _dt.datetime.strptime(normalised, "%Y-%m-%d %H:%M")
    except ValueError:
        raise ToolError(f"Invalid argument '{name}': {value!r} is not a real date and time") from None
    return normalised


def parse_email(name: str, value: str) -> str:
    email = value.strip().lower()
    if not _EMAIL_RE.match(email):
        raise ToolError(f"Invalid argument '{name}': {value!r} is not an email address")
    return email


def add_days(date: str, days: int) -> str:
    return (_dt.date.fromisoformat(date) + _dt.timedelta(days=days)).isoformat()


# -- SQL rendering ----------------------------------------------------------------------------------


def sql_literal(value: Any) -> str:
    """Render a Python value as an SQLite literal (for building deterministic seed scripts)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"cannot render {type(value).__name__} as SQL")


def insert_sql(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """One ``INSERT`` statement per row, columns named, values rendered by :func:`sql_literal`."""
    column_list = ", ".join(columns)
    lines = []
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{table}: row {row!r} does not match columns {columns!r}")
        values = ", ".join(sql_literal(v) for v in row)
        lines.append(f"INSERT INTO {table} ({column_list}) VALUES ({values});")
    return "\n".join(lines)
