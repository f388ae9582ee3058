"""The Chromium behind local browser leases: the computer tool over MCP, cdp_url, allowed_hosts,
and no browser process outliving its lease (delete, TTL, an episode that raises, server stop).

A dedicated server per module, so the processes it starts can be told apart from any other.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from _procs import alive_in, chromium_groups
from _waits import PATIENCE, wait_until, wait_until_async

from fleet_local import LocalFleet, _cdp, _chromium
from fleet_local._chromium import BrowserPool
from fleet_local._chromium_launch import Launched
from fleet_local._lease_book import REAPER_INTERVAL
from fleet_sdk import BrowserStartError
from fleet_sdk._png import is_blank_png
from fleet_sdk.mcp import MCPClient
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task
from fleet_sdk.types import browser_lease as bm

if TYPE_CHECKING:
    from playwright.async_api import Page


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    with LocalFleet(verifier_timeout=5) as local:
        yield local


def _png(value: object) -> bytes:
    assert isinstance(value, list) and len(value) == 1, value
    block = value[0]
    assert isinstance(block, dict) and block["type"] == "image_url"
    prefix, _, data = block["image_url"]["url"].partition(";base64,")
    assert prefix == "data:image/png"
    return base64.b64decode(data)


async def test_computer_actions_each_return_a_png(server: LocalFleet) -> None:
    fleet = server.async_fleet()
    lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
    mcp = MCPClient([lease.mcp_url or ""], call_deadline=PATIENCE)
    try:
        assert [t.name for t in await mcp.list_tools()] == ["computer"]
        listed = await fleet.api.browser.get_browser_lease_mcp_tools(lease.lease_id)
        assert (await mcp.list_tools())[0].input_schema == listed.tools[0].input_schema
        blank = _png(await mcp.call_tool("computer", {"action": "screenshot"}))
        assert is_blank_png(blank)  # about:blank
        page = _png(
            await mcp.call_tool("computer", {"action": "navigate", "url": f"{server.base_url}/healthz"})
        )
        assert not is_blank_png(page)
        for params in (
            {"action": "left_click", "x": 10, "y": 10},
            {"action": "double_click", "x": 10, "y": 10},
            {"action": "right_click", "x": 10, "y": 10},
            {"action": "mouse_move", "x": 100, "y": 100},
            {"action": "type", "text": "hello"},
            {"action": "key", "key": "ctrl+a"},
            {"action": "scroll", "direction": "down", "amount": 2},
            {"action": "wait", "duration": 0.1},
            {"action": "navigate", "url": "/healthz"},  # relative to the current page
        ):
            assert _png(await mcp.call_tool("computer", params)).startswith(b"\x89PNG"), params
        for params, message in (
            ({"action": "left_click", "x": 5000, "y": 1}, "x in [0, 1279]"),
            ({"action": "fly"}, "unknown action"),
            ({"action": "wait", "duration": 60}, "duration must be in"),
            ({"action": "screenshot", "bogus": 1}, "unknown argument"),
            ({"action": "navigate", "url": "http://example.com/"}, "not in the lease's allowed_hosts"),
        ):
            value = await mcp.call_tool("computer", params)
            assert isinstance(value, dict) and message in value["error"], (params, value)
    finally:
        await mcp.aclose()
        await fleet.api.browser.delete_browser_lease(lease.lease_id)
        await fleet.close()


async def test_cdp_url_serves_devtools_and_allowed_hosts_holds_there_too(server: LocalFleet) -> None:
    from playwright.async_api import async_playwright

    fleet = server.async_fleet()
    lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
    key = {"Authorization": f"Bearer {server.api_key}"}
    try:
        async with httpx.AsyncClient(trust_env=False, headers=key) as http:
            version = (await http.get(f"{lease.cdp_url}/json/version")).json()
        assert version["webSocketDebuggerUrl"].startswith(f"{server.base_url.replace('http', 'ws')}/browser/")
        assert "Chrome" in version["Browser"]
        async with async_playwright() as pw:
            browser = await pw.chromium.connect_over_cdp(lease.cdp_url or "", headers=key)
            page = browser.contexts[0].pages[0]
            response = await page.goto(f"{server.base_url}/healthz")
            assert response is not None  # loaded (its status is the server's business)
            other = server.base_url.replace("127.0.0.1", "localhost")  # same server, host not allowed
            with pytest.raises(Exception, match=r"Page.navigate to .* is refused"):  # by the CDP proxy
                await page.goto(f"{other}/healthz")
    finally:
        await fleet.api.browser.delete_browser_lease(lease.lease_id)
        await fleet.close()
    async with httpx.AsyncClient(trust_env=False, headers=key) as http:
        assert (await http.get(f"{lease.cdp_url}/json/version")).status_code == 404


async def test_twenty_leases_leave_no_chromium_behind(server: LocalFleet) -> None:
    """8 deleted, 8 expired by TTL, 4 ended by episodes that raise; browsers run 4 at a time.

    Regression: the expiring leases had a fixed 8 s TTL, which ran out before their screenshots
    on a loaded machine. Their TTL now comes from how long the deleted batches took here.
    """
    fleet = server.async_fleet()
    groups: set[int] = set()
    loop = asyncio.get_running_loop()

    async def batch(ttl: int) -> tuple[list[bm.BrowserLease], set[int]]:
        """Four leases with a browser each (a screenshot starts it); their new process groups."""
        leases = [
            await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=ttl))
            for _ in range(4)
        ]
        clients = [MCPClient([lease.mcp_url or ""], call_deadline=PATIENCE) for lease in leases]
        try:
            shot = {"action": "screenshot"}
            shots = await asyncio.gather(*(c.call_tool("computer", shot) for c in clients))
        finally:
            for client in clients:
                await client.aclose()
        assert all(_png(s).startswith(b"\x89PNG") for s in shots)
        return leases, chromium_groups(server.data_dir) - groups

    try:
        slowest = 0.0
        for _ in range(2):
            started = loop.time()
            leases, new = await batch(ttl=600)
            slowest = max(slowest, loop.time() - started)
            groups |= new
            for lease in leases:
                await fleet.api.browser.delete_browser_lease(lease.lease_id)
        # Long enough for a batch like the two above to take its screenshots, three times over.
        ttl = max(8, math.ceil(3 * slowest))
        for _ in range(2):
            leases, new = await batch(ttl)
            groups |= new
            # The reaper alone must end them: no lease is read (a read expires it too) until
            # their browsers are gone.
            expires = max(lease.expires_timestamp_ms for lease in leases) / 1000
            await wait_until_async(
                lambda new=new: not alive_in(new),
                "the reaper ended the expired leases' browsers",
                within=max(0.0, expires - time.time()) + REAPER_INTERVAL + PATIENCE,
            )
            for lease in leases:
                assert (await fleet.api.browser.get_browser_lease(lease.lease_id)).status == "expired"
        listed = (await fleet.api.control_plane.list_tasks(env_key="orderdesk")).tasks
        (task,) = [
            Task.model_validate(t.model_dump())
            for t in listed
            if t.task_key == "orderdesk-browser-ship-order"
        ]
        for _ in range(4):
            with pytest.raises(RuntimeError):
                async with TaskEnv(task, fleet=fleet) as env:
                    await env.reset_async()
                    groups |= chromium_groups(server.data_dir)
                    raise RuntimeError("episode failed")
        assert len(groups) >= 20, "every lease had its own browser"
        await wait_until_async(lambda: not alive_in(groups), "every lease's browser exited")
        profiles = server.data_dir / "browsers"
        await wait_until_async(lambda: not list(profiles.iterdir()), "every browser profile was removed")
    finally:
        await fleet.close()


def test_server_stop_kills_live_browsers() -> None:
    with LocalFleet() as local, local.fleet() as fleet:
        lease = fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
        client = MCPClient([lease.mcp_url or ""], call_deadline=60)

        async def shoot() -> None:
            try:
                await client.call_tool("computer", {"action": "screenshot"})
            finally:
                await client.aclose()

        asyncio.run(shoot())
        groups = chromium_groups(local.data_dir)
        assert groups and alive_in(groups)
        local.stop()
        wait_until(lambda: not alive_in(groups), "the stopped server's browsers exited")


async def test_a_lease_created_pending_gets_the_mcp_url_it_has_once_running(
    server: LocalFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """browser-lease.yaml: mcp_url is null until the lease is scheduled; the session uses the running one."""
    fleet = server.async_fleet()
    browser = fleet.api.browser
    create, get = browser.create_browser_lease, browser.get_browser_lease
    polls: list[str] = []

    async def create_pending(body: bm.BrowserLeaseRequest, **options: Any) -> bm.BrowserLease:
        lease = await create(body, **options)
        return lease.model_copy(update={"status": "pending", "mcp_url": None, "cdp_url": None})

    async def get_pending_once(lease_id: str) -> bm.BrowserLease:
        polls.append(lease_id)
        lease = await get(lease_id)
        return lease if len(polls) > 1 else lease.model_copy(update={"status": "pending", "mcp_url": None})

    monkeypatch.setattr(browser, "create_browser_lease", create_pending)
    monkeypatch.setattr(browser, "get_browser_lease", get_pending_once)
    listed = (await fleet.api.control_plane.list_tasks(env_key="orderdesk")).tasks
    (task,) = [
        Task.model_validate(t.model_dump()) for t in listed if t.task_key == "orderdesk-browser-ship-order"
    ]
    try:
        async with TaskEnv(task, fleet=fleet) as env:
            await env.reset_async()
            session = env.browser
            assert session is not None
            assert len(polls) == 2
            assert session.mcp.endpoints == [(await get(session.lease_id)).mcp_url]
            assert session.mcp._http is fleet.http_client
            assert session.screenshot is not None
    finally:
        await fleet.close()


async def _cdp_call(
    client: _cdp.CDPClient, method: str, params: dict[str, Any], session: str | None = None
) -> dict[str, Any]:
    """One command on a CDP proxy client; its result (events on the way are dropped)."""
    message: dict[str, Any] = {"id": 1, "method": method, "params": params}
    if session is not None:
        message["sessionId"] = session
    await client.send(json.dumps(message))
    while True:
        raw = await asyncio.wait_for(client.receive(), PATIENCE)
        assert raw is not None, "the browser went away"
        reply = json.loads(raw)
        if reply.get("id") == 1:
            assert "result" in reply, reply
            return dict(reply["result"])


async def _shows(page: Page, pattern: str) -> bool:
    with contextlib.suppress(Exception):  # a page between two documents has no content yet
        return re.search(pattern, await page.content()) is not None
    return False


async def test_ending_a_lease_reaps_its_browser_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``end`` runs on the loop (delete route, reaper): it only kills; the wait and the profile
    removal run in a worker thread, which ``aclose`` waits for."""
    pool = BrowserPool(tmp_path / "browsers")
    loop_thread = threading.get_ident()
    reaped_in: list[int] = []
    real_reap = _chromium._reap

    def reap(process: subprocess.Popen[bytes], profile: Path) -> None:
        reaped_in.append(threading.get_ident())
        real_reap(process, profile)

    monkeypatch.setattr(_chromium, "_reap", reap)
    try:
        browser = await pool.get("lease-end", ["127.0.0.1"])
        pool.end("lease-end")
        assert browser.closed
        await pool.aclose()
        assert reaped_in and loop_thread not in reaped_in
        assert browser.process.returncode is not None  # reaped
        assert not browser.profile_dir.exists()
        assert alive_in({browser.process.pid}) == []
    finally:
        await pool.aclose()


