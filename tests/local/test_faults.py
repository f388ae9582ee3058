"""Fault injection on a real local server: the SDK's retry policy meets 503s,
hangs and dropped connections over loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk import _exceptions as errors
from fleet_sdk._client import Fleet
from fleet_sdk._runtime import RetryPolicy
from fleet_sdk.types import browser_lease as browser
from fleet_sdk.types import traces_jobs as traces

FAST_RETRY = RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.05)


@pytest.fixture
def retrying(faulty: LocalFleet) -> Iterator[Fleet]:
    """A client of ``faulty`` whose retries back off briefly."""
    client = faulty.fleet(retry=FAST_RETRY)
    yield client
    client.close()


@pytest.fixture()
def lease_id(retrying: Fleet) -> Iterator[str]:
    lease = retrying.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=300))
    yield lease.lease_id
    retrying.api.browser.delete_browser_lease(lease.lease_id)


def _fired(server: LocalFleet, path: str) -> int:
    return sum(1 for _, fired_path, _ in server.fired_faults() if fired_path == path)


def test_get_retries_through_two_503s(faulty: LocalFleet, retrying: Fleet, lease_id: str) -> None:
    path = f"/v1/browser/{lease_id}"
    faulty.inject_fault(path, method="GET", status=503, count=2)
    raw = retrying.api.browser.with_raw_response.get_browser_lease(lease_id)
    assert raw.status_code == 200
    assert raw.retries_taken == 2
    assert raw.parse().lease_id == lease_id
    assert _fired(faulty, path) == 2


def test_post_without_idempotency_key_is_not_retried(faulty: LocalFleet, retrying: Fleet) -> None:
    before = _fired(faulty, "/v1/traces/jobs")  # the server is shared: count this test's faults
    faulty.inject_fault("/v1/traces/jobs", method="POST", status=503, count=2)
    with pytest.raises(errors.InternalServerError) as failed:
        retrying.api.traces.create_trace_job(traces.TraceJobRequest(name="no-retry"))
    assert failed.value.status_code == 503
    assert failed.value.retryable is True
    assert _fired(faulty, "/v1/traces/jobs") - before == 1


def test_post_with_idempotency_key_is_retried(faulty: LocalFleet, retrying: Fleet) -> None:
    faulty.inject_fault("/v1/browser", method="POST", status=503, count=1)
    raw = retrying.api.browser.with_raw_response.create_browser_lease(
        browser.BrowserLeaseRequest(ttl_seconds=30), idempotency_key=str(uuid.uuid4())
    )
    assert raw.retries_taken == 1
    retrying.api.browser.delete_browser_lease(raw.parse().lease_id)


def test_hang_times_out(faulty: LocalFleet, retrying: Fleet, lease_id: str) -> None:
    faulty.inject_fault(f"/v1/browser/{lease_id}", method="GET", mode="hang", delay=3, count=1)
    with pytest.raises(errors.APITimeoutError):
        retrying.api.browser.get_browser_lease(lease_id, options={"timeout": 0.3, "max_retries": 0})


def test_drop_is_a_connection_error(faulty: LocalFleet, retrying: Fleet, lease_id: str) -> None:
    faulty.inject_fault(f"/v1/browser/{lease_id}", method="GET", mode="drop", count=1)
    with pytest.raises(errors.APIConnectionError) as dropped:
        retrying.api.browser.get_browser_lease(lease_id, options={"max_retries": 0})
    assert not isinstance(dropped.value, errors.APITimeoutError)
    # The server is still fine afterwards, and a retrying GET gets through a drop.
    faulty.inject_fault(f"/v1/browser/{lease_id}", method="GET", mode="drop", count=1)
    raw = retrying.api.browser.with_raw_response.get_browser_lease(lease_id)
    assert raw.retries_taken == 1


def test_faults_are_off_by_default(local: LocalFleet) -> None:
    rule = {"path": "/v1/traces/jobs", "status": 503, "count": 1}
    armed = httpx.post(f"{local.base_url}/_admin/faults", json=rule, timeout=10)
    assert armed.status_code in (401, 404)
    with pytest.raises(errors.FleetError):
        local.inject_fault("/v1/traces/jobs")
    with local.fleet() as client:
        assert client.api.traces.create_trace_job(traces.TraceJobRequest(name="fine")).status == "active"
