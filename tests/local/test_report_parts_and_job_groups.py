"""The report export's Markdown parts and the job-session groups, as the platform serves them.

Both were missing from the local server: ``GET /v1/evaluation_reports/{run_id}`` ignored ``part``
and ``scenario`` (the whole report came back; no 404 for a scenario the run did not replay, no 422
for an unknown part), though the library and the CLI render parts; and ``/v1/job-session-groups``,
the dashboard's aggregate whose ``avg_score`` counts only sessions linked to a verifier execution,
was not served at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from _http import raw_client

from fleet_local import LocalFleet
from fleet_sdk import Fleet, NotFoundError
from fleet_sdk.reports import Outcome, ReportEnvelope, Source, build_report, to_markdown

MODELS = ["local/scripted", "local/random"]


def _envelope(run_id: str) -> ReportEnvelope:
    outcomes = [
        Outcome(task_key="t1", model="local/scripted", sample=0, status="passed", score=1.0),
        Outcome(task_key="t1", model="local/random", sample=0, status="failed", score=0.0),
        Outcome(task_key="t2", model="local/scripted", sample=0, status="passed", score=1.0),
        Outcome(task_key="t2", model="local/random", sample=0, status="errored", error="boom"),
    ]
    return build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="suite",
        task_keys=["t1", "t2"],
        models=MODELS,
        k=1,
        outcomes=outcomes,
    )


@pytest.fixture
def http(local: LocalFleet) -> Iterator[httpx.Client]:
    with raw_client(local) as client:
        yield client


@pytest.fixture
def report(http: httpx.Client) -> tuple[str, ReportEnvelope]:
    run_id = f"parts-{uuid.uuid4().hex[:8]}"
    envelope = _envelope(run_id)
    assert http.post("/v1/evaluation_reports", json=envelope.to_dict()).status_code == 201
    return run_id, envelope


@pytest.mark.parametrize(
    "query",
    [
        {"part": "verdict"},
        {"part": "fix_items"},
        {"part": "fix_items", "model": "local/random"},
        {"part": "scenario", "scenario": "t2"},
    ],
)
def test_each_markdown_part_is_the_librarys(
    http: httpx.Client, report: tuple[str, ReportEnvelope], query: dict[str, str]
) -> None:
    run_id, envelope = report
    answer = http.get(f"/v1/evaluation_reports/{run_id}", params={"format": "md", **query})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/markdown")
    assert answer.text == to_markdown(envelope, **query)  # type: ignore[arg-type]
    assert answer.text != to_markdown(envelope)


def test_a_part_downloads_under_its_own_name(http: httpx.Client, report: tuple[str, ReportEnvelope]) -> None:
    run_id, _ = report
    answer = http.get(
        f"/v1/evaluation_reports/{run_id}", params={"format": "md", "part": "fix_items", "download": "1"}
    )
    assert answer.headers["content-disposition"] == f'attachment; filename="{run_id}-fix-items.md"'


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ({"format": "md", "part": "scenario", "scenario": "t9"}, 404, None),
        ({"format": "md", "part": "fix_items", "model": "nope/model"}, 404, None),
        ({"format": "md", "part": "summary"}, 422, "part"),
        ({"format": "html", "part": "verdict"}, 422, "part"),
        ({"part": "verdict"}, 422, "part"),
        ({"format": "md", "part": "scenario"}, 422, "scenario"),
        ({"format": "md", "scenario": "t1"}, 422, "scenario"),
        ({"format": "md", "part": "verdict", "model": "local/random"}, 422, "model"),
    ],
)
def test_a_part_the_report_lacks_is_404_and_a_bad_one_422(
    http: httpx.Client,
    report: tuple[str, ReportEnvelope],
    query: dict[str, str],
    status: int,
    field: str | None,
) -> None:
    run_id, _ = report
    answer = http.get(f"/v1/evaluation_reports/{run_id}", params=query)
    assert answer.status_code == status, answer.text
    if field is not None:
        assert answer.json()["detail"][0]["loc"] == ["query", field]
    else:
        assert answer.json()["code"] == "not_found"


def _ingest(http: httpx.Client, job_id: str, task_key: str, score: float, execution_id: str | None) -> None:
    body = {
        "job_id": job_id,
        "task_key": task_key,
        "model": "anthropic/claude-x",
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"score": score},
    }
    if execution_id is not None:
        body["verifier_execution_id"] = execution_id
    response = http.post("/v1/sessions/ingest", json=body)
    assert response.status_code == 200, response.text


def test_avg_score_counts_only_sessions_linked_to_a_verifier_execution(
    http: httpx.Client, fleet: Fleet
) -> None:
    """As the platform's dashboard does: an inline score alone is stored but not counted."""
    job_id = fleet.traces.create_job("groups")
    groups = fleet.api.sessions
    _ingest(http, job_id, "t1", 1.0, None)
    only_inline = groups.get_job_session_group(job_id)
    assert (only_inline.session_count, only_inline.graded_sessions, only_inline.avg_score) == (1, 0, None)
    _ingest(http, job_id, "t2", 0.0, f"vex_{uuid.uuid4().hex[:8]}")
    linked = groups.get_job_session_group(job_id)
    assert (linked.session_count, linked.graded_sessions, linked.avg_score) == (2, 1, 0.0)
    assert (linked.passed_sessions, linked.task_count, linked.name) == (0, 2, "groups")
    listed = groups.list_job_session_groups(job_id=job_id)
    assert listed.groups == [linked]
    newest = groups.list_job_session_groups(limit=1).groups
    assert [group.job_id for group in newest] == [job_id]  # newest first


def test_job_session_groups_refuse_an_unknown_job_and_a_bad_limit(http: httpx.Client, fleet: Fleet) -> None:
    with pytest.raises(NotFoundError):
        fleet.api.sessions.get_job_session_group("no-such-job")
    assert fleet.api.sessions.list_job_session_groups(job_id="no-such-job").groups == []
    for limit in ("0", "1001", "many"):
        answer = http.get("/v1/job-session-groups", params={"limit": limit})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "limit"]
