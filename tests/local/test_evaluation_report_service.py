"""The report service of the local server: every status of import and export, over loopback."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from _http import raw_client

from fleet_local import LocalFleet
from fleet_local._reports import (
    DB_FILE,
    LOCK_SECONDS_ENV,
    MAX_BODY_BYTES,
    RATE_LIMIT,
    WINDOW_LIMIT,
    WINDOW_MINUTES,
)
from fleet_sdk import ConflictError, NotFoundError
from fleet_sdk.reports import Outcome, ReportEnvelope, Source, build_report, digest, to_html, to_markdown


def _envelope(run_id: str, score: float = 1.0, *, pending: bool = False, task: str = "t1") -> ReportEnvelope:
    outcomes = [
        Outcome(
            task_key=task,
            model="local/scripted",
            sample=0,
            status="passed" if score >= 1 else "failed",
            score=score,
        ),
    ]
    return build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="suite",
        task_keys=[task],
        models=["local/scripted"],
        k=2 if pending else 1,
        outcomes=outcomes,
    )


@pytest.fixture(scope="module")
def service() -> Iterator[LocalFleet]:
    """A server of its own: a short lock wait, and rate-limit counts that no other test shares."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LOCK_SECONDS_ENV, "0.3")
        with LocalFleet(s3=False) as server:
            yield server


@pytest.fixture
def http(service: LocalFleet) -> Iterator[httpx.Client]:
    with raw_client(service) as c:
        yield c


def _post(http: httpx.Client, envelope: ReportEnvelope) -> httpx.Response:
    return http.post("/v1/evaluation_reports", json=envelope.to_dict())


def test_import_is_idempotent_by_digest_and_conflicts_on_change(service: LocalFleet) -> None:
    envelope = _envelope("idem-1")
    with service.fleet() as fleet:
        api = fleet.api.evaluation_reports
        raw = api.with_raw_response.import_evaluation_report(envelope.to_dict())  # type: ignore[arg-type]
        assert raw.status_code == 201
        first = raw.parse()
        assert (first.duplicate, first.digest, first.run_id) == (False, digest(envelope), "idem-1")
        assert first.status == "completed" and first.id >= 1 and first.evaluation_id >= 1
        again = api.with_raw_response.import_evaluation_report(envelope.to_dict())  # type: ignore[arg-type]
        assert again.status_code == 200 and again.parse().duplicate is True
        assert (again.parse().id, again.parse().evaluation_id) == (first.id, first.evaluation_id)
        with pytest.raises(ConflictError) as conflict:
            api.import_evaluation_report(_envelope("idem-1", score=0.0).to_dict())  # type: ignore[arg-type]
        assert conflict.value.status_code == 409
        stored = api.get_evaluation_report("idem-1")
        assert ReportEnvelope.model_validate(stored.model_dump(mode="json", exclude_unset=True)) == envelope
        with pytest.raises(NotFoundError):
            api.get_evaluation_report("never-imported")
    rows = (
        sqlite3.connect(service.data_dir / DB_FILE)
        .execute("SELECT count(*) FROM reports WHERE run_id = 'idem-1'")
        .fetchone()
    )
    assert rows == (1,)  # posted twice, stored once


def test_export_formats_and_attachment_names(http: httpx.Client) -> None:
    envelope = _envelope("fmt-1", task="<script>alert(1)</script>")
    assert _post(http, envelope).status_code == 201
    md = http.get("/v1/evaluation_reports/fmt-1", params={"format": "md"})
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert md.text == to_markdown(envelope)
    page = http.get("/v1/evaluation_reports/fmt-1", params={"format": "html", "download": "1"})
    assert page.headers["content-type"].startswith("text/html") and page.text == to_html(envelope)
    assert page.headers["content-disposition"] == 'attachment; filename="fmt-1.html"'
    as_json = http.get("/v1/evaluation_reports/fmt-1", params={"download": "true"})
    assert as_json.headers["content-disposition"] == 'attachment; filename="fmt-1.json"'
    assert json.loads(as_json.text) == envelope.to_dict()
    unknown = http.get("/v1/evaluation_reports/fmt-1", params={"format": "pdf"})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["query", "format"]
    inline = http.get("/v1/evaluation_reports/fmt-1", params={"download": "false"})
    assert inline.status_code == 200 and "content-disposition" not in inline.headers
    # Not a boolean: refused naming the field, not silently read as false (found by the contracts).
    garbled = http.get("/v1/evaluation_reports/fmt-1", params={"download": "AAA"})
    assert garbled.status_code == 422 and garbled.json()["detail"][0]["loc"] == ["query", "download"]


