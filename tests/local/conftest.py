"""Fixtures of the local-server tests (the servers and clients are in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_local import LocalFleet
from fleet_local._store import Store
from fleet_sdk import Fleet
from fleet_sdk.types import env_instance as models


@pytest.fixture
def faulty(faulty_server: LocalFleet) -> Iterator[LocalFleet]:
    """``faulty_server``; faults a test left behind are cleared afterwards."""
    yield faulty_server
    faulty_server.clear_faults()


@pytest.fixture
def instance(fleet: Fleet) -> Iterator[models.InstanceResponse]:
    """A fresh orderdesk instance, deleted afterwards."""
    created = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
    try:
        yield created
    finally:
        fleet.api.control_plane.delete_instance(created.instance_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store of its own in ``tmp_path``, closed afterwards."""
    opened = Store(tmp_path / "fleet.db")
    try:
        yield opened
    finally:
        opened.close()
