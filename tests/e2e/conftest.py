"""End-to-end fixtures for the facades (servers and clients are in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from fleet_local import LocalFleet
from fleet_sdk.tasks import Task


@pytest.fixture(scope="session")
def server(local: LocalFleet) -> LocalFleet:
    """The server behind ``fleet`` / ``afleet`` (``local``), under the name the e2e tests use."""
    return local


@pytest.fixture(scope="session")
def bundled_tasks(local: LocalFleet) -> list[Task]:
    with local.fleet() as client:
        listed = client.api.control_plane.list_tasks().tasks
    return [Task.model_validate(t.model_dump()) for t in listed]
