"""Attacks on browser leases, each shown refused: what a local user, a key holder over CDP, or a
model through the ``computer`` tool tried against a lease's Chromium (docs/threat-model.md).

Once, a loopback port scan found each lease's DevTools port (no key, no lease id needed), and
through it ``file:`` targets read the server's files, a download wrote any file anywhere, and a
context with ``proxyServer: "direct://"`` left ``allowed_hosts``. Chromium ran as root without its
sandbox, and nothing capped how many browsers a key holder started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _http import bearer
from _procs import chromium_groups, descendants, processes
from _waits import PATIENCE, wait_until_async
from websockets.asyncio.client import ClientConnection, connect

from fleet_local import LocalFleet
from fleet_local._chromium_launch import BROWSER_UID
from fleet_local._hosts import host_allowed
from fleet_sdk import RateLimitError
from fleet_sdk.browser import BrowserSession
from fleet_sdk.mcp import MCPClient
from fleet_sdk.types import browser_lease as bm


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    with LocalFleet() as local:
        yield local


@contextlib.asynccontextmanager
async def live_lease(server: LocalFleet, **request: Any) -> AsyncIterator[bm.BrowserLease]:
    """A lease whose browser runs (one screenshot taken), deleted afterwards."""
    fleet = server.async_fleet()
    lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600, **request))
    mcp = MCPClient([lease.mcp_url or ""], call_deadline=PATIENCE)
    try:
        shot = await mcp.call_tool("computer", {"action": "screenshot"})
        assert isinstance(shot, list), shot
        yield lease
    finally:
        await mcp.aclose()
        with contextlib.suppress(Exception):
            await fleet.api.browser.delete_browser_lease(lease.lease_id)
        await fleet.close()


class RawCDP:
    """A CDP client speaking the protocol itself (no Playwright to smooth anything over)."""

    def __init__(self, websocket: ClientConnection) -> None:
        self._ws = websocket
        self._next = 0
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """The whole reply (``result`` or ``error``) to one command."""
        self._next += 1
        await self._ws.send(json.dumps({"id": self._next, "method": method, "params": params or {}, **extra}))
        while True:
            message = json.loads(await asyncio.wait_for(self._ws.recv(), PATIENCE))
            if message.get("id") == self._next:
                return dict(message)
            self.events.append(message)

    async def event(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event (seen or still to come) that ``matches``."""

        async def seen() -> dict[str, Any] | None:
            found = next((event for event in self.events if matches(event)), None)
            if found is None:
                with contextlib.suppress(TimeoutError):
                    self.events.append(json.loads(await asyncio.wait_for(self._ws.recv(), 0.5)))
            return found

        return await wait_until_async(seen, "the CDP event")


@contextlib.asynccontextmanager
async def raw_cdp(server: LocalFleet, lease: bm.BrowserLease) -> AsyncIterator[RawCDP]:
    async with httpx.AsyncClient(headers=bearer(server), timeout=PATIENCE) as http:
        version = (await http.get(f"{lease.cdp_url}/json/version")).json()
    async with connect(
        version["webSocketDebuggerUrl"], additional_headers=bearer(server), max_size=None
    ) as ws:
        yield RawCDP(ws)


def refused(reply: dict[str, Any]) -> str:
    assert "error" in reply, reply
    return str(reply["error"]["message"])


# ---------------------------------------------------------------- a local user, without the key


