"""Both evaluation paths against the local server: the platform job path and the client-side runner."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from fleet_sdk import AsyncFleet, EvaluationError, EvaluationTimeoutError, Fleet, TaskConfigError
from fleet_sdk.evaluation import (
    RunDir,
    evaluate_job,
    evaluate_job_sync,
    job_report,
    run_evaluation,
    run_evaluation_sync,
    session_score,
)
from fleet_sdk.executors import AsyncioExecutor
from fleet_sdk.tasks import Task


def _orderdesk(tasks: list[Task], n: int) -> list[Task]:
    return [t for t in tasks if t.env_key == "orderdesk"][:n]


async def test_platform_job_scores_per_model_and_agrees_with_sessions(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    keys = [t.task_key for t in _orderdesk(bundled_tasks, 2)]
    seen: list[int] = []
    # "openai/gpt-x" has no model endpoint on this server: its sessions error without a verifier run
    envelope = await evaluate_job(
        afleet,
        models=["local/scripted", "local/random", "openai/gpt-x"],
        task_keys=keys,
        pass_k=2,
        deadline=240,
        poll_interval=0.5,
        on_progress=lambda p: seen.append(p.done),
    )
    assert envelope.source.kind == "platform" and envelope.source.job_id
    summaries = {s.model: s for s in envelope.report.models}
    assert set(summaries) == {"local/scripted", "local/random", "openai/gpt-x"}  # bare names matched back
    assert summaries["local/scripted"].passed == 4 and summaries["local/scripted"].pass_at_k == 1.0
    gpt = summaries["openai/gpt-x"]
    assert (gpt.errored, gpt.passed, gpt.failed, gpt.pass_rate) == (4, 0, 0, None)  # errored, never a 0
    assert envelope.report.complete and seen and seen[-1] == 12
    listing = await afleet.api.sessions.get_job_sessions(envelope.source.job_id)
    stored = {s.session_id: s for t in listing.tasks for s in t.sessions}
    for result in envelope.report.results:
        session = stored[str(result.session_id)]
        verifier = session.verifier_execution.model_dump() if session.verifier_execution else None
        assert session_score(verifier) == result.score


def test_platform_job_sync_twin_and_deadline(fleet: Fleet, bundled_tasks: list[Task]) -> None:
    key = _orderdesk(bundled_tasks, 1)[0].task_key
    envelope = evaluate_job_sync(fleet, models=["local/scripted"], task_keys=[key], deadline=240)
    assert envelope.report.models[0].passed == 1
    with pytest.raises(EvaluationTimeoutError, match="still"):
        evaluate_job_sync(fleet, models=["local/scripted"], task_keys=[key], deadline=0.0)
    with pytest.raises(EvaluationError, match="task selector"):
        evaluate_job_sync(fleet, models=["local/scripted"])


def test_job_report_matches_bare_names_and_errors_ungraded_sessions() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def session(sid: str, model: str, verifier: dict[str, object] | None, status: str = "completed") -> dict:
        return {
            "session_id": sid,
            "model": model,
            "status": status,
            "created_at": now,
            "started_at": now,
            "ended_at": now + dt.timedelta(seconds=2),
            "verifier_execution": verifier,
        }

    listing = {
        "job_id": "job1",
        "tasks": [
            {
                "task_id": "t1",
                "task": {"key": "t1"},
                "sessions": [
                    session("a", "claude-x", {"success": True, "score": None}),
                    session("b", "claude-x", {"success": False, "score": 0.25}),
                    session("c", "gpt-4o", None, status="errored"),
                    session("d", "gpt-4o", None, status="running"),
                    session("e", "claude-x", {"success": True, "score": 0.0}),
                    session("f", "claude-x", {"success": False, "score": None}, status="failed"),
                    session("g", "gpt-4o", {"success": True, "score": 0.0, "stdout": "JUDGE ERROR: 529"}),
                ],
            }
        ],
    }
    envelope = job_report(listing, models=["anthropic/claude-x", "openai/gpt-4o"], k=2)
    results = {r.session_id: r for r in envelope.report.results}
    first = results["a"]
    assert (first.model, first.status, first.score) == ("anthropic/claude-x", "passed", 1.0)
    # rewards.reward_from_outcome: a failed verifier run or a judge error is ungraded, never a 0
    assert (results["b"].status, results["b"].score) == ("errored", None)
    assert (results["e"].status, results["e"].score) == ("failed", 0.0)
    assert (results["f"].status, results["f"].score) == ("errored", None)
    assert (results["g"].status, results["g"].score) == ("errored", None)
    assert (results["c"].status, results["c"].score, results["c"].error) == (
        "errored",
        None,
        "no verifier execution",
    )
    assert results["d"].status == "pending" and envelope.report.complete is False
    assert results["a"].duration_ms == 2000


async def test_client_runner_refuses_models_it_cannot_play_before_the_first_episode(
    afleet: AsyncFleet, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    """Regression: a model with no endpoint used to be played anyway, every episode errored, and the
    run ended as if it had worked; now the run fails before it starts, naming each model."""
    tasks = _orderdesk(bundled_tasks, 1)
    with pytest.raises(EvaluationError) as refused:
        await run_evaluation(
            afleet, tmp_path / "run", tasks=tasks, models=["local/scripted", "vendor/model", "local/randon"]
        )
    message = str(refused.value)
    assert "vendor/model: needs a chat-completions endpoint" in message
    assert "local/randon: no such local policy; did you mean 'local/random'?" in message
    assert not RunDir.exists(tmp_path / "run")  # nothing was started
    await run_evaluation(afleet, tmp_path / "run", tasks=tasks, models=["local/scripted"], upload=False)
    with pytest.raises(EvaluationError, match="already holds run"):
        await run_evaluation(afleet, tmp_path / "run", tasks=tasks, models=["local/scripted"])
    with pytest.raises(EvaluationError, match="concurrency"):
        await run_evaluation(afleet, tmp_path / "x", tasks=tasks, models=["m"], concurrency=0)


def test_client_runner_sync_twin_resumes_nothing_when_done(
    fleet: Fleet, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    tasks = _orderdesk(bundled_tasks, 1)
    first = run_evaluation_sync(fleet, tmp_path / "run", tasks=tasks, models=["local/scripted"], k=2)
    calls: list[int] = []
    again = run_evaluation_sync(
        fleet, tmp_path / "run", resume=True, on_progress=lambda p: calls.append(p.done)
    )
    assert again == first and calls == [2]  # resumed, nothing left to play
    with RunDir(tmp_path / "run") as store:
        assert len(store.outcomes()) == 2


def test_client_runner_sync_twin_plays_on_the_given_executor(
    fleet: Fleet, bundled_tasks: list[Task], tmp_path: Path
) -> None:
    played: list[Any] = []

    class Counting(AsyncioExecutor):
        async def map_unordered(self, fn: Any, items: Any) -> Any:
            played.extend(items)
            async for done in super().map_unordered(fn, items):
                yield done

    tasks = _orderdesk(bundled_tasks, 1)
    envelope = run_evaluation_sync(
        fleet,
        tmp_path / "run",
        tasks=tasks,
        models=["local/scripted"],
        k=2,
        executor=Counting(fleet.async_fleet, concurrency=2),
    )
    assert len(played) == 2  # both episodes went through the executor
    assert [r.status for r in envelope.report.results] == ["passed", "passed"]


def test_a_bad_imported_task_is_a_task_config_error_naming_it(fleet: Fleet, tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match="task 'broken'"):
        evaluate_job_sync(fleet, models=["local/scripted"], import_tasks=[{"task_key": "broken"}])
    with pytest.raises(TaskConfigError, match="task 'broken'"):
        run_evaluation_sync(fleet, tmp_path / "run", tasks=[{"task_key": "broken"}], models=["m"])
