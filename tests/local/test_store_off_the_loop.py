"""No route and no background task waits for the store on the event loop.

Regression: the async browser-lease routes (``fleet_local/_browser.py``), the lease endpoints'
lookups (``_lease_endpoints.py``), the lease TTL reaper and ``POST /v1/traces/jobs``
(``_traces.py``) called ``LeaseBook`` and the SQLite store directly on the event loop. The store
has one lock, shared with the worker threads that run every other route's store calls, so while
one slow store call held it, the loop itself waited for the lock and every route of the server
stalled, ``/v1/regions`` included. Those calls now run in the server's worker threads.

Regression too: the instance manager's ``/health`` (and every other lookup of an instance: the
manager's routes, ``GET /v1/env/instances/{id}``) read the instance through that same lock, so a
slow store call held up a trainer's health checks. They now read through ``Store.read``, a
read-only connection of their own, which in WAL mode waits for no writer.

The server runs in this process (uvicorn in a thread) so that the test can hold the store's own
lock from another thread, as a slow store call would, and see which threads wait for it. The
loop is probed with ``/v1/regions`` (a constant, answered on the loop), as the load tests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import httpx
import pytest
import uvicorn
from _waits import PATIENCE, wait_until_async

from fleet_local._app import create_app
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState

KEY = "sk-store-off-the-loop"
AUTH = {"Authorization": f"Bearer {KEY}"}


class Waits:
    """Which threads wait for the watched locks, and what each is doing (the qualified names of
    the functions on its stack)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: dict[tuple[int, int], frozenset[str]] = {}

    def add(self, lock: object, names: frozenset[str]) -> None:
        with self._guard:
            self._waiting[(id(lock), threading.get_ident())] = names

    def remove(self, lock: object) -> None:
        with self._guard:
            self._waiting.pop((id(lock), threading.get_ident()), None)

    def count(self, matches: Callable[[frozenset[str]], bool]) -> int:
        """How many threads wait for a watched lock with a stack that ``matches``."""
        with self._guard:
            return sum(1 for names in self._waiting.values() if matches(names))


