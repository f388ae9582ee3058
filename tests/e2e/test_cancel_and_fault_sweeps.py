"""Nothing leaks from the client on any failure: every request of every operation of an episode is
cancelled (before it is sent, and after the server acted on it) and fails each way (connection
refused, reset after the server acted, 500, read timeout, a body that is not JSON).

For each operation (``make``, ``reset``, ``step``, ``close``, the verifier run with the trace
upload, a whole ``play_episode``, and a browser lease's start in a browser test) and each way,
request N = 1, 2, ... goes wrong until the operation completes without reaching N. A whole
``play_episode`` is only cancelled: the faults of its requests are those of the operations it
is made of, each swept on its own (and its fourteen requests times five ways would double the
sweep's time). After every case, once the trainer closed what it holds:

- no instance, lease or MCP session it made is left on the server (``LocalFleet.live_objects``);
- the client holds no connection mid-response, no task, no thread and no file descriptor more;
- the operation ended with a typed error (a ``FleetError``, or the cancellation), or succeeded
  after a retry; a reward is never invented (None, or the episode's true reward).

An MCP session whose ``initialize`` answer never reached the client (cut off, or cancelled in
flight) cannot be ended by it: the server ends it with its instance, or at its idle timeout
(short here); those are checked once, at the end of the module. Waits between retries are
shortened to keep the sweep quick (their lengths are tested in ``tests/test_runtime.py``).

The counts of cases run are printed at the end of the module.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from _chaos import CANCELS, FAULTS, Chaos, ChaosTransport, rebuilt
from _waits import wait_until, wait_until_async

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, FleetError, RetryPolicy
from fleet_sdk.browser import BrowserSession
from fleet_sdk.episodes import play_episode
from fleet_sdk.policies import ScriptedPolicy
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

TASK_KEY = "orderdesk-update-customer-email"  # two steps solve it: the shortest episodes there are
MAX_POINTS = 60  # a bound on N, far above any operation's request count

COUNTS: dict[tuple[str, str], int] = {}
"""(operation, way) -> cases run."""
ORPHANS: set[str] = set()
"""MCP sessions the server opened whose id never reached the client."""
IDLE_TIMEOUT = 3.0


@pytest.fixture(scope="module", autouse=True)
def _quick_retries() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RetryPolicy, "backoff", lambda self, retry_number, retry_after=None: 0.01)
        yield


@pytest.fixture(scope="module")
def sweep_server(request: pytest.FixtureRequest) -> Iterator[LocalFleet]:
    """A server of the sweep's own (so ``live_objects`` holds only what the sweep left), with the
    fault admin API on for ``GET /_admin/state``."""
    with LocalFleet(faults=True, verifier_timeout=10, mcp_session_idle_timeout=IDLE_TIMEOUT) as server:
        yield server
        if ORPHANS:  # ended with their instance, or else at the idle timeout

            def orphans_ended() -> bool:
                return not ORPHANS & set(server.live_objects()["mcp_sessions"])

            wait_until(orphans_ended, f"the server ends the {len(ORPHANS)} sessions the client never saw")
    total = sum(COUNTS.values())
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and COUNTS:
        with capture.global_and_fixture_disabled():  # shown on success too, not captured
            reporter.write_line(f"\ncancellation and fault sweep: {total} (operation, point, way) cases")
            for (op, way), n in sorted(COUNTS.items()):
                reporter.write_line(f"  {op:9} {way:13} {n:3} cases")


@pytest.fixture(scope="module")
def task(sweep_server: LocalFleet) -> Task:
    with sweep_server.fleet() as fleet:
        return fleet.tasks.get(TASK_KEY)


@pytest.fixture(scope="module")
def trace_job(sweep_server: LocalFleet) -> str:
    with sweep_server.fleet() as fleet:
        return fleet.traces.create_job("sweeps")


def _actions(task: Task) -> list[dict[str, Any]]:
    return [{"tool": s["tool"], "params": s.get("params") or {}} for s in task.metadata["reference_solution"]]


class _PendingAtFirst(httpx.AsyncHTTPTransport):
    """The real server, but a created instance reads as ``pending`` in the create's answer (a
    platform still placing it): ``make`` waits and polls until the server says ``running``."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.method != "POST" or request.url.path != "/v1/env/instances":
            return response
        body = await response.aread()
        await response.aclose()
        data = json.loads(body)
        if isinstance(data, dict) and data.get("status") == "running":
            body = json.dumps({**data, "status": "pending"}).encode()
        return rebuilt(response, body, request)


