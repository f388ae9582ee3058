"""Verifier runs as an attacker who got past the audit hook would make them: the OS jail alone."""

from __future__ import annotations

import os
from typing import Any

from fleet_local.sandbox import _sandbox
from fleet_sdk.verifiers import VerifierOutcome

__all__ = ["probes", "run_without_audit_hook"]


def run_without_audit_hook(
    code: str,
    databases: dict[str, str],
    timeout: float = 20.0,
    *,
    scratch_mb: int = _sandbox.DEFAULT_SCRATCH_MB,
    scratch_root: str | os.PathLike[str] | None = None,
) -> VerifierOutcome:
    """Run with the OS jail only: as if the verifier had switched the audit hook off."""
    job = _sandbox._prepare(
        code,
        databases=databases,
        final_answer=None,
        function_name=None,
        timeout=timeout,
        memory_mb=512,
        scratch_mb=scratch_mb,
        allow_unjailed=False,
        scratch_root=scratch_root,
        audit_hook=False,
    )
    return _sandbox._run_job(job)


def probes(outcome: VerifierOutcome) -> dict[str, Any]:
    """The dict a probing verifier returned (it must have run to the end)."""
    assert outcome.success, outcome.error
    assert isinstance(outcome.result, dict)
    return outcome.result
