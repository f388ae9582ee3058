"""The synchronous HTTP client: the same decisions as the async one, blocking I/O."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from fleet_generated._transport import QueryValue, RequestOptions

from ._base import BaseHTTPClient
from ._policy import CallPolicy
from ._response import APIResponse

T = TypeVar("T")


class HTTPClient(BaseHTTPClient):
    """Blocking client for one API surface; generated clients call ``request``.

    Args:
        base_url: Root URL of the surface.
        api_key: Bearer key, or None for unauthenticated surfaces.
        policy: Timeouts, retries and the per-call deadline (default ``CallPolicy()``).
        default_headers: Headers added to every request.
        http_client: An ``httpx.Client`` to use (for custom transports); owned by the caller.
    """

    _client: httpx.Client

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        policy: CallPolicy | None = None,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            policy=policy,
            default_headers=default_headers,
        )
        self._owns_client = http_client is None
        self._client = http_client or httpx.Client(follow_redirects=False)

    def close(self) -> None:
        """Close the connection pool if this client created it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> HTTPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        cast_to: type[T],
        path_params: Mapping[str, Any] | None = None,
        params: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        options: RequestOptions | None = None,
    ) -> T:
        """Send one call (with safe retries) and return its body as ``cast_to``.

        Args:
            method: HTTP method.
            path: Path template relative to the base URL, e.g. ``/v1/env/instances/{instance_id}``.
            cast_to: The type to validate the JSON body into (``type(None)`` for no body).
            path_params: Values for the template's placeholders (URL-quoted).
            params: Query parameters; None values are dropped.
            body: JSON body: a pydantic model (None fields omitted) or plain data.
            options: Per-call overrides (timeout, deadline, retries, idempotency key, headers).
        """
        return self.request_raw(
            method, path, cast_to=cast_to, path_params=path_params, params=params, body=body, options=options
        ).parse()

    def request_raw(
        self,
        method: str,
        path: str,
        *,
        cast_to: type[T],
        path_params: Mapping[str, Any] | None = None,
        params: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        options: RequestOptions | None = None,
    ) -> APIResponse[T]:
        """Like ``request`` but returns the ``APIResponse`` (headers, retries, ``parse()``)."""
        call = self._prepare(
            self._client, method, path, path_params=path_params, params=params, body=body, options=options
        )
        loop = self._retry_loop(call)
        step = next(loop)
        try:
            while True:
                if step is not None:
                    time.sleep(step)
                    step = loop.send(None)
                    continue
                try:
                    response = self._client.send(call.request)
                except httpx.TransportError as exc:
                    step = loop.send(exc)
                else:
                    step = loop.send(response)
        except StopIteration as done:
            final, retries_taken = done.value
            return self._raw_response(call, final, retries_taken, cast_to)