def _listening_ports(pid: int) -> set[int]:
    """TCP ports ``pid`` listens on, in its own network namespace."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return set()
    inodes = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def test_a_live_lease_browser_listens_on_no_port(server: LocalFleet) -> None:
    """Chromium speaks CDP on a pipe: none of its processes listens on any TCP port, and no port
    of the server's process tree answers a DevTools discovery request or handshake."""
    async with live_lease(server):
        assert server.pid is not None
        browsers = chromium_groups(server.data_dir)
        chromium = [p.pid for p in processes() if p.alive and p.pgrp in browsers]
        assert chromium
        assert {pid: _listening_ports(pid) for pid in chromium} == {pid: set() for pid in chromium}
        own_net = os.readlink("/proc/self/ns/net")
        tree = [server.pid, *descendants(server.pid)]
        ports = {
            port
            for pid in tree
            if os.readlink(f"/proc/{pid}/ns/net") == own_net
            for port in _listening_ports(pid)
        }
        assert ports  # the server's own port at least
        async with httpx.AsyncClient(timeout=PATIENCE) as http:
            for port in ports:
                for path in ("/json/version", "/json/list", "/json"):
                    with contextlib.suppress(httpx.HTTPError):
                        answer = await http.get(f"http://127.0.0.1:{port}{path}")
                        assert "webSocketDebuggerUrl" not in answer.text, (port, path)
                with pytest.raises(Exception):  # noqa: B017 - any refusal will do, a session must not open
                    async with connect(f"ws://127.0.0.1:{port}/devtools/browser", open_timeout=PATIENCE):
                        pass


async def test_cdp_discovery_and_its_websockets_need_the_key(server: LocalFleet) -> None:
    async with live_lease(server) as lease:
        async with httpx.AsyncClient(timeout=PATIENCE) as http:
            for path in ("", "/json/version", "/json/list", "/json"):
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": server.api_key}):
                    answer = await http.get(f"{lease.cdp_url}{path}", headers=headers)
                    assert answer.status_code == 401, (path, headers, answer.text)
                    assert "webSocketDebuggerUrl" not in answer.text
            version = (await http.get(f"{lease.cdp_url}/json/version", headers=bearer(server))).json()
            pages = (await http.get(f"{lease.cdp_url}/json/list", headers=bearer(server))).json()
        for url in (version["webSocketDebuggerUrl"], pages[0]["webSocketDebuggerUrl"]):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                with pytest.raises(Exception, match="401"):
                    async with connect(url, additional_headers=headers, open_timeout=PATIENCE):
                        pass
        # With the key, a page's own endpoint (as chrome-remote-interface uses) works.
        async with connect(pages[0]["webSocketDebuggerUrl"], additional_headers=bearer(server)) as ws:
            reply = await RawCDP(ws).call("Runtime.evaluate", {"expression": "6 * 7"})
            assert reply["result"]["result"]["value"] == 42


# ---------------------------------------------------------------- a key holder over cdp_url


async def test_cdp_can_open_no_file_nor_privileged_page(server: LocalFleet) -> None:
    async with live_lease(server) as lease, raw_cdp(server, lease) as cdp:
        for url in (
            "file:///etc/hostname",
            f"file://{server.data_dir}/",
            "FILE:///etc/hostname",
            "view-source:file:///etc/hostname",
            "chrome://version",
            "about:version",
            "javascript:alert(1)",
            "http://127.0.0.2:9\\@127.0.0.1/",
        ):
            assert "is refused" in refused(await cdp.call("Target.createTarget", {"url": url})), url
        page = next(
            t for t in (await cdp.call("Target.getTargets"))["result"]["targetInfos"] if t["type"] == "page"
        )
        attached = await cdp.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
        session = attached["result"]["sessionId"]
        for url in ("file:///etc/hostname", "chrome://settings"):
            reply = await cdp.call("Page.navigate", {"url": url}, sessionId=session)
            assert "is refused" in refused(reply), url
        loaded = await cdp.call(
            "Network.loadNetworkResource", {"url": "file:///etc/hostname", "options": {}}, sessionId=session
        )
        assert "is refused" in refused(loaded)
        urls = [t["url"] for t in (await cdp.call("Target.getTargets"))["result"]["targetInfos"]]
        assert not [u for u in urls if u.startswith(("file:", "view-source:"))], urls
        # The browser's own UI pages (chrome:// WebUI) cannot be attached to.
        ui = [
            t
            for t in (await cdp.call("Target.getTargets"))["result"]["targetInfos"]
            if t["type"] == "browser_ui"
        ]
        for target in ui:
            reply = await cdp.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
            assert "browser's own UI" in refused(reply)


