"""``VerifierOutcome``: what every runner returns, success or fault alike."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ._entry import ErrorType, Execution

__all__ = ["ErrorType", "SandboxLayers", "VerifierError", "VerifierOutcome"]

SandboxLayers = Literal["os_jail+audit_hook", "os_jail", "audit_hook", "none"]
"""Which layers protected a sandboxed run: the OS jail and/or the audit hook."""


class VerifierError(BaseModel):
    """Why a verifier run produced no score.

    Attributes:
        type: ``syntax_error`` (the code does not parse), ``no_entry_point`` (no ``verify`` and
            not exactly one function), ``exception`` (the code raised, including sandbox
            denials), ``timeout`` (killed at the wall-clock or CPU limit), ``memory_limit``
            (``MemoryError`` or killed under the memory limit) or ``invalid_result`` (it
            returned something that is not a score).
        message: One line, e.g. ``"ZeroDivisionError: division by zero"``.
        traceback: The traceback from the verifier's own frames, the syntax error with a caret,
            or the child's stderr when it died; ``None`` when there is nothing more to say.
        exception_type: When the verifier raised, the exception's class name (e.g.
            ``"ZeroDivisionError"``); the wire's ``error.type`` carries it, as the platform's does.
    """

    model_config = ConfigDict(frozen=True)

    type: ErrorType
    message: str
    traceback: str | None = None
    exception_type: str | None = None

    @property
    def wire_type(self) -> str:
        """``error.type`` as the platform reports it: the exception's class name when the
        verifier raised, else :attr:`type`."""
        return self.exception_type or self.type


class VerifierOutcome(BaseModel):
    """The result of running one verifier.

    Attributes:
        success: The verifier ran and returned a valid score (``error`` is ``None``).
        score: The score, or ``None`` after any fault; a verifier returning ``None`` scores 1.0.
        result: What the verifier returned (in the sandbox: its JSON form, else its ``repr``).
        stdout: What the verifier printed (capped by the sandbox).
        error: Why there is no score, or ``None``.
        execution_time_ms: Wall time of the run: loading plus calling the verifier for
            ``run_local``, the whole child process for a sandboxed run.
        sandbox: For a sandboxed run (the local server's ``fleet_local.sandbox``), the layers that
            protected the run:
            ``"os_jail+audit_hook"`` normally, ``"audit_hook"`` when the OS jail was
            unavailable and the caller allowed that; ``None`` for ``run_local`` (no sandbox).
    """

    model_config = ConfigDict(frozen=True)

    success: bool
    score: float | None = None
    result: Any = None
    stdout: str = ""
    error: VerifierError | None = None
    execution_time_ms: float = 0.0
    sandbox: SandboxLayers | None = None


def outcome_from_execution(execution: Execution, *, stdout: str) -> VerifierOutcome:
    """Wrap the plain :class:`Execution` of a runner into a :class:`VerifierOutcome`."""
    error = None
    if execution.error_type is not None:
        error = VerifierError(
            type=execution.error_type,
            message=execution.error_message or execution.error_type,
            traceback=execution.traceback,
            exception_type=execution.exception_type,
        )
    return VerifierOutcome(
        success=error is None,
        score=execution.score if error is None else None,
        result=execution.result,
        stdout=stdout,
        error=error,
        execution_time_ms=execution.execution_time_ms,
    )
