"""``Fleet`` / ``AsyncFleet`` and ``fleet.api`` resolve everything in one shared base, alike for both.

The non-I/O half of the clients (settings from arguments and the environment, the call policy,
each surface's base URL, key and headers, the instance manager's runner token) lives once in
``_FleetBase`` and ``_BaseFleetAPI``; these tests send one call per surface through both twins
(an ``httpx.MockTransport`` pins what goes on the wire) and compare.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fleet_sdk import AsyncFleet, Fleet, FleetError, RetryPolicy, Timeout
from fleet_sdk._runtime import NOT_GIVEN

ENVIRON = {
    "FLEET_API_KEY": "sk-test-base-key",
    "FLEET_BASE_URL": "https://orchestrator.test.invalid",
    "FLEET_PLATFORM_URL": "https://platform.test.invalid",
    "BROWSER_API_BASE_URL": "https://browser.test.invalid",
    "FLEET_TEAM_API_KEY": "sk-test-team-key",
}
MANAGER = "https://instance.test.invalid/api/v1/env"

Seen = tuple[str, str, str | None, str | None]


def _recording() -> tuple[list[Seen], Any]:
    seen: list[Seen] = []

    def answer(request: httpx.Request) -> httpx.Response:
        headers = request.headers
        seen.append(
            (request.url.host, request.url.path, headers.get("authorization"), headers.get("x-runner-token"))
        )
        return httpx.Response(200, json={})

    return seen, answer


EXPECTED: list[Seen] = [
    ("orchestrator.test.invalid", "/v1/regions", "Bearer sk-test-base-key", None),
    ("orchestrator.test.invalid", "/v1/sessions/job/j-1", "Bearer sk-test-base-key", None),
    ("platform.test.invalid", "/v1/traces/jobs", "Bearer sk-test-base-key", None),
    ("browser.test.invalid", "/v1/browser/l-1", "Bearer sk-test-team-key", None),
    ("platform.test.invalid", "/v1/evaluation_reports/r-1", "Bearer sk-test-base-key", None),
    ("instance.test.invalid", "/api/v1/env/health", None, "tok-runner"),
    ("instance.test.invalid", "/api/v1/env/health", None, None),
]


def test_each_surface_gets_its_url_key_and_headers_sync() -> None:
    seen, answer = _recording()
    with Fleet(environ=ENVIRON, http_client=httpx.Client(transport=httpx.MockTransport(answer))) as fleet:
        api = fleet.api
        api.control_plane.with_raw_response.list_regions()
        api.sessions.with_raw_response.get_job_sessions("j-1")
        api.traces.with_raw_response.create_trace_job(name="t")
        api.browser.with_raw_response.get_browser_lease("l-1")
        api.evaluation_reports.with_raw_response.get_evaluation_report("r-1")
        api.manager(MANAGER, runner_token="tok-runner").with_raw_response.manager_health()
        api.manager(MANAGER).with_raw_response.manager_health()
    assert seen == EXPECTED


async def test_each_surface_gets_its_url_key_and_headers_async() -> None:
    seen, answer = _recording()
    pool = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    async with AsyncFleet(environ=ENVIRON, http_client=pool) as fleet, pool:
        api = fleet.api
        await api.control_plane.with_raw_response.list_regions()
        await api.sessions.with_raw_response.get_job_sessions("j-1")
        await api.traces.with_raw_response.create_trace_job(name="t")
        await api.browser.with_raw_response.get_browser_lease("l-1")
        await api.evaluation_reports.with_raw_response.get_evaluation_report("r-1")
        await api.manager(MANAGER, runner_token="tok-runner").with_raw_response.manager_health()
        await api.manager(MANAGER).with_raw_response.manager_health()
    assert seen == EXPECTED


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"timeout": None, "retry": None, "deadline": None},
        {"timeout": NOT_GIVEN, "retry": NOT_GIVEN, "deadline": NOT_GIVEN},
        {"timeout": Timeout(5.0), "retry": RetryPolicy(max_retries=1), "deadline": 9.0},
        {"api_key": "sk-test-argument", "base_url": "http://127.0.0.1:9", "browser_api_key": "sk-test-b"},
    ],
    ids=["defaults", "all-off", "not-given", "explicit", "arguments-win"],
)
async def test_both_twins_resolve_the_same_settings_and_policy(options: dict[str, Any]) -> None:
    sync = Fleet(environ=ENVIRON, **options)
    async_ = AsyncFleet(environ=ENVIRON, **options)
    try:
        assert sync.config == async_.config
        assert sync.call_policy == async_.call_policy
        assert sync.api.call_policy is sync.call_policy
        assert async_.api.call_policy is async_.call_policy
        assert sync.api.http_client is sync.http_client
        assert async_.api.http_client is async_.http_client
    finally:
        sync.close()
        await async_.close()


def test_both_twins_refuse_a_missing_key_alike() -> None:
    errors = []
    for cls in (Fleet, AsyncFleet):
        with pytest.raises(FleetError) as caught:
            cls(environ={})
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]


def test_a_caller_s_pool_is_not_closed_and_an_own_pool_is() -> None:
    """The base takes ownership only of the pool it made."""
    given = httpx.Client()
    fleet = Fleet(environ=ENVIRON, http_client=given)
    fleet.close()
    assert not given.is_closed
    given.close()
    own = Fleet(environ=ENVIRON)
    pool = own.http_client
    own.close()
    assert pool.is_closed