@dataclass
class Case:
    """One operation's run: what it set up (closed by ``teardown``, as a trainer's ``finally``)."""

    fleet: AsyncFleet
    task: Task
    trace_job: str
    env: TaskEnv | None = None
    made: Any = None
    lease: BrowserSession | None = None
    rewards: list[float | None] = field(default_factory=list)

    def task_env(self, **kwargs: Any) -> TaskEnv:
        self.env = TaskEnv(self.task, fleet=self.fleet, **kwargs)
        return self.env

    async def teardown(self) -> None:
        if self.lease is not None:
            await self.lease.close()
        if self.env is not None:
            await self.env.close_async()
        if self.made is not None:
            await self.made.close()


async def _nothing(case: Case) -> None:
    pass


async def _reset(case: Case) -> None:
    await case.task_env().reset_async()


async def _solved(case: Case) -> None:
    env = case.task_env(trace_job_id=case.trace_job, trace_model="sweep")
    await env.reset_async()
    for action in _actions(case.task):
        await env.step_async(action)


async def _made(case: Case) -> None:
    case.made = await case.fleet.make("orderdesk")


async def _op_lease(case: Case) -> None:
    case.lease = await BrowserSession.open(case.fleet, case.made, ready_deadline=60.0)


async def _op_make(case: Case) -> None:
    case.made = await case.fleet.make("orderdesk")


async def _op_reset(case: Case) -> None:
    await case.task_env().reset_async()


async def _op_step(case: Case) -> None:
    assert case.env is not None
    await case.env.step_async(_actions(case.task)[0])


async def _op_close(case: Case) -> None:
    assert case.env is not None
    env = case.env
    try:
        await env.close_async()
    finally:
        case.rewards.append(env.final_reward)


async def _op_verify(case: Case) -> None:
    assert case.env is not None
    _, reward, done, _ = await case.env.step_async({"done": True})
    assert done
    case.rewards.append(reward)


async def _op_episode(case: Case) -> None:
    result = await play_episode(case.task_env(), ScriptedPolicy)
    if result.error is not None and not result.error.startswith("close failed"):
        assert result.reward is None, f"an errored episode reports no reward: {result}"
    case.rewards.append(result.reward)


@dataclass(frozen=True)
class Operation:
    name: str
    setup: Callable[[Case], Awaitable[None]]
    run: Callable[[Case], Awaitable[None]]
    pending: bool = False  # instances read as pending at first (``make`` waits for them)


OPERATIONS = (
    Operation("make", _nothing, _op_make),
    Operation("make-wait", _nothing, _op_make, pending=True),  # the create, then the wait's polls
    Operation("reset", _nothing, _op_reset),
    Operation("step", _reset, _op_step),
    Operation("close", _solved, _op_close),
    Operation("verify", _solved, _op_verify),  # the verifier run, then the trace upload
    Operation("episode", _nothing, _op_episode),  # play_episode: reset, steps, close
)
LEASE_START = Operation("lease", _made, _op_lease)  # a browser lease's start (a Chromium each)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()}


