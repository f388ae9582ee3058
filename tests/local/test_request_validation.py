"""Request bodies are judged by the schemas themselves (``fleet_local._validation``).

Raw HTTP, so the bodies can be what no typed client would send: ``null`` where the schema's
type has no ``null``, ``false`` for an integer, dates without a time, undecodable bytes.
Every refusal is a 422 whose ``detail`` names the field; auth is still judged first.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _http import raw_client
from fastapi import APIRouter

from fleet_local import LocalFleet
from fleet_local._manager import MANAGER_PREFIX
from fleet_local._validation import find_schemas, load_body_schemas
from fleet_sdk.types import env_instance as models

TASK_KEY = "orderdesk-count-pending-orders"
SHA = "0" * 64


@pytest.fixture
def http(local: LocalFleet) -> Iterator[httpx.Client]:
    with raw_client(local) as client:
        yield client


@pytest.fixture
def manager_url(http: httpx.Client) -> Iterator[str]:
    created = http.post("/v1/env/instances", json={"env_key": "orderdesk"})
    assert created.status_code == 200, created.text
    instance = models.InstanceResponse.model_validate(created.json())
    yield instance.urls.manager.api.rstrip("/")
    http.delete(f"/v1/env/instances/{instance.instance_id}")


def issues(response: httpx.Response) -> list[list[Any]]:
    """The ``loc`` of every ValidationIssue of a 422 (which must have the ErrorResponse shape)."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "validation_error" and body["retryable"] is False
    assert isinstance(body["detail"], list) and body["detail"]
    assert all({"loc", "msg", "type"} <= set(issue) for issue in body["detail"])
    return [issue["loc"] for issue in body["detail"]]


def test_null_is_refused_where_the_type_has_no_null(http: httpx.Client) -> None:
    before = http.get(f"/v1/tasks/{TASK_KEY}").json()
    response = http.put(f"/v1/tasks/{TASK_KEY}", json={"prompt": "", "metadata": None})
    assert issues(response) == [["body", "metadata"]]
    assert response.json()["detail"][0]["type"] == "dict_type"
    assert http.get(f"/v1/tasks/{TASK_KEY}").json() == before  # nothing was changed
    # Where the type does allow null, null is fine.
    job = http.post("/v1/traces/jobs", json={"name": "nullable"}).json()["job_id"]
    ok = http.post(
        "/v1/sessions/ingest",
        json={
            "messages": [{"role": "user", "content": None}],
            "job_id": job,
            "task_key": TASK_KEY,
            "model": "m",
            "metadata": {"score": None},
            "verifier_execution_id": None,
        },
    )
    assert ok.status_code == 200, ok.text


def test_values_lax_parsing_would_coerce_are_refused(http: httpx.Client, manager_url: str) -> None:
    assert issues(http.post(f"{manager_url}/reset", json={"seed": False})) == [["body", "seed"]]
    assert issues(http.post("/v1/browser", json={"ttl_seconds": "60"})) == [["body", "ttl_seconds"]]
    ingest = {
        "messages": [{"role": "user", "content": "hi"}],
        "job_id": "j",
        "task_key": TASK_KEY,
        "model": "m",
        "metadata": {"score": "1"},
        "started_at": "2024-01-31",  # no time, no zone: not an RFC 3339 date-time
        "ended_at": None,
    }
    assert issues(http.post("/v1/sessions/ingest", json=ingest)) == [
        ["body", "metadata", "score"],
        ["body", "started_at"],
        ["body", "ended_at"],
    ]


def test_nested_fields_are_named(http: httpx.Client, manager_url: str) -> None:
    ingest = {
        "messages": [{"role": "user", "content": [{"type": "text"}]}],
        "job_id": "j",
        "task_key": TASK_KEY,
        "model": "m",
        "metadata": {},
    }
    locs = issues(http.post("/v1/sessions/ingest", json=ingest))
    assert sorted(map(str, locs)) == sorted(
        map(str, [["body", "messages", 0, "content", 0, "text"], ["body", "metadata", "score"]])
    )
    diff = http.post(f"{manager_url}/diff/structured", json={"ignore_config": {"tables": [1]}})
    assert issues(diff) == [["body", "ignore_config", "tables", 0]]


