"""Fixtures of the end-to-end tests: real local servers over loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleet_sdk.local import LocalFleet


@pytest.fixture(scope="session")
def local() -> Iterator[LocalFleet]:
    """One local server (S3 on, faults off) shared by the whole test session."""
    with LocalFleet() as server:
        yield server