@dataclass
class Sweep:
    server: LocalFleet
    task: Task
    trace_job: str

    async def case(self, operation: Operation, chaos: Chaos, at: int) -> bool:
        """Run one case; whether request ``at`` was reached (else the operation is done before)."""
        before = await asyncio.to_thread(self.server.live_objects)
        fds, threads, tasks = _fds(), threading.active_count(), _tasks()
        transport = ChaosTransport(inner=_PendingAtFirst() if operation.pending else None)
        pool = httpx.AsyncClient(transport=transport)
        fleet = self.server.async_fleet(http_client=pool)
        case = Case(fleet, self.task, self.trace_job)
        outcome = "ok"
        try:
            await operation.setup(case)
            transport.chaos, transport.at = chaos, transport.count + at
            run = asyncio.create_task(operation.run(case))
            transport.target = run  # type: ignore[assignment]
            try:
                await run
            except asyncio.CancelledError:
                assert chaos in CANCELS and transport.fired, "cancelled though nobody cancelled it"
                outcome = "cancelled"
            except FleetError as exc:
                outcome = f"{type(exc).__name__}"
            reached = transport.fired is not None
            transport.chaos = None
            # What a trainer does in its ``finally``: close what it holds (no chaos any more).
            await case.teardown()
            busy = [c for c in transport._inner._pool.connections if not c.is_idle() and not c.is_closed()]
            assert not busy, f"connections left mid-response: {busy}"
        finally:
            await fleet.close()
            await pool.aclose()
        where = f"{operation.name} {chaos} at request {at} ({transport.fired}): {outcome}"
        for reward in case.rewards:  # None, or a score a verifier answer handed over
            assert reward is None or reward in transport.scores, f"{where}: reward {reward} invented"

        async def server_clean() -> bool:
            now = await asyncio.to_thread(self.server.live_objects)
            sessions = set(now["mcp_sessions"]) - set(before["mcp_sessions"])
            ORPHANS.update(sessions - transport.sessions)
            return not (sessions & transport.sessions) and all(
                set(now[kind]) <= set(before[kind]) for kind in ("instances", "leases")
            )

        await wait_until_async(server_clean, f"{where}: nothing left on the server")
        assert _tasks() <= tasks, f"{where}: tasks left {_tasks() - tasks}"
        assert threading.active_count() <= threads, f"{where}: threads left"
        assert _fds() <= fds, f"{where}: file descriptors left ({_fds()} > {fds})"
        return reached


@pytest.fixture
async def sweep(sweep_server: LocalFleet, task: Task, trace_job: str) -> AsyncIterator[Sweep]:
    yield Sweep(sweep_server, task, trace_job)


async def _sweep(sweep: Sweep, operation: Operation, chaos: Chaos) -> None:
    cases = 0
    for at in range(1, MAX_POINTS + 1):
        cases += 1
        if not await sweep.case(operation, chaos, at):
            break
    else:
        pytest.fail(f"{operation.name} still reached request {MAX_POINTS} under {chaos}")
    COUNTS[(operation.name, chaos)] = cases
    assert cases > 1, "the operation made no request at all"


@pytest.mark.parametrize("chaos", CANCELS)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.name)
async def test_cancelled_at_every_request_leaves_nothing(
    sweep: Sweep, operation: Operation, chaos: Chaos
) -> None:
    await _sweep(sweep, operation, chaos)


@pytest.mark.parametrize("chaos", FAULTS)
@pytest.mark.parametrize("operation", OPERATIONS[:-1], ids=lambda op: op.name)
async def test_every_request_failing_each_way_leaves_nothing(
    sweep: Sweep, operation: Operation, chaos: Chaos
) -> None:
    await _sweep(sweep, operation, chaos)


@pytest.mark.parametrize("chaos", CANCELS + FAULTS)
async def test_a_lease_start_broken_at_every_request_leaves_nothing(sweep: Sweep, chaos: Chaos) -> None:
    """``BrowserSession.open``: create the lease, wait for it, list its tools, open the web UI and
    take the health-check screenshot (a browser test: every case starts a Chromium)."""
    await _sweep(sweep, LEASE_START, chaos)
