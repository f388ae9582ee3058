"""The per-instance manager API (tag ``instance-manager`` of ``schemas/env-instance.yaml``).

Mounted under ``/instances/{instance_id}/api/v1/env``, the instance's
``urls.manager.api``. No API key (the schema says so). Each instance has two
SQLite resources: ``seed`` (read-only, the data it started from) and
``current`` (read-write, the live data).

SQLite routes are plain ``def`` (FastAPI runs them in its thread pool). Read-only
queries run on a ``mode=ro`` connection with ``PRAGMA query_only``, so "read-only"
is enforced by SQLite itself, not by guessing from the SQL text.
"""

from __future__ import annotations

import base64
import contextlib
import html
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse
from starlette.background import BackgroundTask

from fleet_sdk.types import env_instance as models

from . import _action_log, _instance_browser, _instances, _verifier_exec
from ._action_log import ACTION_LOG
from ._auth import auth_refusal
from ._errors import LocalAPIError
from ._sql_work import run_sql, timed_out
from ._state import LocalState, iso
from .sandbox import harden_connection

__all__ = ["MANAGER_PREFIX", "describe", "diff", "query", "router"]

MANAGER_PREFIX = "/instances/{instance_id}/api/v1/env"

# SQLite's primary result code for "attempt to write a readonly database" (SQLITE_READONLY).
_SQLITE_READONLY = 8
_INT64 = (-(2**63), 2**63 - 1)


def _check_args(args: tuple[Any, ...]) -> None:
    """Refuse, naming the argument, values SQLite cannot bind (422, not a 500)."""
    for index, value in enumerate(args):
        problem = None
        if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            problem = ("Input should be a 64-bit integer", "int_too_large")
        elif isinstance(value, str) and not _encodable(value):
            problem = ("Input should be valid Unicode (no lone surrogates)", "string_unicode")
        if problem is not None:
            issue = {"loc": ("body", "args", index), "msg": problem[0], "type": problem[1]}
            raise RequestValidationError([issue])


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---------------------------------------------------------------- SQLite helpers


