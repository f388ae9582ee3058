"""A client of ``LocalFleet`` never reaches past loopback: every surface, screenshots included.

While these tests run, any connection (or name lookup) to a non-loopback address fails, in
this process and in every Python child it starts (the local server): a ``sitecustomize`` on
``PYTHONPATH`` installs the same guard there and logs each refusal. AWS credentials are set,
so an uploader that fell back to the production bucket would try to connect (and be logged)
rather than stop early at ``NoCredentialsError``.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_local.demo import run_demo
from fleet_sdk.task_env import TaskEnv
from fleet_sdk.tasks import Task

GUARD = """
import errno
import ipaddress
import os
import socket

LOG = os.environ.get("FLEET_TEST_NETWORK_GUARD_LOG", "")


def _loopback(host):
    if isinstance(host, bytes):
        host = host.decode()
    if host is None or host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(what):
    with open(LOG, "a") as log:
        log.write(f"refused {what} in pid {os.getpid()}\\n")
    raise OSError(errno.ENETUNREACH, f"network guard: {what} is not loopback")


def guarded(real_connect, real_connect_ex, real_getaddrinfo):
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            _refuse(f"connect {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            _refuse(f"connect {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            _refuse(f"lookup {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    return connect, connect_ex, getaddrinfo


def install():
    connect, connect_ex, getaddrinfo = guarded(
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo
    )
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.getaddrinfo = getaddrinfo
    with open(LOG, "a") as log:
        log.write(f"installed in pid {os.getpid()}\\n")
"""

SITECUSTOMIZE = """
import os

if os.environ.get("FLEET_TEST_NETWORK_GUARD_LOG"):
    import fleet_test_network_guard

    fleet_test_network_guard.install()
"""

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 13


@pytest.fixture
def guard_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The guard in this process and its Python children; yields the refusal log."""
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "fleet_test_network_guard.py").write_text(GUARD)
    (guard_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "network-guard.log"
    log.touch()
    monkeypatch.setenv("FLEET_TEST_NETWORK_GUARD_LOG", str(log))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(guard_dir), os.environ.get("PYTHONPATH")]))
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, f"fake-{name.lower()}")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location(
        "fleet_test_network_guard", guard_dir / "fleet_test_network_guard.py"
    )
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    connect, connect_ex, getaddrinfo = module.guarded(
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo
    )
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield log


def _refusals(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("refused")]


def test_the_guard_refuses_a_non_loopback_connection_here_and_in_children(guard_log: Path) -> None:
    """The guard itself works, or the tests below would prove nothing."""
    with pytest.raises(OSError, match="network guard"):
        socket.create_connection(("fleet-sessions-images.s3.us-east-1.amazonaws.com", 443), timeout=1)
    with socket.socket() as raw, pytest.raises(OSError, match="network guard"):
        raw.connect(("192.0.2.1", 443))  # TEST-NET-1, never routed
    assert _refusals(guard_log) == [
        f"refused lookup 'fleet-sessions-images.s3.us-east-1.amazonaws.com' in pid {os.getpid()}",
        f"refused connect ('192.0.2.1', 443) in pid {os.getpid()}",
    ]
    guard_log.write_text("")
    import subprocess

    child = "import socket; socket.create_connection(('192.0.2.1', 443), timeout=1)"
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "network guard" in result.stderr
    assert len(_refusals(guard_log)) == 1


def _history(image: bytes) -> list[dict[str, Any]]:
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    return [
        {"role": "user", "content": "Open the orders page."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "computer", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}]},
    ]


def _image_urls(transcript: list[Any]) -> list[str]:
    return [
        block.image_url.url
        for message in transcript
        if isinstance(message.content, list)
        for block in message.content
        if block.type == "image_url"
    ]


def _assert_served(urls: list[str], local: LocalFleet, image: bytes) -> None:
    assert urls, "the transcript holds no image"
    for url in urls:
        assert local.s3_url is not None and url.startswith(f"{local.s3_url}/fleet-sessions-images/")
        assert url.startswith("http://127.0.0.1:")
        fetched = httpx.get(url, trust_env=False)  # anonymously, as the trace viewer does
        assert fetched.status_code == 200 and fetched.content == image


