"""Why the verifier sandbox could not run at all (a verifier's own faults are never raised)."""

from __future__ import annotations

from fleet_sdk import FleetError

__all__ = ["JailUnavailableError", "SandboxError"]


class SandboxError(FleetError):
    """The verifier sandbox could not run at all: invalid arguments or no interpreter to start.

    Faults of the verifier itself never raise; they are returned in ``VerifierOutcome.error``.
    """


class JailUnavailableError(SandboxError):
    """The OS jail cannot start on this machine and the caller did not allow running without it.

    Attributes:
        reason: Why the jail is unavailable (e.g. bubblewrap is not installed).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the verifier OS jail is unavailable ({reason}); refusing to run untrusted code with "
            "only the audit hook (pass allow_unjailed=True to accept that)"
        )
        self.reason = reason
