"""Running ``fleet-sdk`` as a user would: a real subprocess of this interpreter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CLI", "run_cli"]

CLI = (sys.executable, "-m", "fleet_sdk.cli")
"""The ``fleet-sdk`` command, as this test run's interpreter runs it."""


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``fleet-sdk ARGS...`` with its output captured as text.

    Args:
        args: The command line after ``fleet-sdk``.
        cwd: Working directory (default: this process's).
        timeout: Seconds before the run is killed and the test fails.
        env: The child's whole environment (default: this process's).
        check: Raise when it exits non-zero.
    """
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        check=check,
    )
