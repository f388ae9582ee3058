"""``fleet-sdk eval --ray`` without an address: a local Ray is started, the episodes are played on
its actors against the embedded server, and the run directory and report come out as usual."""

from __future__ import annotations

import json
from pathlib import Path

from _cli import run_cli

from fleet_sdk.reports import ReportEnvelope


def test_eval_ray_starts_a_local_ray_and_records_every_episode(tmp_path: Path) -> None:
    run_dir = tmp_path / "ray-run"
    result = run_cli(
        *("eval", "--ray", "--concurrency", "2"),
        *("--task-key", "orderdesk-count-pending-orders", "--task-key", "calendar-cancel-vendor-prep"),
        *("-k", "2", "--model", "local/scripted", "--out-dir", str(run_dir)),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "local/scripted: 4/4 graded passed (100.0%), 0 errored" in result.stdout
    report = run_cli("report", str(run_dir), "--format", "json", timeout=120, check=True)
    envelope = ReportEnvelope.model_validate(json.loads(report.stdout))
    assert len(envelope.report.results) == 4