def canceled(guid: str) -> Callable[[dict[str, Any]], bool]:
    def matches(event: dict[str, Any]) -> bool:
        params = event.get("params") or {}
        return (
            event.get("method") == "Browser.downloadProgress"
            and params.get("guid") == guid
            and (params.get("state") == "canceled")
        )

    return matches


async def test_cdp_downloads_are_denied_wherever_they_are_asked_to_go(
    server: LocalFleet, tmp_path: Path
) -> None:
    """The attack wrote a file of chosen name and content into any directory; the proxy carries
    every download behaviour out as ``deny``, in the default context and in new ones."""
    chosen = tmp_path / "chosen"
    chosen.mkdir(mode=0o777)
    chosen.chmod(0o777)  # writable by the browser's uid too: only the proxy may stop it
    page = (
        'data:text/html,<a href="data:application/octet-stream,owned" download="evil.txt" id=a>x</a>'
        "<script>a.click()</script>"
    )
    async with live_lease(server) as lease, raw_cdp(server, lease) as cdp:
        context = (await cdp.call("Target.createBrowserContext"))["result"]["browserContextId"]
        for where in ({}, {"browserContextId": context}):
            asked = {"behavior": "allow", "downloadPath": str(chosen), "eventsEnabled": True, **where}
            assert "result" in await cdp.call("Browser.setDownloadBehavior", asked)
            created = await cdp.call("Target.createTarget", {"url": page, **where})
            assert "result" in created, created
            begun = await cdp.event(lambda e: e.get("method") == "Browser.downloadWillBegin")
            await cdp.event(canceled(begun["params"]["guid"]))
            cdp.events.clear()
        assert list(chosen.iterdir()) == []
        profiles = server.data_dir / "browsers"
        assert not [p for p in profiles.rglob("*") if "evil" in p.name or p.name == "Downloads"]


async def test_cdp_cannot_take_a_context_off_the_lease_proxy(server: LocalFleet) -> None:
    from playwright.async_api import async_playwright

    forbidden = socket.socket()  # a listener on the lease's own host, another port
    forbidden.bind(("127.0.0.1", 0))
    forbidden.listen()
    forbidden.setblocking(False)
    try:
        async with live_lease(server) as lease:
            async with raw_cdp(server, lease) as cdp:
                for params in (
                    {"proxyServer": "direct://"},
                    {"proxyServer": "socks5://127.0.0.1:1"},
                    {"proxyBypassList": "*"},
                ):
                    assert "with a proxy is refused" in refused(
                        await cdp.call("Target.createBrowserContext", params)
                    )
            async with async_playwright() as pw:
                browser = await pw.chromium.connect_over_cdp(lease.cdp_url or "", headers=bearer(server))
                with pytest.raises(Exception, match="with a proxy is refused"):
                    await browser.new_context(proxy={"server": "direct://"})
                # Playwright itself still works: a context of its own, a page, a load.
                page = await (await browser.new_context()).new_page()
                assert await page.goto(f"{server.base_url}/healthz") is not None
        with pytest.raises(BlockingIOError):
            forbidden.accept()  # nothing connected to it
    finally:
        forbidden.close()


