"""Verifier runs as an attacker who got past the audit hook would make them: the OS jail alone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fleet_local.sandbox import _sandbox, _zygote
from fleet_sdk.verifiers import VerifierOutcome

__all__ = ["probes", "run_unhooked", "run_without_audit_hook", "unhooked_job", "using_runner"]


@contextmanager
def using_runner(runner: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs start with ``runner`` (``"zygote"`` or ``"fresh"``), the test session's temporary
    directories being the zygote's database roots; the server's default runner again after."""
    _zygote.set_runner(runner)
    _zygote.set_database_roots([tmp_path_factory.getbasetemp()])
    try:
        yield
    finally:
        _zygote.set_runner(None)


def unhooked_job(
    code: str,
    databases: dict[str, str],
    timeout: float = 20.0,
    *,
    scratch_mb: int = _sandbox.DEFAULT_SCRATCH_MB,
    scratch_root: str | os.PathLike[str] | None = None,
) -> Any:
    """A prepared run with the OS jail only: as if the verifier had switched the audit hook off."""
    return _sandbox._prepare(
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


def run_without_audit_hook(
    code: str,
    databases: dict[str, str],
    timeout: float = 20.0,
    *,
    scratch_mb: int = _sandbox.DEFAULT_SCRATCH_MB,
    scratch_root: str | os.PathLike[str] | None = None,
) -> VerifierOutcome:
    """Run with the OS jail only (:func:`unhooked_job`), blocking."""
    job = unhooked_job(code, databases, timeout, scratch_mb=scratch_mb, scratch_root=scratch_root)
    return _sandbox._run_job(job)


async def run_unhooked(code: str, databases: dict[str, str], timeout: float = 20.0) -> VerifierOutcome:
    """As :func:`run_without_audit_hook`, on the running loop (for runs side by side)."""
    return await _sandbox._run_job_async(unhooked_job(code, databases, timeout))


def probes(outcome: VerifierOutcome) -> dict[str, Any]:
    """The dict a probing verifier returned (it must have run to the end)."""
    assert outcome.success, outcome.error
    assert isinstance(outcome.result, dict)
    return outcome.result
