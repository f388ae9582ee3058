"""``None`` turns a policy option off; an option left out (``NOT_GIVEN``) keeps the default or the
client's setting (docs of ``CallPolicy``)."""

from __future__ import annotations

import httpx
import pytest

from fleet_sdk import AsyncFleet, CallPolicy, Fleet, RetryPolicy, Timeout
from fleet_sdk._runtime import NO_RETRIES, NO_TIMEOUT, NOT_GIVEN, AsyncHTTPClient
from fleet_sdk._runtime._policy import DEFAULT_DEADLINE

KEY = "sk-test-123456"


async def test_deadline_none_turns_the_overall_deadline_off() -> None:
    """Regression: ``AsyncFleet(deadline=None).call_policy.deadline`` was 180.0 (None meant
    "keep the default" everywhere, so the deadline could not be turned off)."""
    async with AsyncFleet(KEY, deadline=None) as fleet:
        assert fleet.call_policy.deadline is None
        assert fleet.api.control_plane is not None
    async with AsyncFleet(KEY) as fleet:
        assert fleet.call_policy.deadline == DEFAULT_DEADLINE
        assert fleet.with_options(deadline=None).call_policy.deadline is None
        assert fleet.with_options(deadline=5.0).with_options().call_policy.deadline == 5.0


def test_sync_client_and_its_async_side_keep_the_deadline_off() -> None:
    with Fleet(KEY, deadline=None) as fleet:
        assert fleet.call_policy.deadline is None
        assert fleet.async_fleet.call_policy.deadline is None
        assert fleet.with_options(deadline=None).async_fleet.call_policy.deadline is None


async def test_retry_none_means_no_retries_and_left_out_keeps_the_clients() -> None:
    patient = RetryPolicy(max_retries=7)
    async with AsyncFleet(KEY, retry=patient) as fleet:
        assert fleet.call_policy.retry == patient
        assert fleet.with_options().call_policy.retry == patient
        assert fleet.with_options(retry=NOT_GIVEN).call_policy.retry == patient
        assert fleet.with_options(retry=None).call_policy.retry == NO_RETRIES
    async with AsyncFleet(KEY, retry=None) as fleet:
        assert fleet.call_policy.retry == NO_RETRIES
        # A copy of a client without retries keeps that (its settings are rebuilt from the policy).
        assert fleet.with_options(deadline=3.0).call_policy.retry == NO_RETRIES


async def test_a_client_without_retries_sends_a_failing_call_once() -> None:
    sent: list[httpx.Request] = []

    def down(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(503, json={"detail": "busy", "retryable": True})

    pool = httpx.AsyncClient(transport=httpx.MockTransport(down))
    async with AsyncFleet(KEY, base_url="http://fleet.test", retry=None, http_client=pool) as fleet:
        with pytest.raises(Exception, match="503"):
            await fleet.list_envs()
    assert len(sent) == 1
    await pool.aclose()


async def test_timeout_none_leaves_only_the_deadline() -> None:
    async with AsyncFleet(KEY, timeout=None) as fleet:
        assert fleet.call_policy.timeout == NO_TIMEOUT
    assert NO_TIMEOUT.to_httpx(None) == httpx.Timeout(None)
    bounded = NO_TIMEOUT.to_httpx(12.0)
    assert (bounded.read, bounded.connect) == (12.0, 12.0)
    default = AsyncHTTPClient("http://fleet.test", policy=CallPolicy()).timeout
    assert default == Timeout()


def test_call_policy_updated_reads_none_as_off_and_not_given_as_keep() -> None:
    base = CallPolicy(timeout=Timeout(total=5.0), retry=RetryPolicy(max_retries=1), deadline=9.0)
    assert base.updated() == base
    assert base.updated(timeout=None, retry=None, deadline=None) == CallPolicy(
        timeout=NO_TIMEOUT, retry=NO_RETRIES, deadline=None
    )
    assert base.updated(deadline=1.0).deadline == 1.0
    assert repr(NOT_GIVEN) == "NOT_GIVEN" and not NOT_GIVEN
