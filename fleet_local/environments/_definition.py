"""Typed building blocks of a bundled environment: tools, tasks and the environment itself.

Everything here is plain data plus functions over :mod:`sqlite3`, so the local server can mount an
environment without knowing anything about its domain:

* a :class:`ToolDefinition` is one MCP tool: a JSON Schema for its arguments and a handler that reads or
  changes an instance's ``current`` database;
* a :class:`TaskDefinition` is one task config exactly as docs/wire.md#episodes spells it (a JSON-ready dict);
* an :class:`EnvironmentDefinition` ties a seed database (built from SQL), its tools and its tasks together.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

__all__ = [
    "EnvironmentDefinition",
    "JSONSchema",
    "ReferenceStep",
    "TaskDefinition",
    "TaskMetadata",
    "ToolDefinition",
    "ToolError",
    "ToolHandler",
    "UnknownEnvironmentError",
]

JSONSchema = dict[str, Any]
"""A JSON Schema object, as a plain dict."""

ToolHandler = Callable[[sqlite3.Connection, dict[str, Any]], Any]
"""``handler(conn, arguments) -> JSON-serialisable value``; raises :class:`ToolError` for agent errors."""


class ToolError(Exception):
    """An error the agent caused and can fix ("order 999 not found").

    The server turns it into an MCP ``CallToolResult`` with ``isError: true`` and the message as its
    only text block. Any other exception from a handler is a bug in the environment.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnknownEnvironmentError(KeyError):
    """No bundled environment has this key (a permanent error: ``env_key not found``)."""

    def __init__(self, env_key: str, available: list[str]) -> None:
        self.env_key = env_key
        self.available = sorted(available)
        self.message = (
            f"env_key not found: {env_key!r}; bundled environments: {', '.join(self.available) or 'none'}"
        )
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return self.message


class ReferenceStep(TypedDict):
    """One action of a reference solution: an MCP tool call or ``submit_final_answer``."""

    tool: str
    params: dict[str, Any]


class TaskMetadata(TypedDict):
    """``metadata`` of a bundled task."""

    reference_solution: list[ReferenceStep]
    tags: list[str]


