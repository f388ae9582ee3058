"""Where each surface lives and which key it takes (docs/wire.md#hosts)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleet_sdk import ConfigurationError, FleetConfig, Surface
from fleet_sdk._runtime import ORCHESTRATOR_URL, PLATFORM_URL


def test_production_hosts_are_pinned_and_differ() -> None:
    """Regression: trace calls went to the orchestrator and 404'd silently for a whole run."""
    config = FleetConfig.resolve(environ={})
    assert config.url_for(Surface.CONTROL_PLANE) == "https://orchestrator.fleetai.com"
    assert config.url_for(Surface.SESSIONS) == "https://orchestrator.fleetai.com"
    assert config.url_for(Surface.TRACES) == "https://api.internal.fleet-platform.fleetai.com"
    assert config.url_for(Surface.BROWSER) == "https://api.internal.fleet-platform.fleetai.com"
    assert ORCHESTRATOR_URL != PLATFORM_URL


def test_arguments_beat_environment_beat_production() -> None:
    environ = {
        "FLEET_BASE_URL": "http://env-base:1/",
        "FLEET_PLATFORM_URL": "http://env-platform:2",
        "BROWSER_API_BASE_URL": "http://env-browser:3",
        "FLEET_API_KEY": "env-key-123456",
    }
    from_env = FleetConfig.resolve(environ=environ)
    assert from_env.base_url == "http://env-base:1"
    assert from_env.platform_url == "http://env-platform:2"
    assert from_env.browser_url == "http://env-browser:3"
    assert from_env.api_key == "env-key-123456"
    explicit = FleetConfig.resolve(
        api_key="arg-key-123456", base_url="http://arg:9", platform_url="http://argp:9", environ=environ
    )
    assert explicit.base_url == "http://arg:9"
    assert explicit.platform_url == "http://argp:9"
    assert explicit.browser_url == "http://env-browser:3"
    assert explicit.api_key == "arg-key-123456"


def test_browser_url_falls_back_to_platform_override() -> None:
    config = FleetConfig.resolve(environ={"FLEET_PLATFORM_URL": "http://127.0.0.1:9000"})
    assert config.url_for(Surface.BROWSER) == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"FLEET_TEAM_API_KEY": "team", "BROWSER_API_TOKEN": "tok", "FLEET_API_KEY": "fleet"}, "team"),
        ({"BROWSER_API_TOKEN": "tok", "FLEET_API_KEY": "fleet"}, "tok"),
        ({"FLEET_API_KEY": "fleet"}, "fleet"),
        ({}, None),
    ],
)
def test_browser_key_fallback_chain(environ: dict[str, str], expected: str | None) -> None:
    """Regression: FLEET_API_KEY alone is refused by the browser-lease API (401)."""
    config = FleetConfig.resolve(environ=environ)
    assert config.key_for(Surface.BROWSER) == expected
    assert config.key_for(Surface.CONTROL_PLANE) == environ.get("FLEET_API_KEY")


def test_missing_key_error_says_how_to_set_it() -> None:
    config = FleetConfig.resolve(environ={})
    with pytest.raises(ConfigurationError, match="FLEET_API_KEY"):
        config.require_key(Surface.CONTROL_PLANE)
    with pytest.raises(ConfigurationError, match="FLEET_TEAM_API_KEY"):
        config.require_key(Surface.BROWSER)


def test_bad_url_is_named() -> None:
    with pytest.raises(ConfigurationError, match="FLEET_BASE_URL"):
        FleetConfig.resolve(environ={"FLEET_BASE_URL": "orchestrator.fleetai.com"})


def test_repr_hides_keys() -> None:
    config = FleetConfig.resolve(
        api_key="sk-very-secret-key", environ={"FLEET_TEAM_API_KEY": "team-secret-key"}
    )
    assert "sk-very-secret-key" not in repr(config)
    assert "team-secret-key" not in repr(config)


def test_import_fleet_sdk_stays_light() -> None:
    """``import fleet_sdk`` must not pull in boto3, mcp or the server stack."""
    code = (
        "import sys, fleet_sdk; "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'boto3', 'botocore', 'mcp', 'fastapi', 'uvicorn', 'starlette', 'moto'}); "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
