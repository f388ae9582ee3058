"""End-to-end fixtures for the facades: one local server with fault injection on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from fleet_sdk import AsyncFleet, Fleet
from fleet_sdk.local import LocalFleet
from fleet_sdk.tasks import Task


@pytest.fixture(scope="session")
def server() -> Iterator[LocalFleet]:
    """A local server with the fault-injection admin API, shared by the e2e tests."""
    with LocalFleet(faults=True, verifier_timeout=5) as local:
        yield local


@pytest.fixture
def fleet(server: LocalFleet) -> Iterator[Fleet]:
    with server.fleet() as client:
        yield client


@pytest.fixture
async def afleet(server: LocalFleet) -> AsyncIterator[AsyncFleet]:
    client = server.async_fleet()
    yield client
    await client.close()


@pytest.fixture(autouse=True)
def _no_faults_left(server: LocalFleet) -> Iterator[None]:
    yield
    server.clear_faults()


@pytest.fixture(scope="session")
def bundled_tasks(server: LocalFleet) -> list[Task]:
    with server.fleet() as client:
        listed = client.api.control_plane.list_tasks().tasks
    return [Task.model_validate(t.model_dump()) for t in listed]