class TaskDefinition(TypedDict):
    """A task config as docs/wire.md#episodes names its keys; JSON-serialisable as it is."""

    task_key: str
    prompt: str
    env_key: str
    env_version: str
    data_key: str
    data_version: str
    env_variables: dict[str, str]
    verifier_code: str
    task_modality: Literal["tool_use", "browser_use"]
    metadata: TaskMetadata


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_name(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _matches_type(value, name):
            return name
    return type(value).__name__


def _matches_type(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(type_name, ()))


def _check_value(path: str, value: Any, schema: Mapping[str, Any]) -> None:
    """Check ``value`` against the subset of JSON Schema the bundled tools use.

    Raises :class:`ToolError` whose message names the argument (``path``), so the agent can retry.
    """
    declared = schema.get("type")
    if declared is not None:
        allowed = [declared] if isinstance(declared, str) else list(declared)
        if not any(_matches_type(value, t) for t in allowed):
            raise ToolError(
                f"Invalid argument '{path}': expected {' or '.join(allowed)}, got {_type_name(value)}"
            )
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(repr(v) for v in schema["enum"])
        raise ToolError(f"Invalid argument '{path}': {value!r} is not one of {options}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise ToolError(f"Invalid argument '{path}': must not be empty")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ToolError(f"Invalid argument '{path}': longer than {schema['maxLength']} characters")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"Invalid argument '{path}': must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolError(f"Invalid argument '{path}': must be <= {schema['maximum']}, got {value}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ToolError(f"Invalid argument '{path}': needs at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ToolError(f"Invalid argument '{path}': at most {schema['maxItems']} item(s) allowed")
        item_schema = schema.get("items")
        if isinstance(item_schema, Mapping):
            for index, item in enumerate(value):
                _check_value(f"{path}[{index}]", item, item_schema)
    elif isinstance(value, dict):
        _check_object(value, schema, prefix=f"{path}.")


def _check_object(value: Mapping[str, Any], schema: Mapping[str, Any], prefix: str = "") -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    # Unknown names first: "Unknown argument 'orderId' (allowed: order_id)" helps more than
    # "Missing required argument 'order_id'" when the agent misspelled it.
    if schema.get("additionalProperties") is False:
        for name in value:
            if name not in properties:
                allowed = ", ".join(sorted(properties)) or "none"
                raise ToolError(f"Unknown argument '{prefix}{name}' (allowed: {allowed})")
    for name in schema.get("required", []):
        if name not in value:
            raise ToolError(f"Missing required argument '{prefix}{name}'")
    for name, item in value.items():
        if name in properties:
            _check_value(f"{prefix}{name}", item, properties[name])


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """One MCP tool of a bundled environment.

    ``input_schema`` is a JSON Schema object (``type: object``, ``properties``, ``required``,
    ``additionalProperties: false``). ``handler(conn, arguments)`` gets a connection to the instance's
    ``current`` database and the (validated) arguments and returns JSON-serialisable data; it never
    commits: :meth:`call` owns the transaction. ``read_only`` tools never change the database
    (:meth:`call` enforces it with ``PRAGMA query_only``).
    """

    name: str
    description: str
    input_schema: JSONSchema
    handler: ToolHandler
    read_only: bool

    def __post_init__(self) -> None:
        schema = self.input_schema
        if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            raise ValueError(f"tool {self.name}: input_schema must be a closed object schema")
        properties = schema.get("properties")
        required = schema.get("required")
        if not isinstance(properties, dict) or not isinstance(required, list):
            raise ValueError(f"tool {self.name}: input_schema needs 'properties' and 'required'")
        missing = [name for name in required if name not in properties]
        if missing:
            raise ValueError(f"tool {self.name}: required names {missing} are not properties")

    def validate_arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return a copy of ``arguments`` after checking them against ``input_schema``.

        Raises :class:`ToolError` naming the first bad argument.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolError(f"Tool {self.name} takes an object of arguments, got {_type_name(arguments)}")
        _check_object(arguments, self.input_schema)
        return dict(arguments)

    def call(self, conn: sqlite3.Connection, arguments: Mapping[str, Any] | None = None) -> Any:
        """Validate ``arguments``, run the handler in its own savepoint and return its result.

        A write tool's changes are committed when the handler returns and rolled back when it raises
        (``ToolError`` or anything else), whatever the connection's ``isolation_level``. When the
        caller already holds an open transaction, committing it stays the caller's job.
        """
        args = self.validate_arguments(arguments)
        if self.read_only:
            was_query_only = bool(conn.execute("PRAGMA query_only").fetchone()[0])
            conn.execute("PRAGMA query_only = ON")
            try:
                return self.handler(conn, args)
            finally:
                if not was_query_only:
                    conn.execute("PRAGMA query_only = OFF")
        # Outside a transaction the call opens its own, IMMEDIATE: it takes the write lock (waiting
        # for it up to the connection's timeout) before the handler's first read. A deferred one,
        # which a bare SAVEPOINT starts, that read and then wrote while another connection was
        # writing the same database was refused at once ("database is locked"): SQLite cannot
        # wait there without risking a deadlock.
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN IMMEDIATE")
        conn.execute("SAVEPOINT fleet_tool_call")
        try:
            result = self.handler(conn, args)
        except BaseException:
            conn.execute("ROLLBACK TO SAVEPOINT fleet_tool_call")
            conn.execute("RELEASE SAVEPOINT fleet_tool_call")
            if own and conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("RELEASE SAVEPOINT fleet_tool_call")
        if own:
            conn.execute("COMMIT")
        return result

    def to_mcp(self) -> dict[str, Any]:
        """The tool as MCP ``tools/list`` shows it."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {"readOnlyHint": self.read_only, "destructiveHint": not self.read_only},
        }


@dataclass(frozen=True, eq=False)
class EnvironmentDefinition:
    """A bundled environment: seed data (SQL), MCP tools and tasks with verifiers."""

    env_key: str
    name: str
    description: str
    versions: list[str]
    default_version: str
    seed_sql: str
    tools: list[ToolDefinition]
    tasks: list[TaskDefinition]
    env_variables: dict[str, str] = field(default_factory=dict)
    """Defaults for an instance's ``env_variables`` (e.g. ``CURRENT_DATE``, ``LOGGED_IN_USER``)."""

    def __post_init__(self) -> None:
        if self.default_version not in self.versions:
            raise ValueError(f"{self.env_key}: default_version {self.default_version!r} not in versions")
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.env_key}: duplicate tool names")
        keys = [task["task_key"] for task in self.tasks]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.env_key}: duplicate task keys")

    def build_seed(self, path: str | os.PathLike[str]) -> Path:
        """Create the seed SQLite database at ``path`` from :attr:`seed_sql` and return the path.

        Deterministic: the same SQL gives the same database content (``.dump``) every time. An
        existing file at ``path`` is replaced atomically.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            tmp.unlink()
            conn = sqlite3.connect(tmp)
            try:
                conn.executescript(self.seed_sql)
                conn.commit()
            finally:
                conn.close()
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target

    def tool(self, name: str) -> ToolDefinition:
        """The tool called ``name``; ``KeyError`` naming the tools there are otherwise."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(f"{self.env_key} has no tool {name!r}; tools: {', '.join(self.tool_names())}")

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def task(self, task_key: str) -> TaskDefinition:
        """The task with this key; ``KeyError`` otherwise."""
        for task in self.tasks:
            if task["task_key"] == task_key:
                return task
        raise KeyError(f"{self.env_key} has no task {task_key!r}")

    def summary(self) -> dict[str, Any]:
        """The environment as ``GET /v1/env/`` lists it."""
        return {
            "env_key": self.env_key,
            "name": self.name,
            "description": self.description,
            "default_version": self.default_version,
            "versions": list(self.versions),
        }
