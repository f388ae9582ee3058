"""Starting and stopping the local server: nothing left behind, state kept across restarts,
and the ``fleet-sdk serve`` ready line. (Start-up speed: ``benchmarks/bench_startup.py``.)"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from _http import bearer
from _procs import Proc, descendants, processes
from _waits import PATIENCE, wait_until

from fleet_local import LocalFleet
from fleet_sdk.mcp import MCPClient
from fleet_sdk.types import browser_lease as browser
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier


def _session_members(session_id: int) -> list[int]:
    """Pids of live processes in a session or whose parent is ``session_id``."""
    return [p.pid for p in processes() if p.alive and session_id in (p.ppid, p.session)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _port_open(url: str) -> bool:
    parsed = httpx.URL(url)
    with contextlib.suppress(OSError), socket.create_connection((parsed.host, parsed.port or 80), timeout=1):
        return True
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_starts_and_stops_clean() -> None:
    server = LocalFleet()
    server.start()
    try:
        pid = server.pid
        assert pid is not None
        assert server.s3_url is not None and _port_open(server.s3_url)
        assert _port_open(server.base_url)
        s3_url, base_url = server.s3_url, server.base_url
    finally:
        server.stop()
    assert _session_members(pid) == [], "processes of the server's session survived stop()"
    assert not Path(f"/proc/{pid}").exists(), "the server process was not reaped"
    assert not _port_open(s3_url), "the S3 endpoint's port is still open"
    assert not _port_open(base_url)
    assert not server.data_dir.exists(), "temporary data dir was not removed"


SLOW_VERIFIER = """
import time


def verify(env, final_answer=None):
    time.sleep(60)
    return 1.0
"""


def post_slow_verifier(server: LocalFleet) -> None:
    """Start running :data:`SLOW_VERIFIER` on a new instance of ``server``, in a thread (the
    request ends when the server does, or after 90 s)."""
    headers = bearer(server)
    envs = httpx.get(f"{server.base_url}/v1/env/", headers=headers, timeout=PATIENCE).json()
    instance = httpx.post(
        f"{server.base_url}/v1/env/instances",
        json={"env_key": envs[0]["env_key"]},
        headers=headers,
        timeout=PATIENCE,
    ).json()
    body = {
        "key": "slow-verifier",
        "sha256": bundle_sha256(SLOW_VERIFIER),
        "args": {"instance_id": instance["instance_id"]},
        "function_name": "verify",
        "timeout": 60,
        "bundle": base64.b64encode(bundle_verifier(SLOW_VERIFIER)).decode(),
    }

    def run() -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{server.base_url}/v1/verifiers/execute", json=body, headers=headers, timeout=90)

    threading.Thread(target=run, daemon=True).start()


def _start_slow_verifier(server: LocalFleet) -> set[int]:
    """Run :data:`SLOW_VERIFIER` on ``server`` in a thread; the pids of its sandbox once it runs."""
    before = descendants(server.pid or 0)
    post_slow_verifier(server)
    deadline = time.monotonic() + PATIENCE
    while not (sandbox := {p.pid for p in _procs_of(server) if b"_child.py" in p.cmdline()}):
        assert time.monotonic() < deadline, "the verifier sandbox never started"
        time.sleep(0.05)
    return (descendants(server.pid or 0) - before) | sandbox


def _procs_of(server: LocalFleet) -> list[Proc]:
    mine = descendants(server.pid or 0)
    return [p for p in processes() if p.pid in mine]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_stop_ends_running_verifier_sandboxes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verifier sandbox (its own session, so out of reach of killpg) still ends with the server.

    The jailed interpreter dies of its parent-death signal once the server has killed its
    ``bwrap``: the kernel delivers that after ``stop()`` returns, and a loaded machine takes a
    moment to run the exit, so its death is awaited (bounded), not sampled at once (which failed
    once in a full CI run on a busy machine, the survivor gone a moment later). A fresh run per
    verifier; the zygote's twin is in ``test_zygote_server_lifecycle.py``."""
    monkeypatch.setenv("FLEET_VERIFIER_RUNNER", "fresh")
    server = LocalFleet().start()
    try:
        children = _start_slow_verifier(server)
    finally:
        server.stop()
    wait_until(
        lambda: not [child for child in children if _alive(child)], "verifier sandboxes to end after stop()"
    )


