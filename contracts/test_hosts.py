"""Hosts are pinned: each surface on its host (docs/wire.md#hosts), in the cassettes and in the SDK.

The regression this guards against: trace jobs and session ingest were once sent to one host,
and sessions stopped uploading silently for a whole training run. The expected URLs are
written out here literally, never imported from the SDK under test.
"""

from __future__ import annotations

import re
from typing import Final

import pytest
from vcr.request import Request

from contracts.cassette_io import interactions
from contracts.matchers import INSTANCE_HOST_RE, S3_HOST
from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk._runtime import FleetConfig, Surface

# docs/wire.md#hosts.
ORCHESTRATOR: Final = "https://orchestrator.fleetai.com"
PLATFORM: Final = "https://api.internal.fleet-platform.fleetai.com"
S3: Final = "https://fleet-sessions-images.s3.us-east-1.amazonaws.com"

TRACE_JOBS_PATH: Final = "/v1/traces/jobs"
INGEST_PATH: Final = "/v1/sessions/ingest"

# Path prefix -> the base URL that serves it (instance hosts are checked by pattern).
SURFACE_HOSTS: Final = (
    (re.compile(r"^/v1/traces/"), PLATFORM),
    (re.compile(r"^/v1/browser(/|$)"), PLATFORM),
    (re.compile(r"^/v1/(env|tasks|verifiers|jobs|sessions)(/|$)"), ORCHESTRATOR),
    (re.compile(r"^/harness/screenshot/"), S3),
)


def _base_url(request: Request) -> str:
    default_port = {"https": 443, "http": 80}.get(request.scheme)
    port = "" if request.port == default_port else f":{request.port}"
    return f"{request.scheme}://{request.host}{port}"


def _base_urls(path: str) -> set[str]:
    return {_base_url(item.request) for item in interactions() if item.request.path == path}


def test_trace_jobs_and_ingest_hosts_in_the_cassettes() -> None:
    trace_jobs, ingest = _base_urls(TRACE_JOBS_PATH), _base_urls(INGEST_PATH)
    assert trace_jobs == {PLATFORM}, f"trace jobs recorded on {trace_jobs}"
    assert ingest == {ORCHESTRATOR}, f"session ingest recorded on {ingest}"
    assert trace_jobs.isdisjoint(ingest)


def test_trace_jobs_and_ingest_hosts_in_the_sdk_config() -> None:
    config = FleetConfig.resolve(api_key="k", environ={})
    assert config.url_for(Surface.TRACES) == PLATFORM
    assert config.url_for(Surface.SESSIONS) == ORCHESTRATOR
    assert config.url_for(Surface.CONTROL_PLANE) == ORCHESTRATOR
    assert config.url_for(Surface.BROWSER) == PLATFORM
    assert config.url_for(Surface.TRACES) != config.url_for(Surface.SESSIONS)


@pytest.mark.parametrize("client", [Fleet, AsyncFleet])
def test_the_clients_send_each_surface_to_its_host(client: type[Fleet] | type[AsyncFleet]) -> None:
    fleet = client("k", environ={})
    surfaces = {
        "traces": fleet.api.traces,
        "sessions": fleet.api.sessions,
        "control_plane": fleet.api.control_plane,
        "browser": fleet.api.browser,
    }
    base = {name: surface._http.base_url for name, surface in surfaces.items()}
    assert base == {
        "traces": PLATFORM,
        "sessions": ORCHESTRATOR,
        "control_plane": ORCHESTRATOR,
        "browser": PLATFORM,
    }


@pytest.mark.parametrize(
    ("environ", "traces", "sessions"),
    [
        # A non-production orchestrator serves the platform surfaces too, unless told otherwise: its
        # key once went to the production platform (traces) without the user knowing.
        (
            {"FLEET_BASE_URL": "https://staging.fleetai.example"},
            "https://staging.fleetai.example",
            "https://staging.fleetai.example",
        ),
        (
            {"FLEET_BASE_URL": "https://staging.fleetai.example", "FLEET_PLATFORM_URL": PLATFORM},
            PLATFORM,
            "https://staging.fleetai.example",
        ),
        (
            {"FLEET_PLATFORM_URL": "https://platform.fleetai.example"},
            "https://platform.fleetai.example",
            ORCHESTRATOR,
        ),
    ],
)
def test_the_platform_follows_a_non_production_base_url_unless_set(
    environ: dict[str, str], traces: str, sessions: str
) -> None:
    config = FleetConfig.resolve(api_key="k", environ=environ)
    assert (config.url_for(Surface.TRACES), config.url_for(Surface.SESSIONS)) == (traces, sessions)


def test_every_recorded_request_is_on_its_surface_host() -> None:
    wrong: list[str] = []
    for item in interactions():
        request = item.request
        base = _base_url(request)
        if INSTANCE_HOST_RE.match(request.host or ""):
            if not (
                request.scheme == "https" and request.port == 443 and request.path.startswith("/api/v1/env/")
            ):
                wrong.append(f"{item.label}: not the manager API of an instance")
            continue
        expected = next((host for pattern, host in SURFACE_HOSTS if pattern.match(request.path)), None)
        if expected is None or base != expected:
            wrong.append(f"{item.label}: on {base}, expected {expected}")
    assert not wrong, "\n".join(wrong)


def test_the_s3_host_is_the_public_bucket_url() -> None:
    assert f"https://{S3_HOST}" == S3
    from fleet_sdk.traces import DEFAULT_PUBLIC_URL_BASE

    assert DEFAULT_PUBLIC_URL_BASE == S3
