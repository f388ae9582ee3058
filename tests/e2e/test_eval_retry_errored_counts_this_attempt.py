"""``fleet-sdk eval --retry-errored`` says how many episodes it played again this time (the report
keeps the run's total), and says so when there was nothing to retry. Real subprocesses against a
fake chat-completions endpoint that answers 500 for one task until it is fixed."""

from __future__ import annotations

import os
from pathlib import Path

from _cli import run_cli
from _fake_model import reference_model, serve_model

from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task

ENV = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-retried"}


def test_retry_errored_counts_this_attempt_and_says_when_nothing_was_errored(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: `--retry-errored` printed the run's running total (`Retried 8` when 4 were
    retried this time), and the same again when nothing was errored."""
    tasks = [t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use"][:2]
    handler = reference_model(tasks, failing=[tasks[1].task_key])
    run_dir = tmp_path / "run"
    with serve_model(handler) as url:
        flags = ["--model", "fake-gpt", "--model-base-url", url, "--out-dir", str(run_dir)]
        first = run_cli("eval", *flags, *[a for t in tasks for a in ("--task-key", t.task_key)], env=ENV)
        assert first.returncode == 3, first.stdout + first.stderr
        assert "Retried" not in first.stdout

        still = run_cli("eval", "--out-dir", str(run_dir), "--retry-errored", env=ENV)
        assert still.returncode == 3, still.stdout + still.stderr
        assert "Retried 1 errored episode.\n" in still.stdout

        handler.failing.clear()
        fixed = run_cli("eval", "--out-dir", str(run_dir), "--retry-errored", env=ENV)
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        assert "Retried 1 errored episode (2 over every retry of this run).\n" in fixed.stdout

        again = run_cli("eval", "--out-dir", str(run_dir), "--retry-errored", env=ENV)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "No errored episodes to retry: none were played again.\n" in again.stdout
        assert "Retried" not in again.stdout
    with RunDir(run_dir) as store:
        assert store.envelope().report.retried == 2
