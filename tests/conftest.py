"""Shared fixtures. Tests talk to real servers over loopback or to httpx mock
transports that pin wire shapes; nothing reaches the network."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_fleet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a developer's real keys or URLs from the environment."""
    for name in (
        "FLEET_API_KEY",
        "FLEET_BASE_URL",
        "FLEET_PLATFORM_URL",
        "BROWSER_API_BASE_URL",
        "FLEET_TEAM_API_KEY",
        "BROWSER_API_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
