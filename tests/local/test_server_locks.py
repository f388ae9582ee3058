"""The local server's named locks live on its own store: two servers in one process never share
one, and a deleted instance leaves no lock behind.

Regression: the locks were module-level registries shared by every server in the process, with
one lock per instance id ever seen, never removed. These tests build server state in this process
(no HTTP): what they check is which objects the locks live on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _waits import PATIENCE

from fleet_local._instances import create_instance, delete_instance, heartbeat, reset_instance
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models

WAIT = PATIENCE  # bound of every wait on another thread


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[LocalState, LocalState]]:
    states = [build_state(LocalSettings(data_dir=tmp_path / name, s3=False)) for name in ("a", "b")]
    yield states[0], states[1]
    for state in states:
        state.store.close()


def test_two_servers_in_one_process_do_not_share_locks(two_servers: tuple[LocalState, LocalState]) -> None:
    first, second = two_servers
    assert first.store.locks is not second.store.locks
    taken = threading.Event()
    with first.store.locks.hold("instance", "inst-same-id"):
        # The other server takes a lock of the same name while this one is held.
        def take() -> None:
            with second.store.locks.hold("instance", "inst-same-id"):
                taken.set()

        thread = threading.Thread(target=take)
        thread.start()
        assert taken.wait(WAIT)
        thread.join(WAIT)


def test_a_deleted_instance_leaves_no_lock(two_servers: tuple[LocalState, LocalState]) -> None:
    state, _ = two_servers
    locks = state.store.locks
    instance = create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    name = ("instance", instance.instance_id)
    heartbeat(state, instance.instance_id)
    reset_instance(state, instance.instance_id)
    assert name not in locks and len(locks) == 0  # a lock lives only while it is used

    # A delete that waits behind a reset shares the reset's lock; once both are done, none is left.
    deleted = threading.Event()

    def delete() -> None:
        delete_instance(state, instance.instance_id)
        deleted.set()

    with locks.hold(*name):
        thread = threading.Thread(target=delete)
        thread.start()
        deadline = time.monotonic() + WAIT
        while locks._entries[name].users < 2:  # the delete is waiting for this very lock
            assert time.monotonic() < deadline, "the delete never asked for the instance's lock"
            time.sleep(0.01)
        assert not deleted.is_set()
    assert deleted.wait(WAIT)
    thread.join(WAIT)
    assert len(locks) == 0
    assert state.store.get("instance", instance.instance_id)["status"] == "terminated"