def _jsonable(value: Any) -> Any:
    """A SQLite value as JSON can carry it (BLOBs become base64 text)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _user_tables(conn: sqlite3.Connection) -> list[tuple[str, str | None]]:
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [(str(name), sql) for name, sql in rows]


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, table: str) -> list[models.ColumnSchema]:
    return [
        models.ColumnSchema(name=name, type=ctype or "", notnull=bool(notnull), primary_key=bool(pk))
        for _, name, ctype, notnull, _, pk in conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    ]


def _primary_key(conn: sqlite3.Connection, table: str) -> list[str]:
    info = conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    keyed = sorted((pk, name) for _, name, _, _, _, pk in info if pk)
    return [name for _, name in keyed]


def describe(conn: sqlite3.Connection, name: str) -> models.DescribeResponse:
    """Tables, ``CREATE`` statements and columns of a database."""
    tables = [
        models.TableSchema(name=table, sql=sql or "", columns=_columns(conn, table))
        for table, sql in _user_tables(conn)
    ]
    return models.DescribeResponse(
        success=True, resource_name=name, tables=tables, message=f"{len(tables)} table(s)"
    )


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) == _SQLITE_READONLY


def query(
    conn: sqlite3.Connection, request: models.QueryRequest, *, read_only: bool, name: str
) -> models.QueryResponse:
    """Run one statement; SQL errors come back as ``success: false`` (the schema's choice).

    ``ATTACH``, ``DETACH`` and ``VACUUM INTO`` are refused (they would reach other files), as
    is ``fts3_tokenizer()`` (it returns native pointers); see ``harden_connection``.

    Raises:
        LocalAPIError: 403 ``read_only`` when the statement tried to write on a read-only connection.
        RequestValidationError: An argument SQLite cannot bind (a huge integer, a lone surrogate).
    """
    args = tuple(request.args or ())
    _check_args(args)
    if not _encodable(request.query):
        msg = "Input should be valid Unicode (no lone surrogates)"
        raise RequestValidationError([{"loc": ("body", "query"), "msg": msg, "type": "string_unicode"}])
    harden_connection(conn)
    try:
        cursor = conn.execute(request.query, args)
        columns = [d[0] for d in cursor.description] if cursor.description else None
        rows = [[_jsonable(v) for v in row] for row in cursor.fetchall()] if columns is not None else None
        rows_affected = cursor.rowcount if cursor.rowcount >= 0 else None
        last_insert_id = cursor.lastrowid or None
        cursor.close()
    except sqlite3.Error as exc:
        if timed_out(exc):
            raise  # run_sql answers it
        if read_only and _is_read_only_error(exc):
            why = "the seed database is read-only" if name == "seed" else "the query ran with read_only=true"
            raise LocalAPIError(
                403,
                f"write refused: {why} ({exc}); send read_only=false to write to 'current'",
                code="read_only",
                retryable=False,
            ) from None
        return models.QueryResponse(success=False, error=str(exc), message=f"SQL error: {exc}")
    message = f"{len(rows)} row(s)" if rows is not None else f"{rows_affected or 0} row(s) affected"
    return models.QueryResponse(
        success=True,
        columns=columns,
        rows=rows,
        rows_affected=rows_affected,
        last_insert_id=last_insert_id,
        message=message,
    )


def _rows_by_key(
    conn: sqlite3.Connection, table: str, key: list[str]
) -> tuple[list[str], dict[tuple[Any, ...], dict[str, Any]]]:
    select = ", ".join(_quote(c) for c in key) if key else "rowid"
    cursor = conn.execute(f"SELECT {select}, * FROM {_quote(table)}")
    width = len(key) if key else 1
    columns = [d[0] for d in cursor.description][width:]
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in cursor.fetchall():
        rows[tuple(row[:width])] = {c: _jsonable(v) for c, v in zip(columns, row[width:], strict=True)}
    return columns, rows


def _diff_key(conn: sqlite3.Connection, table: str) -> list[str]:
    """The columns rows are matched by, as the platform's differ picks them: the primary key,
    else an ``id`` column, else ``rowid``."""
    key = _primary_key(conn, table)
    if key:
        return key
    columns = [name for _, name, *_ in conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()]
    return ["id"] if "id" in columns else []


def diff(
    seed: sqlite3.Connection, current: sqlite3.Connection, ignore: models.DiffIgnoreConfig | None
) -> models.DiffResponse:
    """Compare ``current`` with ``seed`` table by table, matching rows by primary key (else an
    ``id`` column, else rowid), in the platform's shape: rows as ``{"row_id", "data"}`` (modified
    ones with ``changes`` too, and ``data`` their values in ``current``), ``primary_key`` a list."""
    ignore = ignore or models.DiffIgnoreConfig()
    skipped_tables = set(ignore.tables)
    seed_tables = {name for name, _ in _user_tables(seed)}
    current_tables = {name for name, _ in _user_tables(current)}
    result: dict[str, models.TableDiff] = {}
    for table in sorted((seed_tables | current_tables) - skipped_tables):
        ignored = set(ignore.fields) | set(ignore.table_fields.get(table, []))
        key = _diff_key(current if table in current_tables else seed, table)
        before: dict[tuple[Any, ...], dict[str, Any]] = {}
        after: dict[tuple[Any, ...], dict[str, Any]] = {}
        if table in seed_tables:
            _, before = _rows_by_key(seed, table, key)
        if table in current_tables:
            _, after = _rows_by_key(current, table, key)

        def visible(row: dict[str, Any], ignored: set[str] = ignored) -> dict[str, Any]:
            return {c: v for c, v in row.items() if c not in ignored}

        def row_id(k: tuple[Any, ...]) -> Any:
            return k[0] if len(k) == 1 else list(k)

        added = [
            models.DiffRow(row_id=row_id(k), data=visible(row)) for k, row in after.items() if k not in before
        ]
        removed = [
            models.DiffRow(row_id=row_id(k), data=visible(row)) for k, row in before.items() if k not in after
        ]
        modified: list[models.ModifiedRow] = []
        unchanged = 0
        for k in before.keys() & after.keys():
            old, new = visible(before[k]), visible(after[k])
            changes = {
                column: models.ColumnChange(before=old.get(column), after=new.get(column))
                for column in dict.fromkeys([*old, *new])
                if old.get(column) != new.get(column)
            }
            if changes:
                modified.append(models.ModifiedRow(row_id=row_id(k), changes=changes, data=new))
            else:
                unchanged += 1
        modified.sort(key=lambda m: str(m.row_id))
        result[table] = models.TableDiff(
            table_name=table,
            primary_key=key or ["rowid"],
            added_rows=added,
            removed_rows=removed,
            modified_rows=modified,
            unchanged_count=unchanged,
            total_changes=len(added) + len(removed) + len(modified),
        )
    return models.DiffResponse(success=True, diff=result, message="Structured diff generated successfully")


_DOCS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Manager API of {id}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:50rem}}
code{{background:#8882;padding:0 .2em}}</style>
</head><body><h1>Manager API of <code>{id}</code></h1>
<p>Base URL: <code>{base}</code>. No API key. The contract is
<code>schemas/env-instance.yaml</code> (tag <code>instance-manager</code>).</p>
<ul>
<li><code>GET /health</code></li>
<li><code>POST /reset</code> <code>{{timestamp?, seed?}}</code></li>
<li><code>GET /resources</code></li>
<li><code>GET /resources/sqlite/{{seed|current}}/describe</code></li>
<li><code>POST /resources/sqlite/{{seed|current}}/query</code> <code>{{query, args, read_only}}</code></li>
<li><code>POST /diff/structured</code> <code>{{ignore_config}}</code></li>
<li><code>POST /execute_verifier_function</code></li>
<li><code>GET /snapshot</code> (the <code>current</code> database file)</li>
</ul></body></html>
"""


