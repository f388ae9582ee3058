"""The ``computer`` tool of a browser lease: actions on its Chromium page, each answered with a PNG.

Served over MCP (streamable HTTP) at the lease's ``mcp_url`` (``_browser``). Every action ends
with a screenshot of the page, returned as an MCP image block; when that screenshot cannot be
taken the call is a tool error (``isError``), never an empty or null image. A bad argument, a
refused host or a dead browser are tool errors too, so an agent sees them as observations.

Coordinates are CSS pixels of the 1280x800 page, the same pixels as the screenshot.
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from ._chromium import VIEWPORT
from ._hosts import host_allowed

if TYPE_CHECKING:
    from playwright.async_api import Page

    from ._chromium import LeaseBrowser

__all__ = ["COMPUTER_ACTIONS", "COMPUTER_TOOL", "ComputerError", "run_action"]

COMPUTER_ACTIONS = (
    "screenshot",
    "left_click",
    "double_click",
    "right_click",
    "type",
    "key",
    "scroll",
    "mouse_move",
    "wait",
    "navigate",
)
MAX_WAIT_SECONDS = 10.0
MAX_TEXT = 5000
NAVIGATION_TIMEOUT_MS = 15_000
SCREENSHOT_TIMEOUT_MS = 15_000
ACTION_TIMEOUT = 2 * NAVIGATION_TIMEOUT_MS / 1000 + MAX_WAIT_SECONDS
"""Seconds one action may hold the lease's browser: a navigation or a click and the page load it
starts, plus the longest ``wait``. A wedged mouse or keyboard call fails instead of holding the
lock (and every later action of the lease) forever."""

COMPUTER_TOOL: dict[str, Any] = {
    "name": "computer",
    "description": (
        "Control the lease's browser; every action returns a PNG screenshot of the page "
        f"({VIEWPORT['width']}x{VIEWPORT['height']}). Actions: `screenshot`; `left_click`, "
        "`double_click`, `right_click` and `mouse_move` at (`x`, `y`) in screenshot pixels; `type` the "
        "given `text` into the focused element; `key` presses a key or chord (`Enter`, `Tab`, "
        "`ctrl+a`); `scroll` by `amount` steps in `direction` (at (`x`, `y`) when given); `wait` "
        "`duration` seconds; `navigate` to `url` (absolute, or relative to the current page; only "
        "the lease's allowed hosts)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(COMPUTER_ACTIONS), "description": "What to do."},
            "x": {
                "type": "integer",
                "minimum": 0,
                "maximum": VIEWPORT["width"] - 1,
                "description": "Horizontal pixel (clicks, mouse_move, scroll).",
            },
            "y": {
                "type": "integer",
                "minimum": 0,
                "maximum": VIEWPORT["height"] - 1,
                "description": "Vertical pixel (clicks, mouse_move, scroll).",
            },
            "text": {"type": "string", "maxLength": MAX_TEXT, "description": "Text to type (type)."},
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "Key or chord to press, e.g. Enter, Tab, ctrl+a (key).",
            },
            "direction": {
                "type": "string",
                "enum": ["up", "down", "left", "right"],
                "default": "down",
                "description": "Scroll direction (scroll).",
            },
            "amount": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "default": 3,
                "description": "Scroll steps of 100 pixels (scroll).",
            },
            "duration": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT_SECONDS,
                "default": 1,
                "description": "Seconds to wait (wait).",
            },
            "url": {"type": "string", "maxLength": 2048, "description": "URL to open (navigate)."},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
}
"""The ``computer`` tool (MCP ``Tool`` shape with ``input_schema``), as ``mcp-tools`` lists it."""

_KEY_NAMES = {
    "ctrl": "Control",
    "control": "Control",
    "cmd": "Meta",
    "meta": "Meta",
    "super": "Meta",
    "alt": "Alt",
    "shift": "Shift",
    "enter": "Enter",
    "return": "Enter",
    "tab": "Tab",
    "esc": "Escape",
    "escape": "Escape",
    "backspace": "Backspace",
    "delete": "Delete",
    "space": "Space",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
}
_SCROLL = {"up": (0, -100), "down": (0, 100), "left": (-100, 0), "right": (100, 0)}


class ComputerError(Exception):
    """An action the agent can fix (bad argument, refused host) or a browser failure."""


def playwright_key(chord: str) -> str:
    """``ctrl+a`` / ``Return`` / ``shift+Tab`` in Playwright's spelling (``Control+a``, ``Enter``)."""
    parts = [p.strip() for p in chord.replace(" ", "").split("+")]
    if not all(parts):
        raise ComputerError(f"key {chord!r} is not a key or chord like 'Enter' or 'ctrl+a'")
    return "+".join(_KEY_NAMES.get(p.lower(), p if len(p) == 1 else p[:1].upper() + p[1:]) for p in parts)


def _point(arguments: dict[str, Any], required: bool = True) -> tuple[int, int] | None:
    x, y = arguments.get("x"), arguments.get("y")
    if x is None and y is None and not required:
        return None
    for name, value, limit in (("x", x, VIEWPORT["width"]), ("y", y, VIEWPORT["height"])):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
            raise ComputerError(f"{arguments.get('action')} needs an integer {name} in [0, {limit - 1}]")
    assert isinstance(x, int) and isinstance(y, int)
    return x, y


