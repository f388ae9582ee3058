"""What a CDP client of a lease may ask its browser: the methods the CDP proxy (``_cdp``) allows.

A key holder drives a lease's Chromium over its ``cdp_url``, but CDP also reaches the machine the
browser runs on and the browser's own network settings. The proxy works from an allow-list: the
domains and methods Playwright (``connect_over_cdp``, the server's own ``computer`` tool) and a
browser-use agent need (pages, scripts, the DOM, input, emulation, screenshots, the network as a
page sees it, targets and contexts); any other method is refused with a CDP error naming it.
:data:`ALLOWED_METHODS` and :data:`ALLOWED_DOMAINS` are the list. Every allowed method that
carries a URL (or an origin) the browser would load or act for has it checked against the lease's
hosts (:data:`URL_PARAMS`). Among the allowed ones, the proxy also refuses, with a CDP error that
names the reason:

* the network path: ``Target.createBrowserContext`` with a ``proxyServer`` or ``proxyBypassList``
  (``direct://`` would skip the lease's proxy);
* the host's files: URLs outside the lease's hosts or of another scheme (``file:``, ``chrome:``,
  ``view-source:``, ``about:`` pages but ``about:blank``) in any of :data:`URL_PARAMS`
  (``Page.navigate``, ``Target.createTarget``, ``Network.loadNetworkResource``,
  ``Fetch.continueRequest``, ``Network.continueInterceptedRequest``, cookies' URLs...);
  ``DOM.setFileInputFiles``, ``DOM.getFileInfo`` and ``Input.dispatchDragEvent`` with files (they
  hand host paths to a page, or a page's files' host paths to the client);
* the browser's own privileges: ``Target.exposeDevToolsProtocol`` (CDP for a page's scripts,
  past this proxy), ``Target.sendMessageToTarget`` (messages this proxy would not see),
  ``Target.setRemoteLocations``, ``Target.openDevTools``, ``Browser.executeBrowserCommand``,
  and the ``Extensions``, ``PWA``, ``Cast``, ``Tethering``, ``SystemInfo`` and ``Tracing``
  domains (the last two describe the server's processes); attaching to the browser's own UI targets
  (``browser_ui``, ``chrome:`` pages);
* the browser's life: ``Browser.close``, ``Browser.crash``, ``Browser.crashGpuProcess`` (a lease
  ends by deleting it).

Downloads are never allowed: ``Browser.setDownloadBehavior`` and ``Page.setDownloadBehavior``
are carried out as ``deny`` whatever they ask (Playwright sends one with a path of its own when it
connects, so refusing them would refuse Playwright).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._hosts import browser_url, host_allowed

__all__ = ["ALLOWED_DOMAINS", "ALLOWED_METHODS", "URL_PARAMS", "refusal", "rewritten", "target_refusal"]

ALLOWED_DOMAINS = frozenset(
    {
        # Inside the page's renderer (its DOM, styles, scripts, layout, input, emulation): no
        # host, no file and no URL to load in any of their methods.
        *("Accessibility", "Animation", "CSS", "Console", "DOM", "DOMDebugger", "DOMSnapshot"),
        *("DOMStorage", "Emulation", "Input", "Inspector", "IO", "LayerTree", "Log", "Media"),
        *("Overlay", "Performance", "PerformanceTimeline", "Runtime", "Schema"),
    }
)
"""Domains whose every method is allowed (but the refusals below)."""

ALLOWED_METHODS = frozenset(
    {
        *("Page.enable", "Page.disable", "Page.navigate", "Page.reload", "Page.stopLoading"),
        *("Page.getFrameTree", "Page.getResourceTree", "Page.getResourceContent", "Page.getLayoutMetrics"),
        *("Page.captureScreenshot", "Page.captureSnapshot", "Page.printToPDF", "Page.startScreencast"),
        *("Page.stopScreencast", "Page.screencastFrameAck", "Page.addScriptToEvaluateOnNewDocument"),
        *("Page.removeScriptToEvaluateOnNewDocument", "Page.createIsolatedWorld", "Page.bringToFront"),
        *("Page.setLifecycleEventsEnabled", "Page.setFontFamilies", "Page.setFontSizes", "Page.close"),
        *("Page.getNavigationHistory", "Page.navigateToHistoryEntry", "Page.resetNavigationHistory"),
        *("Page.handleJavaScriptDialog", "Page.setBypassCSP", "Page.setInterceptFileChooserDialog"),
        *("Page.setDownloadBehavior", "Page.setDocumentContent", "Page.setWebLifecycleState"),
        *("Page.setAdBlockingEnabled", "Page.setTouchEmulationEnabled", "Page.setPrerenderingAllowed"),
        *("Page.setDeviceMetricsOverride", "Page.clearDeviceMetricsOverride", "Page.getAppManifest"),
        *("Network.enable", "Network.disable", "Network.setCacheDisabled", "Network.setBypassServiceWorker"),
        *("Network.setExtraHTTPHeaders", "Network.setUserAgentOverride", "Network.emulateNetworkConditions"),
        *("Network.getResponseBody", "Network.getRequestPostData", "Network.searchInResponseBody"),
        *("Network.getResponseBodyForInterception", "Network.takeResponseBodyForInterceptionAsStream"),
        *("Network.setBlockedURLs", "Network.setRequestInterception", "Network.continueInterceptedRequest"),
        *("Network.loadNetworkResource", "Network.getCookies", "Network.getAllCookies", "Network.setCookie"),
        *("Network.setCookies", "Network.deleteCookies", "Network.clearBrowserCookies"),
        *("Network.clearBrowserCache", "Network.setAttachDebugStack", "Network.setAcceptedEncodings"),
        "Network.clearAcceptedEncodingsOverride",
        *("Fetch.enable", "Fetch.disable", "Fetch.continueRequest", "Fetch.failRequest"),
        *("Fetch.fulfillRequest", "Fetch.continueWithAuth", "Fetch.continueResponse"),
        *("Fetch.getResponseBody", "Fetch.takeResponseBodyAsStream"),
        *("Target.setAutoAttach", "Target.autoAttachRelated", "Target.setDiscoverTargets"),
        *("Target.getTargets", "Target.getTargetInfo", "Target.attachToTarget", "Target.detachFromTarget"),
        *("Target.createTarget", "Target.closeTarget", "Target.activateTarget"),
        *("Target.createBrowserContext", "Target.disposeBrowserContext", "Target.getBrowserContexts"),
        *("Browser.getVersion", "Browser.setDownloadBehavior", "Browser.cancelDownload"),
        *("Browser.getWindowForTarget", "Browser.getWindowBounds", "Browser.setWindowBounds"),
        *("Browser.grantPermissions", "Browser.resetPermissions", "Browser.setPermission"),
        *(
            "Storage.getCookies",
            "Storage.setCookies",
            "Storage.clearCookies",
            "Storage.getStorageKeyForFrame",
        ),
        *("Security.enable", "Security.disable", "Security.setIgnoreCertificateErrors"),
    }
)
"""Methods allowed one by one, in the domains that also reach the browser, its network or disk."""

URL_PARAMS: dict[str, tuple[str, ...]] = {
    "Page.navigate": ("url",),
    "Page.getResourceContent": ("url",),
    "Target.createTarget": ("url",),
    "Network.loadNetworkResource": ("url",),
    "Network.continueInterceptedRequest": ("url",),
    "Network.getCookies": ("urls[]",),
    "Network.setCookie": ("url",),
    "Network.setCookies": ("cookies[].url",),
    "Network.deleteCookies": ("url",),
    "Storage.setCookies": ("cookies[].url",),
    "Fetch.continueRequest": ("url",),
    "Browser.grantPermissions": ("origin",),
    "Browser.setPermission": ("origin",),
}
"""The parameters of allowed methods that hold a URL or an origin: each must be a lease's
(``[]``: each item of a list; ``[].name``: that field of each item)."""

_REFUSED_DOMAINS = {
    "Extensions": "loads extensions from the server's disk",
    "PWA": "installs web apps from any URL",
    "Cast": "discovers and casts to devices on the network",
    "Tethering": "opens listening ports on the server",
    "SystemInfo": "describes the server's processes, GPU and command line",
    "Tracing": "a browser trace holds the server's process list and command lines",
}

_REFUSED_METHODS = {
    "Browser.close": "the browser lives as long as its lease: delete the lease to end it",
    "Browser.crash": "the browser lives as long as its lease: delete the lease to end it",
    "Browser.crashGpuProcess": "the browser lives as long as its lease",
    "Browser.executeBrowserCommand": "runs the browser's own UI commands",
    "Target.exposeDevToolsProtocol": "would give a page's scripts CDP past this proxy",
    "Target.sendMessageToTarget": "use flat sessions (sessionId on each message)",
    "Target.setRemoteLocations": "makes the browser connect to other hosts",
    "Target.openDevTools": "opens the browser's privileged DevTools pages",
    "DOM.setFileInputFiles": "hands files of the server's disk to a page",
    "DOM.getFileInfo": "answers the server-side path of a page's file",
}

_DOWNLOAD_BEHAVIOR = frozenset({"Browser.setDownloadBehavior", "Page.setDownloadBehavior"})

# Pages with the browser's own privileges (WebUI bindings), never a lease's content.
_PRIVILEGED_SCHEMES = ("chrome:", "chrome-untrusted:", "chrome-extension:", "chrome-search:", "devtools:")


def refusal(method: str, params: Mapping[str, Any], allowed_hosts: Sequence[str]) -> str | None:
    """Why the proxy refuses ``method`` with ``params``, or None when it goes to the browser.

    Args:
        method: The CDP method, ``Domain.method``.
        params: Its parameters (``{}`` when none were sent).
        allowed_hosts: The lease's hosts.
    """
    domain = method.partition(".")[0]
    why = _REFUSED_DOMAINS.get(domain) or _REFUSED_METHODS.get(method)
    if why is not None:
        return f"{method} is refused by the fleet server: {why}"
    if domain not in ALLOWED_DOMAINS and method not in ALLOWED_METHODS:
        return (
            f"{method[:100]} is refused by the fleet server: it is not among the CDP methods a"
            " lease's client may use (pages, scripts, DOM, input, emulation, screenshots, the"
            " page's network, targets and contexts)"
        )
    for path in URL_PARAMS.get(method, ()):
        for url in _values(params, path):
            if not isinstance(url, str):
                return f"{method}: {path} must be a string URL"
            if not host_allowed(url, allowed_hosts):
                shown = browser_url(url)[:200]
                hosts = list(allowed_hosts)
                return (
                    f"{method} to {shown!r} ({path}) is refused: only http(s) URLs of the lease's"
                    f" allowed_hosts {hosts}"
                )
    if method == "Target.createBrowserContext" and (
        params.get("proxyServer") is not None or params.get("proxyBypassList") is not None
    ):
        return f"{method} with a proxy is refused: every context goes through the lease's proxy"
    if method == "Input.dispatchDragEvent":
        data = params.get("data")
        if isinstance(data, Mapping) and data.get("files"):
            return f"{method} with files is refused: it hands files of the server's disk to a page"
    return None


def _values(params: Mapping[str, Any], path: str) -> list[Any]:
    """The values at ``path`` in ``params`` (see :data:`URL_PARAMS`); none when it is absent."""
    head, listed, field = path.partition("[]")
    value = params.get(head)
    if value is None:
        return []
    if not listed or not isinstance(value, list):
        return [value]  # a list where a string was due is refused as not a string, and vice versa
    if not field:
        return list(value)
    name = field.lstrip(".")
    return [item.get(name) for item in value if isinstance(item, Mapping) and item.get(name) is not None]


def rewritten(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters the browser gets: a download behaviour is always ``deny``, without a path.

    Args:
        method: The CDP method.
        params: Its parameters, as the client sent them.
    """
    if method in _DOWNLOAD_BEHAVIOR:
        kept = {k: v for k, v in params.items() if k in ("browserContextId", "eventsEnabled")}
        return {**kept, "behavior": "deny"}
    return dict(params)


def target_refusal(info: Mapping[str, Any]) -> str | None:
    """Why a client may not attach to a target (the browser's own UI), or None.

    Args:
        info: The target's ``TargetInfo`` (``type``, ``url``).
    """
    url = str(info.get("url") or "").lower()
    if info.get("type") == "browser_ui" or url.startswith(_PRIVILEGED_SCHEMES):
        return f"target {info.get('targetId')!r} is the browser's own UI ({url[:80]!r}): not a lease page"
    return None