def test_an_integral_float_is_an_integer(http: httpx.Client) -> None:
    lease = http.post("/v1/browser", json={"ttl_seconds": 60.0})  # JSON Schema: 60.0 is an integer
    assert lease.status_code == 200, lease.text
    http.delete(f"/v1/browser/{lease.json()['lease_id']}")


def test_auth_is_judged_before_the_body(local: LocalFleet) -> None:
    response = httpx.put(f"{local.base_url}/v1/tasks/{TASK_KEY}", json={"metadata": None})
    assert response.status_code == 401


def test_missing_and_undecodable_bodies_are_422(http: httpx.Client, manager_url: str) -> None:
    json_header = {"Content-Type": "application/json"}
    url = f"{manager_url}/diff/structured"
    assert issues(http.post(url, headers=json_header)) == [["body"]]
    for raw in (b"\xff\xfe\x7f{", b'{"ignore_config": ', b"[" * 100_000):
        locs = issues(http.post(url, content=raw, headers=json_header))
        assert all(loc[0] == "body" for loc in locs), (raw[:10], locs)


def test_control_plane_verifier_needs_args_instance_id(http: httpx.Client, manager_url: str) -> None:
    body = {"key": "k", "sha256": SHA, "args": {}, "function_name": "verify", "timeout": 5}
    assert issues(http.post("/v1/verifiers/execute", json=body)) == [["body", "args", "instance_id"]]
    null = {**body, "args": {"instance_id": None}}
    assert issues(http.post("/v1/verifiers/execute", json=null)) == [["body", "args", "instance_id"]]
    # The manager's endpoint binds the instance from its URL; unknown code is a documented 404.
    unknown = http.post(f"{manager_url}/execute_verifier_function", json=body)
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"


def test_browser_lease_conflicts(http: httpx.Client) -> None:
    key = str(uuid.uuid4())
    first = http.post("/v1/browser", json={"ttl_seconds": 60}, headers={"Idempotency-Key": key})
    again = http.post("/v1/browser", json={"ttl_seconds": 60}, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 200
    assert again.json()["lease_id"] == first.json()["lease_id"]
    other = http.post("/v1/browser", json={"ttl_seconds": 61}, headers={"Idempotency-Key": key})
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"

    chosen = f"lease-{uuid.uuid4().hex[:8]}"
    assert http.post("/v1/browser", json={"ttl_seconds": 60, "lease_id": chosen}).status_code == 200
    live = http.post("/v1/browser", json={"ttl_seconds": 60, "lease_id": chosen})
    assert live.status_code == 409 and live.json()["code"] == "conflict"
    http.delete(f"/v1/browser/{chosen}")
    reused = http.post("/v1/browser", json={"ttl_seconds": 60, "lease_id": chosen})  # ended: a new lease
    assert reused.status_code == 200 and reused.json()["status"] == "running"
    for lease_id in (chosen, first.json()["lease_id"]):
        http.delete(f"/v1/browser/{lease_id}")


def test_transcript_leaves_out_fields_never_sent(http: httpx.Client) -> None:
    job = http.post("/v1/traces/jobs", json={"name": "image"}).json()["job_id"]
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    ingest = http.post(
        "/v1/sessions/ingest",
        json={
            "messages": [{"role": "user", "content": [image]}],
            "job_id": job,
            "task_key": TASK_KEY,
            "model": "m",
            "metadata": {"score": 1.0},
        },
    )
    assert ingest.status_code == 200, ingest.text
    transcript = http.get(f"/v1/sessions/{ingest.json()['session_id']}/transcript").json()
    # ImageURL.detail is optional but not nullable: absent, never null.
    assert transcript["transcript"] == [{"role": "user", "content": [image]}]


def test_every_body_route_has_a_schema_operation() -> None:
    bodies = load_body_schemas({"instance-manager": MANAGER_PREFIX}, find_schemas())
    stray = APIRouter()

    @stray.post("/v1/not-in-any-schema")
    def stray_route(body: models.HeartbeatRequest) -> None:
        """A route with a body that no schema describes."""

    with pytest.raises(RuntimeError, match="/v1/not-in-any-schema"):
        bodies.check_routes(stray.routes)