def _string(arguments: dict[str, Any], name: str, limit: int) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or (name != "text" and not value):
        raise ComputerError(f"{arguments.get('action')} needs a string {name}")
    if len(value) > limit:
        raise ComputerError(f"{name} is longer than {limit} characters")
    return value


async def _navigate(browser: LeaseBrowser, page: Page, arguments: dict[str, Any]) -> None:
    url = urljoin(page.url, _string(arguments, "url", 2048))
    if not host_allowed(url, browser.allowed_hosts):
        raise ComputerError(f"navigation to {url} refused: its host is not in the lease's allowed_hosts")
    try:
        await page.goto(url, wait_until="load", timeout=NAVIGATION_TIMEOUT_MS)
    except Exception as exc:
        raise ComputerError(f"navigation to {url} failed: {exc}") from exc


async def _act(browser: LeaseBrowser, page: Page, action: str, arguments: dict[str, Any]) -> None:
    mouse = page.mouse
    if action == "screenshot":
        return
    if action in ("left_click", "double_click", "right_click"):
        point = _point(arguments)
        assert point is not None
        count = 2 if action == "double_click" else 1
        if action == "right_click":
            await mouse.click(*point, button="right")
        else:
            await mouse.click(*point, button="left", click_count=count)
    elif action == "mouse_move":
        point = _point(arguments)
        assert point is not None
        await mouse.move(*point)
    elif action == "type":
        await page.keyboard.type(_string(arguments, "text", MAX_TEXT))
    elif action == "key":
        await page.keyboard.press(playwright_key(_string(arguments, "key", 64)))
    elif action == "scroll":
        direction = arguments.get("direction", "down")
        amount = arguments.get("amount", 3)
        if direction not in _SCROLL:
            raise ComputerError(f"direction must be one of {sorted(_SCROLL)}")
        if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= 50:
            raise ComputerError("amount must be an integer in [1, 50]")
        point = _point(arguments, required=False)
        if point is not None:
            await mouse.move(*point)
        dx, dy = _SCROLL[direction]
        await mouse.wheel(dx * amount, dy * amount)
    elif action == "wait":
        duration = arguments.get("duration", 1)
        if not isinstance(duration, int | float) or isinstance(duration, bool):
            raise ComputerError("duration must be a number of seconds")
        if not 0 <= duration <= MAX_WAIT_SECONDS:
            raise ComputerError(f"duration must be in [0, {MAX_WAIT_SECONDS:g}] seconds")
        await asyncio.sleep(float(duration))
    elif action == "navigate":
        await _navigate(browser, page, arguments)
    else:
        raise ComputerError(f"unknown action {action!r}; expected one of {list(COMPUTER_ACTIONS)}")
    if action in ("left_click", "double_click", "key"):
        # A click or Enter may submit a form: let the next page load before the screenshot.
        await _settle(page)


async def _settle(page: Page) -> None:
    # Give a navigation the click started a moment to begin, then wait for it to load.
    await asyncio.sleep(0.05)
    try:
        await page.wait_for_load_state("load", timeout=NAVIGATION_TIMEOUT_MS)
    except Exception as exc:
        raise ComputerError(f"the page did not finish loading: {exc}") from exc


async def run_action(browser: LeaseBrowser, arguments: dict[str, Any]) -> bytes:
    """Run one ``computer`` action on the lease's page and return the PNG screenshot after it.

    Actions of one lease run one at a time.

    Args:
        browser: The lease's browser.
        arguments: The tool arguments (``action`` and its parameters).

    Raises:
        ComputerError: A bad argument, a refused host, a failed action or a failed screenshot.
    """
    action = arguments.get("action")
    if not isinstance(action, str):
        raise ComputerError(f"action is required: one of {list(COMPUTER_ACTIONS)}")
    unknown = sorted(set(arguments) - set(COMPUTER_TOOL["input_schema"]["properties"]))
    if unknown:
        raise ComputerError(f"unknown argument(s) {unknown}")
    async with browser.lock:
        page = browser.page
        if page is None or browser.closed or page.is_closed():
            raise ComputerError("the lease's browser is not running")
        try:
            await asyncio.wait_for(_act(browser, page, action, arguments), ACTION_TIMEOUT)
        except ComputerError:
            raise
        except TimeoutError:
            raise ComputerError(f"{action} did not finish within {ACTION_TIMEOUT:g}s") from None
        except Exception as exc:
            raise ComputerError(f"{action} failed: {type(exc).__name__}: {exc}") from exc
        try:
            png = await page.screenshot(type="png", timeout=SCREENSHOT_TIMEOUT_MS)
        except Exception as exc:
            raise ComputerError(f"screenshot failed: {type(exc).__name__}: {exc}") from exc
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ComputerError("screenshot failed: the browser returned no PNG image")
    return png


def png_base64(png: bytes) -> str:
    """Base64 text of a PNG, for an MCP image block."""
    return base64.b64encode(png).decode("ascii")
