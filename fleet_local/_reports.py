"""The report service (``schemas/evaluation-reports.yaml``): import, export and render evaluation reports.

Reports live in their own SQLite file, ``<data dir>/evaluation_reports.sqlite3``, whose
``user_version`` names its layout: a file with another layout is not migrated and every call
answers 501. A report's ``id`` is its row id; its ``evaluation_id`` is the row of its suite name
under the key in the ``evaluations`` table, which a store of this layout gains when first opened.
An import takes the file's write lock (``BEGIN IMMEDIATE``) and waits for it at
most ``FLEET_LOCAL_REPORT_LOCK_SECONDS`` (default 5); past that it answers 503 with
``Retry-After``. Reports are scoped to the hash of the bearer key that imported them.

The checks run in the order a client can act on: 401 and 413 (the request gate: the key, then
the size, before the body is read), 415 (content type), 422 (the envelope against the schema,
naming the field; then its summaries against its own results, ``fleet_sdk.reports.inconsistency``,
so a report cannot say what its results do not), then 409/200/201 by digest, with 429 (30 new
reports per key per rolling minute) only for a report that would be new.

The work proportional to a report runs in worker threads, never on the event loop: checking an
import, and rendering an export. Renderings are kept by digest, format, theme and Markdown part
(the ``_Renderings`` cache), so a large report is rendered once however often it is fetched.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from fleet_sdk.reports import (
    MARKDOWN_PARTS,
    THEMES,
    Outcome,
    ReportEnvelope,
    TaskSummary,
    Theme,
    digest,
    filename,
    inconsistency,
    render,
    to_markdown,
)

from ._episodes import session_records
from ._errors import LocalAPIError
from ._state import LocalState
from ._validation import checked_body, model_refusal

__all__ = [
    "BODY_LIMITS",
    "DB_FILE",
    "LAYOUT_VERSION",
    "MAX_BODY_BYTES",
    "RATE_LIMIT",
    "WINDOW_LIMIT",
    "WINDOW_MINUTES",
    "router",
]

DB_FILE = "evaluation_reports.sqlite3"
LAYOUT_VERSION = 1
MAX_BODY_BYTES = 5 * 1024 * 1024
BODY_LIMITS = ((re.compile(r"^/v1/evaluation_reports$"), MAX_BODY_BYTES),)
"""The request gate's limit for an import (``path_limits`` of ``_request_gate.RequestGate``)."""
RENDER_CACHE_BYTES = 64 * 1024 * 1024
"""Renderings kept (``_Renderings``), in characters: a 1000-task, 5-model page is about 3 MB."""

RATE_LIMIT = 30
RATE_WINDOW = 60.0
WINDOW_LIMIT = (1, 1000)
"""The trace window's ``limit`` is clamped into this range (``x-clamp`` in the schema)."""
WINDOW_MINUTES = (1, 60 * 24 * 90)
"""The trace window's ``minutes`` is clamped into this range: a minute to 90 days."""
LOCK_SECONDS_ENV = "FLEET_LOCAL_REPORT_LOCK_SECONDS"
_MAX_BUCKETS = 10_000
_MEDIA = {
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
}


# Spellings of a boolean query parameter, as FastAPI parses a ``bool`` one.
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def _query_flag(request: Request, name: str) -> bool:
    """A boolean query parameter (the schema's ``type: boolean``); anything else is a 422."""
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise RequestValidationError(
        [{"loc": ("query", name), "msg": f"{name} is a boolean (true or false)", "type": "bool_parsing"}]
    )


