"""An ``httpx.AsyncClient`` that sends through a caller's ``httpx.Client``, one worker thread per
request in flight.

A sync ``Fleet`` runs its facade methods (``make``, ``list_envs``, tool calls, traces, tasks) as
async code on the SDK's own event loop, and an env's MCP client speaks through an async client.
When the caller hands ``Fleet`` only a sync ``httpx.Client`` (a custom transport, proxies, auth,
event hooks), :func:`async_client_over` gives that async traffic a client whose every request
goes through the caller's one, so nothing the caller configured is bypassed and nothing falls
back to the network on its own.
"""

from __future__ import annotations

import anyio
import anyio.to_thread
import httpx

__all__ = ["MAX_THREADS", "SyncClientTransport", "async_client_over"]

MAX_THREADS = 64
"""Requests one :class:`SyncClientTransport` has in flight at once (a worker thread each); more wait."""

# The extensions of the caller's response that still mean something once its body was read.
_KEPT_EXTENSIONS = ("http_version", "reason_phrase")
# Headers that described the body as it came over the wire, not the decoded body handed on.
_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class SyncClientTransport(httpx.AsyncBaseTransport):
    """An async transport that hands each request to a sync ``httpx.Client`` in a worker thread.

    The sync client's own ``send`` runs, so its transport, auth and event hooks apply. The body
    is read whole and decoded in the thread (the SDK's JSON and MCP replies are small) and handed
    back without the headers that framed it on the wire (``Content-Encoding``...). A cancelled
    call waits for its thread, which the request's own timeout bounds (the SDK sets one on every
    request).

    Args:
        client: The caller's client; never closed here.
        max_threads: Requests in flight at once.
    """

    def __init__(self, client: httpx.Client, *, max_threads: int = MAX_THREADS) -> None:
        self._client = client
        self._max_threads = max_threads
        self._limiter: anyio.CapacityLimiter | None = None  # made inside the loop that uses it

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the sync client and return its response, body read."""
        # An async request's body may be an async stream, which a sync transport cannot read.
        blocking = httpx.Request(
            request.method,
            request.url,
            headers=request.headers,
            content=await request.aread(),
            extensions=request.extensions,
        )
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_threads)
        return await anyio.to_thread.run_sync(self._send, blocking, limiter=self._limiter)

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self._client.send(request)  # read whole, decoded and closed
        headers = [(name, value) for name, value in response.headers.multi_items() if name not in _FRAMING]
        kept = {name: response.extensions[name] for name in _KEPT_EXTENSIONS if name in response.extensions}
        return httpx.Response(
            response.status_code, headers=headers, content=response.content, extensions=kept
        )


def async_client_over(client: httpx.Client) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose requests all go through ``client`` (see the module docstring).

    It takes ``client``'s default headers and timeout, so requests are built as ``client`` would
    build them; redirects are left to ``client``. Closing it leaves ``client`` open.

    Args:
        client: The caller's sync client.
    """
    return httpx.AsyncClient(
        transport=SyncClientTransport(client),
        headers=client.headers,
        timeout=client.timeout,
        follow_redirects=False,
    )
