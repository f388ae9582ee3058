"""An episode's requests make fewer worker-thread hops, and none of them runs on the loop.

Each ``anyio.to_thread.run_sync`` of a request is a queue put, a thread wake-up, a GIL hand-off and
a wake-up of the loop; at 64 concurrent episodes those context switches were most of the growth in
the server's CPU per episode. These tests pin the hops that were removed: a new instance is known
live from its creation (its first MCP request reads no record back in a thread of its own), and a
verify request plans its run in the same hop that finds its code and instance; and what the
removal must not weaken: a deleted instance is still refused, and a request waiting for a run slot
holds no descriptor of its run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _waits import wait_until_async

from fleet_local import _instances, _mcp, _verifier_exec
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

CODE = "def verify(env, final_answer=None):\n    return 1.0\n"


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


def _verify_request(instance_id: str) -> models.VerifiersExecuteRequest:
    return models.VerifiersExecuteRequest(
        key="k",
        sha256=bundle_sha256(CODE),
        args=models.VerifierArgs(instance_id=instance_id),
        bundle=base64.b64encode(bundle_verifier(CODE)).decode("ascii"),
    )


async def test_a_verify_request_plans_its_run_in_the_hop_that_finds_its_code(
    state: LocalState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code, the instance's seed and the run's plan (the jail check, the payload) are one
    worker-thread hop, off the loop; the run still scores."""
    created = _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    threads: dict[str, int] = {}
    looked_up, planned = _verifier_exec._code_and_seed, _verifier_exec.plan_run

    def code_and_seed(*args: Any) -> Any:
        threads["code_and_seed"] = threading.get_ident()
        return looked_up(*args)

    def plan_run(*args: Any, **kwargs: Any) -> Any:
        threads["plan_run"] = threading.get_ident()
        return planned(*args, **kwargs)

    monkeypatch.setattr(_verifier_exec, "_code_and_seed", code_and_seed)
    monkeypatch.setattr(_verifier_exec, "plan_run", plan_run)
    request = _verify_request(created.instance_id)
    answer = await _verifier_exec.execute_verifier(state, request, None, keyed=True)
    assert answer.success is True and answer.result == 1.0, answer.error
    assert set(threads) == {"code_and_seed", "plan_run"}
    assert threads["code_and_seed"] == threads["plan_run"] != threading.get_ident()


def _pipes() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
async def test_a_verify_request_waiting_for_a_run_slot_holds_no_pipe(state: LocalState) -> None:
    """Planning moved before the run slot, but what the run holds is made only once it has one:
    a flood of requests waiting for slots must not take the process's descriptors."""
    created = _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    request = _verify_request(created.instance_id)
    first = await _verifier_exec.execute_verifier(state, request, None, keyed=True)  # the zygote, warm
    assert first.success is True, first.error
    gate = state.verifier_gate = anyio.Semaphore(1)
    await gate.acquire()  # every slot taken
    before = _pipes()
    waiting = asyncio.ensure_future(_verifier_exec.execute_verifier(state, request, None, keyed=True))
    try:
        await wait_until_async(lambda: gate.statistics().tasks_waiting == 1, "the request waiting for a slot")
        assert _pipes() == before
    finally:
        gate.release()
    answer = await waiting
    assert answer.success is True and answer.result == 1.0, answer.error
