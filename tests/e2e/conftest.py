"""End-to-end fixtures for the facades (servers and clients are in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from fleet_local import LocalFleet
from fleet_local.environments import registry
from fleet_sdk.tasks import Task


@pytest.fixture(scope="session")
def server(local: LocalFleet) -> LocalFleet:
    """The server behind ``fleet`` / ``afleet`` (``local``), under the name the e2e tests use."""
    return local


@pytest.fixture(scope="session")
def bundled_tasks(local: LocalFleet) -> list[Task]:
    """The tasks the local server ships with, as it serves them.

    Only those: other tests import tasks into the shared server too. Regression: every listed task
    was taken, so tests that ran after tests/local/test_control_plane.py played its imports.
    """
    shipped = {task["task_key"] for env in registry().values() for task in env.tasks}
    with local.fleet() as client:
        listed = client.api.control_plane.list_tasks().tasks
    tasks = [Task.model_validate(t.model_dump()) for t in listed if t.task_key in shipped]
    assert len(tasks) == len(shipped), "the server lists every bundled task"
    return tasks