async def test_cdp_refuses_what_reaches_past_the_proxy_or_ends_the_browser(server: LocalFleet) -> None:
    async with live_lease(server) as lease, raw_cdp(server, lease) as cdp:
        page = next(
            t for t in (await cdp.call("Target.getTargets"))["result"]["targetInfos"] if t["type"] == "page"
        )
        session = (await cdp.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}))[
            "result"
        ]["sessionId"]
        for method, params in (
            ("Browser.close", {}),
            ("Browser.crash", {}),
            ("Target.exposeDevToolsProtocol", {"targetId": page["targetId"], "bindingName": "cdp"}),
            (
                "Target.sendMessageToTarget",
                {"message": '{"id":1,"method":"Browser.close"}', "sessionId": session},
            ),
            ("Target.setRemoteLocations", {"locations": [{"host": "127.0.0.1", "port": 22}]}),
            ("Target.openDevTools", {"targetId": page["targetId"]}),
            ("Extensions.loadUnpacked", {"path": "/etc"}),
            ("Tethering.bind", {"port": 9222}),
            ("PWA.install", {"manifestId": "x", "installUrlOrBundleUrl": "file:///etc/hostname"}),
            ("Tracing.start", {"perfettoConfig": "AA=="}),
        ):
            assert "is refused" in refused(await cdp.call(method, params)), method
        for method, params in (
            ("DOM.setFileInputFiles", {"files": ["/etc/hostname"], "nodeId": 1}),
            (
                "Input.dispatchDragEvent",
                {
                    "type": "drop",
                    "x": 1,
                    "y": 1,
                    "data": {"items": [], "files": ["/etc/hostname"], "dragOperationsMask": 1},
                },
            ),
        ):
            assert "is refused" in refused(await cdp.call(method, params, sessionId=session)), method
        other = await cdp.call(
            "Runtime.evaluate", {"expression": "1"}, sessionId="0123456789ABCDEF0123456789ABCDEF"
        )
        assert refused(other) == "Session with given id not found."
        assert (
            "HeadlessChrome" in (await cdp.call("Browser.getVersion"))["result"]["userAgent"]
        )  # still alive


# ---------------------------------------------------------------- what the browser could reach


def test_the_browser_runs_unprivileged_sandboxed_and_sees_no_data_dir(server: LocalFleet) -> None:
    """Chromium ran as root with ``--no-sandbox`` and the server's files in reach. Now: an
    unprivileged uid (a uid of its own when the server is root), renderers in Chromium's
    seccomp sandbox, a network namespace of its own, and the data dir covered but its profile."""

    async def look() -> None:
        async with live_lease(server):
            browsers = chromium_groups(server.data_dir)
            pids = [p.pid for p in processes() if p.alive and p.pgrp in browsers]
            statuses = {pid: Path(f"/proc/{pid}/status").read_text() for pid in pids}
            cmdlines = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids}
            uids = {
                int(next(line for line in s.splitlines() if line.startswith("Uid:")).split()[1])
                for s in statuses.values()
            }
            assert uids == ({BROWSER_UID} if os.geteuid() == 0 else {os.geteuid()})
            renderers = [pid for pid in pids if b"--type=renderer" in cmdlines[pid]]
            assert renderers and all("Seccomp:\t2" in statuses[pid] for pid in renderers)
            assert not any(b"--no-sandbox" in c for c in cmdlines.values())
            main = next(pid for pid in pids if b"--type=" not in cmdlines[pid])
            assert os.readlink(f"/proc/{main}/ns/net") != os.readlink("/proc/self/ns/net")
            profile = next(a for a in cmdlines[main].split(b"\0") if a.startswith(b"--user-data-dir="))[
                16:
            ].decode()
            seen = Path(f"/proc/{main}/root")
            assert (seen / profile.lstrip("/")).is_dir()
            assert not (seen / str(server.data_dir / "fleet.db").lstrip("/")).exists()
            assert (server.data_dir / "fleet.db").exists()

    asyncio.run(look())


# ---------------------------------------------------------------- how many browsers


def test_browsers_are_capped_server_wide_with_429_and_retry_after(tmp_path: Path) -> None:
    """100 leases were accepted, each may start a Chromium of 250-400 MiB. Now a lease past
    ``max_browsers`` is a 429 with ``Retry-After``, lease and instance browsers counted together."""
    with (
        LocalFleet(tmp_path / "server", max_browsers=2) as local,
        httpx.Client(base_url=local.base_url, headers=bearer(local), timeout=PATIENCE) as api,
    ):
        leases = [api.post("/v1/browser", json={"ttl_seconds": 600}) for _ in range(2)]
        assert [r.status_code for r in leases] == [200, 200]
        full = api.post("/v1/browser", json={"ttl_seconds": 600})
        assert full.status_code == 429, full.text
        assert full.json()["code"] == "browser_limit" and full.json()["retryable"] is True
        assert 1 <= int(full.headers["Retry-After"]) <= 5
        instance = api.post("/v1/env/instances", json={"env_key": "orderdesk"}).json()
        described = api.get(f"/instances/{instance['instance_id']}/api/v1/env/resources/cdp/describe")
        assert described.status_code == 429 and described.json()["code"] == "browser_limit"
        assert api.delete(f"/v1/browser/{leases[0].json()['lease_id']}").status_code == 200
        assert (
            api.get(f"/instances/{instance['instance_id']}/api/v1/env/resources/cdp/describe").status_code
            == 200
        )
        assert api.post("/v1/browser", json={"ttl_seconds": 600}).status_code == 429  # the instance took it


