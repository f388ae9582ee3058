"""The browser of a job session: how server-side jobs play ``browser_use`` and ``computer_use`` tasks.

The local server has no desktop images, so both multimodal modalities are played the way
``fleet_sdk.browser`` plays ``browser_use`` on the client:

1. a browser lease (``_browser``: a real headless Chromium) allowed to open only the instance's
   host, with the id ``lease_<session_id>`` (:func:`session_lease_id`), so ``GET
   /v1/browser/{lease_id}`` shows what became of a session's browser;
2. the instance's web UI opened in it and health-checked: the first screenshot must be a real,
   non-blank PNG, or the session errors;
3. the agent offered only the lease's ``computer`` tool, every call going through
   ``_lease_endpoints.computer_call``, the path the lease's MCP endpoint serves;
4. the lease ended with the episode, before the verifier grades the instance, and again (a no-op
   then) whatever way the session ends: failure, cancellation, server shutdown.

Screenshots: the policy sees each one as an image block with a ``data:`` URL; the stored
transcript gets the same PNG as an object of the local S3 endpoint, because viewers cannot render
``data:`` URLs (``ImageURL`` in schemas/sessions-ingest.yaml). A server started without S3 stores
a text note in its place.

A server that cannot start Chromium (none installed, ``FLEET_CHROMIUM`` pointing at nothing, no
Playwright) errors such sessions with a reason naming the missing piece (:func:`unavailable`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio

from fleet_sdk.png import is_blank_png
from fleet_sdk.tools import Tool
from fleet_sdk.types import browser_lease as models

from . import _s3
from ._browser import book
from ._chromium import browser_unavailable
from ._computer import COMPUTER_TOOL
from ._errors import LocalAPIError
from ._lease_endpoints import ComputerOutcome, computer_call
from ._state import LocalState

__all__ = [
    "MIN_LEASE_TTL_SECONDS",
    "MULTIMODAL",
    "JobBrowser",
    "JobBrowserError",
    "computer_tool",
    "release_lease",
    "session_lease_id",
    "unavailable",
]

MULTIMODAL = frozenset({"browser_use", "computer_use"})
"""Task modalities a job plays on a browser lease."""

MIN_LEASE_TTL_SECONDS = 300
"""Floor of a session lease's TTL: its backstop should the server die before it ends the lease."""

SCREENSHOT_PREFIX = "jobs/screenshot/"
"""Key prefix of job screenshots in the local S3 bucket (keys are content hashes)."""


class JobBrowserError(Exception):
    """The session's browser could not be made ready (its lease was ended before this was raised)."""


def unavailable(modality: str) -> str | None:
    """Why this server cannot play ``modality`` tasks on a browser lease, or None when it can.

    Args:
        modality: The task modality (``browser_use`` or ``computer_use``).
    """
    reason = browser_unavailable()
    if reason is None:
        return None
    return f"{modality} tasks need a browser lease, and this server cannot start Chromium: {reason}"


def session_lease_id(session_id: str) -> str:
    """The id of the browser lease a job session uses.

    Args:
        session_id: The session.
    """
    return f"lease_{session_id}"


def computer_tool() -> Tool:
    """The lease's ``computer`` tool, as the episode offers it to the policy."""
    return Tool(
        name=str(COMPUTER_TOOL["name"]),
        description=str(COMPUTER_TOOL["description"]),
        input_schema=dict(COMPUTER_TOOL["input_schema"]),
    )


def _error_text(message: str) -> str:
    return json.dumps({"error": message})


class JobBrowser:
    """A ready lease of one session (create with :meth:`open`, end with :meth:`release`).

    Attributes:
        lease_id: The lease.
        start_url: The instance's web UI.
    """

    def __init__(self, state: LocalState, lease_id: str, start_url: str) -> None:
        self._state = state
        self.lease_id = lease_id
        self.start_url = start_url
        self._released = False

    @classmethod
    async def open(
        cls, state: LocalState, session_id: str, start_url: str, ttl_seconds: int
    ) -> tuple[JobBrowser, tuple[Any, Any]]:
        """Lease a browser for ``start_url``'s host, open the page and health-check it.

        Args:
            state: Server state.
            session_id: The job session (names the lease: :func:`session_lease_id`).
            start_url: The instance's web UI.
            ttl_seconds: The lease's TTL (a backstop: the session ends the lease itself).

        Returns:
            The browser and the first screenshot as ``(shown, stored)`` content (see :meth:`call`).

        Raises:
            JobBrowserError: The page could not be opened or the screenshot is missing or blank.
        """
        host = urlsplit(start_url).netloc
        request = models.BrowserLeaseRequest(
            ttl_seconds=max(MIN_LEASE_TTL_SECONDS, min(ttl_seconds, 86_400)),
            allowed_hosts=[host],
            lease_id=session_lease_id(session_id),
        )
        lease = book(state).create(request, None)
        browser = cls(state, str(lease["lease_id"]), start_url)
        try:
            outcome = await computer_call(state, browser.lease_id, {"action": "navigate", "url": start_url})
            if outcome.png is None or is_blank_png(outcome.png):
                detail = outcome.error or "its screenshot is blank"
                raise JobBrowserError(
                    f"browser lease {browser.lease_id} could not open {start_url}: {detail}"
                )
            return browser, await browser._content(outcome)
        except BaseException:
            browser.release()
            raise

    async def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[Any, Any]:
        """Run one tool call of the policy on the lease.

        Args:
            name: The tool (only ``computer`` exists).
            arguments: Its arguments.

        Returns:
            ``(shown, stored)``: the ``tool`` message content the policy sees (an image block
            with a ``data:`` URL, or an error as JSON text) and the content the transcript
            stores (the image from the local S3 endpoint, or the same error).
        """
        if name != COMPUTER_TOOL["name"]:
            text = _error_text(f"Unknown tool: {name}")
            return text, text
        return await self._content(await computer_call(self._state, self.lease_id, dict(arguments)))

    async def _content(self, outcome: ComputerOutcome) -> tuple[Any, Any]:
        if outcome.png is None:
            text = _error_text(outcome.error or "computer failed")
            return text, text
        encoded = base64.b64encode(outcome.png).decode("ascii")
        shown = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}]
        return shown, await self._stored(outcome.png)

    async def _stored(self, png: bytes) -> Any:
        if self._state.s3_url is None:
            return f"[screenshot: {len(png)} bytes of PNG, not stored (the server runs without S3)]"
        key = f"{SCREENSHOT_PREFIX}{hashlib.sha256(png).hexdigest()}.png"
        url = await anyio.to_thread.run_sync(_s3.put_public_object, self._state, key, png, "image/png")
        return [{"type": "image_url", "image_url": {"url": url}}]

    def release(self) -> None:
        """End the lease and kill its Chromium (idempotent; synchronous, so a cancelled session
        still runs it; a lease that already ended is fine)."""
        if self._released:
            return
        self._released = True
        release_lease(self._state, self.lease_id)


def release_lease(state: LocalState, lease_id: str) -> None:
    """End a lease a session holds; one that already ended or is unknown is fine.

    Args:
        state: Server state.
        lease_id: The lease.
    """
    with contextlib.suppress(LocalAPIError):
        book(state).terminate(lease_id)
