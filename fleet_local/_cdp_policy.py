"""What a CDP client of a lease may ask its browser: the methods the CDP proxy (``_cdp``) refuses.

A key holder drives a lease's Chromium over its ``cdp_url``, but CDP also reaches the machine the
browser runs on and the browser's own network settings. The proxy refuses, with a CDP error that
names the reason:

* the network path: ``Target.createBrowserContext`` with a ``proxyServer`` or ``proxyBypassList``
  (``direct://`` would skip the lease's proxy);
* the host's files: URLs outside the lease's hosts or of another scheme (``file:``, ``chrome:``,
  ``view-source:``, ``about:`` pages but ``about:blank``) in ``Page.navigate``,
  ``Target.createTarget``, ``Network.loadNetworkResource`` and ``Fetch.continueRequest``;
  ``DOM.setFileInputFiles`` and ``Input.dispatchDragEvent`` with files (both hand host paths to
  a page); ``Tracing.start`` with a Perfetto config or the system backend;
* the browser's own privileges: ``Target.exposeDevToolsProtocol`` (CDP for a page's scripts,
  past this proxy), ``Target.sendMessageToTarget`` (messages this proxy would not see),
  ``Target.setRemoteLocations``, ``Target.openDevTools``, ``Browser.executeBrowserCommand``,
  and the ``Extensions``, ``PWA``, ``Cast`` and ``Tethering`` domains; attaching to the
  browser's own UI targets (``browser_ui``, ``chrome:`` pages);
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

__all__ = ["refusal", "rewritten", "target_refusal"]

_REFUSED_DOMAINS = {
    "Extensions": "loads extensions from the server's disk",
    "PWA": "installs web apps from any URL",
    "Cast": "discovers and casts to devices on the network",
    "Tethering": "opens listening ports on the server",
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
}

_URL_PARAMS = {
    "Page.navigate": "url",
    "Target.createTarget": "url",
    "Network.loadNetworkResource": "url",
    "Fetch.continueRequest": "url",
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
    name = _URL_PARAMS.get(method)
    url = params.get(name) if name is not None else None
    if isinstance(url, str) and not host_allowed(url, allowed_hosts):
        shown = browser_url(url)[:200]
        hosts = list(allowed_hosts)
        return f"{method} to {shown!r} is refused: only http(s) URLs of the lease's allowed_hosts {hosts}"
    if method == "Target.createBrowserContext" and (
        params.get("proxyServer") is not None or params.get("proxyBypassList") is not None
    ):
        return f"{method} with a proxy is refused: every context goes through the lease's proxy"
    if method == "Input.dispatchDragEvent":
        data = params.get("data")
        if isinstance(data, Mapping) and data.get("files"):
            return f"{method} with files is refused: it hands files of the server's disk to a page"
    if method == "Tracing.start" and (
        params.get("perfettoConfig") is not None or params.get("tracingBackend") == "system"
    ):
        return f"{method} with a Perfetto config or the system backend is refused"
    return None


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
