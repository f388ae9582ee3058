"""An episode's requests make fewer worker-thread hops, and none of them runs on the loop.

Each ``anyio.to_thread.run_sync`` of a request is a queue put, a thread wake-up, a GIL hand-off and
a wake-up of the loop; at 64 concurrent episodes those context switches were most of the growth in
the server's CPU per episode. These tests pin the hops that were removed: a new instance is known
live from its creation (its first MCP request reads no record back in a thread of its own), and
what the removal must not weaken: a deleted instance is still refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_local import _instances, _mcp
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    yield state
    state.store.close()


async def test_a_new_instance_is_served_by_mcp_without_reading_its_record_back(
    state: LocalState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create_instance`` remembers the instance as live, so the episode's first MCP request
    (the session's ``initialize``) finds its environment on the loop: reading the record back
    from the store (``_live_env_key``) would be a worker-thread hop of its own."""
    created = _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    read_back: list[str] = []
    original = _mcp._live_env_key

    def counting(state: LocalState, instance_id: str) -> str:
        read_back.append(instance_id)
        return original(state, instance_id)

    monkeypatch.setattr(_mcp, "_live_env_key", counting)
    env = await _mcp.instance_environment(state, created.instance_id)
    assert env.env_key == "orderdesk" and read_back == []


async def test_a_deleted_instance_is_not_served_from_what_its_creation_remembered(
    state: LocalState,
) -> None:
    """What creation remembered ends with the instance: after ``delete_instance`` the lookup asks
    the store again and refuses the terminated instance."""
    created = _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    _instances.delete_instance(state, created.instance_id)
    assert state.live_instances.env_key(created.instance_id, state.instance_dir(created.instance_id)) is None
    with pytest.raises(_mcp.InstanceUnavailableError):
        await _mcp.instance_environment(state, created.instance_id)
