"""Retrying work that is more than one HTTP call: the one loop above the runtime.

The runtime retries a single safe request by itself. Some operations need a retry around
something bigger: an instance creation under a provisioning-sized backoff, a remote verifier
run whose answer can say "judge error, try again", an MCP session, the model endpoint a
chat-completions policy calls. They all go through ``call_with_retries``, which takes its
decisions from ``fleet_sdk._runtime``: ``is_transient`` (the one classifier),
``RetryPolicy.backoff`` (with the server's ``Retry-After``) and a ``Deadline`` that no wait may run past.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ._exceptions import APIStatusError
from ._runtime import Deadline, RetryPolicy, is_transient
from ._runtime._policy import is_transient_reply, parse_retry_after

# Re-exported: what a caller of call_with_retries needs, without reaching into the runtime package.
__all__ = [
    "Deadline",
    "RetryPolicy",
    "call_with_retries",
    "describe_error",
    "is_transient",
    "is_transient_reply",
]

T = TypeVar("T")


def describe_error(exc: BaseException) -> str:
    """One line for a log: the error, with what the server said about retrying it.

    Args:
        exc: The error of one attempt.
    """
    if isinstance(exc, BaseExceptionGroup):  # anyio task groups: report the leaves
        return "; ".join(describe_error(e) for e in exc.exceptions)
    name = type(exc).__name__
    # A private class is a detail of this package: a log line gives only what it says.
    text = str(exc) if name.startswith("_") else f"{name}: {exc}"
    if isinstance(exc, APIStatusError):
        text += f" (code={exc.code}, retryable={exc.retryable} at {exc.retryable_at})"
    return text


async def call_with_retries(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    policy: RetryPolicy,
    deadline: Deadline,
    log: logging.Logger,
    transient: Callable[[BaseException], bool] = is_transient,
) -> T:
    """Run ``operation`` until it succeeds, fails for good, or retrying would outrun the deadline.

    Each retry is logged as a warning (``"<what> failed (<error>); retry n/max in s"``). The
    error of the last attempt is raised unchanged, so the caller decides what giving up means
    (raise it, wrap it, or return a "transient" result).

    Args:
        operation: One attempt; it should bound itself by ``deadline`` too.
        what: The work, for the log (``"creating orderdesk"``).
        policy: How many retries and the backoff between them (the server's ``Retry-After``
            wins, up to the policy's cap).
        deadline: No wait is started that would end past it.
        log: Where retries are logged.
        transient: Which errors are worth another attempt (default: ``is_transient``).
    """
    retries = 0
    while True:
        try:
            return await operation()
        except Exception as exc:
            retries += 1
            retry_after = parse_retry_after(exc.response) if isinstance(exc, APIStatusError) else None
            wait = policy.backoff(retries, retry_after)
            if not transient(exc) or retries > policy.max_retries or not deadline.allows(wait):
                raise
            log.warning(
                "%s failed (%s); retry %d/%d in %.1fs",
                what,
                describe_error(exc),
                retries,
                policy.max_retries,
                wait,
            )
            await anyio.sleep(wait)
