"""The ``cdp`` resource of an instance: a headless Chromium on its web UI, through a browser lease.

Production instances that have a browser list a ``cdp`` resource, and the public SDK's
``env.browser()`` reads its DevTools URLs from ``/resources/cdp/describe``. Every local instance has
a web UI, so every instance gets one when the server can run Chromium (``_chromium``):

* the resource is a browser lease (``_browser``) with the id ``lease_<instance_id>``
  (:func:`instance_lease_id`), allowed to open only this server's host, made on the first
  ``describe`` or ``start``; its URLs are the lease's, so whatever guards a lease's CDP endpoint
  guards this one too;
* its Chromium starts on first use of those URLs (or on ``start``), with the instance's web UI
  open, so an instance nobody drives a browser on costs nothing;
* at most ``LocalSettings.instance_browsers`` instances hold one at once (each Chromium takes
  250-400 MiB); past that, ``describe`` answers 503 ``browser_limit`` (retryable). That cap is
  a part of the server-wide ``max_browsers`` (``_lease_book``: 429 past it), kept because the
  manager API takes no key: instance browsers never take every browser the server runs;
* the lease ends, and its Chromium is killed, when the instance ends (:func:`release`, one of
  ``LocalState.instance_end_hooks``, which ``_instances.delete_instance`` runs on every path:
  delete, batch delete, TTL).
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import urlsplit

import anyio

from fleet_sdk import BrowserStartError
from fleet_sdk.types import browser_lease as lease_models
from fleet_sdk.types import env_instance as models

from . import _instances
from ._browser import book
from ._chromium import START_DEADLINE, browser_unavailable, host_allowed
from ._errors import LocalAPIError
from ._lease_book import LIVE_STATUSES
from ._lease_endpoints import lease_browser
from ._state import LocalState

__all__ = ["LEASE_PREFIX", "describe", "instance_lease_id", "offered", "release", "start"]

LEASE_PREFIX = "lease_inst"
"""Start of the id of every instance's lease (instance ids start with ``inst``)."""

LEASE_TTL_SECONDS = 86_400
"""TTL of an instance's lease: the longest a lease may have; it ends with the instance anyway."""

_RESOLUTION = re.compile(r"^(\d+)[x,](\d+)$")


def instance_lease_id(instance_id: str) -> str:
    """The id of the browser lease behind an instance's ``cdp`` resource.

    Args:
        instance_id: The instance.
    """
    return f"lease_{instance_id}"


def offered() -> bool:
    """Whether instances list a ``cdp`` resource: the server can run Chromium."""
    return browser_unavailable() is None


def _lease(state: LocalState, instance_id: str) -> lease_models.BrowserLease:
    """The instance's live lease, made on first use (blocking: the store)."""
    _instances.require_live(state, instance_id)
    leases = book(state)
    lease_id = instance_lease_id(instance_id)
    record = leases.get(lease_id)
    if record is not None and record.lease.status in LIVE_STATUSES:
        return record.lease
    reason = browser_unavailable()
    if reason is not None:
        raise LocalAPIError(
            503, f"this server cannot run a browser: {reason}", code="browser_unavailable", retryable=False
        )
    limit = max(0, int(state.settings.instance_browsers))
    if leases.live_count(LEASE_PREFIX) >= limit:
        raise LocalAPIError(
            503,
            f"{limit} instance(s) already hold a browser (the server's instance_browsers limit); "
            "retry once one of them has ended",
            code="browser_limit",
            retryable=True,
        )
    request = lease_models.BrowserLeaseRequest(
        ttl_seconds=LEASE_TTL_SECONDS,
        allowed_hosts=[urlsplit(state.public_url).netloc],
        lease_id=lease_id,
    )
    try:
        return leases.create(request, None, start_url=state.instance_root(instance_id)).lease
    except LocalAPIError as exc:
        if exc.code != "conflict":
            raise
        made = leases.get(lease_id)  # a concurrent call made it first
        if made is None:
            raise
        return made.lease


def describe(state: LocalState, instance_id: str) -> models.CDPDescribeResponse:
    """The DevTools URLs of an instance's browser (blocking: run in a worker thread).

    Raises:
        LocalAPIError: 404 ``instance_not_found``; 503 ``browser_unavailable`` / ``browser_limit``;
            429 ``browser_limit`` when the server runs ``max_browsers`` leases already.
    """
    cdp = str(_lease(state, instance_id).cdp_url)
    return models.CDPDescribeResponse(
        success=True,
        cdp_browser_url=cdp,
        cdp_page_url=f"{cdp}/json/list",
        cdp_devtools_url=f"{cdp}/json/version",
    )


async def start(
    state: LocalState, instance_id: str, body: models.ChromeStartRequest
) -> models.ChromeStartResponse:
    """Start an instance's browser now, on its web UI; size its page, open ``start_page``.

    Args:
        state: Server state.
        instance_id: The instance.
        body: ``resolution`` (``WIDTHxHEIGHT`` or ``WIDTH,HEIGHT``, bounded by the schema) and
            ``start_page``, each optional.

    Raises:
        LocalAPIError: As :func:`describe`; 503 ``browser_unavailable`` when Chromium does not
            start; 400 ``bad_request`` for a ``start_page`` on another host.
    """
    lease = await anyio.to_thread.run_sync(_lease, state, instance_id)
    if body.start_page is not None and not host_allowed(body.start_page, lease.allowed_hosts):
        raise LocalAPIError(
            400,
            f"start_page {body.start_page!r} is not on the instance's host {lease.allowed_hosts}",
            code="bad_request",
            retryable=False,
        )
    try:
        browser = await lease_browser(state, lease.lease_id)
    except BrowserStartError as exc:
        raise LocalAPIError(
            503, f"the browser did not start: {exc}", code="browser_unavailable", retryable=True
        ) from exc
    size = _RESOLUTION.match(body.resolution or "")
    if browser.page is not None:
        async with browser.lock:
            if size is not None:
                await browser.page.set_viewport_size({"width": int(size[1]), "height": int(size[2])})
            if body.start_page is not None:
                await browser.page.goto(body.start_page, timeout=START_DEADLINE * 1000)
    shown = f" at {size[1]}x{size[2]}" if size is not None else ""
    return models.ChromeStartResponse(success=True, message=f"browser of {instance_id} running{shown}")


def release(state: LocalState, instance_id: str) -> None:
    """End an instance's lease and kill its browser; an instance without one is fine.

    Args:
        state: Server state.
        instance_id: The instance that ended.
    """
    with contextlib.suppress(LocalAPIError):
        book(state).terminate(instance_lease_id(instance_id))
