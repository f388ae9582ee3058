"""One headless Chromium per browser lease, confined, driven over a pipe, with Playwright on top.

The browser is the system's Chromium (``chromium`` on Debian; ``FLEET_CHROMIUM`` overrides the
path): browser downloads are not needed. Each lease gets its own process on a fresh profile
directory, started confined (``_chromium_launch``, ``_chromium_confine``): a network namespace of
its own, the server's data dir hidden, an unprivileged uid with Chromium's sandbox on, as far as
the machine allows (:attr:`BrowserPool.confinement` says what held; the server warns once when
something did not).

No TCP DevTools port: Chromium speaks CDP on ``--remote-debugging-pipe``, and that pipe is held by
a :class:`~fleet_local._cdp.CDPConnection` in the server, which every client shares, each through
the CDP proxy's checks (``_cdp_policy``). The server's own Playwright (for the ``computer`` tool)
connects through a private loopback WebSocket whose path holds a random token; key holders
connect through the lease's ``cdp_url`` (``_lease_endpoints``).

Chromium runs in a process group of its own (``start_new_session``), so ending a lease kills the
browser and every renderer/utility child it forked with one ``killpg``: no orphan processes, even
when the Playwright connection is wedged. Reaping it and removing the profile directory follow in
a worker thread. The group is also registered with ``fleet_local/sandbox/_process_groups.py`` from its start
until it is reaped, so it dies with the server even when the server is SIGKILLed and runs no
shutdown. (The Playwright driver needs no guard: it exits when its stdin pipe from the server
closes, ``tests/local/test_server_lifecycle.py``.)

``allowed_hosts`` is enforced on four levels: ``navigate`` refuses a URL outside them before the
browser sees it; a route on the default context aborts every request (links, forms, redirects,
sub-resources) to any other host; the CDP proxy refuses navigations and targets outside them and
any context with a proxy of its own; and every connection Chromium makes goes through the lease's
SOCKS proxy (``_socks``), which connects only to the allowed hosts. In its own network namespace
that proxy is Chromium's only way out, so even a context that CDP could switch to ``direct://``
reaches nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet_sdk import BrowserStartError

from ._cdp import CDPConnection, pump
from ._chromium_launch import PROFILE_PREFIX, START_DEADLINE, Confinement, Launched, kill_group
from ._chromium_launch import launch as _launch
from ._chromium_launch import reap as _reap
from ._hosts import host_allowed
from ._socks import SocksProxy

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, Playwright, Route
    from websockets.asyncio.server import Server, ServerConnection
    from websockets.http11 import Request, Response

__all__ = [
    "START_DEADLINE",
    "VIEWPORT",
    "BrowserPool",
    "Confinement",
    "LeaseBrowser",
    "browser_unavailable",
    "chromium_executable",
    "host_allowed",
    "missing_chromium",
]

logger = logging.getLogger(__name__)

VIEWPORT = {"width": 1280, "height": 800}
"""Size of every lease's page, in CSS pixels (screenshots have this size)."""

CHROMIUM_FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
    # WebRTC sends UDP past any proxy; where there is no network namespace this keeps it off.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    f"--window-size={VIEWPORT['width']},{VIEWPORT['height']}",
)

INTERNAL_MAX_MESSAGE = 64 * 1024 * 1024
"""Largest message the server's own Playwright may send on its private WebSocket."""


def chromium_executable() -> str | None:
    """The Chromium binary to run: ``$FLEET_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH."""
    override = os.environ.get("FLEET_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_unavailable() -> str | None:
    """Why this machine cannot run lease browsers (no Chromium, no Playwright), or None."""
    import importlib.util

    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install 'fleet-sdk[browser]')"
    if chromium_executable() is None:
        return missing_chromium()
    return None


def missing_chromium() -> str:
    """Why no Chromium can be run, naming ``FLEET_CHROMIUM`` when it points at no executable."""
    override = os.environ.get("FLEET_CHROMIUM")
    if override:
        return f"FLEET_CHROMIUM={override!r} is not an executable Chromium (fix the path or unset it)"
    return "no Chromium found (install the 'chromium' package or set FLEET_CHROMIUM)"


