"""Running a verifier in this process, for debugging. Not a sandbox."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ._entry import CallConvention, call_arguments, execute, execute_async
from ._outcome import VerifierOutcome, outcome_from_execution

__all__ = ["run_local", "run_local_sync"]


def run_local_sync(
    code: str,
    env: Any,
    final_answer: Any = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
) -> VerifierOutcome:
    """Run a verifier in this process and return its outcome.

    This is for debugging verifiers and for trusted code only: **it is not a sandbox**. The code
    runs with this process's permissions, files, network and secrets, with no time or memory
    limit; untrusted code runs on a server (the local server's OS sandbox, or the platform).
    Faults of the verifier (syntax errors, no entry point, exceptions, invalid results) are
    returned in ``outcome.error``, never raised. ``print`` output is captured by swapping
    ``sys.stdout``, which is process-wide: other threads' prints during the run land in
    ``outcome.stdout`` too.

    An ``async def verify`` works here as well: without a running event loop it is run with
    ``asyncio.run``; inside one (a notebook, an async app) it runs on a fresh loop in a worker
    thread while this call blocks. Prefer :func:`run_local` from async code.

    Args:
        code: The verifier's source; its entry point is ``verify`` (else the only function).
        env: What ``verify`` receives first, e.g. a :class:`SQLiteEnvironment`.
        final_answer: The agent's final answer, passed when ``verify`` takes two parameters.
        args: Call ``verify(env, *args, **kwargs)`` instead (the public SDK's form).
        kwargs: Keyword arguments for that call, e.g. ``{"final_answer": "42"}``.
        convention: ``"snapshots"`` calls ``fn(env.db("seed"), env.db("current"), final_answer)``
            instead (see :data:`~fleet_sdk.verifiers.CallConvention`).
        function_name: Call this top-level function instead of finding the entry point.

    Raises:
        ValueError: ``args``/``kwargs`` together with ``final_answer`` or ``"snapshots"``.
    """
    arguments = call_arguments(final_answer, args, kwargs, convention)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        execution = execute(
            code, env, final_answer, arguments=arguments, convention=convention, function_name=function_name
        )
    return outcome_from_execution(execution, stdout=buffer.getvalue())


async def run_local(
    code: str,
    env: Any,
    final_answer: Any = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
) -> VerifierOutcome:
    """Run a verifier in this process on the running event loop. Not a sandbox.

    Like :func:`run_local_sync`, but an ``async def verify`` (and an env whose methods are
    coroutines) is awaited on the caller's loop. A synchronous ``verify`` still runs inline and
    blocks the loop while it runs. ``sys.stdout`` is swapped for the whole run, so prints of
    other tasks that run meanwhile are captured too.

    Args:
        code: The verifier's source.
        env: What ``verify`` receives first.
        final_answer: The agent's final answer, passed when ``verify`` takes two parameters.
        args: Call ``verify(env, *args, **kwargs)`` instead (the public SDK's form).
        kwargs: Keyword arguments for that call.
        convention: ``"snapshots"`` calls ``fn(env.db("seed"), env.db("current"), final_answer)``.
        function_name: Call this top-level function instead of finding the entry point.

    Raises:
        ValueError: ``args``/``kwargs`` together with ``final_answer`` or ``"snapshots"``.
    """
    arguments = call_arguments(final_answer, args, kwargs, convention)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        execution = await execute_async(
            code, env, final_answer, arguments=arguments, convention=convention, function_name=function_name
        )
    return outcome_from_execution(execution, stdout=buffer.getvalue())
