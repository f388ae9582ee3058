"""Instance creation through the orchestrator's failures, in the shapes production sends them.

Each case arms one injected failure on ``POST /v1/env/instances`` of the local faulty_server and
calls ``make()``. A transient failure is retried and succeeds, leaving exactly one instance
(the idempotency key holds); a permanent one raises at once: the fault fires only once, so a
retry would have succeeded.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest

from fleet_local import LocalFleet
from fleet_sdk import (
    APIStatusError,
    AsyncFleet,
    AuthenticationError,
    BadRequestError,
    EnvNotFoundError,
    Fleet,
    InternalServerError,
    RetryPolicy,
)
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

CREATE = "/v1/env/instances"
FAST = RetryPolicy(max_retries=3, backoff_base=0.05, backoff_max=0.2)

PLACEMENT = {"error": "seed_placement_failed", "message": "no host holds the seed yet", "retryable": True}
REFUSED = {"error": "image_not_found", "message": "no such image", "retryable": False}


def forwarded(driver_error: dict[str, Any]) -> dict[str, Any]:
    """The orchestrator's body when it forwards a driver's error verbatim in its message."""
    driver = json.dumps({"detail": driver_error}, separators=(",", ":"))
    return {"detail": f"Failed to create instance: DriverAPIError: Driver API returned 400: {driver}"}


def created_for(faulty_server: LocalFleet, run_id: str) -> list[str]:
    """Ids of the live instances of one run (each test uses its own run id)."""
    with faulty_server.fleet() as client:
        return [i.instance_id for i in client.api.control_plane.list_instances(run_id=run_id)]


def creates_fired(faulty_server: LocalFleet) -> int:
    return sum(1 for method, path, _ in faulty_server.fired_faults() if (method, path) == ("POST", CREATE))


TRANSIENT = {
    "500, flag in a driver error forwarded in the detail string": (500, forwarded(PLACEMENT)),
    "400, flag in a driver error forwarded in the detail string": (400, forwarded(PLACEMENT)),
    "400, flag in a detail object": (400, {"detail": PLACEMENT}),
    "500, 'Instance health check failed' with no flag": (500, {"detail": "Instance health check failed"}),
    "500 with no flag": (500, {"detail": "Internal Server Error"}),
    "502 with no flag": (502, {"detail": "Bad Gateway"}),
    "429 burst cap": (429, {"detail": "Instance creation burst cap reached for this team"}),
}


@pytest.mark.parametrize(("status", "body"), list(TRANSIENT.values()), ids=list(TRANSIENT))
async def test_a_transient_create_failure_is_retried_and_makes_one_instance(
    faulty_server: LocalFleet,
    faulty_afleet: AsyncFleet,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    before = creates_fired(faulty_server)
    faulty_server.inject_fault(CREATE, method="POST", status=status, body=body, count=1)
    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    async with await faulty_afleet.make("orderdesk", run_id=run_id, retry=FAST) as env:
        assert env.instance.status == "running"
        assert creates_fired(faulty_server) == before + 1
        assert created_for(faulty_server, run_id) == [env.instance_id]
    retries = [r.getMessage() for r in caplog.records if "creating orderdesk failed" in r.getMessage()]
    assert len(retries) == 1 and f"-> {status}" in retries[0]


async def test_a_lost_create_response_is_retried_with_the_same_key_and_makes_one_instance(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet
) -> None:
    """The orchestrator created the instance, then failed to answer: the retry gets that instance."""
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    faulty_server.inject_fault(
        CREATE, method="POST", status=500, body=forwarded(PLACEMENT), count=1, when="after"
    )
    async with await faulty_afleet.make("orderdesk", run_id=run_id, retry=FAST) as env:
        assert created_for(faulty_server, run_id) == [env.instance_id]


PERMANENT: dict[str, tuple[int, dict[str, Any], type[APIStatusError], bool | None]] = {
    "401 bad token": (401, {"detail": "invalid API key", "code": "unauthorized"}, AuthenticationError, None),
    "404 unknown env": (
        404,
        {"detail": "env 'orderdesk' not found", "code": "env_not_found", "retryable": False},
        EnvNotFoundError,
        False,
    ),
    "503 flagged false at the top": (
        503,
        {"detail": "draining", "retryable": False},
        InternalServerError,
        False,
    ),
    "400 flagged false in a detail object": (400, {"detail": REFUSED}, BadRequestError, False),
    "500 flagged false in a forwarded driver error": (500, forwarded(REFUSED), InternalServerError, False),
    "400 with no flag": (400, {"detail": "env_variables must be an object"}, BadRequestError, None),
}


@pytest.mark.parametrize(("status", "body", "cls", "flag"), list(PERMANENT.values()), ids=list(PERMANENT))
async def test_a_permanent_create_failure_raises_at_once(
    faulty_server: LocalFleet,
    faulty_afleet: AsyncFleet,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
    cls: type[APIStatusError],
    flag: bool | None,
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    before = creates_fired(faulty_server)
    faulty_server.inject_fault(CREATE, method="POST", status=status, body=body, count=1)
    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    with pytest.raises(cls) as raised:
        await faulty_afleet.make("orderdesk", run_id=run_id, retry=FAST)
    assert raised.value.status_code == status
    assert raised.value.retryable is flag
    assert creates_fired(faulty_server) == before + 1
    assert created_for(faulty_server, run_id) == []
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


def test_the_error_says_where_it_found_the_flag(faulty_server: LocalFleet, faulty_fleet: Fleet) -> None:
    faulty_server.inject_fault(CREATE, method="POST", status=500, body=forwarded(REFUSED), count=1)
    with pytest.raises(InternalServerError) as raised:
        faulty_fleet.make("orderdesk", retry=FAST)
    assert raised.value.code == "image_not_found"
    assert raised.value.retryable_at == "body.detail<json>.detail"


async def test_the_real_401_and_404_raise_at_once(
    faulty_server: LocalFleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    async with AsyncFleet("not-the-key", base_url=faulty_server.base_url) as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.make("orderdesk", retry=FAST)
    async with faulty_server.async_fleet() as client:
        with pytest.raises(EnvNotFoundError):
            await client.make("no-such-env", retry=FAST)
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


def test_the_sync_twin_retries_a_seed_placement_blip(faulty_server: LocalFleet, faulty_fleet: Fleet) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    faulty_server.inject_fault(CREATE, method="POST", status=400, body={"detail": PLACEMENT}, count=1)
    with faulty_fleet.make("orderdesk", run_id=run_id, retry=FAST) as env:
        assert created_for(faulty_server, run_id) == [env.instance_id]


async def test_a_task_episode_succeeds_through_a_seed_placement_blip_on_reset(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    task = next(t for t in bundled_tasks if t.env_key == "orderdesk" and t.metadata.get("reference_solution"))
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    before = creates_fired(faulty_server)
    faulty_server.inject_fault(CREATE, method="POST", status=500, body=forwarded(PLACEMENT), count=1)
    make_kwargs = {"retry": FAST, "run_id": run_id}
    async with TaskEnv(task, fleet=faulty_afleet, max_steps=40, make_kwargs=make_kwargs) as env:
        observation = await env.reset_async()
        assert observation["tools"]
        assert env.env is not None and created_for(faulty_server, run_id) == [env.env.instance_id]
        for step in task.metadata["reference_solution"]:
            await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
        _, reward, done, _ = await env.step_async({"done": True})
    assert (reward, done, env.verifier_error) == (1.0, True, None)
    assert creates_fired(faulty_server) == before + 1
