"""While the server runs, its event loop's thread tells ``sniffio`` it runs asyncio, and takes
the name back when the server stops.

anyio asks ``sniffio`` for the running library on every thread hop, event, stream and cancel
scope (dozens of times per MCP request); unnamed, ``sniffio`` sniffs for asyncio's current task
each time. The name is set by the app's lifespan on the loop's own thread, never over a name
another library set, and must not outlive the server on a thread that goes on to run other code
(a test's, an embedding program's).
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import sniffio

from fleet_local._app import _loop_thread_named, create_app
from fleet_local._server import build_state
from fleet_local._state import LocalSettings


def test_the_name_is_set_inside_and_taken_back_after() -> None:
    assert sniffio.thread_local.name is None
    with _loop_thread_named():
        assert sniffio.thread_local.name == "asyncio"
    assert sniffio.thread_local.name is None
    try:
        with _loop_thread_named():
            raise RuntimeError("startup failed")
    except RuntimeError:
        pass
    assert sniffio.thread_local.name is None


def test_a_name_another_library_set_is_left_alone() -> None:
    sniffio.thread_local.name = "trio"
    try:
        with _loop_thread_named():
            assert sniffio.thread_local.name == "trio"
        assert sniffio.thread_local.name == "trio"
    finally:
        sniffio.thread_local.name = None


def test_only_the_loops_thread_is_named(tmp_path: Path) -> None:
    """The running app names its loop's thread; a worker thread's own question is its own."""
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    app = create_app(state)
    seen: dict[str, str | None] = {}

    async def run() -> None:
        async with app.router.lifespan_context(app):
            seen["loop"] = sniffio.thread_local.name
            seen["library"] = sniffio.current_async_library()
            seen["worker"] = await anyio.to_thread.run_sync(lambda: sniffio.thread_local.name)
            other = threading.Thread(target=lambda: seen.update(thread=sniffio.thread_local.name))
            other.start()
            other.join(timeout=10)
        seen["after"] = sniffio.thread_local.name

    try:
        anyio.run(run)
    finally:
        state.store.close()
    assert seen == {"loop": "asyncio", "library": "asyncio", "worker": None, "thread": None, "after": None}