def _key_hash(request: Request) -> str:
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    return hashlib.sha256(token.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class _Stored:
    """Where an import put a report: its row, its evaluation's row, its digest, whether it was there."""

    report_id: int
    evaluation_id: int
    digest: str
    duplicate: bool


class _ReportStore:
    """The report file; one short-lived connection per call, so a held lock is a real lock."""

    def __init__(self, state: LocalState) -> None:
        self.path = state.data_dir / DB_FILE
        self.lock_seconds = float(os.environ.get(LOCK_SECONDS_ENV) or 5.0)
        self.recent: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)

    def busy(self) -> LocalAPIError:
        return LocalAPIError(
            503,
            f"another import held the report store's lock for over {self.lock_seconds:g}s",
            code="busy",
            retryable=True,
            headers={"Retry-After": "1"},
        )

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=self.lock_seconds, isolation_level=None)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and not tables:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS reports (key_hash TEXT NOT NULL, run_id TEXT NOT NULL, "
                    "digest TEXT NOT NULL, envelope TEXT NOT NULL, created REAL NOT NULL, "
                    "PRIMARY KEY (key_hash, run_id))"
                )
                db.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
                tables.add("reports")
            elif version != LAYOUT_VERSION or "reports" not in tables:
                raise LocalAPIError(
                    501,
                    f"the report store {DB_FILE} has layout {version}, this server knows {LAYOUT_VERSION}: "
                    "it is not migrated",
                    code="not_implemented",
                    retryable=False,
                )
            if "evaluations" not in tables:  # added to layout 1 in place: nothing else changes
                db.execute(
                    "CREATE TABLE IF NOT EXISTS evaluations (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                    "key_hash TEXT NOT NULL, name TEXT NOT NULL, UNIQUE (key_hash, name))"
                )
            yield db
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise self.busy() from exc
            raise
        finally:
            db.close()

    def find(self, key_hash: str, run_id: str) -> tuple[str, str] | None:
        with self.connect() as db:
            row = db.execute(
                "SELECT digest, envelope FROM reports WHERE key_hash = ? AND run_id = ?", (key_hash, run_id)
            ).fetchone()
        return (str(row[0]), str(row[1])) if row else None

    def _rate_check(self, key_hash: str) -> None:
        now = time.monotonic()
        window = self.recent[key_hash]
        while window and now - window[0] >= RATE_WINDOW:
            window.popleft()
        if len(window) >= RATE_LIMIT:
            wait = max(1, math.ceil(RATE_WINDOW - (now - window[0])))
            raise LocalAPIError(
                429,
                f"more than {RATE_LIMIT} new reports in a minute for this key",
                code="rate_limited",
                retryable=True,
                headers={"Retry-After": str(wait)},
            )

    def put(self, key_hash: str, envelope: ReportEnvelope) -> _Stored:
        """Store the envelope (a duplicate is found, not stored again). Blocking: run in a worker thread."""
        text = json.dumps(envelope.to_dict(), sort_keys=True)
        value = digest(envelope)
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")  # waits lock_seconds for the write lock, then 503
            try:
                row = db.execute(
                    "SELECT digest, rowid FROM reports WHERE key_hash = ? AND run_id = ?",
                    (key_hash, envelope.run_id),
                ).fetchone()
                duplicate = row is not None
                if row is not None:
                    if row[0] != value:
                        raise LocalAPIError(
                            409,
                            f"run_id {envelope.run_id!r} is stored with another digest ({row[0]})",
                            code="conflict",
                            retryable=False,
                        )
                    report_id = int(row[1])
                else:
                    self._rate_check(key_hash)
                    report_id = int(
                        db.execute(
                            "INSERT INTO reports (key_hash, run_id, digest, envelope, created) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (key_hash, envelope.run_id, value, text, time.time()),
                        ).lastrowid
                        or 0
                    )
                    self.recent[key_hash].append(time.monotonic())
                db.execute(
                    "INSERT OR IGNORE INTO evaluations (key_hash, name) VALUES (?, ?)",
                    (key_hash, envelope.suite.name),
                )
                (evaluation_id,) = db.execute(
                    "SELECT id FROM evaluations WHERE key_hash = ? AND name = ?",
                    (key_hash, envelope.suite.name),
                ).fetchone()
            finally:
                db.execute("COMMIT")
        return _Stored(report_id, int(evaluation_id), value, duplicate)


def _checked_envelope(data: Any) -> ReportEnvelope:
    """The envelope of an import body the schema accepted, whose summaries agree with its results
    (blocking: run it in a worker thread).

    The long lists are parsed an item at a time (one pydantic call for a whole report would hold
    the interpreter's lock, and so the event loop, for as long as it takes).

    Raises:
        RequestValidationError: The model refuses it, or a summary disagrees with the results
            (naming the field).
    """
    report = dict(data["report"])
    for name, model in (("results", Outcome), ("tasks", TaskSummary)):
        items = []
        for index, item in enumerate(report[name]):
            try:
                items.append(model.model_validate(item))
            except ValidationError as exc:
                raise model_refusal(exc, "report", name, index) from None
        report[name] = items
    try:
        envelope = ReportEnvelope.model_validate({**data, "report": report})
    except ValidationError as exc:
        raise model_refusal(exc) from None
    found = inconsistency(envelope)
    if found is not None:
        msg = f"the report's results give {_shown(found.expected)}, not {_shown(found.found)}"
        raise RequestValidationError([{"loc": ("body", *found.path), "msg": msg, "type": "inconsistent"}])
    return envelope


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 200 else text[:197] + "..."


