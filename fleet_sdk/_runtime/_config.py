"""Where each API lives and which key it takes.

Resolution order for every setting: an explicit argument, then an environment
variable, then the default (docs/wire.md#hosts): production for a client of the production
orchestrator, else the one ``base_url`` for every surface, so that a key meant for a local or
self-hosted server never reaches a production host. The two production hosts
differ on purpose: trace jobs and browser leases live on the platform host,
everything else (including session ingest) on the orchestrator.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .._exceptions import ConfigurationError

ORCHESTRATOR_URL = "https://orchestrator.fleetai.com"
PLATFORM_URL = "https://api.internal.fleet-platform.fleetai.com"

ENV_API_KEY = "FLEET_API_KEY"
ENV_BASE_URL = "FLEET_BASE_URL"
ENV_PLATFORM_URL = "FLEET_PLATFORM_URL"
ENV_BROWSER_URL = "BROWSER_API_BASE_URL"
# The browser-lease API rejects some research keys; the team key comes first (docs/wire.md#hosts).
BROWSER_KEY_CHAIN = ("FLEET_TEAM_API_KEY", "BROWSER_API_TOKEN")


class Surface(StrEnum):
    """The API surfaces a ``Fleet`` client talks to."""

    CONTROL_PLANE = "control_plane"
    """``/v1/env``, ``/v1/tasks``, ``/v1/verifiers``, ``/v1/jobs`` on the orchestrator."""
    SESSIONS = "sessions"
    """``/v1/sessions/...`` (ingest and read-back) on the orchestrator."""
    TRACES = "traces"
    """``/v1/traces/...`` on the platform host."""
    BROWSER = "browser"
    """``/v1/browser...`` on the platform host (or ``BROWSER_API_BASE_URL``)."""


def _clean_url(url: str, setting: str) -> str:
    url = url.strip()
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{setting} must be an http(s) URL, got {url!r}")
    return url.rstrip("/")


@dataclass(frozen=True)
class FleetConfig:
    """Resolved base URLs and keys for every surface.

    Build it with ``FleetConfig.resolve(...)``; construct directly only in tests.
    ``repr`` never shows a key.
    """

    base_url: str = ORCHESTRATOR_URL
    platform_url: str = PLATFORM_URL
    browser_url: str = PLATFORM_URL
    api_key: str | None = field(default=None, repr=False)
    browser_api_key: str | None = field(default=None, repr=False)

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        platform_url: str | None = None,
        browser_url: str | None = None,
        browser_api_key: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> FleetConfig:
        """Resolve every setting from arguments, then the environment, then production.

        Args:
            api_key: Fleet API key; else ``FLEET_API_KEY``.
            base_url: Orchestrator URL (control plane, sessions); else ``FLEET_BASE_URL``.
            platform_url: Platform URL (traces); else ``FLEET_PLATFORM_URL``; else production
                when ``base_url`` is the production orchestrator, else ``base_url`` itself (a
                local or self-hosted server serves every surface; see ``get_discovery``).
            browser_url: Browser-lease URL; else ``BROWSER_API_BASE_URL``, else the platform URL.
            browser_api_key: Browser-lease key; else ``FLEET_TEAM_API_KEY``, ``BROWSER_API_TOKEN``,
                then the Fleet API key.
            environ: The environment to read (defaults to ``os.environ``).
        """
        env = os.environ if environ is None else environ
        key = api_key or env.get(ENV_API_KEY) or None
        resolved_base = _clean_url(
            base_url or env.get(ENV_BASE_URL) or ORCHESTRATOR_URL, "base_url / FLEET_BASE_URL"
        )
        # Any server but the production orchestrator serves the platform surfaces itself unless
        # told otherwise: its key must never be sent to the production platform.
        default_platform = PLATFORM_URL if resolved_base == ORCHESTRATOR_URL else resolved_base
        resolved_platform = _clean_url(
            platform_url or env.get(ENV_PLATFORM_URL) or default_platform,
            "platform_url / FLEET_PLATFORM_URL",
        )
        browser_key = browser_api_key
        for name in BROWSER_KEY_CHAIN:
            browser_key = browser_key or env.get(name) or None
        return cls(
            base_url=resolved_base,
            platform_url=resolved_platform,
            browser_url=_clean_url(
                browser_url or env.get(ENV_BROWSER_URL) or resolved_platform,
                "browser_url / BROWSER_API_BASE_URL",
            ),
            api_key=key,
            browser_api_key=browser_key or key,
        )

    def url_for(self, surface: Surface) -> str:
        """The base URL that serves ``surface``."""
        if surface in (Surface.CONTROL_PLANE, Surface.SESSIONS):
            return self.base_url
        if surface is Surface.TRACES:
            return self.platform_url
        return self.browser_url

    def key_for(self, surface: Surface) -> str | None:
        """The bearer key sent to ``surface``."""
        return self.browser_api_key if surface is Surface.BROWSER else self.api_key

    def require_key(self, surface: Surface) -> str:
        """The key for ``surface``, or a ``ConfigurationError`` that says how to set one."""
        key = self.key_for(surface)
        if not key:
            hint = (
                "FLEET_TEAM_API_KEY, BROWSER_API_TOKEN or FLEET_API_KEY"
                if surface is Surface.BROWSER
                else "FLEET_API_KEY"
            )
            raise ConfigurationError(f"no API key for {surface.value}: pass api_key= or set {hint}")
        return key
