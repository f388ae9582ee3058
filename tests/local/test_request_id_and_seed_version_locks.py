"""The check-and-bind of an ``X-Request-ID`` and the numbering of a data key's seed versions hold
a named lock of the server's own store, per id and per data key.

Regression: both held a lock of their module (``fleet_local/_request_ids.py``,
``fleet_local/_data_files.py``), one for every server in the process and every id or data key,
so while one server's store was slow, another server's creates and seed uploads waited for it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _waits import PATIENCE
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fleet_local import _data_files
from fleet_local._request_ids import DuplicateRequestError, create_once
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_local._store import Store

ENV = "orderdesk"


@pytest.fixture
def two_stores(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    stores = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    try:
        yield stores
    finally:
        for store in stores:
            store.close()


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[LocalState, LocalState]]:
    """Two servers' states in this process, as if their S3 endpoints ran (signing needs no more)."""
    states = []
    for name in ("a", "b"):
        state = build_state(LocalSettings(data_dir=tmp_path / name, api_key=f"sk-{name}", s3=False))
        state.s3_url = "http://127.0.0.1:9"
        states.append(state)
    try:
        yield states[0], states[1]
    finally:
        for state in states:
            state.store.close()


def data_file_client(state: LocalState) -> TestClient:
    app = FastAPI()
    app.include_router(_data_files.router(state))
    return TestClient(app)


def upload_url(state: LocalState, data_key: str) -> str:
    """POST the upload-url route of ``state``'s server; the version it answers."""
    with data_file_client(state) as client:
        answer = client.post(f"/v1/seeds/{data_key}/{ENV}/upload-url", json={"filename": "seed.tar"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["version"])


class Reached:
    """A store's lock that notes when some thread reaches it (``reached``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reached = threading.Event()

    def __enter__(self) -> Reached:
        self.reached.set()
        self.inner.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.release()


@contextlib.contextmanager
def busy(store: Store) -> Iterator[threading.Event]:
    """Hold ``store``'s lock for the block, as a slow store call does; yields an event set once
    another thread reaches the lock (and waits there)."""
    watched = Reached(store._lock)
    store._lock = watched  # type: ignore[assignment]
    try:
        with watched.inner:
            yield watched.reached
    finally:
        store._lock = watched.inner


def test_one_request_id_creates_once_among_concurrent_creates(two_stores: tuple[Store, Store]) -> None:
    store, _ = two_stores
    made: list[str] = []

    def create(index: int) -> str:
        def make() -> str:
            made.append(f"inst-{index}")
            return f"inst-{index}"

        try:
            return create_once(store, "rid", f"inst-{index}", make)
        except DuplicateRequestError as duplicate:
            return f"duplicate of {duplicate.instance_id}"

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(create, range(8)))
    assert len(made) == 1
    assert sorted(answers) == sorted([made[0]] + [f"duplicate of {made[0]}"] * 7)
    assert ("create_request_id", "rid") not in store.locks  # no lock kept once unused


def test_a_request_id_binding_waits_for_its_own_store_only(two_stores: tuple[Store, Store]) -> None:
    a, b = two_stores
    with ThreadPoolExecutor(2) as pool:
        with busy(a) as reached:
            waiting = pool.submit(create_once, a, "rid", "inst-a", lambda: "a")
            assert reached.wait(PATIENCE)  # server A's create waits for its store, binding "rid"
            other = pool.submit(create_once, b, "rid", "inst-b", lambda: "b")
            assert other.result(PATIENCE) == "b"  # server B's create with that id goes ahead
            assert not waiting.done()
        assert waiting.result(PATIENCE) == "a"


def test_concurrent_uploads_of_one_data_key_get_distinct_versions(
    two_servers: tuple[LocalState, LocalState],
) -> None:
    state, _ = two_servers
    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(lambda _: upload_url(state, "shared"), range(6)))
    assert sorted(versions) == [f"v{n}" for n in range(1, 7)]


def test_a_seed_version_waits_for_its_own_store_only(two_servers: tuple[LocalState, LocalState]) -> None:
    a, b = two_servers
    with ThreadPoolExecutor(2) as pool:
        with busy(a.store) as reached:
            waiting = pool.submit(upload_url, a, "shared")
            assert reached.wait(PATIENCE)  # server A numbers a version of "shared", waiting for its store
            other = pool.submit(upload_url, b, "shared")
            assert other.result(PATIENCE) == "v1"  # server B numbers its own versions meanwhile
            assert not waiting.done()
        assert waiting.result(PATIENCE) == "v1"
    assert upload_url(a, "shared") == "v2"
