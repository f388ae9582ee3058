"""One headless Chromium per browser lease, driven over CDP with Playwright.

The browser is the system's Chromium (``chromium`` on Debian; ``FLEET_CHROMIUM`` overrides the
path): browser downloads are not needed. Each lease gets its own process, started with a fresh
profile directory and ``--remote-debugging-port=0``; the port Chromium picked is read from the
``DevToolsActivePort`` file it writes into the profile. Playwright then attaches with
``connect_over_cdp``, and the same port serves the lease's ``cdp_url`` (``_browser``).

Chromium runs in a process group of its own (``start_new_session``), so ending a lease kills the
browser and every renderer/utility child it forked with one ``killpg``: no orphan processes, even
when the Playwright connection is wedged. Reaping it and removing the profile directory follow in
a worker thread. The group is also registered with ``fleet_sdk.process_groups`` from its start
until it is reaped, so it dies with the server even when the server is SIGKILLed and runs no
shutdown. (The Playwright driver needs no guard: it exits when its stdin pipe from the server
closes, ``tests/local/test_server_lifecycle.py``.)

``allowed_hosts`` is enforced on three levels: ``navigate`` refuses a URL outside them before the
browser sees it, a route on the default context aborts every request (links, forms, redirects,
sub-resources) to any other host, and Chromium itself is started with a proxy that refuses every
connection and a bypass list of exactly the allowed hosts (loopback included: ``<-loopback>``), so
a client holding ``cdp_url`` that opens a context of its own cannot reach any other host either,
IP literals included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fleet_sdk import BrowserStartError
from fleet_sdk.process_groups import guard_group, release_group

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, Playwright, Route

__all__ = [
    "VIEWPORT",
    "BrowserPool",
    "LeaseBrowser",
    "browser_unavailable",
    "chromium_executable",
    "host_allowed",
    "missing_chromium",
]

logger = logging.getLogger(__name__)

PROFILE_PREFIX = "chromium-"
"""Name prefix of each browser's profile directory under the pool's root."""

VIEWPORT = {"width": 1280, "height": 800}
"""Size of every lease's page, in CSS pixels (screenshots have this size)."""

START_DEADLINE = 30.0
"""Seconds Chromium gets to write its DevTools port."""

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    f"--window-size={VIEWPORT['width']},{VIEWPORT['height']}",
)


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


