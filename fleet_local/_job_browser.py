"""The browser of a job session: what the server adds to ``browser_use`` and ``computer_use`` sessions.

A job session plays its task with ``fleet_sdk``'s ``TaskEnv`` (:mod:`._episodes`), which plays a
``browser_use`` task on a browser lease as it does for any client (``fleet_sdk.browser``): a lease
allowed to open only the instance's host, the web UI opened and health-checked (a real, non-blank
first screenshot), the agent offered only the lease's ``computer`` tool, and the lease deleted when
the episode closes, before the verifier grades the instance. The local server has no desktop
images, so its jobs play ``computer_use`` tasks that way too. This module holds the server's part:

- the lease's id, ``lease_<session_id>`` (:func:`session_lease_id`), so ``GET
  /v1/browser/{lease_id}`` shows what became of a session's browser, and a server that stops or
  restarts mid-session can end it (:func:`release_lease`);
- whether this server can start Chromium at all (:func:`unavailable`: none installed,
  ``FLEET_CHROMIUM`` pointing at nothing, no Playwright), checked before an instance is made;
- the screenshots of the stored transcript (:func:`stored_content`): the policy sees each as an
  image block with a ``data:`` URL; the transcript gets the same image as an object of the local
  S3 endpoint, because viewers cannot render ``data:`` URLs (``ImageURL`` in
  schemas/sessions-ingest.yaml). A server started without S3 stores a text note in its place.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

from fleet_sdk.traces import DataImage, collect_data_images

from . import _s3
from ._browser import book
from ._chromium import browser_unavailable
from ._errors import LocalAPIError
from ._state import LocalState

__all__ = [
    "MIN_LEASE_TTL_SECONDS",
    "MULTIMODAL",
    "JobBrowserError",
    "lease_ttl",
    "release_lease",
    "session_lease_id",
    "stored_content",
    "unavailable",
]

MULTIMODAL = frozenset({"browser_use", "computer_use"})
"""Task modalities a job plays on a browser lease."""

MIN_LEASE_TTL_SECONDS = 300
"""Floor of a session lease's TTL: its backstop should the server die before the session ends it."""


class JobBrowserError(Exception):
    """This server cannot play the session's task on a browser lease."""


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


def lease_ttl(max_duration_minutes: float) -> int:
    """The TTL of a session's instance and lease: the session's time limit and a margin to grade.

    Args:
        max_duration_minutes: The job's time limit per session.
    """
    return max(MIN_LEASE_TTL_SECONDS, min(int(max_duration_minutes * 60) + 120, 86_400))


def release_lease(state: LocalState, lease_id: str) -> None:
    """End a lease a session holds; one that already ended or is unknown is fine.

    Args:
        state: Server state.
        lease_id: The lease.
    """
    with contextlib.suppress(LocalAPIError):
        book(state).terminate(lease_id)


async def stored_content(state: LocalState, content: Any) -> Any:
    """A message's content as the transcript stores it: each ``data:`` image as a local S3 object.

    Args:
        state: Server state.
        content: The content the policy was shown (a string, or blocks).
    """
    if not isinstance(content, list):
        return content
    images = collect_data_images([{"content": content}])
    if not images:
        return content
    stored = {url: await _stored(state, image) for url, image in images.items()}
    blocks = []
    for block in content:
        url = (block.get("image_url") or {}).get("url") if isinstance(block, dict) else None
        blocks.append(stored.get(url, block) if isinstance(url, str) else block)
    return blocks


async def _stored(state: LocalState, image: DataImage) -> dict[str, Any]:
    if state.s3_url is None:
        note = f"[screenshot: {len(image.data)} bytes of {image.mime}, not stored (no S3 on this server)]"
        return {"type": "text", "text": note}
    url = await anyio.to_thread.run_sync(_s3.put_public_object, state, image.key, image.data, image.mime)
    return {"type": "image_url", "image_url": {"url": url}}
