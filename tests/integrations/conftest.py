"""One local server for the trainer-integration tests (OpenEnv, SkyRL-gym, Ray)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleet_local import LocalFleet


@pytest.fixture(scope="session")
def local() -> Iterator[LocalFleet]:
    with LocalFleet(verifier_timeout=10) as server:
        yield server
