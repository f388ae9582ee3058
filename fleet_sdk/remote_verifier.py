"""Run a task's verifier on the platform (``POST /v1/verifiers/execute``): how episodes are graded.

Retries transient failures inside a deadline, as the runtime's ``is_transient``
classifies them: connection errors, timeouts, 408/429/502/503/504 (fresh instances
answer 502 while warming up), an error body that says ``"retryable": true``
anywhere, and also a run whose stdout carries a ``JUDGE ERROR:``
line (docs/wire.md#verifiers). The ``execution_id`` is kept, because the dashboard only counts
sessions that link one.
"""

from __future__ import annotations

import base64
import functools
import logging
from typing import TYPE_CHECKING, Any, cast, get_args

from ._client import async_fleet_of
from ._exceptions import FleetError
from ._retry import call_with_retries
from ._runtime import Deadline, RetryPolicy, is_transient
from ._twin import sync_function
from .rewards import is_judge_error
from .verifiers import (
    ErrorType,
    VerifierCodeError,
    VerifierError,
    VerifierOutcome,
    bundle_sha256,
    bundle_verifier,
    find_entry_point,
    score_from_result,
)

if TYPE_CHECKING:
    from ._client import AsyncFleet

__all__ = ["RemoteVerifierOutcome", "run_remote", "run_remote_sync"]

log = logging.getLogger("fleet_sdk.verifiers")


class _JudgeError(Exception):
    """The platform ran the verifier, and its output says the judge failed: worth another run."""


class RemoteVerifierOutcome(VerifierOutcome):
    """A ``VerifierOutcome`` from the platform, with its ids.

    Attributes:
        execution_id: The platform's id of this run (link it to traces).
        verifier_id: The platform's id of the verifier.
        attempts: How many times the verifier was executed.
        transient: The run failed for a reason a retry might fix (the reward is unknown).
    """

    execution_id: str | None = None
    verifier_id: str | None = None
    attempts: int = 1
    transient: bool = False


_KINDS: frozenset[str] = frozenset(get_args(ErrorType))


def _error_from_wire(wire_type: str, message: str, traceback: str | None) -> VerifierError:
    """The wire's ``error.type`` is a fault kind, or, when the verifier raised, the exception's
    class name (as the platform reports it): the latter is kind ``exception``."""
    if wire_type in _KINDS:
        return VerifierError(type=cast(ErrorType, wire_type), message=message, traceback=traceback)
    return VerifierError(type="exception", message=message, traceback=traceback, exception_type=wire_type)


def _outcome(response: Any, attempts: int) -> RemoteVerifierOutcome:
    error = None
    if response.error is not None:
        error = _error_from_wire(response.error.type, response.error.message, response.error.traceback)
    score: float | None = None
    if response.success and error is None:
        try:
            score = score_from_result(response.result)
        except (TypeError, ValueError) as exc:
            error = VerifierError(type="invalid_result", message=str(exc))
    return RemoteVerifierOutcome(
        success=score is not None,
        score=score,
        result=response.result,
        stdout=response.stdout or "",
        error=error,
        execution_time_ms=float(response.execution_time_ms or 0),
        execution_id=response.execution_id,
        verifier_id=response.verifier_id,
        attempts=attempts,
    )


@functools.lru_cache(maxsize=256)
def _prepared(code: str) -> tuple[str, str, str]:
    """Entry point, bundle sha256 and base64 bundle of a verifier's source.

    Cached: every episode of a task sends the same code, and parsing it was the largest
    client cost of an episode's end (see benchmarks/README.md).
    """
    try:
        function_name = find_entry_point(code)
    except VerifierCodeError:
        function_name = "verify"  # let the platform report the syntax error / missing entry point
    return function_name, bundle_sha256(code), base64.b64encode(bundle_verifier(code)).decode("ascii")


async def run_remote(
    fleet: AsyncFleet,
    code: str,
    *,
    key: str,
    instance_id: str,
    final_answer: Any = None,
    run_timeout: int = 60,
    deadline: float = 300.0,
    retry: RetryPolicy | None = None,
) -> RemoteVerifierOutcome:
    """Execute a verifier on the platform against an instance; never raises for verifier faults.

    Args:
        fleet: The client to call through.
        code: The verifier's Python source.
        key: The verifier key (normally the task key).
        instance_id: The instance the verifier grades.
        final_answer: The agent's final answer, if any.
        run_timeout: Seconds the platform gives one run.
        deadline: Overall seconds, retries included.
        retry: Backoff between attempts (default 3 retries, 3 s then doubling).

    Returns:
        The outcome; ``transient=True`` with ``score=None`` when every attempt failed for a
        reason a retry might have fixed.
    """
    from fleet_generated.env_instance import models

    policy = retry or RetryPolicy(max_retries=3, backoff_base=3.0, backoff_max=12.0)
    function_name, sha256, bundle = _prepared(code)
    request = models.VerifiersExecuteRequest(
        key=key,
        sha256=sha256,
        args=models.VerifierArgs(instance_id=instance_id, final_answer=final_answer),
        function_name=function_name,
        timeout=run_timeout,
        bundle=bundle,
    )
    limit = Deadline(deadline)
    attempts = 0
    last: RemoteVerifierOutcome | None = None

    async def attempt() -> RemoteVerifierOutcome:
        nonlocal attempts, last
        attempts += 1
        response = await fleet.api.control_plane.execute_verifier(
            request, options={"deadline": limit.remaining() or deadline}
        )
        outcome = last = _outcome(response, attempts)
        if is_judge_error(outcome.stdout):
            raise _JudgeError
        return outcome

    def worth_retrying(exc: BaseException) -> bool:
        return isinstance(exc, _JudgeError) or is_transient(exc)

    try:
        outcome = await call_with_retries(
            attempt, what=f"verifier {key}", policy=policy, deadline=limit, log=log, transient=worth_retrying
        )
    except _JudgeError:
        problem = "verifier stdout reported a JUDGE ERROR"
    except FleetError as exc:
        if not is_transient(exc):
            raise
        problem = f"verifier execution failed: {exc}"
    else:
        if not outcome.execution_id:
            log.warning("verifier %s returned no execution_id; its trace cannot be linked", key)
        return outcome
    log.warning("verifier %s: giving up after %d attempts: %s", key, attempts, problem)
    failure = VerifierError(type="exception", message=problem)
    if last is not None:  # keep the last run's ids and output for the trace
        return last.model_copy(update={"success": False, "score": None, "error": failure, "transient": True})
    return RemoteVerifierOutcome(success=False, score=None, error=failure, attempts=attempts, transient=True)


run_remote_sync = sync_function(run_remote, first=async_fleet_of)
"""Sync twin of ``run_remote``: the same arguments with a ``Fleet``; runs on the loop bridge."""
