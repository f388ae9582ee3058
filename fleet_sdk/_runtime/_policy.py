"""Timeout, deadline and retry policy: the one place that decides when to retry.

A call is retried only when repeating it is safe (an idempotent method, or a
POST/PATCH that carries an idempotency key) and the failure is transient
(``is_transient``: connect error, timeout, the body's ``retryable`` flag, else
408, 429, 502, 503, 504). Waits grow exponentially with jitter, honour
``Retry-After`` up to a cap, and never run past the call's deadline.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from .._exceptions import APIConnectionError, APIStatusError, read_error_body

if TYPE_CHECKING:
    import httpx
    from fleet_generated._transport import RequestOptions, TimeoutLike

T = TypeVar("T")


class NotGiven:
    """The type of ``NOT_GIVEN``: an option left out, which keeps the default (or the current
    client's setting), unlike ``None``, which turns the option off."""

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __reduce__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Final = NotGiven()
"""Default of a policy option: "keep the default" (``None`` means "off")."""


def given(value: T | NotGiven, default: T) -> T:
    """``value``, or ``default`` when it was not given.

    Args:
        value: An option's value, or ``NOT_GIVEN``.
        default: What an option left out means.
    """
    return default if isinstance(value, NotGiven) else value


IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRYABLE_STATUS = frozenset({408, 429, 502, 503, 504})
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_DEADLINE = 180.0

# The last resort of ``is_transient`` for instance provisioning (``server_errors=True``):
# production error messages known to be transient that arrive with no ``retryable`` flag,
# matched case-insensitively anywhere in the error body.
# Add one only with a test that pins it (tests/test_retry_classification.py, one case each).
TRANSIENT_MESSAGES = (
    "instance health check failed",  # an instance that did not come up healthy in time
    "too many in-flight",  # the orchestrator's cap on concurrent creations
)


def is_transient(error: BaseException, *, server_errors: bool = False) -> bool:
    """Whether doing the same thing again may succeed: the one retry classifier.

    In order: no response at all (a connection error or timeout, the runtime's or a raw
    ``httpx`` one) is transient; a ``retryable`` flag in the error body, wherever the server
    put it (see ``read_error_body``), decides, and an explicit ``false`` is final; then the
    status: 408, 429, 502, 503, 504, and with ``server_errors`` every 5xx; then, with
    ``server_errors`` only, as a last resort, ``TRANSIENT_MESSAGES``. Anything else (a bug, a
    refused request) is permanent.

    Args:
        error: The error of one attempt.
        server_errors: Treat every 5xx as transient. For calls that cannot do harm twice
            and whose server failures are usually passing, such as an instance creation
            that carries an idempotency key. Also consults ``TRANSIENT_MESSAGES``, which
            are provisioning messages: a plain safe call is never retried by its error text.
    """
    import httpx  # loaded by then: the error came from a call

    if isinstance(error, APIConnectionError | httpx.TransportError):
        return True
    if not isinstance(error, APIStatusError):
        return False
    return is_transient_reply(error.status_code, error.body, server_errors=server_errors)


def is_transient_reply(status_code: int, body: Any, *, server_errors: bool = False) -> bool:
    """``is_transient`` for an error reply that is not (yet) an exception: status and body.

    Args:
        status_code: The reply's HTTP status (an error: 400 or more).
        body: The parsed JSON body, or its text.
        server_errors: Treat every 5xx as transient (see ``is_transient``).
    """
    retryable = read_error_body(body).retryable
    if retryable is not None:
        return retryable
    if status_code in RETRYABLE_STATUS or (server_errors and status_code >= 500):
        return True
    if not server_errors:
        return False  # the message list is for instance provisioning only (its last resort)
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    text = text.lower()
    return any(message in text for message in TRANSIENT_MESSAGES)


@dataclass(frozen=True)
class Timeout:
    """Per-attempt timeouts in seconds.

    Attributes:
        total: Read/write/pool timeout of one attempt.
        connect: Connect timeout of one attempt (kept short so a dead host fails fast).
    """

    total: float = 60.0
    connect: float = 10.0

    def to_httpx(self, remaining: float | None) -> httpx.Timeout:
        """An ``httpx.Timeout`` for one attempt, never longer than the time left (``NO_TIMEOUT``
        and no deadline: none at all)."""
        import httpx

        total = self.total if remaining is None else max(0.001, min(self.total, remaining))
        connect = min(self.connect, total)
        return httpx.Timeout(
            None if math.isinf(total) else total, connect=None if math.isinf(connect) else connect
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how patiently to retry a safe call.

    Attributes:
        max_retries: Retries after the first attempt (0 disables retries).
        backoff_base: First backoff in seconds; doubles each retry.
        backoff_max: Upper bound of one backoff.
        retry_after_cap: Largest ``Retry-After`` honoured; longer values are clamped to it.
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_cap: float = 30.0

    def backoff(self, retry_number: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based).

        Args:
            retry_number: Which retry this is, starting at 1.
            retry_after: The server's ``Retry-After`` in seconds, if it sent one.
        """
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.retry_after_cap)
        ceiling = min(self.backoff_max, self.backoff_base * 2.0 ** (retry_number - 1))
        # "Equal jitter": at least half the ceiling, so waits still grow, but
        # hundreds of rollouts retrying together spread out.
        return ceiling / 2 + random.uniform(0, ceiling / 2)


NO_TIMEOUT: Final = Timeout(total=math.inf, connect=math.inf)
"""No per-attempt timeout (what ``timeout=None`` asks for): only the call's deadline bounds it."""

NO_RETRIES: Final = RetryPolicy(max_retries=0)
"""No retries (what ``retry=None`` asks for)."""


@dataclass(frozen=True)
class CallPolicy:
    """How every call of a client is bounded and retried: the one options object a ``Fleet``
    hands its typed clients and each of their ``HTTPClient``s (``fleet.call_policy``).

    A client's options (``AsyncFleet(timeout=..., retry=..., deadline=...)``, ``with_options``)
    read ``None`` as "off" and leave what is not given (``NOT_GIVEN``) as it was; here the
    offs are spelled ``NO_TIMEOUT``, ``NO_RETRIES`` and ``deadline=None``.

    Attributes:
        timeout: Per-attempt timeouts; None for the default (``Timeout()``: 60 s, connect 10 s;
            an env's MCP requests then keep their own 30 s, see ``MCPClient``); ``NO_TIMEOUT``
            for none.
        retry: Retry policy for safe calls; None for the default (``RetryPolicy()``);
            ``NO_RETRIES`` for none.
        deadline: Overall seconds per call, retries included; None for no overall deadline.
    """

    timeout: Timeout | None = None
    retry: RetryPolicy | None = None
    deadline: float | None = DEFAULT_DEADLINE

    def updated(
        self,
        *,
        timeout: Timeout | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven | None = NOT_GIVEN,
        deadline: float | NotGiven | None = NOT_GIVEN,
    ) -> CallPolicy:
        """A copy with the given settings replaced; one not given keeps this policy's, and
        ``None`` turns it off.

        Args:
            timeout: Per-attempt timeouts (None: no per-attempt timeout, ``NO_TIMEOUT``).
            retry: Retry policy for safe calls (None: no retries, ``NO_RETRIES``).
            deadline: Overall seconds per call (None: no overall deadline).
        """
        new_timeout = given(timeout, self.timeout)
        new_retry = given(retry, self.retry)
        return CallPolicy(
            timeout=NO_TIMEOUT if new_timeout is None and timeout is None else new_timeout,
            retry=NO_RETRIES if new_retry is None and retry is None else new_retry,
            deadline=given(deadline, self.deadline),
        )


class Deadline:
    """A point in monotonic time after which no more work starts."""

    def __init__(self, seconds: float | None) -> None:
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None for no deadline."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """True once the deadline has passed."""
        left = self.remaining()
        return left is not None and left <= 0

    def allows(self, wait: float) -> bool:
        """True when waiting ``wait`` seconds still leaves time for another attempt."""
        left = self.remaining()
        return left is None or wait < left


def within(deadline: Deadline) -> RequestOptions | None:
    """Request options that keep one call inside an outer deadline.

    Args:
        deadline: The deadline of the operation the call belongs to.
    """
    remaining = deadline.remaining()
    return {"deadline": remaining} if remaining is not None else None


def is_safe_to_retry(method: str, headers: httpx.Headers) -> bool:
    """A call may be repeated: idempotent by method, or carrying an idempotency key."""
    return method.upper() in IDEMPOTENT_METHODS or IDEMPOTENCY_HEADER in headers


def parse_retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # an HTTP date is rare: the import (~10 ms) waits for one

    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, parsed.timestamp() - time.time())


def resolve_timeout(value: float | TimeoutLike | None, default: Timeout) -> Timeout:
    """Normalise a timeout option: a bare number replaces the total, keeping connect."""
    if value is None:
        return default
    if isinstance(value, Timeout):
        return value
    if not isinstance(value, int | float):
        return Timeout(total=value.total, connect=value.connect)
    return replace(default, total=float(value), connect=min(default.connect, float(value)))
