"""A create's replay and duplicate checks read the store without queueing at its writer lock.

Every ``Store.get`` and ``Store.put`` takes the store's one lock, and a worker thread holds it
across the SQLite call (which lets the GIL go) until it has the GIL back. With 64 episodes
creating their instances at once, a ``py-spy dump`` of the server 80 ms into the burst found 31
of its 40 worker threads queued there: the ``Idempotency-Key`` replay lookup and the
``X-Request-ID`` duplicate check were two of each create's five turns at that lock, though each
is a plain read made under a named lock that already orders it after the earlier write of the
same key. They now read through the store's lock-free read connections (``Store.read``). These
tests hold the writer lock in another thread and show that both checks still answer: the replay,
and the refusal of a reused request id. A real SQLite store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from _waits import PATIENCE
from pydantic import BaseModel

from fleet_local._idempotency import idempotent
from fleet_local._request_ids import DuplicateRequestError, create_once
from fleet_local._store import Store

T = TypeVar("T")


class Made(BaseModel):
    instance_id: str


def _while_writer_busy(store: Store, work: Callable[[], T]) -> T:
    """``work()`` in a worker thread while another thread holds the store's writer lock (a slow
    write); waiting for that lock would never end before the holder lets go."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            taken.set()
            done.wait(PATIENCE)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    pool = ThreadPoolExecutor(1)
    try:
        assert taken.wait(PATIENCE)
        return pool.submit(work).result(timeout=PATIENCE / 4)
    finally:
        done.set()  # before the pool's shutdown waits for a worker stuck at the lock
        holder.join(PATIENCE)
        pool.shutdown(wait=True)


def test_a_replayed_create_answers_while_the_writer_is_busy(store: Store) -> None:
    """The first create stores its answer; with the writer lock then held elsewhere, the same key
    and body replay that answer, and ``create`` is not called again."""
    calls: list[str] = []

    def create() -> Made:
        calls.append("create")
        return Made(instance_id="inst_1")

    def once() -> Made:
        return idempotent(
            store,
            scope="create_instance",
            key="k1",
            payload={"env_key": "orderdesk"},
            model=Made,
            create=create,
        )

    first = once()
    assert _while_writer_busy(store, once) == first == Made(instance_id="inst_1")
    assert calls == ["create"]


def test_a_reused_request_id_is_refused_while_the_writer_is_busy(store: Store) -> None:
    """A request id bound by an earlier create is refused (the duplicate's error names the
    instance it made) with the writer lock held elsewhere, and nothing is created."""
    calls: list[str] = []

    def create(instance_id: str) -> Callable[[], Made]:
        def made() -> Made:
            calls.append(instance_id)
            return Made(instance_id=instance_id)

        return made

    create_once(store, "req-1", "inst_1", create("inst_1"))

    def again() -> DuplicateRequestError | Made:
        try:
            return create_once(store, "req-1", "inst_2", create("inst_2"))
        except DuplicateRequestError as exc:
            return exc

    refused = _while_writer_busy(store, again)
    assert isinstance(refused, DuplicateRequestError)
    assert refused.instance_id == "inst_1"
    assert calls == ["inst_1"]