class _Renderings:
    """Rendered reports by (digest, format, theme); the least recently used go past ``limit``
    characters. Used on the event loop only, so it needs no lock."""

    def __init__(self, limit: int = RENDER_CACHE_BYTES) -> None:
        self.limit = limit
        self._texts: collections.OrderedDict[tuple[str | None, ...], str] = collections.OrderedDict()
        self._size = 0

    def get(self, key: tuple[str | None, ...]) -> str | None:
        text = self._texts.get(key)
        if text is not None:
            self._texts.move_to_end(key)
        return text

    def put(self, key: tuple[str | None, ...], text: str) -> None:
        if len(text) > self.limit or key in self._texts:
            return
        self._texts[key] = text
        self._size += len(text)
        while self._size > self.limit:
            _, dropped = self._texts.popitem(last=False)
            self._size -= len(dropped)


@dataclasses.dataclass(frozen=True)
class _Part:
    """A Markdown part of a report (``part``, narrowed by ``model`` or named by ``scenario``)."""

    part: str | None = None
    model: str | None = None
    scenario: str | None = None


def _part_of(request: Request, fmt: str) -> _Part:
    """The part the query asks for; 422 for an unknown one, or one a format or part cannot take."""
    query = request.query_params
    # Only an absent value means "none": ``?part=`` is a 422 like ``?part=bogus``.
    part, model, scenario = query.get("part"), query.get("model"), query.get("scenario")

    def refuse(name: str, message: str) -> RequestValidationError:
        return RequestValidationError([{"loc": ("query", name), "msg": message, "type": "value_error"}])

    if part is not None and part not in MARKDOWN_PARTS:
        raise refuse("part", f"part is one of {', '.join(MARKDOWN_PARTS)}, got {part!r}")
    if part is not None and fmt != "md":
        raise refuse("part", f"part applies to format=md, not format={fmt}")
    if part == "scenario" and scenario is None:
        raise refuse("scenario", "part=scenario needs scenario=<task key>")
    if scenario is not None and part != "scenario":
        raise refuse("scenario", "scenario applies to part=scenario")
    if model is not None and part != "fix_items":
        raise refuse("model", "model applies to part=fix_items")
    return _Part(part, model, scenario)


def _rendered(stored: str, fmt: str, theme: Theme, part: _Part) -> str | None:
    """A stored envelope rendered, or None when it is not complete (blocking: a worker's job).

    Raises:
        LocalAPIError: 404 for a scenario the run did not replay or a model it did not run.
    """
    envelope = ReportEnvelope.model_validate_json(stored)
    if not envelope.report.complete:
        return None
    if part.part is None:
        return render(envelope, fmt, theme=theme)
    if part.scenario is not None and part.scenario not in envelope.suite.task_keys:
        raise LocalAPIError(404, f"the run did not replay scenario {part.scenario!r}", code="not_found")
    if part.model is not None and part.model not in envelope.suite.models:
        raise LocalAPIError(404, f"the run did not evaluate model {part.model!r}", code="not_found")
    return to_markdown(envelope, part=part.part, model=part.model, scenario=part.scenario)


_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)


def _parse_time(name: str, value: str | None) -> dt.datetime:
    """A date-time query parameter, in UTC (without a zone it is UTC, schemas/README.md, never the
    server's local time); one whose UTC time falls outside the years 1-9999 is a 422."""
    try:
        moment = dt.datetime.fromisoformat(str(value))
        return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)
    except ValueError:
        message = "must be an RFC 3339 date-time"
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is in the year 0 in UTC
        message = "must be an RFC 3339 date-time whose UTC time is in the years 1 to 9999"
    raise RequestValidationError([{"loc": ("query", name), "msg": message, "type": "value_error"}])