async def test_a_browser_session_waits_for_a_free_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every browser taken, ``BrowserSession.open`` creates its lease again after each
    429's ``Retry-After``, within its ready deadline, rather than failing the episode."""
    with LocalFleet(tmp_path / "server", max_browsers=1) as local:
        fleet = local.async_fleet()
        holder = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=600))
        env = await fleet.make("orderdesk")
        refusals: list[int] = []
        create = fleet.api.browser.create_browser_lease

        async def counted(body: bm.BrowserLeaseRequest, **options: Any) -> bm.BrowserLease:
            try:
                return await create(body, **options)
            except RateLimitError as exc:
                refusals.append(exc.status_code)
                raise

        monkeypatch.setattr(fleet.api.browser, "create_browser_lease", counted)
        opening = asyncio.ensure_future(BrowserSession.open(fleet, env, ready_deadline=2 * PATIENCE))
        try:
            await wait_until_async(lambda: refusals or opening.done(), "the session met the cap")
            assert not opening.done(), "it opened past the cap"
            await fleet.api.browser.delete_browser_lease(holder.lease_id)
            session = await opening
            assert session.screenshot is not None and refusals[0] == 429
            await session.close()
        finally:
            opening.cancel()
            await env.close()
            await fleet.close()


# ---------------------------------------------------------------- the model, through navigate


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.2:18080\\@127.0.0.1:8000/", False),
        ("http://127.0.0.1:8000\\@evil.example/", True),  # a path on the allowed host
        ("http:\\\\evil.example\\@127.0.0.1:8000/", False),
        ("http://127.0.0.1:8000\n@evil.example/", False),  # newlines are dropped: evil.example
        (" http://127.0.0.1:8000/", True),
        ("http://evil.example#@127.0.0.1:8000/", False),
        ("about:blank", True),
        ("about:version", False),
        ("file:///etc/hostname", False),
        ("http://[::1/", False),
    ],
)
def test_urls_are_checked_as_a_browser_reads_them(url: str, allowed: bool) -> None:
    assert host_allowed(url, ["127.0.0.1:8000"]) is allowed


async def test_a_backslash_in_a_navigation_url_fails_the_host_check(server: LocalFleet) -> None:
    """urlsplit keeps ``\\`` in the netloc, a browser reads it as ``/``: this URL passed the
    check as a URL of the allowed host and the browser went to 127.0.0.2."""
    port = server.base_url.rsplit(":", 1)[1]
    async with live_lease(server) as lease:
        mcp = MCPClient([lease.mcp_url or ""], call_deadline=PATIENCE)
        try:
            sneaky = f"http://127.0.0.2:18080\\@127.0.0.1:{port}/"
            value = await mcp.call_tool("computer", {"action": "navigate", "url": sneaky})
            assert isinstance(value, dict) and "not in the lease's allowed_hosts" in value["error"], value
        finally:
            await mcp.aclose()
    async with httpx.AsyncClient(base_url=server.base_url, headers=bearer(server), timeout=PATIENCE) as api:
        instance = (await api.post("/v1/env/instances", json={"env_key": "orderdesk"})).json()["instance_id"]
        try:
            started = await api.post(
                f"/instances/{instance}/api/v1/env/resources/cdp/start",
                json={"start_page": f"http://127.0.0.2:18080\\@127.0.0.1:{port}/"},
            )
            assert started.status_code == 400 and "start_page" in started.text
        finally:
            await api.delete(f"/v1/env/instances/{instance}")
