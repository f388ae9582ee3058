"""``fleet-sdk serve`` and auth: a key is always required unless ``--allow-any-key``, a
generated key is announced, the 401 says what to send (and reads right through the SDK's
redaction), a busy port or a data dir another server holds is one line and exit 1."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_local._auth import X_API_KEY_REFUSAL, auth_refusal
from fleet_sdk import AuthenticationError, Fleet, __version__

CLI = [sys.executable, "-m", "fleet_sdk.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_LOCAL_API_KEY"}
    return {**env, **extra}


@dataclass
class Served:
    """A ``fleet-sdk serve`` run: its ready line, its process, and its stderr once it has stopped."""

    ready: dict[str, Any]
    stderr: str = ""
    process: subprocess.Popen[str] | None = None


def _read_line(stream: IO[str], timeout: float) -> str:
    """One line of ``stream``, or a failure after ``timeout`` seconds (read in a thread)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no line within {timeout}s") from None


@contextmanager
def serving(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """Run ``fleet-sdk serve`` until its ready line; stops it (SIGTERM) on exit."""
    argv = [*CLI, "serve", "--port", "0", "--no-s3", "--data-dir", str(tmp_path / "data"), *args]
    # stderr goes to a file: a pipe left unread while the server runs could fill and block it.
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env or _env(),
            start_new_session=True,
        )
        assert process.stdout is not None
        served = Served({}, process=process)
        try:
            line = _read_line(process.stdout, timeout=120)
            served.ready = json.loads(line) if line else {}
            assert served.ready.get("event") == "ready", line
            yield served
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            process.stdout.close()
            stderr.seek(0)
            served.stderr = stderr.read()


def _jobs(url: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(f"{url}/v1/traces/jobs", json={"name": "cli"}, headers=headers, timeout=30)


def test_without_a_key_one_is_generated_announced_and_required(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        ready = served.ready
        key = ready["api_key"]
        assert isinstance(key, str) and len(key) >= 32
        wrong = _jobs(ready["url"], "guess")
        assert wrong.status_code == 401
        body = wrong.json()
        assert body["code"] == "unauthorized" and body["retryable"] is False
        assert "Authorization: Bearer <key>" in body["detail"] and "FLEET_LOCAL_API_KEY" in body["detail"]
        assert key not in wrong.text
        missing = _jobs(ready["url"], None)
        assert missing.status_code == 401 and "Authorization: Bearer <key>" in missing.json()["detail"]
        assert _jobs(ready["url"], key).status_code == 200
    assert f"generated API key {key}" in served.stderr
    assert "Traceback" not in served.stderr


def test_a_given_key_is_required_and_never_printed(tmp_path: Path) -> None:
    for args, env in (((), _env(FLEET_LOCAL_API_KEY="env-key-123")), (("--api-key", "env-key-123"), _env())):
        with serving(tmp_path, *args, env=env) as served:
            assert "api_key" not in served.ready
            assert _jobs(served.ready["url"], "env-key-12").status_code == 401
            assert _jobs(served.ready["url"], "env-key-123").status_code == 200
        assert "env-key-123" not in served.stderr


def test_allow_any_key_accepts_any_bearer_but_not_none(tmp_path: Path) -> None:
    with serving(tmp_path, "--allow-any-key") as served:
        assert "api_key" not in served.ready
        assert _jobs(served.ready["url"], "whatever").status_code == 200
        assert _jobs(served.ready["url"], None).status_code == 401
    assert "every bearer key is accepted" in served.stderr


def test_ctrl_c_stops_the_server_with_one_line_and_exit_130(tmp_path: Path) -> None:
    """Regression: Ctrl-C printed a CancelledError ... KeyboardInterrupt traceback."""
    with serving(tmp_path, "--allow-any-key") as served:
        assert served.process is not None
        assert _jobs(served.ready["url"], "any").status_code == 200
        served.process.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends
        code = served.process.wait(timeout=60)
        with pytest.raises(httpx.ConnectError):
            _jobs(served.ready["url"], "any")
    assert code == 130
    assert "Traceback" not in served.stderr and "KeyboardInterrupt" not in served.stderr
    assert served.stderr.splitlines()[-1] == "fleet-sdk serve: stopped (Ctrl-C)"


def _serve_refused(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "serve", *args], capture_output=True, text=True, timeout=60, env=_env(), check=False
    )


def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """A busy port used to be found only once the server stack was loaded, a key generated and
    printed and the state built (11-12 s on a busy machine): now nothing is said but the refusal."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = _serve_refused("--port", str(port), "--data-dir", str(tmp_path / "data"))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"fleet-sdk serve: error: cannot listen on 127.0.0.1:{port}: the port is already in use"
    ]
    assert not (tmp_path / "data").exists(), "nothing was created for a server that cannot listen"


def test_a_data_dir_another_server_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    """Two servers on one data dir used to both run, writing one SQLite store and one S3 tree."""
    data_dir = tmp_path / "data"
    with serving(tmp_path) as served:
        result = _serve_refused("--port", "0", "--data-dir", str(data_dir))
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"fleet-sdk serve: error: the data dir {data_dir} is in use by another local server "
            f"(pid {served.ready['pid']})"
        ]
        assert result.stdout == ""
    with serving(tmp_path) as again:  # once the first stops, the data dir is free
        assert again.ready["event"] == "ready"


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    data_dir = tmp_path / "file" / "data"
    result = _serve_refused("--port", "0", "--data-dir", str(data_dir))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"fleet-sdk serve: error: cannot use the data dir {data_dir}: Not a directory"
    ]


def test_a_sigkilled_server_leaves_its_data_dir_free(tmp_path: Path) -> None:
    """The lock is the open file's, so it dies with its holder: no stale lock to clean up."""
    argv = [*CLI, "serve", "--port", "0", "--no-s3", "--data-dir", str(tmp_path / "data"), "--quiet"]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(), start_new_session=True
    )
    assert process.stdout is not None
    try:
        assert json.loads(_read_line(process.stdout, timeout=120))["event"] == "ready"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    assert (tmp_path / "data" / "server.lock").exists()
    with serving(tmp_path) as served:
        assert served.ready["event"] == "ready"


