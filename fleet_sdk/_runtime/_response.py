"""Raw-response access: the parsed model plus everything HTTP said about it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

_UNSET: object = object()


class APIResponse(Generic[T]):
    """One completed call: headers, status, retry count, and the typed body on demand.

    Attributes:
        http_response: The final ``httpx.Response``.
        request_id: The ``X-Request-ID`` sent with every attempt of this call.
        retries_taken: How many retries happened before this response (0 = first try).
    """

    def __init__(
        self,
        http_response: httpx.Response,
        *,
        request_id: str,
        retries_taken: int,
        parser: Callable[[httpx.Response], T],
    ) -> None:
        self.http_response = http_response
        self.request_id = request_id
        self.retries_taken = retries_taken
        self._parser = parser
        self._parsed: object = _UNSET

    @property
    def status_code(self) -> int:
        """HTTP status of the final attempt."""
        return self.http_response.status_code

    @property
    def headers(self) -> httpx.Headers:
        """Response headers of the final attempt."""
        return self.http_response.headers

    def parse(self) -> T:
        """The body validated into the operation's return type (parsed once, then cached)."""
        if self._parsed is _UNSET:
            self._parsed = self._parser(self.http_response)
        return self._parsed  # type: ignore[return-value]

    def __repr__(self) -> str:
        request = self.http_response.request
        return (
            f"<APIResponse {request.method} {request.url} -> {self.status_code} "
            f"retries_taken={self.retries_taken} request_id={self.request_id}>"
        )
