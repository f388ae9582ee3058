"""An env made with ``heartbeat_interval`` lives while its process does, and no longer.

The local server reclaims such an instance three intervals after its last heartbeat (its reaper
runs every 0.2 s here), the way the platform reclaims the instances of a dead worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import pytest
from _waits import PATIENCE

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, FleetError

ENV = "orderdesk"
INTERVAL = 1  # seconds; reclaimed after 3 without a heartbeat


@pytest.fixture(scope="module")
def reaping() -> Iterator[LocalFleet]:
    with LocalFleet(reaper_interval=0.2, s3=False) as server:
        yield server


async def _status(fleet: AsyncFleet, instance_id: str) -> str:
    return str((await fleet.api.control_plane.get_instance(instance_id)).status)


async def test_heartbeats_keep_an_env_alive_until_it_is_closed(reaping: LocalFleet) -> None:
    async with reaping.async_fleet() as fleet:
        kept = await fleet.make(ENV, heartbeat_interval=INTERVAL)
        unkept = await fleet.make(ENV, heartbeat_interval=INTERVAL, keep_alive=False)
        try:
            with anyio.fail_after(PATIENCE):  # window 3 s, reaper every 0.2 s
                while await _status(fleet, unkept.instance_id) != "terminated":
                    await anyio.sleep(0.1)
            # The same age, the same window: only the beats tell them apart.
            assert await _status(fleet, kept.instance_id) == "running"
            await anyio.sleep(INTERVAL * 1.5)
            assert await _status(fleet, kept.instance_id) == "running"
            beats = kept._heartbeats
            assert beats is not None and not beats.done()
        finally:
            await kept.close()
            await unkept.close()
        assert beats.done()
        assert await _status(fleet, kept.instance_id) == "terminated"
        with pytest.raises(FleetError, match="closed"):
            await kept.keep_alive()


_WORKER = """
import sys
from fleet_sdk import Fleet
env = Fleet().make("orderdesk", heartbeat_interval=int(sys.argv[1]))
print(env.instance_id, flush=True)
sys.stdin.read()  # until killed
"""


def test_the_env_of_a_killed_worker_is_reclaimed_and_a_live_one_is_not(reaping: LocalFleet) -> None:
    """A trainer's worker (the sync client, its beats on the SDK's loop thread) dies with -9."""
    environ = {**os.environ, "FLEET_API_KEY": reaping.api_key, "FLEET_BASE_URL": reaping.base_url}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(INTERVAL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=environ,
        text=True,
    )
    try:
        assert worker.stdout is not None
        instance_id = worker.stdout.readline().strip()
        assert instance_id, "the worker made no env"
        with reaping.fleet() as fleet:
            cp = fleet.api.control_plane
            alive_until = time.monotonic() + INTERVAL * 4  # past the 3 s window
            while time.monotonic() < alive_until:
                assert cp.get_instance(instance_id).status == "running"
                time.sleep(0.2)
            worker.send_signal(signal.SIGKILL)
            worker.wait(PATIENCE)
            deadline = time.monotonic() + PATIENCE
            while cp.get_instance(instance_id).status != "terminated":
                assert time.monotonic() < deadline, "the dead worker's instance was never reclaimed"
                time.sleep(0.1)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
