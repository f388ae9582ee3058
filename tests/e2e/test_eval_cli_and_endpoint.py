"""``fleet-sdk eval --jobs`` (the server runs the episodes); the runner with a chat-completions endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli import run_cli
from _fake_model import ModelHandler, serve_model

from fleet_sdk import AsyncFleet
from fleet_sdk.evaluation import ModelEndpoint, RunDir, run_evaluation
from fleet_sdk.reports import ReportEnvelope
from fleet_sdk.tasks import Task


def test_eval_jobs_path_writes_a_run_directory(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    key = next(t.task_key for t in bundled_tasks if t.env_key == "calendar")
    run_dir = tmp_path / "jobs-run"
    result = run_cli(
        *("eval", "--jobs", "--task-key", key, "-k", "2"),
        *("--model", "local/scripted", "--out-dir", str(run_dir), "--run-id", "jobs-1"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "local/scripted: 2/2 graded passed (100.0%), 0 errored" in result.stdout
    report = run_cli("report", str(run_dir), "--format", "json", timeout=120, check=True)
    envelope = ReportEnvelope.model_validate(json.loads(report.stdout))
    assert envelope.source.kind == "platform" and envelope.source.job_id
    assert envelope.run_id == "jobs-1" and envelope.report.models[0].pass_at_k == 1.0


class _ChatCompletions(ModelHandler):
    """A chat-completions endpoint that answers every request with a plain text turn."""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"choices": [{"message": {"role": "assistant", "content": "I give up."}}]}


@pytest.fixture
def chat_endpoint() -> Iterator[str]:
    with serve_model(_ChatCompletions) as url:
        yield url


async def test_runner_asks_an_openai_compatible_endpoint(
    afleet: AsyncFleet, bundled_tasks: list[Task], tmp_path: Path, chat_endpoint: str
) -> None:
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk")
    envelope = await run_evaluation(
        afleet,
        tmp_path / "run",
        tasks=[task],
        models=["my-model"],
        k=1,
        model_endpoint=ModelEndpoint(chat_endpoint, api_key="sk-test-secret"),
    )
    probe, request = _ChatCompletions.requests  # one small request before the run, then the episode
    assert probe["body"]["max_tokens"] == 1 and "tools" not in probe["body"]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test-secret"
    assert request["body"]["model"] == "my-model"
    assert any(t["function"]["name"] for t in request["body"]["tools"])
    (result,) = envelope.report.results
    assert (result.status, result.score) == ("failed", 0.0)  # graded: the model did nothing
    with RunDir(tmp_path / "run") as store:
        assert "sk-test-secret" not in (store.path / "run.sqlite3").read_bytes().decode("latin-1")
