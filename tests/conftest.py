"""Shared fixtures. Tests talk to real servers over loopback or to httpx mock
transports that pin wire shapes; nothing reaches the network.

Two kinds of local server, each started once per session and each with one sync and one
async client fixture:

- ``local`` (``fleet``, ``afleet``): the server as users run it, fault injection off;
- ``faulty_server`` (``faulty_fleet``, ``faulty_afleet``): the fault-injection admin API on;
  its client fixtures clear any fault a test left behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _dbs import make_db

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, Fleet


@pytest.fixture(autouse=True)
def _no_fleet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a developer's real keys or URLs from the environment."""
    for name in (
        "FLEET_API_KEY",
        "FLEET_BASE_URL",
        "FLEET_PLATFORM_URL",
        "BROWSER_API_BASE_URL",
        "FLEET_TEAM_API_KEY",
        "BROWSER_API_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def local() -> Iterator[LocalFleet]:
    """The local server (S3 on, faults off) shared by the whole test session."""
    with LocalFleet() as server:
        yield server


@pytest.fixture
def fleet(local: LocalFleet) -> Iterator[Fleet]:
    """A sync client of ``local``."""
    with local.fleet() as client:
        yield client


@pytest.fixture
async def afleet(local: LocalFleet) -> AsyncIterator[AsyncFleet]:
    """An async client of ``local``."""
    client = local.async_fleet()
    yield client
    await client.close()


@pytest.fixture(scope="session")
def faulty_server() -> Iterator[LocalFleet]:
    """A local server with the fault-injection admin API, shared by the tests that inject faults."""
    with LocalFleet(faults=True, verifier_timeout=5) as server:
        yield server


@pytest.fixture
def faulty_fleet(faulty_server: LocalFleet) -> Iterator[Fleet]:
    """A sync client of ``faulty_server``; faults left by the test are cleared afterwards."""
    with faulty_server.fleet() as client:
        yield client
    faulty_server.clear_faults()


@pytest.fixture
async def faulty_afleet(faulty_server: LocalFleet) -> AsyncIterator[AsyncFleet]:
    """An async client of ``faulty_server``; faults left by the test are cleared afterwards."""
    client = faulty_server.async_fleet()
    yield client
    await client.close()
    faulty_server.clear_faults()


@pytest.fixture
def databases(tmp_path: Path) -> dict[str, str]:
    """The seed and current databases a verifier run is given (one user added since the seed)."""
    return {
        "seed": make_db(tmp_path / "seed.db", [(1, "Ada")]),
        "current": make_db(tmp_path / "current.db", [(1, "Ada"), (2, "Grace Hopper")]),
    }
