"""A lease browser ended from a worker thread is killed there and reaped on the loop's side.

Regression: once the lease book's calls moved off the event loop into worker threads
(``tests/local/test_store_off_the_loop.py``), ending a lease from there waited in that thread,
under the lease book's lock, until Chromium was reaped and its profile removed: a lease
``DELETE`` went from 5-50 ms to 0.5-0.9 s, and every other lease call waited as long. The
worker thread now only kills the process group and hands the rest to the loop.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from _procs import alive_in
from _waits import PATIENCE, wait_until_async

from fleet_local import _chromium
from fleet_local._chromium import BrowserPool


async def test_a_browser_ended_from_a_worker_thread_is_reaped_off_that_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = BrowserPool(tmp_path / "browsers")
    reaped_in: list[int] = []
    may_reap = threading.Event()  # the reap waits for it: the worker must not
    real_reap = _chromium._reap

    def reap(process: subprocess.Popen[bytes], profile: Path) -> None:
        reaped_in.append(threading.get_ident())
        may_reap.wait(PATIENCE)
        real_reap(process, profile)

    monkeypatch.setattr(_chromium, "_reap", reap)
    try:
        browser = await pool.get("lease-ended-in-a-worker", ["127.0.0.1"])
        ended = threading.Event()

        def end_in_a_worker() -> None:
            pool.end("lease-ended-in-a-worker")
            ended.set()

        worker = threading.Thread(target=end_in_a_worker, name="lease-book-call")
        worker.start()
        await wait_until_async(ended.is_set, "the worker thread done with the end, before the reap")
        await wait_until_async(lambda: reaped_in, "the reap started elsewhere")
        may_reap.set()
        await pool.aclose()  # waits for the reap handed to the loop
        worker.join(PATIENCE)
        assert worker.ident not in reaped_in
        assert browser.closed
        assert browser.process.returncode is not None
        assert not browser.profile_dir.exists()
        assert alive_in({browser.process.pid}) == []
    finally:
        may_reap.set()
        await pool.aclose()
