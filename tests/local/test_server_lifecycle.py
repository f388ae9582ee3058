"""Starting and stopping the local server: nothing left behind, state kept across restarts,
and the ``fleet-sdk serve`` ready line. (Start-up speed: ``benchmarks/bench_startup.py``.)"""

from __future__ import annotations

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
from _procs import descendants, processes
from fleet_api.browser_lease import models as browser

from fleet_sdk.local import LocalFleet
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


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_stop_ends_running_verifier_sandboxes() -> None:
    """A verifier sandbox (its own session, so out of reach of killpg) still ends with the server."""
    server = LocalFleet().start()
    try:
        headers = bearer(server)
        envs = httpx.get(f"{server.base_url}/v1/env/", headers=headers).json()
        instance = httpx.post(
            f"{server.base_url}/v1/env/instances",
            json={"env_key": envs[0]["env_key"]},
            headers=headers,
            timeout=30,
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
        assert server.pid is not None
        pid = server.pid
        deadline = time.monotonic() + 15
        while not (children := descendants(pid)):
            assert time.monotonic() < deadline, "the verifier sandbox never started"
            time.sleep(0.05)
    finally:
        server.stop()
    assert not [child for child in children if _alive(child)], "verifier sandboxes survived stop()"


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
        )
        assert response.status_code == 200, response.text
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal: the conventional -SIGTERM exit.
        assert process.wait(timeout=15) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