async def test_a_browser_start_cancelled_midway_leaves_no_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stopping while a lease's Chromium starts: the start goes on in its thread, and
    the browser it brings up is killed and its profile removed, though no lease ever owned it."""
    pool = BrowserPool(tmp_path / "browsers")
    launched: list[Launched] = []
    entered, go_on = threading.Event(), threading.Event()
    real_launch = _chromium._launch

    def launch(executable: str, root: Path, flags: list[str]) -> Launched:
        entered.set()
        go_on.wait(60)  # the cancellation lands while the start is in this thread
        result = real_launch(executable, root, flags)
        launched.append(result)
        return result

    monkeypatch.setattr(_chromium, "_launch", launch)
    starting = asyncio.ensure_future(pool.get("lease-cancel", ["127.0.0.1"]))
    try:
        await wait_until_async(entered.is_set, "the start reached its thread")
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        go_on.set()
        await wait_until_async(lambda: launched, "the browser was launched")
        process, profile = launched[0].process, launched[0].profile
        await wait_until_async(
            lambda: process.returncode is not None and not profile.exists(),
            "the browser no lease owned was killed and its profile removed",
        )
        assert alive_in({process.pid}) == []
        assert pool.live == {}
    finally:
        go_on.set()
        for started in launched:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started.process.pid, signal.SIGKILL)
        await pool.aclose()


async def test_a_context_of_the_cdp_client_cannot_leave_allowed_hosts(server: LocalFleet) -> None:
    """The route guard covers the default context only; the lease's SOCKS proxy covers every
    context a ``cdp_url`` client opens, loopback IP literals on another port included."""
    from playwright.async_api import async_playwright

    other = socket.socket()  # another local server: same host, a port the lease does not allow
    other.bind(("127.0.0.1", 0))
    other.listen()
    other_url = f"http://127.0.0.1:{other.getsockname()[1]}/"
    fleet = server.async_fleet()
    lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
    try:
        async with async_playwright() as pw:
            key = {"Authorization": f"Bearer {server.api_key}"}
            browser = await pw.chromium.connect_over_cdp(lease.cdp_url or "", headers=key)
            context = await browser.new_context()
            page = await context.new_page()
            response = await page.goto(f"{server.base_url}/healthz")
            assert response is not None  # the lease's own host loads (a refused proxy raises)
            with pytest.raises(Exception, match=r"Page.navigate to .* is refused"):
                await page.goto(other_url, timeout=PATIENCE * 1000)
            # A link to it, which CDP does not see: refused by the route guard (the server's
            # Playwright guards every page it sees) or the lease's proxy.
            await page.set_content(f'<a href="{other_url}">other</a>')
            await page.click("a")
            await wait_until_async(
                lambda: _shows(page, r'"errorCode":"ERR_(BLOCKED_BY_CLIENT|SOCKS_CONN)'), "an error page"
            )
            other.setblocking(False)
            with pytest.raises(BlockingIOError):
                other.accept()  # nothing ever connected to it
            await context.close()
    finally:
        other.close()
        await fleet.api.browser.delete_browser_lease(lease.lease_id)
        await fleet.close()


async def test_chromium_reaches_only_allowed_hosts_even_past_the_cdp_proxy(
    server: LocalFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SOCKS proxy and the network namespace alone, with the CDP proxy's checks switched off
    and no Playwright route on new contexts: only the allowed host:port is reached, and a context
    switched to ``direct://`` (which skips any proxy Chromium was started with) reaches nothing,
    the allowed host included: its proxy is the browser's only way out."""
    monkeypatch.setattr(_cdp, "refusal", lambda *args: None)
    other = socket.socket()  # same loopback IP, a port the lease does not allow
    other.bind(("127.0.0.1", 0))
    other.listen()
    other.setblocking(False)
    other_url = f"http://127.0.0.1:{other.getsockname()[1]}/"
    pool = BrowserPool(tmp_path / "browsers")
    try:
        lease = await pool.get("lease-layers", [server.base_url.split("://", 1)[1]])
        assert lease.confinement.netns, lease.confinement.problems
        assert lease.browser is not None
        page = await (await lease.browser.new_context()).new_page()
        assert await page.goto(f"{server.base_url}/healthz") is not None
        for url in (other_url, server.base_url.replace("127.0.0.1", "localhost")):
            with pytest.raises(Exception, match="ERR_SOCKS_CONNECTION_FAILED"):
                await page.goto(url, timeout=PATIENCE * 1000)
        server_port = server.base_url.rsplit(":", 1)[1]
        assert {f"127.0.0.1:{other.getsockname()[1]}", f"localhost:{server_port}"} <= set(lease.proxy.refused)
        # Raw CDP: Playwright would read "direct://" as an HTTP proxy at host "direct".
        cdp = await lease.cdp.attach()
        try:
            context = await _cdp_call(cdp, "Target.createBrowserContext", {"proxyServer": "direct://"})
            created = {"url": "about:blank", "browserContextId": context["browserContextId"]}
            target = await _cdp_call(cdp, "Target.createTarget", created)
            attach = {"targetId": target["targetId"], "flatten": True}
            session = (await _cdp_call(cdp, "Target.attachToTarget", attach))["sessionId"]
            went = await _cdp_call(cdp, "Page.navigate", {"url": f"{server.base_url}/healthz"}, session)
            assert went.get("errorText") == "net::ERR_CONNECTION_REFUSED", went  # no way out
            went = await _cdp_call(cdp, "Page.navigate", {"url": other_url}, session)
            # The server's Playwright guards this page too (it adopts every page it sees).
            assert went.get("errorText") in ("net::ERR_CONNECTION_REFUSED", "net::ERR_BLOCKED_BY_CLIENT")
        finally:
            cdp.close()
        with pytest.raises(BlockingIOError):
            other.accept()  # nothing ever connected to the forbidden listener
    finally:
        other.close()
        await pool.aclose()


async def test_a_chromium_that_dies_at_start_is_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The confining helper reports before Chromium runs; a browser that then exits at once fails
    the start with its exit status, and leaves no process or profile behind."""
    monkeypatch.setenv("FLEET_CHROMIUM", "/bin/false")
    pool = BrowserPool(tmp_path / "browsers")
    try:
        with pytest.raises(BrowserStartError, match="exited with status 1 at start"):
            await pool.get("lease-dies", ["127.0.0.1"])
        assert pool.live == {}
    finally:
        await pool.aclose()
    assert not list((tmp_path / "browsers").iterdir())