def test_export_of_an_incomplete_report_is_422(http: httpx.Client) -> None:
    assert _post(http, _envelope("pending-1", pending=True)).status_code == 201
    response = http.get("/v1/evaluation_reports/pending-1")
    assert response.status_code == 422 and "not complete" in response.json()["detail"][0]["msg"]


def test_import_refusals_name_the_problem(service: LocalFleet, http: httpx.Client) -> None:
    body = json.dumps(_envelope("refuse-1").to_dict())
    unauthenticated = httpx.post(
        f"{service.base_url}/v1/evaluation_reports",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert unauthenticated.status_code == 401
    wrong_key = httpx.post(
        f"{service.base_url}/v1/evaluation_reports",
        content=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer nope"},
    )
    assert wrong_key.status_code == 401
    text = http.post("/v1/evaluation_reports", content=body, headers={"Content-Type": "text/plain"})
    assert text.status_code == 415
    huge = http.post(
        "/v1/evaluation_reports",
        content=b" " * (MAX_BODY_BYTES + 1),
        headers={"Content-Type": "application/json"},
    )
    assert huge.status_code == 413
    assert huge.json() == {
        "detail": f"request body is larger than the server's limit of {MAX_BODY_BYTES} bytes",
        "code": "payload_too_large",
        "retryable": False,
    }
    bad = _envelope("refuse-1").to_dict()
    bad["report"]["models"][0]["passed"] = -1
    invalid = http.post("/v1/evaluation_reports", json=bad)
    assert invalid.status_code == 422
    assert invalid.json()["detail"][0]["loc"] == ["body", "report", "models", 0, "passed"]
    wrong_version = {**_envelope("refuse-1").to_dict(), "version": 2}
    assert http.post("/v1/evaluation_reports", json=wrong_version).json()["detail"][0]["loc"] == [
        "body",
        "version",
    ]
    not_json = http.post("/v1/evaluation_reports", content=b"{", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 422


def test_a_held_import_lock_answers_503_with_retry_after(service: LocalFleet, http: httpx.Client) -> None:
    assert _post(http, _envelope("lock-0")).status_code == 201  # the store exists
    holder = sqlite3.connect(service.data_dir / DB_FILE, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        busy = _post(http, _envelope("lock-1"))
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert busy.json()["retryable"] is True
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _post(http, _envelope("lock-1")).status_code == 201


def test_a_store_with_an_unknown_layout_answers_501(service: LocalFleet, http: httpx.Client) -> None:
    assert _post(http, _envelope("layout-0")).status_code in (200, 201)
    path = service.data_dir / DB_FILE
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA user_version = 99")
    try:
        assert _post(http, _envelope("layout-1")).status_code == 501
        assert http.get("/v1/evaluation_reports/layout-0").status_code == 501
    finally:
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute("PRAGMA user_version = 1")
    assert http.get("/v1/evaluation_reports/layout-0").status_code == 200


def test_more_than_30_new_reports_a_minute_is_429() -> None:
    with (
        LocalFleet(s3=False) as server,
        raw_client(server) as http,
    ):
        for i in range(RATE_LIMIT):
            assert _post(http, _envelope(f"rate-{i}")).status_code == 201
        limited = _post(http, _envelope("rate-over"))
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        # a duplicate stores nothing new, so it is not limited
        assert _post(http, _envelope("rate-0")).status_code == 200


def test_trace_window_report(service: LocalFleet, http: httpx.Client) -> None:
    with service.fleet() as fleet:
        job = fleet.traces.create_job("window")
        for model in ("a", "b", "c"):
            fleet.traces.upload_session(
                job_id=job,
                task_key="t",
                model=model,
                chat_history=[{"role": "user", "content": "hi"}],
                reward=1.0,
            )
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        window = fleet.api.evaluation_reports.get_trace_window_report(
            start=(now - dt.timedelta(hours=1)).isoformat(),
            end=(now + dt.timedelta(hours=1)).isoformat(),
            bucket_seconds=3600,
            limit=2,
            job_id=job,
        )
    assert (window.total_count, window.returned_count, window.truncated) == (3, 2, True)
    assert len(window.buckets) == 2 and sum(b.count for b in window.buckets) == 3
    assert all(s.job_id == job for s in window.sessions)
    reversed_window = http.get(
        "/v1/evaluation_trace_window", params={"start": "2100-01-01T00:00:00Z", "end": "2000-01-01T00:00:00Z"}
    ).json()
    assert (reversed_window["total_count"], reversed_window["buckets"]) == (0, [])
    decades = http.get("/v1/evaluation_trace_window", params={"start": "2000-01-01T00:00:00Z"}).json()
    assert len(decades["buckets"]) <= 10_000 and decades["bucket_seconds"] > 60
    no_zone = http.get("/v1/evaluation_trace_window", params={"start": "2000-01-01T00:00:00"}).json()
    assert no_zone["start"] == decades["start"] == "2000-01-01T00:00:00+00:00"  # zone-less is UTC
    not_a_time = http.get("/v1/evaluation_trace_window", params={"start": "yesterday"})
    assert not_a_time.status_code == 422 and not_a_time.json()["detail"][0]["loc"] == ["query", "start"]


def test_import_answers_the_platforms_id_evaluation_id_and_status(http: httpx.Client) -> None:
    """The platform answers an import with the stored run's `id`, `evaluation_id` and `status`."""
    one = _post(http, _envelope("ids-1")).json()
    two = _post(http, _envelope("ids-2", task="t2")).json()  # the same suite: the same evaluation
    pending = _post(http, _envelope("ids-3", pending=True)).json()
    assert one["id"] != two["id"] and one["evaluation_id"] == two["evaluation_id"] == pending["evaluation_id"]
    assert (one["status"], pending["status"]) == ("completed", "running")
    other = build_report(
        run_id="ids-4",
        source=Source(kind="client"),
        suite_name="another suite",
        task_keys=["t1"],
        models=["local/scripted"],
        k=1,
        outcomes=[Outcome(task_key="t1", model="local/scripted", status="passed", score=1.0)],
    )
    assert _post(http, other).json()["evaluation_id"] != one["evaluation_id"]


def test_html_export_takes_a_theme(http: httpx.Client) -> None:
    envelope = _envelope("theme-1")
    assert _post(http, envelope).status_code == 201
    for theme in ("light", "dark", "auto"):
        page = http.get("/v1/evaluation_reports/theme-1", params={"format": "html", "theme": theme})
        assert page.status_code == 200 and page.text == to_html(envelope, theme=theme)  # type: ignore[arg-type]
        assert f'data-theme="{theme}"' in page.text
    assert http.get("/v1/evaluation_reports/theme-1", params={"format": "html"}).text == to_html(envelope)
    sepia = http.get("/v1/evaluation_reports/theme-1", params={"format": "html", "theme": "sepia"})
    assert sepia.status_code == 422 and sepia.json()["detail"][0]["loc"] == ["query", "theme"]


def test_trace_window_limit_and_minutes_are_clamped_as_the_schema_says(
    service: LocalFleet, http: httpx.Client
) -> None:
    """Regression: out-of-range `limit` and `minutes` were 422s where the platform clamps them."""
    parameters = {
        p["name"]: p
        for p in yaml.safe_load(
            (Path(__file__).parents[2] / "schemas" / "evaluation-reports.yaml").read_text()
        )["paths"]["/v1/evaluation_trace_window"]["get"]["parameters"]
    }
    assert (
        parameters["limit"]["x-clamp"]["minimum"],
        parameters["limit"]["x-clamp"]["maximum"],
    ) == WINDOW_LIMIT
    assert (
        parameters["minutes"]["x-clamp"]["minimum"],
        parameters["minutes"]["x-clamp"]["maximum"],
    ) == WINDOW_MINUTES
    with service.fleet() as fleet:
        job = fleet.traces.create_job("clamps")
        for model in ("a", "b"):
            fleet.traces.upload_session(
                job_id=job,
                task_key="t",
                model=model,
                chat_history=[{"role": "user", "content": "hi"}],
                reward=1.0,
            )
    none = http.get("/v1/evaluation_trace_window", params={"job_id": job, "limit": "0"}).json()
    assert (none["total_count"], none["returned_count"]) == (2, 1)  # limit 0 counts as 1
    many = http.get("/v1/evaluation_trace_window", params={"job_id": job, "limit": "5000"})
    assert many.status_code == 200 and many.json()["returned_count"] == 2
    short = http.get("/v1/evaluation_trace_window", params={"job_id": job, "minutes": "0"}).json()
    span = dt.datetime.fromisoformat(short["end"]) - dt.datetime.fromisoformat(short["start"])
    assert span == dt.timedelta(minutes=1) and short["total_count"] == 2
    long = http.get(
        "/v1/evaluation_trace_window", params={"minutes": str(10**9), "bucket_seconds": "86400"}
    ).json()
    span = dt.datetime.fromisoformat(long["end"]) - dt.datetime.fromisoformat(long["start"])
    assert span == dt.timedelta(minutes=WINDOW_MINUTES[1])
    for name in ("limit", "minutes"):
        text = http.get("/v1/evaluation_trace_window", params={name: "many"})
        assert text.status_code == 422 and text.json()["detail"][0]["loc"] == ["query", name]