# ---------------------------------------------------------------- router


def router(state: LocalState) -> APIRouter:
    """Routes of the instance manager API."""
    api = APIRouter(prefix=MANAGER_PREFIX, tags=["instance-manager"])

    def _bears_key(request: Request) -> bool:
        """Whether a request to these keyless routes bore the server's key anyway (a key holder
        using the public SDK's manager URL): it may run what only key holders may."""
        authorization = request.headers.get("authorization", "")
        return auth_refusal(authorization, state.settings.api_key) is None

    @api.get("/health", response_model=models.HealthResponse)
    def manager_health(instance_id: str) -> models.HealthResponse:
        """200 while the instance is live (404 ``instance_not_found`` otherwise)."""
        record = _instances.require_live(state, instance_id)
        return models.HealthResponse(
            status="ok",
            timestamp=iso(),
            service="fleet-sdk local instance manager",
            instance_id=instance_id,
            env_key=record.instance.env_key,
        )

    @api.post("/reset", response_model=models.ResetResponse)
    def reset_instance(instance_id: str, body: models.ResetRequest) -> models.ResetResponse:
        """Restore ``current`` from ``seed``."""
        reset = _instances.reset_instance(state, instance_id, seed=body.seed)
        _action_log.record(state, instance_id, "reset", path="/reset", raw_payload={"seed": body.seed})
        return reset

    @api.get("/resources", response_model=list[models.Resource])
    def list_resources(instance_id: str) -> list[models.Resource]:
        """The SQLite resources, and the browser when the server can run one."""
        _instances.require_live(state, instance_id)
        resources = [
            models.Resource(name="seed", type="sqlite", mode="ro", label="Seed data (read-only)"),
            models.Resource(name="current", type="sqlite", mode="rw", label="Current data"),
            models.Resource(
                name=ACTION_LOG, type="sqlite", mode="ro", label="Actions taken on the instance (read-only)"
            ),
        ]
        if _instance_browser.offered():
            label = "Headless Chromium on the instance's web UI (starts on first use)"
            resources.append(models.Resource(name="cdp", type="cdp", mode="rw", label=label))
        return resources

    # SQL runs through run_sql: off the loop, bounded in number and time (see _sql_work).
    @api.get("/resources/sqlite/{name}/describe", response_model=models.DescribeResponse)
    async def describe_database(instance_id: str, name: str) -> models.DescribeResponse:
        """Tables and columns of ``seed`` or ``current``."""

        def work(arm: Any) -> models.DescribeResponse:
            conn = _instances.open_db(state, instance_id, name, read_only=True)
            arm(conn)
            try:
                return describe(conn, name)
            except sqlite3.Error as exc:
                if timed_out(exc):
                    raise
                return models.DescribeResponse(
                    success=False, resource_name=name, error=str(exc), message=str(exc)
                )
            finally:
                conn.close()

        return await run_sql(state, work)

    @api.post("/resources/sqlite/{name}/query", response_model=models.QueryResponse)
    async def query_database(instance_id: str, name: str, body: models.QueryRequest) -> models.QueryResponse:
        """Run one statement; writes need ``read_only: false`` and the ``current`` resource."""

        def work(arm: Any) -> models.QueryResponse:
            if name != "current" and not body.read_only:
                _instances.database_path(state, instance_id, name)  # 404 first for a dead instance or name
                raise LocalAPIError(
                    403, f"write refused: the {name} database is read-only", code="read_only", retryable=False
                )
            conn = _instances.open_db(state, instance_id, name, read_only=body.read_only)
            arm(conn)
            try:
                answer = query(conn, body, read_only=body.read_only, name=name)
            finally:
                conn.close()
            if not body.read_only:
                path = f"/resources/sqlite/{name}/query"
                outcome = {"ok": True} if answer.success else {"error": answer.error}
                _action_log.record(
                    state, instance_id, "sql", sql=body.query, args=body.args, path=path, raw_payload=outcome
                )
            return answer

        return await run_sql(state, work)

    @api.post("/diff/structured", response_model=models.DiffResponse)
    async def structured_diff(instance_id: str, body: models.DiffRequest) -> models.DiffResponse:
        """Rows added, removed and modified in ``current`` relative to ``seed``."""

        def work(arm: Any) -> models.DiffResponse:
            seed = _instances.open_db(state, instance_id, "seed", read_only=True)
            try:
                arm(seed)
                current = _instances.open_db(state, instance_id, "current", read_only=True)
                try:
                    arm(current)
                    return diff(seed, current, body.ignore_config)
                finally:
                    current.close()
            finally:
                seed.close()

        return await run_sql(state, work)

    @api.get("/resources/cdp/describe", response_model=models.CDPDescribeResponse)
    def describe_browser(instance_id: str) -> models.CDPDescribeResponse:
        """The DevTools URLs of the instance's browser (``_instance_browser``)."""
        return _instance_browser.describe(state, instance_id)

    @api.post("/resources/cdp/start", response_model=models.ChromeStartResponse)
    async def start_browser(instance_id: str, body: models.ChromeStartRequest) -> models.ChromeStartResponse:
        """Start the instance's browser now, on its web UI, at ``resolution``."""
        return await _instance_browser.start(state, instance_id, body)

    @api.post(
        "/execute_verifier_function",
        response_model=models.VerifiersExecuteResponse | models.ExecuteFunctionResponse,
    )
    async def execute_verifier_function(
        instance_id: str,
        body: models.VerifiersExecuteRequest | models.ExecuteFunctionRequest,
        request: Request,
    ) -> models.VerifiersExecuteResponse | models.ExecuteFunctionResponse:
        """Run a verifier against this instance, answering in the shape of the request: a bundle
        as ``/v1/verifiers/execute`` does, or the public SDK's function source."""
        keyed = _bears_key(request)
        if isinstance(body, models.ExecuteFunctionRequest):
            return await _verifier_exec.execute_function(state, body, instance_id, keyed=keyed)
        return await _verifier_exec.execute_verifier(state, body, instance_id, keyed=keyed)

    # ``urls.manager.execute_verifier_function_with_upload`` points here: the bundle travels in the body.
    @api.post("/execute_verifier_function_with_upload", response_model=models.VerifiersExecuteResponse)
    async def execute_verifier_function_with_upload(
        instance_id: str, body: models.VerifiersExecuteRequest, request: Request
    ) -> models.VerifiersExecuteResponse:
        """Run a verifier bundle against this instance (same contract as ``/v1/verifiers/execute``)."""
        return await _verifier_exec.execute_verifier(state, body, instance_id, keyed=_bears_key(request))

    @api.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def manager_docs(instance_id: str) -> HTMLResponse:
        """A short HTML page listing the manager endpoints."""
        _instances.require_live(state, instance_id)
        base = state.instance_root(instance_id) + "api/v1/env"
        return HTMLResponse(_DOCS.format(id=html.escape(instance_id), base=html.escape(base)))

    @api.get("/snapshot", include_in_schema=False)
    def snapshot(instance_id: str) -> FileResponse:
        """A consistent copy of the ``current`` database file."""
        # Open the instance first: an unknown instance must not leave a temporary file behind.
        with contextlib.closing(_instances.open_db(state, instance_id, "current", read_only=True)) as source:
            handle = tempfile.NamedTemporaryFile(prefix="snapshot-", suffix=".db", delete=False)  # noqa: SIM115
            handle.close()
            path = Path(handle.name)
            with contextlib.closing(sqlite3.connect(path)) as target:
                source.backup(target)
        return FileResponse(
            path,
            media_type="application/vnd.sqlite3",
            filename=f"{instance_id}-current.db",
            background=BackgroundTask(path.unlink, missing_ok=True),
        )

    return api