@dataclass
class LeaseBrowser:
    """The Chromium of one lease: its process group, CDP connection, proxy and Playwright page.

    Attributes:
        lease_id: The lease.
        allowed_hosts: Hosts the page may load from.
        process: The Chromium process (leader of its own process group).
        profile_dir: Its ``--user-data-dir``, removed on close.
        cdp: The CDP pipe every client of the browser shares.
        proxy: The SOCKS proxy its connections go through.
        confinement: What confines it.
    """

    lease_id: str
    allowed_hosts: list[str]
    process: subprocess.Popen[bytes]
    profile_dir: Path
    cdp: CDPConnection
    proxy: SocksProxy
    confinement: Confinement
    browser: Browser | None = None
    page: Page | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False

    async def _guard(self, route: Route) -> None:
        if host_allowed(route.request.url, self.allowed_hosts):
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    async def attach(self, playwright: Playwright, endpoint: str) -> None:
        """Connect Playwright through the CDP proxy, install the host guard and size the page.

        Args:
            playwright: The pool's Playwright driver.
            endpoint: The private WebSocket URL of this browser.
        """
        self.browser = await playwright.chromium.connect_over_cdp(endpoint)
        context = self.browser.contexts[0] if self.browser.contexts else await self.browser.new_context()
        await context.route("**/*", self._guard)
        self.page = context.pages[0] if context.pages else await context.new_page()
        await self.page.set_viewport_size({"width": VIEWPORT["width"], "height": VIEWPORT["height"]})

    def kill(self) -> None:
        """Kill the browser's whole process group now (idempotent, never raises, never blocks).

        Closing its CDP pipe and proxy and reaping the process is the pool's (``_retire``).
        """
        self.closed = True
        kill_group(self.process)

    async def aclose_links(self) -> None:
        """Close its CDP connection (disconnecting every client) and its proxy."""
        await self.cdp.aclose()
        await self.proxy.aclose()


