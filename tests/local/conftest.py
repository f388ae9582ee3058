"""Fixtures of the end-to-end tests: real local servers over loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleet_api.env_instance import models

from fleet_sdk import Fleet
from fleet_sdk.local import LocalFleet


@pytest.fixture(scope="session")
def local() -> Iterator[LocalFleet]:
    """One local server (S3 on, faults off) shared by the whole test session."""
    with LocalFleet() as server:
        yield server


@pytest.fixture(scope="session")
def faulty() -> Iterator[LocalFleet]:
    """A server with the fault-injection admin API enabled (S3 off)."""
    with LocalFleet(faults=True, s3=False) as server:
        yield server


@pytest.fixture
def fleet(local: LocalFleet) -> Iterator[Fleet]:
    """A client of the shared server."""
    with local.fleet() as client:
        yield client


@pytest.fixture
def instance(fleet: Fleet) -> Iterator[models.InstanceResponse]:
    """A fresh orderdesk instance, deleted afterwards."""
    created = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
    try:
        yield created
    finally:
        fleet.api.control_plane.delete_instance(created.instance_id)
