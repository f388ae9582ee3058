"""What the sync and async HTTP clients share: building requests, deciding
retries, mapping errors and parsing bodies. Only the I/O loop differs."""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
import pydantic
from fleet_generated._transport import QueryValue, RequestOptions

from .._exceptions import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    ClientClosedError,
    status_error_class,
)
from ._policy import (
    IDEMPOTENCY_HEADER,
    NOT_GIVEN,
    CallPolicy,
    Deadline,
    NotGiven,
    RetryPolicy,
    Timeout,
    is_safe_to_retry,
    is_transient,
    parse_retry_after,
    resolve_timeout,
)
from ._redact import REDACTED, Redactor
from ._response import APIResponse

T = TypeVar("T")

REQUEST_ID_HEADER = "X-Request-ID"
RETRY_COUNT_HEADER = "X-Fleet-Retry-Count"
"""Sent on every attempt beside the stable ``X-Request-ID``: 0 on the first, then the number of
retries before it, so a server (and its logs) can tell a retry from a new call, as openai-python's
``x-stainless-retry-count`` does."""
USER_AGENT = "fleet-sdk/0.1"

log = logging.getLogger("fleet_sdk.http")

# Yields None ("send now") or seconds to sleep; receives the attempt's outcome.
RetryLoop = Generator[
    float | None, "httpx.Response | httpx.TransportError | None", tuple[httpx.Response, int]
]


