"""The README's Python examples run as written (against the embedded local server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import path_without
from _readme import python_examples

EXAMPLES = python_examples()


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 2


def _run(code: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    "code", [e.code for e in EXAMPLES], ids=[f"example-{i}" for i in range(len(EXAMPLES))]
)
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    result = _run(code, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip(), "an example should print what it shows"
    # The OpenEnv example ended with a 60-line WebSocketDisconnect traceback from the server.
    assert "Traceback" not in result.stderr, result.stderr


def test_the_first_example_grades_where_bubblewrap_is_missing(tmp_path: Path) -> None:
    """Without bubblewrap every verifier run was refused (503), so the README's first example
    printed ``None None``: the bundled tasks' own verifiers now run under the audit hook alone,
    and LocalFleet says so, once."""
    env = {**os.environ, "PATH": path_without("bwrap")}
    result = _run(EXAMPLES[0].code, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    reward, execution_id = result.stdout.split()
    assert reward == "1.0" and execution_id.startswith("vexec_"), result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if "verifier OS jail is unavailable" in line]
    assert len(said) == 1, result.stderr
    assert "LocalFleet(allow_unjailed=True)" in said[0]
