"""The CDP proxy's allow-list (``fleet_local._cdp_policy``), method by method, without a browser.

Round 3 found the proxy working from a deny-list: ``SystemInfo.getProcessInfo`` (the server's
processes) went through, and so did ``Network.continueInterceptedRequest`` with a ``file:`` URL,
which no list named (Chromium refused that one itself). Now only listed methods reach the
browser, and each listed method that carries a URL has it checked. The same refusals through a
live proxy, and Playwright still browsing, are in ``test_browser_cdp_allow_list.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleet_local._cdp_policy import ALLOWED_DOMAINS, ALLOWED_METHODS, URL_PARAMS, refusal

HOSTS = ["127.0.0.1", "example.com"]

# What Playwright sent through the proxy in the browser tests (recorded from
# tests/local/test_browser_*.py, test_jobs_browser.py, test_traces_browser.py and
# tests/e2e/test_browser_episodes.py), the Playwright session of test_browser_cdp_allow_list.py
# (routes, cookies, history, emulation, typing) included.
PLAYWRIGHT_SENT = [
    "Browser.getVersion",
    "Browser.getWindowForTarget",
    "Browser.setDownloadBehavior",
    "Browser.setWindowBounds",
    "DOM.describeNode",
    "DOM.getBoxModel",
    "DOM.getContentQuads",
    "DOM.resolveNode",
    "DOM.scrollIntoViewIfNeeded",
    "Emulation.setDeviceMetricsOverride",
    "Emulation.setEmulatedMedia",
    "Emulation.setFocusEmulationEnabled",
    "Emulation.setLocaleOverride",
    "Emulation.setUserAgentOverride",
    "Fetch.continueRequest",
    "Fetch.disable",
    "Fetch.enable",
    "Fetch.failRequest",
    "Input.dispatchKeyEvent",
    "Input.dispatchMouseEvent",
    "Input.insertText",
    "Inspector.enable",
    "Log.enable",
    "Network.enable",
    "Network.setCacheDisabled",
    "Network.setExtraHTTPHeaders",
    "Page.addScriptToEvaluateOnNewDocument",
    "Page.captureScreenshot",
    "Page.createIsolatedWorld",
    "Page.enable",
    "Page.getFrameTree",
    "Page.getLayoutMetrics",
    "Page.getNavigationHistory",
    "Page.navigate",
    "Page.navigateToHistoryEntry",
    "Page.reload",
    "Page.setFontFamilies",
    "Page.setLifecycleEventsEnabled",
    "Runtime.callFunctionOn",
    "Runtime.enable",
    "Runtime.evaluate",
    "Runtime.releaseObject",
    "Runtime.runIfWaitingForDebugger",
    "Storage.getCookies",
    "Storage.setCookies",
    "Target.attachToTarget",
    "Target.closeTarget",
    "Target.createBrowserContext",
    "Target.createTarget",
    "Target.disposeBrowserContext",
    "Target.getTargetInfo",
    "Target.setAutoAttach",
]


@pytest.mark.parametrize("method", PLAYWRIGHT_SENT)
def test_what_playwright_sends_is_allowed(method: str) -> None:
    assert refusal(method, {}, HOSTS) is None


@pytest.mark.parametrize(
    "method",
    [
        "SystemInfo.getProcessInfo",
        "SystemInfo.getInfo",
        "SystemInfo.getFeatureState",
        "Tracing.start",
        "Tracing.end",
        "Browser.getBrowserCommandLine",
        "Browser.getHistograms",
        "Storage.clearDataForOrigin",
        "Memory.getBrowserSamplingProfile",
        "HeapProfiler.takeHeapSnapshot",
        "Debugger.enable",
        "ServiceWorker.deliverPushMessage",
        "FileSystem.getDirectory",
        "BackgroundService.startObserving",
        "WebAuthn.enable",
        "DeviceAccess.enable",
        "Page.crash",
        "Page.setGeolocationOverride",
        "Network.replayXHR",
        "Target.attachToBrowserTarget",
        "Nonsense.method",
        "page.navigate",  # methods are case-sensitive: not the listed one
        "",
    ],
)
def test_an_unlisted_method_is_refused_with_an_error_naming_it(method: str) -> None:
    why = refusal(method, {}, HOSTS)
    assert why is not None
    assert why.startswith(f"{method} is refused by the fleet server"), why


def test_a_refused_method_name_is_shown_capped() -> None:
    why = refusal("X." + "a" * 10_000, {}, HOSTS)
    assert why is not None and len(why) < 400


def test_every_allowed_domain_and_method_is_well_formed() -> None:
    assert all(d and d[0].isupper() and "." not in d for d in ALLOWED_DOMAINS)
    for method in ALLOWED_METHODS:
        domain, _, name = method.partition(".")
        assert domain and name and domain not in ALLOWED_DOMAINS, method
    assert set(URL_PARAMS) <= ALLOWED_METHODS


def _with_url(path: str, url: Any) -> dict[str, Any]:
    """``params`` holding ``url`` at ``path`` (the notation of ``URL_PARAMS``)."""
    head, listed, field = path.partition("[]")
    if not listed:
        return {head: url}
    if not field:
        return {head: ["https://example.com/", url]}
    return {
        head: [
            {"name": "a", field.lstrip("."): "https://example.com/"},
            {"name": "b", field.lstrip("."): url},
        ]
    }


URL_CASES = [(method, path) for method, paths in URL_PARAMS.items() for path in paths]


@pytest.mark.parametrize(("method", "path"), URL_CASES, ids=[f"{m}:{p}" for m, p in URL_CASES])
@pytest.mark.parametrize(
    "url",
    ["file:///etc/hostname", "chrome://settings", "http://169.254.169.254/", "https://evil.example.org/"],
)
def test_each_url_carrying_method_checks_its_url(method: str, path: str, url: str) -> None:
    why = refusal(method, _with_url(path, url), HOSTS)
    assert why is not None and "is refused" in why and path in why, why
    assert refusal(method, _with_url(path, "https://example.com/page"), HOSTS) is None
    assert refusal(method, _with_url(path, "http://127.0.0.1:8000/x"), HOSTS) is None


@pytest.mark.parametrize(("method", "path"), URL_CASES, ids=[f"{m}:{p}" for m, p in URL_CASES])
def test_a_url_that_is_not_a_string_is_refused(method: str, path: str) -> None:
    why = refusal(method, _with_url(path, {"url": "file:///etc/hostname"}), HOSTS)
    assert why == f"{method}: {path} must be a string URL"


def test_the_refusals_inside_allowed_domains_still_hold() -> None:
    assert refusal("DOM.setFileInputFiles", {"files": ["/etc/hostname"]}, HOSTS) is not None
    assert refusal("DOM.getFileInfo", {"objectId": "1"}, HOSTS) is not None
    drop = {"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": ["/etc/hostname"]}}
    assert refusal("Input.dispatchDragEvent", drop, HOSTS) is not None
    assert refusal("Input.dispatchDragEvent", {**drop, "data": {"items": []}}, HOSTS) is None
    assert refusal("Tracing.start", {"tracingBackend": "system"}, HOSTS) is not None
    assert refusal("Target.createBrowserContext", {"proxyServer": "direct://"}, HOSTS) is not None