async def test_demo_trace_uploads_and_task_env_stay_on_loopback(guard_log: Path, tmp_path: Path) -> None:
    demo_out = io.StringIO()
    assert await run_demo(out_dir=tmp_path / "demo", random_episodes=1, limit=2, out=demo_out) == 0, (
        demo_out.getvalue()
    )

    async with LocalFleet() as local:
        # Sync client: an upload with a screenshot goes to the local endpoint and reads back.
        sync_image = PNG + uuid.uuid4().bytes
        with local.fleet() as fleet:
            job_id = fleet.traces.create_job("no production")
            session_id = fleet.traces.upload_session(
                job_id=job_id, task_key="t", model="m", chat_history=_history(sync_image), reward=1.0
            )
            assert session_id is not None
            transcript = fleet.api.sessions.get_session_transcript(session_id).transcript
        _assert_served(_image_urls(transcript), local, sync_image)

        # Async client, through with_options (a copy must keep the store), driving a TaskEnv.
        afleet = local.async_fleet().with_options(deadline=120)
        try:
            task = Task.model_validate(
                (await afleet.api.control_plane.list_tasks(env_key="orderdesk")).tasks[0].model_dump()
            )
            episode_image = PNG + uuid.uuid4().bytes
            env = TaskEnv(task, fleet=afleet, max_steps=5, trace_job_id=job_id, trace_model="local/test")
            async with env:
                await env.reset_async()
                await env.step_async({"tool": "list_orders", "params": {}})
                # The bundled environments have no screen: record one as a computer-use harness would.
                for message in _history(episode_image)[1:]:
                    env.context.add_message(message)
                await env.step_async({"done": True})
            assert env.trace_session_id is not None
            episode = await afleet.api.sessions.get_session_transcript(env.trace_session_id)
        finally:
            await afleet.close()
        _assert_served(_image_urls(episode.transcript), local, episode_image)

    installed = [line for line in guard_log.read_text().splitlines() if line.startswith("installed")]
    assert len({line.rsplit(" ", 1)[1] for line in installed}) >= 2, "the guard did not run in the servers"
    assert _refusals(guard_log) == []


async def test_base_url_and_key_alone_keep_an_episode_with_traces_and_screenshots_local(
    guard_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client given only ``base_url`` and the key, as a user of ``fleet-sdk serve`` writes it.

    Regression: ``AsyncFleet(base_url=<local>, api_key=...)`` sent ``traces.create_job`` to the
    production platform host and screenshots to the production bucket (with whatever AWS
    credentials the environment held); a user had to find ``platform_url``, ``browser_url`` and
    a ``ScreenshotStore`` with the server's S3 URL and key in the code. Now the platform and browser
    URLs are the base URL, and the bucket is the one the server names at ``GET /v1/discovery``.
    """
    for name in ("FLEET_BASE_URL", "FLEET_API_KEY", "FLEET_PLATFORM_URL", "BROWSER_API_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    from fleet_sdk import AsyncFleet, Fleet
    from fleet_sdk.traces import DiscoveredScreenshotStore

    async with LocalFleet() as local:
        with Fleet(base_url=local.base_url, api_key=local.api_key) as fleet:
            assert (fleet.config.platform_url, fleet.config.browser_url) == (local.base_url, local.base_url)
            job_id = fleet.traces.create_job("only base_url")
            sync_image = PNG + uuid.uuid4().bytes
            session_id = fleet.traces.upload_session(
                job_id=job_id, task_key="t", model="m", chat_history=_history(sync_image), reward=1.0
            )
            assert session_id is not None
            transcript = fleet.api.sessions.get_session_transcript(session_id).transcript
            store = fleet.traces.screenshot_store
            assert isinstance(store, DiscoveredScreenshotStore) and store.resolve() is not None
        _assert_served(_image_urls(transcript), local, sync_image)

        afleet = AsyncFleet(base_url=local.base_url, api_key=local.api_key)
        try:
            task = (await afleet.tasks.list(env_key="orderdesk"))[0]
            episode_image = PNG + uuid.uuid4().bytes
            env = TaskEnv(task, fleet=afleet, max_steps=5, trace_job_id=job_id, trace_model="local/test")
            async with env:
                await env.reset_async()
                await env.step_async({"tool": "list_orders", "params": {}})
                for message in _history(episode_image)[1:]:
                    env.context.add_message(message)
                await env.step_async({"done": True})
            assert env.trace_session_id is not None
            episode = await afleet.api.sessions.get_session_transcript(env.trace_session_id)
        finally:
            await afleet.close()
        _assert_served(_image_urls(episode.transcript), local, episode_image)
    assert _refusals(guard_log) == []
