"""``GET /v1/discovery`` and the client that reads it: ``base_url`` and the key are the only settings.

A client of any server but the production orchestrator sends its platform and browser calls to
``base_url`` itself and asks the server, once, on its first screenshot, where screenshots go. It
never falls back to the production bucket: a server that names no bucket leaves them data URLs.
"""

from __future__ import annotations

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk import AuthenticationError, Fleet, FleetConfig
from fleet_sdk._runtime import ORCHESTRATOR_URL, PLATFORM_URL
from fleet_sdk.traces import DiscoveredScreenshotStore, ScreenshotStore
from fleet_sdk.traces._screenshots import ScreenshotsUnavailableError

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 13


def test_a_non_production_base_url_serves_every_surface() -> None:
    local = FleetConfig.resolve(base_url="http://127.0.0.1:18420", api_key="k", environ={})
    assert (local.platform_url, local.browser_url) == ("http://127.0.0.1:18420", "http://127.0.0.1:18420")
    production = FleetConfig.resolve(api_key="k", environ={})
    assert (production.base_url, production.platform_url) == (ORCHESTRATOR_URL, PLATFORM_URL)
    # An explicit platform URL (argument or variable) still wins over the derivation.
    told = FleetConfig.resolve(
        base_url="http://127.0.0.1:18420", environ={"FLEET_PLATFORM_URL": "http://127.0.0.1:9"}
    )
    assert (told.platform_url, told.browser_url) == ("http://127.0.0.1:9", "http://127.0.0.1:9")


def test_only_a_production_client_defaults_to_the_production_bucket() -> None:
    with Fleet(api_key="k", environ={}) as production:
        assert isinstance(production.traces.screenshot_store, ScreenshotStore)
    with Fleet(base_url="http://127.0.0.1:9", api_key="k", environ={}) as other:
        store = other.traces.screenshot_store
        assert isinstance(store, DiscoveredScreenshotStore) and store.base_url == "http://127.0.0.1:9"
        assert other.with_options(deadline=5).traces.screenshot_store is store  # copies share it


def test_discovery_names_this_server_and_its_bucket(local: LocalFleet) -> None:
    with Fleet(base_url=local.base_url, api_key=local.api_key, environ={}) as fleet:
        found = fleet.api.control_plane.get_discovery()
    assert (found.platform_url, found.browser_url) == (local.base_url, local.base_url)
    assert found.screenshots is not None and local.s3_url is not None
    assert found.screenshots.endpoint_url == local.s3_url
    assert found.screenshots.public_url_base == f"{local.s3_url}/{found.screenshots.bucket}"
    with (
        Fleet(base_url=local.base_url, api_key="wrong-key", environ={}) as stranger,
        pytest.raises(AuthenticationError),
    ):
        stranger.api.control_plane.get_discovery()


def test_the_store_asks_once_and_uploads_to_the_named_bucket(
    local: LocalFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    real_get = httpx.get

    def counting_get(url: str, **kwargs: object) -> httpx.Response:
        asked.append(url)
        return real_get(url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx, "get", counting_get)
    store = DiscoveredScreenshotStore(local.base_url, local.api_key)
    first = store.upload("harness/screenshot/discovery-a.png", PNG + b"a", "image/png")
    second = store.upload("harness/screenshot/discovery-b.png", PNG + b"b", "image/png")
    assert asked == [f"{local.base_url}/v1/discovery"]
    assert local.s3_url is not None and first.startswith(f"{local.s3_url}/")
    assert httpx.get(second, trust_env=False).content == PNG + b"b"


def test_a_server_without_the_route_gets_no_screenshots_and_a_5xx_is_asked_again(
    faulty: LocalFleet,
) -> None:
    store = DiscoveredScreenshotStore(faulty.base_url, faulty.api_key)
    faulty.inject_fault("/v1/discovery", method="GET", status=503)
    with pytest.raises(ScreenshotsUnavailableError, match="503"):
        store.upload("harness/screenshot/x.png", PNG, "image/png")
    assert store.resolve() is not None  # asked again: this time it answered

    unknown = DiscoveredScreenshotStore(faulty.base_url, faulty.api_key)
    faulty.inject_fault("/v1/discovery", method="GET", status=404, body={"detail": "Not Found"})
    with pytest.raises(ScreenshotsUnavailableError, match="404"):
        unknown.upload("harness/screenshot/x.png", PNG, "image/png")
    assert unknown.resolve() is None  # a definite answer is kept: not asked again