def _query_int(request: Request, name: str, default: int, low: int, high: int, *, clamp: bool = False) -> int:
    """An integer query parameter in ``low..high``: out of range is a 422, or with ``clamp`` the
    nearest bound (the schema's ``x-clamp``); text that is not an integer is a 422 either way."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is not None and clamp:
        return min(max(value, low), high)
    if value is None or not low <= value <= high:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"must be an integer from {low} to {high}",
                    "type": "value_error",
                }
            ]
        )
    return value


def trace_window(state: LocalState, request: Request) -> dict[str, Any]:
    """The trace window report of ``GET /v1/evaluation_trace_window`` (blocking)."""
    raw_end = request.query_params.get("end")
    end = dt.datetime.now(dt.UTC) if raw_end is None else _parse_time("end", raw_end)
    raw_start = request.query_params.get("start")
    minutes = _query_int(request, "minutes", 60, *WINDOW_MINUTES, clamp=True)
    if raw_start is not None:
        start = _parse_time("start", raw_start)
    elif end - _EARLIEST < dt.timedelta(minutes=minutes):  # it would begin before the year 1
        start = _EARLIEST
    else:
        start = end - dt.timedelta(minutes=minutes)
    bucket = _query_int(request, "bucket_seconds", 60, 1, 86400)
    limit = _query_int(request, "limit", 100, *WINDOW_LIMIT, clamp=True)
    # An empty or reversed window has no buckets; a window too long for its buckets gets wider
    # ones (the answer's bucket_seconds says which), so any valid request is answered.
    span = max(0.0, (end - start).total_seconds())
    bucket = max(bucket, math.ceil(span / _MAX_BUCKETS))
    count = math.ceil(span / bucket)
    job_id = request.query_params.get("job_id")
    rows = []
    for doc in session_records(state).list(parent=job_id):
        created = doc.session.created_at
        if start <= created < end:
            rows.append((created, doc))
    rows.sort(key=lambda r: (r[0], r[1].session.session_id), reverse=True)
    counts = [0] * count
    errored = [0] * count
    for created, doc in rows:
        slot = int((created - start).total_seconds() // bucket)
        counts[slot] += 1
        errored[slot] += doc.session.status == "errored"
    buckets = [
        {
            "start": (start + dt.timedelta(seconds=i * bucket)).isoformat(),
            "count": counts[i],
            "errored": errored[i],
        }
        for i in range(count)
    ]
    listed = [
        {
            "session_id": doc.session.session_id,
            "job_id": doc.private.job_id,
            "model": doc.session.model,
            "status": doc.session.status,
            "created_at": created.isoformat(),
        }
        for created, doc in rows[:limit]
    ]
    return {
        "start": start.isoformat(),
        "end": end.isoformat(),
        "bucket_seconds": bucket,
        "total_count": len(rows),
        "returned_count": len(listed),
        "truncated": len(rows) > len(listed),
        "buckets": buckets,
        "sessions": listed,
    }


def router(state: LocalState) -> APIRouter:
    """The report service's routes (they read their own bodies, which the request gate checked)."""
    api = APIRouter()
    store = _ReportStore(state)
    renderings = _Renderings()
    workers: list[anyio.CapacityLimiter] = []

    def work() -> anyio.CapacityLimiter:
        """One report at a time is checked or rendered (a big one takes a core): made on first
        use, inside the event loop."""
        if not workers:
            workers.append(anyio.CapacityLimiter(1))
        return workers[0]

    @api.post("/v1/evaluation_reports", status_code=201)
    async def import_evaluation_report(request: Request) -> JSONResponse:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise LocalAPIError(415, "Content-Type must be application/json", code="unsupported_media_type")
        envelope = await anyio.to_thread.run_sync(_checked_envelope, checked_body(request), limiter=work())
        stored = await asyncio.to_thread(store.put, _key_hash(request), envelope)
        result = {
            "id": stored.report_id,
            "evaluation_id": stored.evaluation_id,
            "status": "completed" if envelope.report.complete else "running",
            "run_id": envelope.run_id,
            "digest": stored.digest,
            "duplicate": stored.duplicate,
            "url": f"/v1/evaluation_reports/{envelope.run_id}",
        }
        return JSONResponse(result, status_code=200 if stored.duplicate else 201)

    @api.get("/v1/evaluation_reports/{run_id}")
    async def get_evaluation_report(run_id: str, request: Request) -> Response:
        # Only an absent value takes the default: ``?format=`` is a 422 like ``?format=bogus``.
        fmt = request.query_params.get("format", "json")
        download = _query_flag(request, "download")
        theme = request.query_params.get("theme", "auto")
        if theme not in THEMES:
            raise RequestValidationError(
                [{"loc": ("query", "theme"), "msg": f"theme is one of {', '.join(THEMES)}", "type": "enum"}]
            )
        found = await asyncio.to_thread(store.find, _key_hash(request), run_id)
        if found is None:
            raise LocalAPIError(404, f"no evaluation report with run_id {run_id!r}", code="not_found")
        if fmt not in _MEDIA:
            raise RequestValidationError(
                [{"loc": ("query", "format"), "msg": "format is one of json, md, html", "type": "enum"}]
            )
        part = _part_of(request, fmt)
        key = (found[0], fmt, theme, part.part, part.model, part.scenario)
        text = renderings.get(key)
        if text is None:
            text = await anyio.to_thread.run_sync(_rendered, found[1], fmt, theme, part, limiter=work())
            if text is None:
                raise RequestValidationError(
                    [
                        {
                            "loc": ("path", "run_id"),
                            "msg": "the report is not complete (pending results)",
                            "type": "value_error",
                        }
                    ]
                )
            renderings.put(key, text)
        headers = {}
        if download:
            name = filename(run_id, fmt, part.part)  # type: ignore[arg-type]
            headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return Response(text, media_type=_MEDIA[fmt], headers=headers)

    @api.get("/v1/evaluation_trace_window")
    async def get_trace_window_report(request: Request) -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(trace_window, state, request))

    return api