def _profile_in_use(profile: Path) -> bool:
    """Whether a live process holds ``profile``: Chromium links ``SingletonLock`` to ``host-pid``."""
    try:
        owner = os.readlink(profile / "SingletonLock").rpartition("-")[2]
    except OSError:
        return False
    if not owner.isdigit():
        return False
    try:
        os.kill(int(owner), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    try:  # a killed browser may linger as a zombie until init reaps it
        with open(f"/proc/{owner}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


class BrowserPool:
    """The live Chromium of every lease that has one, on the server's event loop.

    A lease's browser starts on its first use (MCP, CDP), so a lease nobody drives costs nothing,
    and stops when the lease ends. One Playwright driver serves every browser; it starts with the
    first browser and stops with the pool, as does the private WebSocket it connects through.

    Args:
        root: Where profile directories are created.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        # Profiles of browsers whose server was killed before it could remove them (the browsers
        # themselves died with it: fleet_local/sandbox/_process_groups.py); one still in use by a live
        # Chromium (another server on this data dir) is left alone.
        for stale in root.glob(f"{PROFILE_PREFIX}*"):
            if not _profile_in_use(stale):
                shutil.rmtree(stale, ignore_errors=True)
        self._browsers: dict[str, LeaseBrowser] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._connections: dict[str, CDPConnection] = {}
        self._ended: set[str] = set()
        self._playwright: Any = None
        self._driver: Any = None
        self._driver_lock = asyncio.Lock()
        self._reaping: set[asyncio.Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._internal: Server | None = None
        self._token = secrets.token_urlsafe(32)
        self.confinement: Confinement | None = None
        """What confined the last browser started (None before the first)."""

    @property
    def live(self) -> dict[str, LeaseBrowser]:
        """The running browsers by lease id."""
        return dict(self._browsers)

    async def _driver_instance(self) -> Playwright:
        async with self._driver_lock:
            if self._playwright is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError as exc:
                    raise BrowserStartError(
                        "browser leases need Playwright: pip install 'fleet-sdk[browser]'"
                    ) from exc
                self._driver = async_playwright()
                self._playwright = await self._driver.start()
            if self._internal is None:
                from websockets.asyncio.server import serve

                self._internal = await serve(
                    self._serve_internal,
                    "127.0.0.1",
                    0,
                    compression=None,
                    max_size=INTERNAL_MAX_MESSAGE,
                    process_request=self._check_internal,
                )
            return self._playwright  # type: ignore[no-any-return]

    def _endpoint(self, lease_id: str) -> str:
        assert self._internal is not None
        port = next(iter(self._internal.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/{self._token}/{lease_id}"

    def _internal_connection(self, path: str) -> CDPConnection | None:
        """The browser a private WebSocket path names (``/<token>/<lease id>``), if the token is right."""
        token, _, lease_id = path.removeprefix("/").partition("/")
        if not secrets.compare_digest(token.encode(), self._token.encode()):
            return None
        return self._connections.get(lease_id)

    def _check_internal(self, websocket: ServerConnection, request: Request) -> Response | None:
        """Refuse, before the handshake, every path but a live browser's with the token."""
        if self._internal_connection(request.path) is None:
            return websocket.respond(HTTPStatus.NOT_FOUND, "not found\n")
        return None

    async def _serve_internal(self, websocket: ServerConnection) -> None:
        """The server's own Playwright, on the private WebSocket."""
        from websockets.exceptions import ConnectionClosed

        assert websocket.request is not None
        connection = self._internal_connection(websocket.request.path)
        if connection is None:  # its browser ended during the handshake
            await websocket.close(1008, "unknown browser")
            return
        client = await connection.attach()

        async def receive() -> str | bytes | None:
            try:
                return await websocket.recv()
            except ConnectionClosed:
                return None

        await pump(client, receive, websocket.send)

    async def get(
        self, lease_id: str, allowed_hosts: Sequence[str], start_url: str | None = None
    ) -> LeaseBrowser:
        """The lease's browser, started on first use.

        Args:
            lease_id: The lease.
            allowed_hosts: Hosts its page may load from.
            start_url: A page to open once the browser has started (``about:blank`` without); a
                page that does not load leaves the browser on ``about:blank``.

        Raises:
            BrowserStartError: Chromium or Playwright is missing, or the browser did not start.
        """
        browser = self._browsers.get(lease_id)
        if browser is not None:
            return browser
        lock = self._starting.setdefault(lease_id, asyncio.Lock())
        async with lock:
            browser = self._browsers.get(lease_id)
            if browser is not None:
                return browser
            if lease_id in self._ended:
                raise BrowserStartError(f"browser lease {lease_id!r} has ended")
            executable = chromium_executable()
            if executable is None:
                raise BrowserStartError(missing_chromium())
            playwright = await self._driver_instance()
            self._loop = asyncio.get_running_loop()
            launch = asyncio.ensure_future(
                asyncio.to_thread(_launch, executable, self._root, list(CHROMIUM_FLAGS))
            )
            try:
                launched = await asyncio.shield(launch)
            except asyncio.CancelledError:
                # The thread goes on starting Chromium (in a session of its own): once it is up,
                # kill it, or it outlives the server unrecorded.
                launch.add_done_callback(self._discard_launch)
                raise
            browser = await self._started(lease_id, allowed_hosts, launched)
            try:
                await asyncio.wait_for(browser.attach(playwright, self._endpoint(lease_id)), START_DEADLINE)
            except BaseException as exc:
                exited = browser.process.poll()
                self._retire(browser)
                if exited is not None and isinstance(exc, Exception):
                    raise BrowserStartError(f"chromium exited with status {exited} at start") from exc
                raise
            if start_url is not None and browser.page is not None:
                try:
                    await browser.page.goto(start_url, timeout=START_DEADLINE * 1000)
                except Exception as exc:  # the browser still works; the client may navigate itself
                    logger.warning("lease %s could not open %s: %s", lease_id, start_url, type(exc).__name__)
            if lease_id in self._ended:  # the lease ended while the browser started
                self._retire(browser)
                raise BrowserStartError(f"browser lease {lease_id!r} has ended")
            self._browsers[lease_id] = browser
            return browser

    async def _started(self, lease_id: str, allowed_hosts: Sequence[str], launched: Launched) -> LeaseBrowser:
        """Take a started Chromium over: its CDP pipe and its proxy listener."""
        self._note(launched.confinement)
        cdp = CDPConnection(launched.cdp_read, launched.cdp_write, allowed_hosts)
        proxy = SocksProxy(launched.listener, allowed_hosts)
        browser = LeaseBrowser(
            lease_id,
            list(allowed_hosts),
            launched.process,
            launched.profile,
            cdp,
            proxy,
            launched.confinement,
        )
        try:
            await cdp.open()
            await proxy.start()
        except BaseException:
            self._retire(browser)
            raise
        self._connections[lease_id] = cdp
        return browser

    def _note(self, confinement: Confinement) -> None:
        first = self.confinement is None
        self.confinement = confinement
        if first and not confinement.complete:
            missing = "; ".join(confinement.problems) or "Chromium's sandbox is off"
            logger.warning(
                "lease browsers run confined only in part (uid %d, sandbox %s): %s (docs/threat-model.md)",
                confinement.uid,
                "on" if confinement.sandbox else "off",
                missing,
            )

    def _discard_launch(self, launch: asyncio.Future[Launched]) -> None:
        if launch.cancelled() or launch.exception() is not None:
            return  # launch killed what it started
        launched = launch.result()
        kill_group(launched.process)
        launched.close_ends()
        self._reap_later(launched.process, launched.profile)

    def _retire(self, browser: LeaseBrowser) -> None:
        """Kill the browser's process group now; close its links and reap it off the loop."""
        browser.kill()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # A worker thread (a lease or an instance ending, under the lease book's lock): the
            # links live on the loop, and the wait and the profile removal go there too, so the
            # thread (and the lock) is not held until the process is reaped.
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: reap here
                    self._loop.call_soon_threadsafe(self._retire_on_loop, browser)
                    return
            _reap(browser.process, browser.profile_dir)
            return
        self._retire_on_loop(browser)

    def _retire_on_loop(self, browser: LeaseBrowser) -> None:
        self._close_links(browser)
        self._reap_later(browser.process, browser.profile_dir)

    def _close_links(self, browser: LeaseBrowser) -> None:
        if self._connections.get(browser.lease_id) is browser.cdp:
            del self._connections[browser.lease_id]
        links = asyncio.ensure_future(browser.aclose_links())
        self._reaping.add(links)
        links.add_done_callback(self._reaping.discard)

    def _reap_later(self, process: subprocess.Popen[bytes], profile: Path) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # called from a worker thread: blocking it blocks no request
            _reap(process, profile)
            return
        task = asyncio.ensure_future(asyncio.to_thread(_reap, process, profile))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    def reopen(self, lease_id: str) -> None:
        """Let a new lease reuse the id of an ended one."""
        self._ended.discard(lease_id)

    def end(self, lease_id: str) -> None:
        """Kill the lease's browser now (synchronous, so no end path can leave it running).

        Only the ``killpg`` runs here: waiting for the process and removing its profile go to a
        worker thread (``aclose`` waits for them), so ending a lease never blocks the event loop,
        nor, when called from a worker thread (the lease book runs there), that thread.
        """
        self._ended.add(lease_id)
        self._starting.pop(lease_id, None)
        browser = self._browsers.pop(lease_id, None)
        if browser is not None:
            self._retire(browser)

    async def aclose(self) -> None:
        """Kill every browser, wait until each is reaped and its profile removed, and stop the
        Playwright driver and the private WebSocket."""
        for lease_id in list(self._browsers):
            self.end(lease_id)
        while self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)
        if self._internal is not None:
            internal, self._internal = self._internal, None
            internal.close()
            with contextlib.suppress(Exception):
                await internal.wait_closed()
        if self._driver is not None:
            driver, self._driver, self._playwright = self._driver, None, None
            with contextlib.suppress(Exception):
                await driver.__aexit__(None, None, None)
