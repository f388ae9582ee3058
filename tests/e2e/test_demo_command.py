"""The README's first command: ``fleet-sdk demo`` on an embedded server, no account, no network."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from _cli import run_cli

from fleet_local import LocalFleet


def test_fleet_sdk_demo_runs_scripted_and_random_episodes(tmp_path: Path) -> None:
    out_dir = tmp_path / "demo"
    result = run_cli(
        "demo", "--limit", "4", "--random-episodes", "2", "--out-dir", str(out_dir), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("task") and "policy" in line and "reward" in line for line in lines)
    assert sum(" scripted " in line and " 1.00 " in line for line in lines) == 4
    assert sum(" random " in line for line in lines) == 2
    assert "Scripted policy: 4/4 tasks scored 1.0." in result.stdout
    assert "4/6 episodes" in result.stdout or "6/6 episodes" in result.stdout  # progress output
    transcripts = sorted((out_dir / "transcripts").glob("*.json"))
    assert len(transcripts) == 6
    first = json.loads(transcripts[0].read_text())
    assert first["transcript"][0]["role"] == "user"

    # The uploaded sessions outlive the demo: a server on the same data dir reads them back.
    match = re.search(r"Uploaded as trace job (\S+);", result.stdout)
    assert match is not None
    with LocalFleet(out_dir / "server-data", s3=False) as local, local.fleet() as fleet:
        sessions = fleet.api.sessions.get_job_sessions(match.group(1))
    assert sessions.total_sessions == 6


def test_demo_still_grades_where_the_verifier_jail_cannot_start(tmp_path: Path) -> None:
    """A fresh machine without bubblewrap: the demo says so and grades its bundled tasks anyway."""
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}  # no bwrap on it
    result = run_cli("demo", "--limit", "2", "--random-episodes", "0", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if "verifier OS jail is unavailable" in line]
    assert len(said) == 1
    assert "only the bundled tasks' own verifiers run (under the audit hook alone)" in said[0]
    assert "Scripted policy: 2/2 tasks scored 1.0." in result.stdout
