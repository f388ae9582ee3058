"""A machine without bubblewrap (no ``bwrap`` on the server's PATH): the server still grades the
bundled tasks, whose verifiers ship with this package, under the audit hook alone, and still
refuses every other verifier (an imported task's, however close to a bundled one) unless the
caller opts in with ``allow_unjailed``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from _procs import path_without

from fleet_local import LocalFleet
from fleet_sdk import Fleet, Task, TaskEnv
from fleet_sdk.types import env_instance as models

TASK = "orderdesk-count-pending-orders"


def _play_reference(fleet: Fleet, task: Task) -> TaskEnv:
    """The task's reference solution, step by step; returns the finished episode."""
    with TaskEnv(task, fleet=fleet, max_steps=20) as env:
        env.reset()
        for step in task.metadata["reference_solution"]:
            env.step({"tool": step["tool"], "params": step["params"]})
        if not env.done:
            env.step({"done": True})
    return env


def _imported_copy(fleet: Fleet, task: Task, verifier_code: str) -> Task:
    copy: dict[str, Any] = {
        **task.model_dump(exclude_none=True),
        "task_key": f"{task.task_key}-copy-{uuid.uuid4().hex[:8]}",
        "verifier_code": verifier_code,
    }
    fleet.api.control_plane.import_task(models.TaskRequest.model_validate(copy))
    return fleet.tasks.get(copy["task_key"])


def test_only_the_bundled_verifiers_run_without_the_jail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path_without("bwrap"))
    with LocalFleet(s3=False) as local, local.fleet() as fleet:
        bundled = fleet.tasks.get(TASK)
        assert bundled.verifier_code is not None
        graded = _play_reference(fleet, bundled)
        assert graded.final_reward == 1.0, graded.verifier_error
        # The same code imported under another key is the same code: it runs too.
        same = _play_reference(fleet, _imported_copy(fleet, bundled, bundled.verifier_code))
        assert same.final_reward == 1.0, same.verifier_error
        # One character more, and it is someone else's code: refused, and the reward is unknown.
        edited = _imported_copy(fleet, bundled, bundled.verifier_code + "\n# edited\n")
        refused = _play_reference(fleet, edited)
        assert refused.final_reward is None
        assert refused.verifier_error is not None and "bubblewrap" in refused.verifier_error
    with LocalFleet(s3=False, allow_unjailed=True) as local, local.fleet() as fleet:
        edited = _imported_copy(fleet, fleet.tasks.get(TASK), bundled.verifier_code + "\n# edited\n")
        assert _play_reference(fleet, edited).final_reward == 1.0