async def _screenshot(mcp_url: str) -> None:
    """Use a lease's ``computer`` tool once, which starts its Chromium."""
    client = MCPClient([mcp_url], call_deadline=PATIENCE)
    try:
        await client.call_tool("computer", {"action": "screenshot"})
    finally:
        await client.aclose()


def _described(procs: list[Proc]) -> list[str]:
    """Each process with its state, pending signals, kernel stack and command line, for a
    failure message."""
    described = []
    for p in procs:
        status, stack = "", ""
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p.pid}/status").read_text().splitlines()
            status = " ".join(f for f in fields if f.split(":")[0] in ("State", "SigPnd", "ShdPnd"))
            stack = Path(f"/proc/{p.pid}/stack").read_text().replace("\n", " | ")
        described.append(f"{p.pid} (group {p.pgrp}) {status} [{stack}]: {p.cmdline()[:100]!r}")
    return described


def _started(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None once it has gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except OSError:
        return None


def _sigkill_leaves_nothing(server: LocalFleet, procs: list[Proc]) -> None:
    """SIGKILL the server; every process in ``procs`` and in their groups must then end.

    Polled against a deadline: the watchdog of ``fleet_local.sandbox._process_groups`` and the Playwright
    driver notice the server's death through a closed pipe, which takes a moment. Only
    processes started before the kill count: on a busy machine pids wrap around within
    minutes, and a stranger may get one of ours (or lead a group with one of our group ids).
    """
    assert server.pid is not None
    pids, groups = {p.pid for p in procs}, {p.pgrp for p in procs}

    def left() -> list[Proc]:
        return [
            p
            for p in processes()
            if p.alive and (p.pid in pids or p.pgrp in groups) and (_started(p.pid) or 0) <= killed_at
        ]

    os.kill(server.pid, signal.SIGKILL)
    killed_at = int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")) + 1
    deadline = time.monotonic() + PATIENCE
    try:
        while remaining := left():
            assert time.monotonic() < deadline, f"outlived the SIGKILLed server: {_described(remaining)}"
            time.sleep(0.05)
    finally:
        for proc in left():  # only after a failure: leave this machine clean anyway
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_sigkilled_server_leaves_no_browser_driver_or_verifier_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No shutdown code runs on SIGKILL: the lease browsers (each in a process group of its own),
    the Playwright driver and a jailed verifier run must all end by themselves. The browsers'
    profiles stay on disk until the next server on that data dir removes them. A fresh run per
    verifier; the zygote's twin is in ``test_zygote_server_lifecycle.py``."""
    monkeypatch.setenv("FLEET_VERIFIER_RUNNER", "fresh")
    data_dir = tmp_path / "data"
    server = LocalFleet(data_dir, s3=False).start()
    try:
        with server.fleet() as fleet:
            leases = [
                fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=600))
                for _ in range(2)
            ]
        for lease in leases:
            asyncio.run(_screenshot(lease.mcp_url or ""))
        _start_slow_verifier(server)
        procs = _procs_of(server)
        chromium_groups = {p.pgrp for p in procs if b"/chromium" in p.cmdline()}
        assert len(chromium_groups) == 2, "each lease has a Chromium in a group of its own"
        started = {
            kind
            for p in procs
            for kind in ("playwright", "bwrap", "_child.py", "_group_watchdog")
            if kind.encode() in p.cmdline()
        }
        assert started == {"playwright", "bwrap", "_child.py", "_group_watchdog"}
        _sigkill_leaves_nothing(server, procs)
    finally:
        server.stop()
    profiles = data_dir / "browsers"
    assert len(list(profiles.glob("chromium-*"))) == 2
    # One more as another server's live browser would look: its lock names a live process.
    in_use = profiles / "chromium-in-use"
    in_use.mkdir()
    (in_use / "SingletonLock").symlink_to(f"{socket.gethostname()}-{os.getpid()}")
    with LocalFleet(data_dir, s3=False):
        assert list(profiles.glob("chromium-*")) == [in_use]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_sigkilled_server_leaves_no_unjailed_verifier_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap (none on the server's PATH) nothing like ``--die-with-parent`` ends a
    verifier run: the guard alone must."""
    monkeypatch.setenv("PATH", "/nonexistent")
    server = LocalFleet(allow_unjailed=True).start()
    try:
        sandbox = _start_slow_verifier(server)
        procs = [p for p in _procs_of(server) if p.pid in sandbox]
        assert procs and not [p for p in procs if b"bwrap" in p.cmdline()], "the run is unjailed"
        _sigkill_leaves_nothing(server, procs)
    finally:
        server.stop()


STARTS_A_SERVER = """
import sys
from fleet_local import LocalFleet

server = LocalFleet(sys.argv[1]).start()
print(server.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_server_dies_with_the_sigkilled_process_that_started_it(tmp_path: Path) -> None:
    """A test run or trainer killed before ``LocalFleet.stop()``: its server goes too (and the
    server's own guard then ends what it started, as the tests above show)."""
    server_pid = 0
    with subprocess.Popen(
        [sys.executable, "-c", STARTS_A_SERVER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as starter:
        assert starter.stdout is not None
        try:
            server_pid = int(starter.stdout.readline())
            assert _alive(server_pid)
            starter.kill()
            starter.wait(PATIENCE)
            deadline = time.monotonic() + PATIENCE
            while _alive(server_pid):
                assert time.monotonic() < deadline, "the server outlived the process that started it"
                time.sleep(0.05)
        finally:
            starter.kill()
            if server_pid and _alive(server_pid):
                os.kill(server_pid, signal.SIGKILL)


def test_state_survives_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "fleet-data"
    with LocalFleet(data_dir, api_key="restart-key") as first, first.fleet() as fleet:
        lease = fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=3600))
        ended = fleet.api.browser.create_browser_lease(browser.BrowserLeaseRequest(ttl_seconds=3600))
        fleet.api.browser.delete_browser_lease(ended.lease_id)
    assert (data_dir / "fleet.db").exists()
    with LocalFleet(data_dir, api_key="restart-key") as second, second.fleet() as fleet:
        again = fleet.api.browser.get_browser_lease(lease.lease_id)
        assert again.status == "running"
        assert again.created_timestamp_ms == lease.created_timestamp_ms
        assert fleet.api.browser.get_browser_lease(ended.lease_id).status == "terminated"
    assert data_dir.exists(), "a caller's data dir must be kept"


def test_cli_serve_prints_ready_line(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "fleet_sdk.cli",
        "serve",
        "--port",
        "0",
        "--data-dir",
        str(tmp_path),
        "--quiet",
    ]
    env = {**os.environ, "FLEET_LOCAL_API_KEY": "cli-key"}
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        ready = json.loads(line)
        assert ready["event"] == "ready"
        assert ready["url"].startswith("http://127.0.0.1:")
        assert ready["pid"] == process.pid
        assert ready["s3_url"] and ready["s3_url"] != ready["url"]
        assert "api_key" not in ready  # a key the user chose is never printed
        response = httpx.post(
            f"{ready['url']}/v1/traces/jobs",
            json={"name": "cli"},
            headers={"Authorization": "Bearer cli-key"},
            timeout=PATIENCE,
        )
        assert response.status_code == 200, response.text
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal: the conventional -SIGTERM exit.
        assert process.wait(timeout=PATIENCE) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