def host_allowed(url: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether ``url`` may be opened under ``allowed_hosts``.

    An entry matches the URL's ``host:port`` or its bare host; ``*.example.com`` matches subdomains.
    ``about:`` and ``data:`` URLs never leave the browser and are always allowed.
    """
    parts = urlsplit(url)
    if parts.scheme in ("about", "data", "blob"):
        return True
    if parts.scheme not in ("http", "https", "ws", "wss"):
        return False
    host = (parts.hostname or "").lower()
    netloc = parts.netloc.rsplit("@", 1)[-1].lower()
    for allowed in allowed_hosts:
        entry = allowed.strip().lower()
        if not entry:
            continue
        if entry in (host, netloc):
            return True
        if entry.startswith("*.") and (host.endswith(entry[1:]) or host == entry[2:]):
            return True
    return False


@dataclass
class LeaseBrowser:
    """The Chromium of one lease: its process group, DevTools port and Playwright page.

    Attributes:
        lease_id: The lease.
        allowed_hosts: Hosts the page may load from.
        process: The Chromium process (leader of its own process group).
        profile_dir: Its ``--user-data-dir``, removed on close.
        devtools_port: The loopback port of its DevTools endpoint.
    """

    lease_id: str
    allowed_hosts: list[str]
    process: subprocess.Popen[bytes]
    profile_dir: Path
    devtools_port: int
    browser: Browser | None = None
    page: Page | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False

    @property
    def devtools_url(self) -> str:
        """``http://127.0.0.1:<port>``: the browser's own DevTools HTTP endpoint."""
        return f"http://127.0.0.1:{self.devtools_port}"

    async def _guard(self, route: Route) -> None:
        if host_allowed(route.request.url, self.allowed_hosts):
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    async def attach(self, playwright: Playwright) -> None:
        """Connect Playwright over CDP, install the host guard and size the page."""
        self.browser = await playwright.chromium.connect_over_cdp(self.devtools_url)
        context = self.browser.contexts[0] if self.browser.contexts else await self.browser.new_context()
        await context.route("**/*", self._guard)
        self.page = context.pages[0] if context.pages else await context.new_page()
        await self.page.set_viewport_size({"width": VIEWPORT["width"], "height": VIEWPORT["height"]})

    def kill(self) -> None:
        """Kill the browser's whole process group now (idempotent, never raises, never blocks).

        Reaping the process and removing the profile is :func:`_reap`'s, which may block.
        """
        self.closed = True
        _kill_group(self.process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


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


def _reap(process: subprocess.Popen[bytes], profile: Path) -> None:
    """Wait for a killed Chromium and remove its profile (blocking: disk and a process wait)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
        release_group(process.pid)  # reaped: the id may be reused (else the guard keeps it)
    shutil.rmtree(profile, ignore_errors=True)


# What may go into one bypass-list entry: a host, an IP literal, a port, a leading "*." wildcard.
_BYPASS_ENTRY = re.compile(r"^(\*\.)?[a-z0-9.\-\[\]:]+$")


def host_flags(allowed_hosts: Sequence[str], refusing_proxy: int) -> list[str]:
    """Chromium flags that send every connection outside ``allowed_hosts`` to a proxy that refuses it.

    Args:
        allowed_hosts: The lease's hosts, as :func:`host_allowed` reads them.
        refusing_proxy: A loopback port that refuses connections.
    """
    bypass = ["<-loopback>"]  # else Chromium never proxies loopback, whatever the port
    for allowed in allowed_hosts:
        entry = allowed.strip().lower()
        if _BYPASS_ENTRY.match(entry):
            bypass.append(entry)
            if entry.startswith("*."):
                bypass.append(entry[2:])  # host_allowed lets the bare domain through too
    return [f"--proxy-server=http://127.0.0.1:{refusing_proxy}", f"--proxy-bypass-list={';'.join(bypass)}"]


def _refusing_socket() -> socket.socket:
    """A loopback port that refuses every connection: bound (so no one else takes it), never listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def _launch(
    executable: str, root: Path, flags: Sequence[str] = ()
) -> tuple[subprocess.Popen[bytes], Path, int]:
    """Start Chromium and wait for its DevTools port (blocking; runs in a worker thread)."""
    root.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix=PROFILE_PREFIX, dir=root))
    process = subprocess.Popen(
        [executable, *CHROMIUM_FLAGS, *flags, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    guard_group(process.pid)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_DEADLINE
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrowserStartError(f"chromium exited with status {process.returncode} at start")
            with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
                port = int(port_file.read_text().splitlines()[0])
                if port > 0:
                    return process, profile, port
            time.sleep(0.05)  # a worker thread, not the event loop
        raise BrowserStartError(f"chromium did not open its DevTools port within {START_DEADLINE:.0f}s")
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        release_group(process.pid)
        shutil.rmtree(profile, ignore_errors=True)
        raise


class BrowserPool:
    """The live Chromium of every lease that has one, on the server's event loop.

    A lease's browser starts on its first use (MCP, CDP), so a lease nobody drives costs nothing,
    and stops when the lease ends. One Playwright driver serves every browser; it starts with the
    first browser and stops with the pool.

    Args:
        root: Where profile directories are created.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        # Profiles of browsers whose server was killed before it could remove them (the browsers
        # themselves died with it: fleet_sdk/process_groups.py); one still in use by a live
        # Chromium (another server on this data dir) is left alone.
        for stale in root.glob(f"{PROFILE_PREFIX}*"):
            if not _profile_in_use(stale):
                shutil.rmtree(stale, ignore_errors=True)
        self._browsers: dict[str, LeaseBrowser] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._ended: set[str] = set()
        self._playwright: Any = None
        self._driver: Any = None
        self._driver_lock = asyncio.Lock()
        self._reaping: set[asyncio.Future[None]] = set()
        self._refusing: socket.socket | None = None

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
            return self._playwright  # type: ignore[no-any-return]

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
            if self._refusing is None:
                self._refusing = _refusing_socket()
            flags = host_flags(allowed_hosts, self._refusing.getsockname()[1])
            launch = asyncio.ensure_future(asyncio.to_thread(_launch, executable, self._root, flags))
            try:
                process, profile, port = await asyncio.shield(launch)
            except asyncio.CancelledError:
                # The thread goes on starting Chromium (in a session of its own): once it is up,
                # kill it, or it outlives the server unrecorded.
                launch.add_done_callback(self._discard_launch)
                raise
            browser = LeaseBrowser(lease_id, list(allowed_hosts), process, profile, port)
            try:
                await asyncio.wait_for(browser.attach(playwright), START_DEADLINE)
            except BaseException:
                self._retire(browser)
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

    def _discard_launch(self, launch: asyncio.Future[tuple[subprocess.Popen[bytes], Path, int]]) -> None:
        if launch.cancelled() or launch.exception() is not None:
            return  # _launch killed what it started
        process, profile, _ = launch.result()
        _kill_group(process)
        self._reap_later(process, profile)

    def _retire(self, browser: LeaseBrowser) -> None:
        """Kill the browser's process group now; reap it and remove its profile off the loop."""
        browser.kill()
        self._reap_later(browser.process, browser.profile_dir)

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
        worker thread (``aclose`` waits for them), so ending a lease never blocks the event loop.
        """
        self._ended.add(lease_id)
        self._starting.pop(lease_id, None)
        browser = self._browsers.pop(lease_id, None)
        if browser is not None:
            self._retire(browser)

    async def aclose(self) -> None:
        """Kill every browser, wait until each is reaped and its profile removed, and stop the
        Playwright driver."""
        for lease_id in list(self._browsers):
            self.end(lease_id)
        while self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)
        if self._refusing is not None:
            self._refusing.close()
            self._refusing = None
        if self._driver is not None:
            driver, self._driver, self._playwright = self._driver, None, None
            with contextlib.suppress(Exception):
                await driver.__aexit__(None, None, None)