def test_version_and_help_show_defaults() -> None:
    version = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.strip() == f"fleet-sdk {__version__}"
    shown = subprocess.run([*CLI, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(shown.stdout.split())
    for expected in (
        "--api-key",
        "--allow-any-key",
        "FLEET_LOCAL_API_KEY",
        "(default: 8765)",
        "(default: 127.0.0.1)",
    ):
        assert expected in text
    shown = subprocess.run([*CLI, "eval", "--help"], capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(shown.stdout.split())
    # A resumed run keeps its own values, so the flags default to None and the help says the default.
    for expected in ("(the k of pass@k; default 1)", "at once (default 4,", "per episode (default 30)"):
        assert expected in text


@pytest.mark.parametrize(
    ("server_key", "authorization", "x_api_key", "detail"),
    [
        ("k", "", True, X_API_KEY_REFUSAL),  # the platform's own answer to X-API-Key
        ("k", "Basic k", False, "missing API key"),
        ("k", "Bearer ", False, "missing API key"),
        ("k", "Bearer k2", False, "invalid API key"),
        ("k", "Bearer K", False, "invalid API key"),
        ("k", "Bearer k", False, None),
        ("k", "bearer  k ", False, None),
        (None, "Bearer anything", False, None),
        (None, "", False, "missing API key"),
    ],
)
def test_auth_refusal(
    server_key: str | None, authorization: str, x_api_key: bool, detail: str | None
) -> None:
    refusal = auth_refusal(authorization, server_key, x_api_key=x_api_key)
    if detail is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.status == 401 and refusal.detail.startswith(detail)


def test_the_401_reads_right_through_the_sdks_redaction(local: LocalFleet) -> None:
    """The SDK's redactor took ``<key>`` and the closing backtick of the hint for a bearer token:
    ``send `Authorization: Bearer <redacted> with this server's key``."""
    wrong_key = "wrong-key-0123456789"
    url = local.base_url
    with (
        Fleet(wrong_key, base_url=url, platform_url=url, environ={}) as fleet,
        pytest.raises(AuthenticationError) as info,
    ):
        fleet.api.control_plane.list_envs()
    assert "send `Authorization: Bearer <key>` with this server's key" in str(info.value)
    assert wrong_key not in str(info.value) and wrong_key not in repr(info.value)
