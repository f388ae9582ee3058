"""The CDP proxy's allow-list on a live lease: Playwright still browses, the rest is refused.

Round 3 found the proxy working from a deny-list: ``SystemInfo.getProcessInfo`` answered with the
server's processes, and ``Network.continueInterceptedRequest`` with a ``file:`` URL went to the
browser (Chromium refused it itself). The method-by-method list is checked in
``test_cdp_allow_list.py``; here, through the real proxy and a real Chromium.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from _http import bearer
from _waits import PATIENCE
from websockets.asyncio.client import ClientConnection, connect

from fleet_local import LocalFleet
from fleet_sdk.mcp import MCPClient
from fleet_sdk.types import browser_lease as bm


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    with LocalFleet() as local:
        yield local


@contextlib.asynccontextmanager
async def live_lease(server: LocalFleet) -> AsyncIterator[bm.BrowserLease]:
    """A lease whose browser runs (one screenshot taken), deleted afterwards."""
    fleet = server.async_fleet()
    lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
    mcp = MCPClient([lease.mcp_url or ""], call_deadline=PATIENCE)
    try:
        assert isinstance(await mcp.call_tool("computer", {"action": "screenshot"}), list)
        yield lease
    finally:
        await mcp.aclose()
        with contextlib.suppress(Exception):
            await fleet.api.browser.delete_browser_lease(lease.lease_id)
        await fleet.close()


class RawCDP:
    """A CDP client speaking the protocol itself."""

    def __init__(self, websocket: ClientConnection) -> None:
        self._ws = websocket
        self._next = 0

    async def call(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """The whole reply (``result`` or ``error``) to one command; events are skipped."""
        self._next += 1
        await self._ws.send(json.dumps({"id": self._next, "method": method, "params": params or {}, **extra}))
        while True:
            message = json.loads(await asyncio.wait_for(self._ws.recv(), PATIENCE))
            if message.get("id") == self._next:
                return dict(message)


@contextlib.asynccontextmanager
async def raw_cdp(server: LocalFleet, lease: bm.BrowserLease) -> AsyncIterator[RawCDP]:
    async with httpx.AsyncClient(headers=bearer(server), timeout=PATIENCE) as http:
        version = (await http.get(f"{lease.cdp_url}/json/version")).json()
    async with connect(
        version["webSocketDebuggerUrl"], additional_headers=bearer(server), max_size=None
    ) as ws:
        yield RawCDP(ws)


async def page_session(cdp: RawCDP) -> str:
    targets = (await cdp.call("Target.getTargets"))["result"]["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    attached = await cdp.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
    return str(attached["result"]["sessionId"])


def error_of(reply: dict[str, Any]) -> str:
    assert "error" in reply, reply
    return str(reply["error"]["message"])


FORM = """
<title>form</title>
<form><input id=who><select id=pick><option>a</option><option>b</option></select>
<button id=go type=button onclick="document.title = 'sent ' + who.value + pick.value">go</button></form>
<div style="height: 3000px">tall</div>
"""


async def test_playwright_browses_through_the_allow_list(server: LocalFleet) -> None:
    """A normal session of Playwright over ``connect_over_cdp``: contexts, pages, navigation,
    typing, clicking, scrolling, scripts, routes, cookies, emulation and screenshots."""
    from playwright.async_api import async_playwright

    home = f"{server.base_url}/v1/regions"  # keyed: the context sends the key as a header
    async with live_lease(server) as lease, async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(lease.cdp_url or "", headers=bearer(server))
        context = await browser.new_context(
            viewport={"width": 800, "height": 600}, locale="en-GB", extra_http_headers=bearer(server)
        )
        await context.add_init_script("window.__seen = 1")
        await context.add_cookies([{"name": "k", "value": "v", "url": server.base_url}])
        page = await context.new_page()
        routed: list[str] = []

        async def note(route: Any) -> None:
            routed.append(route.request.url)
            await route.continue_()

        await page.route("**/v1/regions", note)
        response = await page.goto(home)
        assert response is not None and response.ok
        assert routed == [home]
        await page.unroute("**/v1/regions")
        await page.set_content(FORM)
        await page.fill("#who", "ada")
        await page.select_option("#pick", "b")
        await page.hover("#go")
        await page.click("#go")
        assert await page.title() == "sent adab"
        await page.keyboard.press("End")
        await page.mouse.wheel(0, 500)
        box = await page.locator("#go").bounding_box()
        assert box is not None and box["width"] > 0
        assert await page.evaluate("window.__seen") == 1
        await page.set_viewport_size({"width": 640, "height": 480})
        await page.emulate_media(color_scheme="dark")
        await page.set_extra_http_headers({"x-test": "1"})
        await page.goto(home)
        await page.reload()
        await page.go_back()
        assert (await page.screenshot(full_page=True))[:8] == b"\x89PNG\r\n\x1a\n"
        assert [c["name"] for c in await context.cookies()] == ["k"]
        await page.close()
        await context.close()
        await browser.close()


@pytest.mark.parametrize("where", ["browser", "page"])
async def test_an_unlisted_method_is_refused_by_the_proxy_naming_it(server: LocalFleet, where: str) -> None:
    async with live_lease(server) as lease, raw_cdp(server, lease) as cdp:
        extra = {"sessionId": await page_session(cdp)} if where == "page" else {}
        for method in ("SystemInfo.getProcessInfo", "SystemInfo.getInfo", "Browser.getBrowserCommandLine"):
            message = error_of(await cdp.call(method, **extra))
            assert message.startswith(f"{method} is refused by the fleet server"), message
        for method in ("Debugger.enable", "HeapProfiler.enable", "Storage.clearDataForOrigin"):
            message = error_of(await cdp.call(method, **extra))
            assert message.startswith(f"{method} is refused by the fleet server: it is not among"), message
        # The connection carries on: a listed method still answers.
        assert "HeadlessChrome" in (await cdp.call("Browser.getVersion", **extra))["result"]["userAgent"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("Fetch.continueRequest", {"requestId": "interception-job-1.0"}),
        ("Network.continueInterceptedRequest", {"interceptionId": "interception-job-1.0"}),
        ("Network.loadNetworkResource", {"frameId": "x", "options": {}}),
        ("Page.navigate", {}),
    ],
)
async def test_url_carrying_methods_check_their_url_in_the_proxy(
    server: LocalFleet, method: str, params: dict[str, Any]
) -> None:
    """A ``file:`` URL is refused by the proxy (its message names the lease's hosts); the same
    call with a lease URL reaches the browser, which answers for itself."""
    async with live_lease(server) as lease, raw_cdp(server, lease) as cdp:
        session = await page_session(cdp)
        if method.startswith("Fetch."):
            assert "result" in await cdp.call("Fetch.enable", {}, sessionId=session)
        denied = error_of(
            await cdp.call(method, {**params, "url": "file:///etc/hostname"}, sessionId=session)
        )
        assert denied.startswith(f"{method} to 'file:///etc/hostname' (url) is refused"), denied
        assert "allowed_hosts" in denied
        passed = await cdp.call(method, {**params, "url": f"{server.base_url}/v1/regions"}, sessionId=session)
        assert "is refused" not in json.dumps(passed), passed
