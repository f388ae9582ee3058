"""``fleet-sdk eval --tasks-file F --jobs`` plays the file's tasks: a job names its tasks by key, so
the tasks the server lacks are imported before any job is made; a key the server holds with
another config is refused, naming the task and what differs, rather than played as the server's.

Each run is a real ``fleet-sdk eval`` subprocess with its embedded local server."""

from __future__ import annotations

import json
from pathlib import Path

from _cli import run_cli

from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task


def _orderdesk(bundled: list[Task]) -> Task:
    return next(t for t in bundled if t.env_key == "orderdesk" and t.task_modality == "tool_use")


def test_a_jobs_run_imports_the_tasks_of_its_file_that_the_server_lacks(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: `--tasks-file F --jobs` sent only the task keys to the job, so a task of the
    file that was not already on the server failed the run with `404: task(s) not found`."""
    own = _orderdesk(bundled_tasks).model_copy(update={"task_key": "orderdesk-of-my-own-file"})
    tasks_file = tmp_path / "tasks.json"
    tasks_file.write_text(json.dumps({"tasks": [own.model_dump(mode="json")]}), encoding="utf-8")
    run_dir = tmp_path / "run"

    result = run_cli(
        "eval",
        "--tasks-file",
        str(tasks_file),
        "--jobs",
        "--model",
        "local/scripted",
        "--out-dir",
        str(run_dir),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "local/scripted: 1/1 graded passed" in result.stdout
    with RunDir(run_dir) as store:
        (outcome,) = store.outcomes()
    assert (outcome.task_key, outcome.status) == ("orderdesk-of-my-own-file", "passed")


def test_a_jobs_run_refuses_a_task_whose_key_the_server_holds_with_another_config(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: a task of the file whose key the server already held was silently played as the
    server's task (the job names keys only); it is now refused before the run starts."""
    bundled = _orderdesk(bundled_tasks)
    changed = bundled.model_copy(update={"prompt": "Do something else entirely."})
    tasks_file = tmp_path / "tasks.json"
    tasks_file.write_text(json.dumps([changed.model_dump(mode="json")]), encoding="utf-8")
    run_dir = tmp_path / "run"

    result = run_cli(
        "eval",
        "--tasks-file",
        str(tasks_file),
        "--jobs",
        "--model",
        "local/scripted",
        "--out-dir",
        str(run_dir),
    )

    assert result.returncode == 2, result.stdout + result.stderr
    assert f"task {bundled.task_key!r}: the server holds another task of that key (differing in prompt)" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not RunDir.exists(run_dir)  # refused before the run started: nothing to resume
