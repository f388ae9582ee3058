"""``make`` deletes what it created when anything after the create fails or is cancelled, on the
real local server; ``reset`` in the middle of an episode grades the episode it abandons."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from _chaos import ChaosTransport, rebuilt

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, Fleet, FleetError
from fleet_sdk._runtime._bridge import run_sync
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

LIVE = ("pending", "running")


class _StillPending(httpx.AsyncBaseTransport):
    """The real server, but every instance it describes reads as still ``pending`` (a platform
    whose instances are slow to place): ``make`` waits and polls."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.created = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        await response.aclose()
        if request.url.path.startswith("/v1/env/instances") and request.method in ("POST", "GET"):
            data = json.loads(body)
            if isinstance(data, dict) and data.get("status") == "running":
                body = json.dumps({**data, "status": "pending"}).encode()
            if request.method == "POST":
                self.created.set()
        return rebuilt(response, body, request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
async def pending_fleet(server: LocalFleet) -> AsyncIterator[tuple[AsyncFleet, _StillPending]]:
    transport = _StillPending()
    pool = httpx.AsyncClient(transport=transport)
    fleet = server.async_fleet(http_client=pool)
    yield fleet, transport
    await fleet.close()
    await pool.aclose()


async def _live(afleet: AsyncFleet, run_id: str) -> list[str]:
    return [i.instance_id for i in await afleet.instances(run_id=run_id) if i.status in LIVE]


async def test_a_make_whose_wait_runs_out_deletes_the_instance(
    pending_fleet: tuple[AsyncFleet, _StillPending], afleet: AsyncFleet
) -> None:
    """Regression: when waiting for the instance to run timed out, nobody deleted it; on the
    platform it was billed until its TTL."""
    fleet, _ = pending_fleet
    run_id = f"make-wait-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FleetError, match="still pending at the provisioning deadline"):
        await fleet.make("orderdesk", run_id=run_id, provision_deadline=1.0)
    made = await afleet.instances(run_id=run_id)
    assert len(made) == 1 and made[0].status == "terminated"


async def test_a_make_cut_by_a_trainers_timeout_deletes_the_instance(
    pending_fleet: tuple[AsyncFleet, _StillPending], afleet: AsyncFleet
) -> None:
    """A trainer's ``asyncio.timeout`` (or ``play_episode(time_limit=...)``) cancels ``make``
    while it waits for the instance to run."""
    fleet, transport = pending_fleet
    run_id = f"make-timeout-{uuid.uuid4().hex[:8]}"
    task = asyncio.create_task(fleet.make("orderdesk", run_id=run_id))
    await transport.created.wait()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await task
    made = await afleet.instances(run_id=run_id)
    assert len(made) == 1 and made[0].status == "terminated"


async def test_a_make_cancelled_while_the_creates_answer_is_on_its_way_deletes_the_instance(
    server: LocalFleet, afleet: AsyncFleet
) -> None:
    """The server made the instance but the answer never reached ``make``: it asks again with the
    create's idempotency key, learns the id and deletes it."""
    transport = ChaosTransport("cancel_after", at=1)
    pool = httpx.AsyncClient(transport=transport)
    fleet = server.async_fleet(http_client=pool)
    run_id = f"make-cancel-{uuid.uuid4().hex[:8]}"
    task = asyncio.create_task(fleet.make("orderdesk", run_id=run_id))
    transport.target = task  # type: ignore[assignment]
    with pytest.raises(asyncio.CancelledError):
        await task
    assert transport.fired == "POST /v1/env/instances"
    made = await afleet.instances(run_id=run_id)
    assert len(made) == 1 and made[0].status == "terminated"
    await fleet.close()
    await pool.aclose()


def test_ctrl_c_in_a_sync_make_deletes_the_instance_before_the_interrupt_returns(server: LocalFleet) -> None:
    """Ctrl-C while ``Fleet.make`` waits: the bridge cancels the coroutine, which deletes the
    instance it created, before ``KeyboardInterrupt`` reaches the caller."""

    def interrupt(number: int, request: httpx.Request) -> None:
        if number == 2:  # the create was answered: the instance exists
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    transport = _StillPending()
    counting = ChaosTransport(on_request=interrupt)
    counting._inner = transport  # type: ignore[assignment]
    pool = httpx.AsyncClient(transport=counting)
    run_id = f"make-sigint-{uuid.uuid4().hex[:8]}"
    with server.fleet(async_http_client=pool) as fleet, pytest.raises(KeyboardInterrupt):
        fleet.make("orderdesk", run_id=run_id)
    run_sync(pool.aclose())  # it lives on the loop bridge, where the sync client used it
    with Fleet(server.api_key, base_url=server.base_url) as check:
        made = check.instances(run_id=run_id)
    assert len(made) == 1 and made[0].status == "terminated"


async def test_reset_in_the_middle_of_an_episode_grades_the_abandoned_one(
    afleet: AsyncFleet, bundled_tasks: list[Task]
) -> None:
    """Regression: ``reset()`` mid-episode started the next episode without running the verifier
    on the abandoned one, though docs/wire.md says an abandoned episode is always graded."""
    task = next(t for t in bundled_tasks if t.task_key == "orderdesk-cancel-pending-order")
    job_id = await afleet.traces.create_job("reset grades the abandoned episode")
    env = TaskEnv(task, fleet=afleet, trace_job_id=job_id, trace_model="m")
    try:
        await env.reset_async()
        for step in task.metadata["reference_solution"]:
            await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
        assert not env.done and env.final_reward is None
        abandoned = env.chat_history
        await env.reset_async()  # before the instance is restored, the solved episode is graded
        assert env.step_count == 0 and not env.done and env.final_reward is None
        sessions = await afleet.api.sessions.get_job_sessions(job_id)
        (graded,) = [s for t in sessions.tasks for s in t.sessions]
        assert graded.verifier_execution is not None and graded.verifier_execution.score == 1.0
        transcript = (await afleet.api.sessions.get_session_transcript(graded.session_id)).transcript
        assert len(transcript) == len(abandoned)
    finally:
        await env.close_async()