@functools.lru_cache(maxsize=512)
def _adapter(cast_to: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(cast_to)


def encode_body(body: Any) -> Any:
    """JSON-ready form of a request body.

    Pydantic models send only the fields the caller set: a field left at its
    default is omitted (the server applies the same schema default), while a
    field explicitly set to None is sent as null, which is how a caller says
    "unknown" (for example ``metadata.score`` of an ungraded session).
    """
    if body is None:
        return None
    if isinstance(body, pydantic.BaseModel):
        return body.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(body, list):
        return [encode_body(item) for item in body]
    return body


@dataclass(frozen=True)
class PreparedCall:
    """One logical call: the request (reused by every attempt) and its budget."""

    request: httpx.Request
    request_id: str
    deadline: Deadline
    max_retries: int
    timeout: Timeout


class BaseHTTPClient:
    """Shared configuration and decisions of ``HTTPClient`` and ``AsyncHTTPClient``.

    Args:
        base_url: Root URL of the surface (``https://orchestrator.fleetai.com``).
        api_key: Sent as ``Authorization: Bearer <key>``; None sends no auth header.
        policy: Timeouts, retries and the per-call deadline (default ``CallPolicy()``).
        default_headers: Headers added to every request (for example ``X-Runner-Token``).
    """

    _client: httpx.Client | httpx.AsyncClient  # the subclass's pool, shared by with_options copies

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        policy: CallPolicy | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._policy = policy or CallPolicy()
        self._timeout = self._policy.timeout or Timeout()
        self._retry = self._policy.retry or RetryPolicy()
        self.default_headers = dict(default_headers or {})
        self._redact = Redactor([api_key, *self.default_headers.values()])

    def __repr__(self) -> str:
        key = REDACTED if self._api_key else None
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={key!r})"

    @property
    def policy(self) -> CallPolicy:
        """Timeouts, retries and the per-call deadline of this client's calls."""
        return self._policy

    @property
    def timeout(self) -> Timeout:
        """Per-attempt timeouts (``policy.timeout``, else the default)."""
        return self._timeout

    @property
    def retry(self) -> RetryPolicy:
        """Retry policy for safe calls (``policy.retry``, else the default)."""
        return self._retry

    @property
    def deadline(self) -> float | None:
        """Default overall seconds per call (``policy.deadline``)."""
        return self._policy.deadline

    def with_options(
        self,
        *,
        timeout: Timeout | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven | None = NOT_GIVEN,
        deadline: float | NotGiven | None = NOT_GIVEN,
    ) -> Self:
        """A copy with another call policy, sharing this client's connection pool.

        Args:
            timeout: Per-attempt timeouts (not given: this client's; None: none).
            retry: Retry policy (not given: this client's; None: no retries).
            deadline: Overall seconds per call (not given: this client's; None: none).
        """
        cls: Any = type(self)  # HTTPClient or AsyncHTTPClient: the same keyword arguments
        copy: Self = cls(
            self.base_url,
            api_key=self._api_key,
            policy=self._policy.updated(timeout=timeout, retry=retry, deadline=deadline),
            default_headers=self.default_headers,
            http_client=self._client,
        )
        return copy

    # -- building ---------------------------------------------------------------------

    def _url(self, path: str, path_params: Mapping[str, Any] | None) -> str:
        if path_params:
            path = path.format(**{k: quote(str(v), safe="") for k, v in path_params.items()})
        return f"{self.base_url}{path}"

    def _headers(self, request_id: str, options: RequestOptions) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
            REQUEST_ID_HEADER: request_id,
            **self.default_headers,
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if "idempotency_key" in options:
            headers[IDEMPOTENCY_HEADER] = options["idempotency_key"]
        headers.update(options.get("extra_headers", {}))
        return headers

    def _prepare(
        self,
        client: httpx.Client | httpx.AsyncClient,
        method: str,
        path: str,
        *,
        path_params: Mapping[str, Any] | None,
        params: Mapping[str, QueryValue] | None,
        body: Any,
        options: RequestOptions | None,
    ) -> PreparedCall:
        if client.is_closed:  # httpx would say "the client has been closed" as a RuntimeError
            raise ClientClosedError(
                f"{method} {path}: this client's connection pool is closed; make a new client"
            )
        opts: RequestOptions = options or {}
        # A caller may give the call's id (as ``extra_headers``, or a generated ``x_request_id``
        # argument) so that several calls are one to the server: see fleet_sdk/_provisioning.py.
        extra = {name.lower(): value for name, value in opts.get("extra_headers", {}).items()}
        request_id = extra.get(REQUEST_ID_HEADER.lower()) or str(uuid.uuid4())
        query = {k: v for k, v in (params or {}).items() if v is not None}
        content = encode_body(body)
        request = client.build_request(
            method,
            self._url(path, path_params),
            params=query or None,
            json=content,
            headers=self._headers(request_id, opts),
        )
        deadline = opts.get("deadline", self.deadline)
        return PreparedCall(
            request=request,
            request_id=request_id,
            deadline=Deadline(deadline),
            max_retries=opts.get("max_retries", self.retry.max_retries),
            timeout=resolve_timeout(opts.get("timeout"), self.timeout),
        )

    def _retry_loop(self, call: PreparedCall) -> RetryLoop:
        """The attempt/retry state machine, free of I/O so sync and async share it.

        Yields ``None`` when the caller must send ``call.request`` and ``send()``
        back the ``httpx.Response`` or the ``httpx.TransportError``; yields a float
        when the caller must sleep that many seconds. Returns the successful
        response and the number of retries taken; raises the typed error otherwise.
        """
        retries_taken = 0
        while True:
            if call.deadline.expired():
                raise self._deadline_error(call, retries_taken)
            timeout = call.timeout.to_httpx(call.deadline.remaining())
            call.request.extensions["timeout"] = timeout.as_dict()
            call.request.headers[RETRY_COUNT_HEADER] = str(retries_taken)
            outcome = yield None
            if isinstance(outcome, httpx.TransportError):
                error = self._transport_error(call, outcome)
                # A URL with no http(s) scheme fails the same way every time.
                permanent = isinstance(outcome, httpx.UnsupportedProtocol)
                wait = None if permanent else self._retry_wait(call, retries_taken, error)
                if wait is None:
                    raise error from outcome
                reason = str(error)
            else:
                assert outcome is not None
                if outcome.is_success:
                    return outcome, retries_taken
                status_error = self._status_error(call, outcome)
                wait = self._retry_wait(call, retries_taken, status_error)
                if wait is None:
                    raise status_error
                reason = f"HTTP {outcome.status_code}"
            self._log_retry(call, retries_taken, wait, reason)
            yield wait
            retries_taken += 1

    def _raw_response(
        self, call: PreparedCall, response: httpx.Response, retries_taken: int, cast_to: Any
    ) -> APIResponse[Any]:
        return APIResponse(
            response,
            request_id=call.request_id,
            retries_taken=retries_taken,
            parser=self._parser(call, cast_to),
        )

    # -- deciding ---------------------------------------------------------------------

    def _retry_wait(self, call: PreparedCall, retries_taken: int, error: APIError) -> float | None:
        """Seconds to wait before the next attempt, or None to stop now."""
        if retries_taken >= call.max_retries or not is_safe_to_retry(
            call.request.method, call.request.headers
        ):
            return None
        if not is_transient(error):
            return None
        retry_after = parse_retry_after(error.response) if isinstance(error, APIStatusError) else None
        wait = self.retry.backoff(retries_taken + 1, retry_after)
        if not call.deadline.allows(wait):
            return None
        return wait

    def _log_retry(self, call: PreparedCall, retries_taken: int, wait: float, reason: str) -> None:
        log.warning(
            "retrying %s %s in %.2fs (retry %d/%d, request_id=%s): %s",
            call.request.method,
            call.request.url.copy_with(query=None),
            wait,
            retries_taken + 1,
            call.max_retries,
            call.request_id,
            self._redact(reason),
        )

    # -- errors and parsing -----------------------------------------------------------

    def _transport_error(self, call: PreparedCall, exc: Exception) -> APIConnectionError:
        cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
        what = "timed out" if cls is APITimeoutError else "could not connect"
        return cls(
            self._redact(f"{call.request.method} {call.request.url} {what}: {type(exc).__name__}: {exc}"),
            method=call.request.method,
            url=str(call.request.url),
            request_id=call.request_id,
        )

    def _deadline_error(self, call: PreparedCall, retries_taken: int) -> APITimeoutError:
        return APITimeoutError(
            f"{call.request.method} {call.request.url} ran past its deadline after {retries_taken} retries",
            method=call.request.method,
            url=str(call.request.url),
            request_id=call.request_id,
        )

    @staticmethod
    def _body_of(response: httpx.Response) -> Any:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return response.text

    def _status_error(self, call: PreparedCall, response: httpx.Response) -> APIStatusError:
        body = self._body_of(response)
        detail: Any = body.get("detail", body) if isinstance(body, dict) else body
        if not isinstance(detail, str):
            detail = json.dumps(detail, default=str)
        if len(detail) > 2000:
            detail = detail[:2000] + "..."
        cls = status_error_class(response.status_code, body)
        return cls(
            self._redact(f"{call.request.method} {call.request.url} -> {response.status_code}: {detail}"),
            method=call.request.method,
            url=str(call.request.url),
            request_id=call.request_id,
            response=response,
            body=body,
        )

    def _parser(self, call: PreparedCall, cast_to: Any) -> Any:
        def parse(response: httpx.Response) -> Any:
            if cast_to is None or cast_to is type(None):
                return None
            method, url = call.request.method, str(call.request.url)
            try:
                data = response.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                snippet = self._redact(response.text[:200])
                raise APIResponseValidationError(
                    f"{method} {url} -> {response.status_code}: expected JSON, got "
                    f"{response.headers.get('content-type', 'no content-type')}: {snippet!r}",
                    method=method,
                    url=url,
                    request_id=call.request_id,
                    status_code=response.status_code,
                    body=response.text,
                ) from exc
            try:
                return _adapter(cast_to).validate_python(data)
            except pydantic.ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or '<body>'}: {err['msg']}"
                    for err in exc.errors()[:5]
                )
                raise APIResponseValidationError(
                    f"{method} {url} -> {response.status_code}: response does not match "
                    f"{getattr(cast_to, '__name__', cast_to)}: {problems}",
                    method=method,
                    url=url,
                    request_id=call.request_id,
                    status_code=response.status_code,
                    body=data,
                ) from exc

        return parse
