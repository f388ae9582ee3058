"""A tool call whose ``arguments`` are not JSON is kept as the model wrote it: in the episode's
transcript and in the report's last action (the model is told the call could not run).

``fleet-sdk eval`` in a real subprocess with its embedded server; the model a fake endpoint that
writes broken arguments once, then stops."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from _cli import run_cli
from _fake_model import ModelHandler, serve_model, text_reply

from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task

WRITTEN = '{"status": "pending",'  # cut short: not JSON


def test_non_json_tool_arguments_are_kept_as_written(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    """Regression: such a call was recorded as `{}` in the transcript and the report's last action."""
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk" and t.task_modality == "tool_use")
    tool = str(task.metadata["reference_solution"][0]["tool"])

    class Broken(ModelHandler):
        def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            if not body.get("tools") or any(m["role"] == "assistant" for m in body["messages"]):
                return 200, text_reply("I am done.")
            call = {"id": "call_0", "type": "function", "function": {"name": tool, "arguments": WRITTEN}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}

    run_dir = tmp_path / "run"
    env = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-arguments"}
    with serve_model(Broken) as url:
        result = run_cli(
            *("eval", "--model", "fake-gpt", "--model-base-url", url, "--task-key", task.task_key),
            *("--out-dir", str(run_dir)),
            env=env,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    with RunDir(run_dir) as store:
        (outcome,) = store.outcomes()
    assert outcome.status == "failed"
    assert outcome.last_action == f"{tool}({WRITTEN})"
    assert outcome.transcript is not None
    transcript = json.loads((run_dir / outcome.transcript).read_text(encoding="utf-8"))
    calls = [c for m in transcript["transcript"] for c in m.get("tool_calls") or []]
    assert [c["function"]["arguments"] for c in calls] == [WRITTEN]
    told = [m for m in transcript["transcript"] if m.get("role") == "tool"]
    assert told and "not a JSON object" in json.dumps(told[0])