class WatchedLock:
    """A lock of the server, noting each thread that has to wait for it in ``waits``.

    Args:
        inner: The lock (used as a context manager only, as the store and the lease book do).
        waits: Where waiting threads are noted.
    """

    def __init__(self, inner: Any, waits: Waits) -> None:
        self.inner = inner
        self._waits = waits

    def __enter__(self) -> WatchedLock:
        if not self.inner.acquire(blocking=False):
            names: set[str] = set()
            frame: FrameType | None = sys._getframe(1)
            while frame is not None:
                names.add(frame.f_code.co_qualname)
                frame = frame.f_back
            self._waits.add(self, frozenset(names))
            self.inner.acquire()
            self._waits.remove(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.release()


@contextlib.contextmanager
def held_by_another_thread(lock: WatchedLock) -> Iterator[Callable[[], bool]]:
    """Hold ``lock`` from a thread of its own, as a slow store call does, until the block ends
    (or, should the block never end, for :data:`PATIENCE`); yields whether it is held still."""
    taken, release, let_go = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock.inner:
            taken.set()
            release.wait(PATIENCE)
            let_go.set()

    holder = threading.Thread(target=hold, name="slow-store-call", daemon=True)
    holder.start()
    assert taken.wait(PATIENCE)
    try:
        yield lambda: not let_go.is_set()
    finally:
        release.set()
        holder.join(PATIENCE)


def inside(qualname: str) -> Callable[[frozenset[str]], bool]:
    return lambda names: qualname in names


def trace_job_put(names: frozenset[str]) -> bool:
    """A store write outside the lease book: the trace job's."""
    return "Store.put" in names and not any(name.startswith("LeaseBook.") for name in names)


@dataclass
class Served:
    state: LocalState
    store_lock: WatchedLock
    waits: Waits
    url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server in this process whose store and lease-book locks are watched."""
    data_dir = tmp_path_factory.mktemp("store-off-the-loop")
    state = build_state(LocalSettings(data_dir=data_dir, api_key=KEY, s3=False))
    waits = Waits()
    store_lock = WatchedLock(state.store._lock, waits)
    state.store._lock = store_lock  # type: ignore[assignment]
    # Lease calls queue on the lease book's own lock behind the one that reached the store.
    book = state.browser_leases
    book._lock = WatchedLock(book._lock, waits)  # type: ignore[assignment]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    state.public_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    ready = threading.Event()
    state.on_ready = ready.set
    server = uvicorn.Server(uvicorn.Config(create_app(state), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="in-process-server")
    thread.start()
    try:
        assert ready.wait(PATIENCE), "the server did not start"
        yield Served(state, store_lock, waits, state.public_url)
    finally:
        server.should_exit = True
        thread.join(PATIENCE)
        sock.close()
        state.store.close()


async def test_lease_and_trace_routes_wait_for_the_store_off_the_loop(served: Served) -> None:
    waits = served.waits
    async with httpx.AsyncClient(base_url=served.url, headers=AUTH, timeout=PATIENCE) as client:
        created = await client.post("/v1/browser", json={"ttl_seconds": 3600})
        assert created.status_code == 200, created.text
        lease_id = created.json()["lease_id"]
        with held_by_another_thread(served.store_lock) as still_held:
            pending = [
                asyncio.ensure_future(client.get(f"/v1/browser/{lease_id}")),
                asyncio.ensure_future(client.get(f"/v1/browser/{lease_id}/mcp-tools")),
                asyncio.ensure_future(client.post("/v1/browser", json={"ttl_seconds": 60})),
                asyncio.ensure_future(client.post("/v1/traces/jobs", json={"name": "held"})),
                asyncio.ensure_future(  # the lease's MCP endpoint checks the lease first
                    client.post(
                        f"/browser/{lease_id}/mcp",
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Accept": "application/json, text/event-stream"},
                    )
                ),
            ]
            # Every request reached the store (or the lease book queued before it) and waits.
            # Before the fix the first of them waited on the loop, which then read no other.
            await wait_until_async(
                lambda: (
                    waits.count(inside("LeaseBook.get")) >= 3
                    and waits.count(inside("LeaseBook.create")) >= 1
                    and waits.count(trace_job_put) >= 1
                ),
                "the lease and trace requests waiting for the store",
            )
            regions = await client.get("/v1/regions")  # answered on the loop, meanwhile
            assert regions.status_code == 200 and regions.json()
            assert still_held() and not any(request.done() for request in pending)
        answers = await asyncio.gather(*pending)
    assert [answer.status_code for answer in answers] == [200] * 5, [a.text for a in answers]
    assert answers[0].json()["status"] == "running"
    assert answers[3].json()["name"] == "held"
    assert answers[4].json()["result"]["tools"][0]["name"] == "computer"


async def test_the_lease_reaper_waits_for_the_store_off_the_loop(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=AUTH, timeout=PATIENCE) as client:
        created = await client.post("/v1/browser", json={"ttl_seconds": 1})
        assert created.status_code == 200, created.text
        lease_id = created.json()["lease_id"]
        with held_by_another_thread(served.store_lock) as still_held:
            # Once the lease is due, the reaper's pass reads it from the store, and waits.
            await wait_until_async(lambda: served.waits.count(inside("LeaseBook.reap")) >= 1, "the reaper")
            regions = await client.get("/v1/regions")
            assert regions.status_code == 200
            assert still_held()  # answered while the reaper waited, not once the store was free
        await wait_until_async(
            lambda: served.state.store.get("browser_lease", lease_id)["status"] == "expired",  # type: ignore[index]
            "the reaper expiring the lease",
        )


def instance_lookup(names: frozenset[str]) -> bool:
    """A thread looking an instance up (a manager route, the control plane's ``get_instance``)."""
    return "require_live" in names or "get_instance" in names


async def test_instance_health_and_lookups_answer_while_the_store_lock_is_held(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=AUTH, timeout=PATIENCE) as client:
        made = []
        for _ in range(2):
            created = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
            assert created.status_code == 200, created.text
            made.append(created.json()["instance_id"])
        live, deleted = made
        gone = await client.delete(f"/v1/env/instances/{deleted}")
        assert gone.status_code == 200 and gone.json()["status"] == "terminated", gone.text
        manager = "/instances/{}/api/v1/env"
        with held_by_another_thread(served.store_lock) as still_held:
            pending = [
                asyncio.ensure_future(client.get(manager.format(live) + "/health")),
                asyncio.ensure_future(client.get(manager.format(live) + "/resources")),
                asyncio.ensure_future(
                    client.get(manager.format(live) + "/resources/sqlite/current/describe")
                ),
                asyncio.ensure_future(client.get(f"/v1/env/instances/{live}")),
                asyncio.ensure_future(client.get(manager.format(deleted) + "/health")),
                asyncio.ensure_future(client.get(manager.format("no-such-instance") + "/health")),
            ]
            # Before the fix each of them waited for the lock inside its lookup.
            await wait_until_async(
                lambda: all(request.done() for request in pending) or served.waits.count(instance_lookup),
                "the instance lookups answering (or waiting for the store)",
            )
            assert not served.waits.count(instance_lookup)
            assert still_held()  # answered while the lock was held, not once it was free
        answers = [request.result() for request in pending]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 200, 404, 404], [
        a.text for a in answers
    ]
    health = answers[0].json()
    assert (health["status"], health["instance_id"], health["env_key"]) == ("ok", live, "orderdesk")
    assert {"seed", "current"} <= {resource["name"] for resource in answers[1].json()}
    assert answers[2].json()["success"] is True and answers[2].json()["tables"]
    assert answers[3].json()["status"] == "running"
    assert answers[4].json()["code"] == answers[5].json()["code"] == "instance_not_found"
    assert "terminated" in answers[4].json()["detail"]


async def test_instance_create_and_delete_wait_for_the_store_off_the_loop(served: Served) -> None:
    """The create and delete routes are coroutines handing their work to one worker thread
    (a ``def`` route with a response model costs FastAPI a second hop): their store calls must
    still wait in a worker thread, never on the loop."""
    async with httpx.AsyncClient(base_url=served.url, headers=AUTH, timeout=PATIENCE) as client:
        made = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
        assert made.status_code == 200, made.text
        with held_by_another_thread(served.store_lock) as still_held:
            pending = [
                asyncio.ensure_future(client.post("/v1/env/instances", json={"env_key": "orderdesk"})),
                asyncio.ensure_future(client.delete(f"/v1/env/instances/{made.json()['instance_id']}")),
            ]
            await wait_until_async(
                lambda: (
                    served.waits.count(inside("create_instance")) >= 1
                    and served.waits.count(inside("delete_instance")) >= 1
                ),
                "the create and the delete waiting for the store",
            )
            regions = await client.get("/v1/regions")  # answered on the loop, meanwhile
            assert regions.status_code == 200 and regions.json()
            assert still_held() and not any(request.done() for request in pending)
        created, deleted = await asyncio.gather(*pending)
    assert created.status_code == 200 and created.json()["status"] == "running", created.text
    assert deleted.status_code == 200 and deleted.json()["status"] == "terminated", deleted.text
