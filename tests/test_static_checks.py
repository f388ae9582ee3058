"""The package passes its own linters: ruff, and mypy in strict mode on ``fleet_sdk/``
and the generated clients (configuration in ``pyproject.toml``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_check_and_format() -> None:
    targets = ("fleet_sdk", "codegen", "tests", "contracts", "benchmarks", "noxfile.py")
    check = run("ruff", "check", *targets)
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = run("ruff", "format", "--check", *targets)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_strict() -> None:
    result = run("mypy", "fleet_sdk", "generated/fleet_api")
    assert result.returncode == 0, result.stdout + result.stderr
