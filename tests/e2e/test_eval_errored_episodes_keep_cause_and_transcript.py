"""An errored episode of ``fleet-sdk eval`` keeps what happened: its transcript in the run
directory and, in the report's fix items, why it was not graded (not what the verifier said of
the half-played episode). A real subprocess with its embedded server, the model a fake endpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from _cli import run_cli
from _fake_model import ReferenceModel, reference_model, serve_model

from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task


def test_an_errored_episode_keeps_its_transcript_and_its_cause(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: an errored episode got no transcript (it is not uploaded as a session), and its
    fix item showed the verifier's feedback instead of `PolicyError: model endpoint answered
    without choices[0].message`."""
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use")
    base = reference_model([task])

    class Broken(base):  # type: ignore[valid-type,misc]
        """One right step, then a reply without a message."""

        def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            if any(m["role"] == "assistant" for m in body.get("messages", [])):
                return 200, {"choices": [{"index": 0, "finish_reason": "stop"}]}
            return ReferenceModel.answer(self, body)

    run_dir = tmp_path / "run"
    env = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-errored"}
    with serve_model(Broken) as url:
        result = run_cli(
            *("eval", "--model", "fake-gpt", "--model-base-url", url, "--task-key", task.task_key),
            *("--out-dir", str(run_dir)),
            env=env,
        )
    assert result.returncode == 3, result.stdout + result.stderr
    with RunDir(run_dir) as store:
        (outcome,) = store.outcomes()
    assert outcome.status == "errored"
    assert outcome.error is not None
    assert (
        outcome.error.startswith("PolicyError: model endpoint ")
        and "without choices[0].message" in outcome.error
    )
    assert outcome.transcript is not None
    transcript = json.loads((run_dir / outcome.transcript).read_text(encoding="utf-8"))
    assert transcript["error"] == outcome.error
    calls = [m for m in transcript["transcript"] if m.get("role") == "assistant" and m.get("tool_calls")]
    assert len(calls) == 1  # the step the model took before it failed
    fix_items = run_cli("report", str(run_dir), "--part", "fix_items", check=True).stdout
    (line,) = [line for line in fix_items.splitlines() if task.task_key in line]
    assert "errored: PolicyError: model endpoint" in line and "transcript" in line
