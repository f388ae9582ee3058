"""Traces jobs and browser leases of the local server, over HTTP with the generated
clients (``fleet.api.traces`` / ``fleet.api.browser``); the S3 endpoint is ``test_s3.py``."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from _http import bearer
from _waits import wait_until

from fleet_local import LocalFleet
from fleet_sdk import _exceptions as errors
from fleet_sdk._client import Fleet
from fleet_sdk.types import browser_lease as browser
from fleet_sdk.types import traces_jobs as traces

BUCKET = "fleet-sessions-images"
X_API_KEY_REFUSAL = "Authentication required. Provide either API key or JWT token with team ID"


# --- traces ---------------------------------------------------------------------------------------


def test_create_trace_job(fleet: Fleet) -> None:
    job = fleet.api.traces.create_trace_job(traces.TraceJobRequest(name="run-42"))
    assert job.name == "run-42"
    assert job.status == "active"
    assert job.job_id
    other = fleet.api.traces.create_trace_job(traces.TraceJobRequest(name="run-42"))
    assert other.job_id != job.job_id


def test_trace_job_validation_names_the_field(local: LocalFleet) -> None:
    response = httpx.post(
        f"{local.base_url}/v1/traces/jobs",
        json={"name": ""},
        headers=bearer(local),
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_error"
    assert ["body", "name"] in [issue["loc"] for issue in body["detail"]]


def test_traces_refuse_x_api_key(local: LocalFleet) -> None:
    response = httpx.post(
        f"{local.base_url}/v1/traces/jobs", json={"name": "x"}, headers={"X-API-Key": local.api_key}
    )
    assert response.status_code == 401
    assert response.json()["detail"] == X_API_KEY_REFUSAL


# --- browser leases -------------------------------------------------------------------------------


def test_lease_lifecycle(local: LocalFleet, fleet: Fleet) -> None:
    before = int(time.time() * 1000)
    lease = fleet.api.browser.create_browser_lease(
        browser.BrowserLeaseRequest(ttl_seconds=600, allowed_hosts=["127.0.0.1"])
    )
    assert lease.status == "running"
    assert lease.id == lease.lease_id
    assert lease.allowed_hosts == ["127.0.0.1"]
    assert lease.host_domain and lease.browser_id and lease.cluster_name
    for url, suffix in ((lease.mcp_url, "mcp"), (lease.cdp_url, "cdp"), (lease.stream_url, "stream")):
        assert url == f"{local.base_url}/browser/{lease.lease_id}/{suffix}"
    assert before <= lease.created_timestamp_ms <= int(time.time() * 1000)
    assert lease.expires_timestamp_ms == lease.created_timestamp_ms + 600_000

    assert fleet.api.browser.get_browser_lease(lease.lease_id) == lease
    tools = fleet.api.browser.get_browser_lease_mcp_tools(lease.lease_id)
    assert [tool.name for tool in tools.tools] == ["computer"]
    schema = tools.tools[0].input_schema
    assert schema["properties"]["action"]["enum"] == [
        "screenshot",
        "left_click",
        "double_click",
        "right_click",
        "type",
        "key",
        "scroll",
        "mouse_move",
        "wait",
        "navigate",
    ]
    assert schema["required"] == ["action"]

    deleted = fleet.api.browser.delete_browser_lease(lease.lease_id)
    assert deleted.success and deleted.status == "terminated" and deleted.lease_id == lease.lease_id
    assert fleet.api.browser.get_browser_lease(lease.lease_id).status == "terminated"
    with pytest.raises(errors.APIStatusError) as gone:
        fleet.api.browser.delete_browser_lease(lease.lease_id)
    assert gone.value.status_code == 410
    with pytest.raises(errors.NotFoundError):
        fleet.api.browser.get_browser_lease_mcp_tools(lease.lease_id)


def test_unknown_lease_is_404(fleet: Fleet) -> None:
    with pytest.raises(errors.NotFoundError):
        fleet.api.browser.get_browser_lease("lease_missing")
    with pytest.raises(errors.NotFoundError):
        fleet.api.browser.delete_browser_lease("lease_missing")
    with pytest.raises(errors.NotFoundError):
        fleet.api.browser.get_browser_lease_mcp_tools("lease_missing")


def test_default_allowed_hosts_is_this_server(local: LocalFleet, fleet: Fleet) -> None:
    lease = fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=60))
    assert lease.allowed_hosts == [httpx.URL(local.base_url).netloc.decode()]
    fleet.api.browser.delete_browser_lease(lease.lease_id)


def test_lease_expires_by_ttl(fleet: Fleet) -> None:
    lease = fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=1))
    assert lease.status == "running"

    def expired() -> bool:
        return fleet.api.browser.get_browser_lease(lease.lease_id).status == "expired"

    wait_until(expired, "the lease expired")
    # An expired lease is already gone: deleting it answers 410.
    with pytest.raises(errors.APIStatusError) as gone:
        fleet.api.browser.delete_browser_lease(lease.lease_id)
    assert gone.value.status_code == 410


def test_client_chosen_lease_id_and_idempotency_key(fleet: Fleet) -> None:
    chosen = f"lease-{uuid.uuid4().hex[:8]}"
    lease = fleet.api.browser.create_browser_lease(
        browser.BrowserLeaseRequest(ttl_seconds=60, lease_id=chosen)
    )
    assert lease.lease_id == chosen
    key = str(uuid.uuid4())
    first = fleet.api.browser.create_browser_lease(
        browser.BrowserLeaseRequest(ttl_seconds=60), idempotency_key=key
    )
    second = fleet.api.browser.create_browser_lease(
        browser.BrowserLeaseRequest(ttl_seconds=60), idempotency_key=key
    )
    assert first == second
    third = fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=60))
    assert third.lease_id != first.lease_id
    for lease_id in (chosen, first.lease_id, third.lease_id):
        fleet.api.browser.delete_browser_lease(lease_id)


def test_browser_requires_bearer(local: LocalFleet) -> None:
    response = httpx.post(f"{local.base_url}/v1/browser", json={"ttl_seconds": 5})
    assert response.status_code == 401
    wrong = httpx.post(
        f"{local.base_url}/v1/browser", json={"ttl_seconds": 5}, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
