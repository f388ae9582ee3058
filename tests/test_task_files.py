"""Task configs and task files: aliases, wrapped and bare lists, clear errors (docs/wire.md#episodes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_sdk import (
    TaskConfigError,
)
from fleet_sdk.tasks import Task, load_tasks, parse_tasks


def test_task_aliases_are_accepted() -> None:
    task = Task.model_validate(
        {
            "key": "t1",
            "prompt": "p",
            "env_id": "fira",
            "version": "1.0",
            "data_id": "d",
            "data_version": "2",
            "verifier_func": "def verify(env):\n    return 1\n",
        }
    )
    assert (task.task_key, task.env_key, task.env_version, task.data_key) == ("t1", "fira", "1.0", "d")
    assert task.verifier_code is not None
    assert task.env_spec == "fira:v1.0"
    assert task.data_spec == "d:v2"
    assert task.task_modality == "tool_use"
    assert task.key == "t1"  # read under the name the config gave it


def test_the_apis_task_converts_to_the_sdks() -> None:
    """Two task types met a newcomer: ``TaskResponse`` (``list_tasks``) and ``fleet_sdk.Task``
    (``fleet.tasks``); ``Task.model_validate`` takes the former, its optional fields as defaults."""
    from fleet_sdk.types import env_instance

    response = env_instance.TaskResponse.model_validate(
        {
            "key": "t1",
            "task_key": "t1",
            "prompt": "p",
            "env_key": "fira",
            "environment_id": "fira",
            "team_id": "team",
            "created_at": "2026-01-01T00:00:00Z",
            "metadata": None,
        }
    )
    task = Task.model_validate(response)
    assert (task.key, task.env_key, task.metadata, task.env_variables) == ("t1", "fira", {}, {})


def test_load_tasks_accepts_wrapped_and_bare_lists(tmp_path: Path) -> None:
    one = {"task_key": "a", "prompt": "p", "env_key": "e"}
    (tmp_path / "wrapped.json").write_text(json.dumps({"tasks": [one]}))
    (tmp_path / "bare.json").write_text(json.dumps([one]))
    assert load_tasks(tmp_path / "wrapped.json") == load_tasks(tmp_path / "bare.json")


def test_bad_task_file_names_index_and_field(tmp_path: Path) -> None:
    good = {"task_key": "a", "prompt": "p", "env_key": "e"}
    bad = {"task_key": "b", "env_key": "e", "task_modality": "telepathy"}
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": [good, bad]}))
    with pytest.raises(TaskConfigError) as info:
        load_tasks(path)
    message = str(info.value)
    assert "task 1 ('b')" in message
    assert "'prompt'" in message and "'task_modality'" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON at line 1"),
        ('{"items": []}', 'expected {"tasks": [...]}'),
        ('{"tasks": {}}', "'tasks' must be a list"),
        ("[1]", "task 0 must be an object"),
    ],
)
def test_malformed_task_files_get_clear_errors(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(TaskConfigError, match=r"t\.json") as info:
        load_tasks(path)
    assert expected in str(info.value)


def test_duplicate_task_keys_and_missing_file(tmp_path: Path) -> None:
    one = {"task_key": "a", "prompt": "p", "env_key": "e"}
    with pytest.raises(TaskConfigError, match="duplicate task_key 'a'"):
        parse_tasks([one, one])
    with pytest.raises(TaskConfigError, match="cannot read"):
        load_tasks(tmp_path / "missing.json")
