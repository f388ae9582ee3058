"""``LocalFleet``: the local server as a child process, for tests, scripts and the demo.

It starts ``python -m fleet_local serve`` (the same command line as ``fleet-sdk serve``, the one
interface to the server process) on a free loopback port, waits for the ready line ``serve``
prints (``_server.py``), and hands out clients whose every surface points at it. The server runs
in a process group of its own that dies with this process (``sandbox/_process_groups.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from fleet_sdk import ConfigurationError, FleetError

from ._server import API_KEY_ENV, MODEL_API_KEY_ENV, READY_EVENT, jail_notice
from .sandbox._process_groups import end_idle_watchdog, guard_group, release_group

if TYPE_CHECKING:
    from fleet_sdk import AsyncFleet, Fleet
    from fleet_sdk.traces import ScreenshotSink

S3_ACCESS_KEY_ID = "fleet-local"
"""Access key id of the local S3 endpoint's credentials (any works; the secret is the API key)."""


_jail_told = threading.Event()  # set once the notice is given: at most once per process
_jail_told_lock = threading.Lock()


def _tell_about_jail(allow_unjailed: bool) -> None:
    """Say once per process, on stderr, that verifiers run without the OS jail here (if they do)."""
    notice = jail_notice(allow_unjailed=allow_unjailed, opt_in="LocalFleet(allow_unjailed=True)")
    with _jail_told_lock:
        if notice is None or _jail_told.is_set():
            return
        _jail_told.set()
    sys.stderr.write(f"fleet_local: {notice}\n")
    sys.stderr.flush()


class LocalFleet:
    """A local Fleet server in a child process, for tests, scripts and the demo.

    ``with LocalFleet() as local:`` starts the server on a free loopback port and
    stops it (and everything it started) on exit. The clients it hands out
    (``fleet()``, ``async_fleet()``) send every surface to it, screenshots included
    (``screenshot_store()``), never to production.

    Where the verifier OS jail cannot start (no bubblewrap), it says so once per process on
    stderr; the bundled tasks' own verifiers then run under the audit hook alone, and any other
    verifier (an imported task's, a bundle a client sends) is refused unless ``allow_unjailed``.

    Args:
        data_dir: State directory; a temporary one (deleted on stop) when None. One server at
            a time may use a data dir: a second one fails to start, naming the first's pid.
        api_key: The bearer key the server requires (also the secret of its S3
            endpoint); random when None.
        faults: Enable the fault-injection admin API.
        s3: Start the S3-compatible screenshot endpoint.
        allow_unjailed: Run every verifier under the audit hook alone where the OS jail cannot
            start (``fleet-sdk serve --allow-unjailed-verifiers``), not only the bundled ones.
        verifier_timeout: Default wall-clock seconds of a verifier run.
        verifier_memory_mb: Address-space limit of a verifier process.
        verifier_scratch_mb: Size of a jailed verifier's scratch tmpfs, and of its ``/tmp``.
        verifier_concurrency: Verifier runs at once (default: 2 per core, as memory allows).
        job_concurrency: Sessions a job runs at once.
        job_browser_concurrency: Browser leases (a Chromium each) a job holds at once.
        instance_browsers: Instances whose ``cdp`` resource may hold a browser at once.
        max_browsers: Browser leases live at once, server-wide (429 beyond).
        model_base_url: OpenAI-compatible chat-completions URL for the jobs' model policies.
        model_api_key: Key for ``model_base_url`` (handed over in the environment, never argv).
        instance_ttl_seconds: Default TTL of an instance.
        reaper_interval: Seconds between two passes of the TTL reaper.
        mcp_session_idle_timeout: Seconds an idle MCP session lives.
        query_timeout: Seconds one SQL request may take.
        query_concurrency: SQL statements run at once.
        max_body_bytes: The largest request body accepted on a route that needs the key (413 beyond).
        max_keyless_body_bytes: The largest request body accepted on a route that needs none (the
            instance manager API, MCP).
        retention_seconds: Seconds finished records (terminated instances, verifier executions,
            finished sessions and their transcripts, jobs, ended leases) and the files that go
            with them are kept once they stopped changing; None keeps them for ever.
        startup_timeout: Seconds to wait for the server to be ready.

    Every setting left None keeps the server's default (``LocalSettings``, ``fleet-sdk serve
    --help``).

    Attributes:
        base_url: Where every surface is served, e.g. ``http://127.0.0.1:43121``.
        s3_url: The S3-compatible endpoint, or None.
        api_key: The bearer key to use.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        api_key: str | None = None,
        faults: bool = False,
        s3: bool = True,
        allow_unjailed: bool = False,
        verifier_timeout: float | None = None,
        verifier_memory_mb: int | None = None,
        verifier_scratch_mb: int | None = None,
        verifier_concurrency: int | None = None,
        job_concurrency: int | None = None,
        job_browser_concurrency: int | None = None,
        instance_browsers: int | None = None,
        max_browsers: int | None = None,
        model_base_url: str | None = None,
        model_api_key: str | None = None,
        instance_ttl_seconds: int | None = None,
        reaper_interval: float | None = None,
        mcp_session_idle_timeout: float | None = None,
        query_timeout: float | None = None,
        query_concurrency: int | None = None,
        max_body_bytes: int | None = None,
        max_keyless_body_bytes: int | None = None,
        retention_seconds: float | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self._temp_dir = None if data_dir is not None else tempfile.mkdtemp(prefix="fleet-local-")
        self.data_dir = Path(data_dir if data_dir is not None else self._temp_dir or "")
        self.api_key = api_key or f"local-{secrets.token_urlsafe(24)}"
        self._allow_unjailed = allow_unjailed
        self._model_api_key = model_api_key
        self._startup_timeout = startup_timeout
        # The command line of ``fleet-sdk serve`` is the one interface to the server process.
        self._flags: dict[str, object] = {
            "enable_faults": faults,
            "no_s3": not s3,
            "allow_unjailed_verifiers": allow_unjailed,
            "verifier_timeout": verifier_timeout,
            "verifier_memory_mb": verifier_memory_mb,
            "verifier_scratch_mb": verifier_scratch_mb,
            "verifier_concurrency": verifier_concurrency,
            "job_concurrency": job_concurrency,
            "job_browser_concurrency": job_browser_concurrency,
            "instance_browsers": instance_browsers,
            "max_browsers": max_browsers,
            "model_base_url": model_base_url,
            "instance_ttl_seconds": instance_ttl_seconds,
            "reaper_interval": reaper_interval,
            "mcp_session_idle_timeout": mcp_session_idle_timeout,
            "query_timeout": query_timeout,
            "query_concurrency": query_concurrency,
            "max_body_bytes": max_body_bytes,
            "max_keyless_body_bytes": max_keyless_body_bytes,
            "retention_seconds": retention_seconds,
        }
        self._process: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self.base_url = ""
        self.s3_url: str | None = None

    def __repr__(self) -> str:
        return f"LocalFleet(base_url={self.base_url!r}, data_dir={str(self.data_dir)!r})"

    @property
    def pid(self) -> int | None:
        """The server's process id while running."""
        return self._process.pid if self._process is not None else None

    def start(self) -> LocalFleet:
        """Start the server and wait until it is ready; returns self.

        Raises:
            FleetError: The server exited (its stderr's last lines say why: a data dir another
                server holds...) or was not ready within ``startup_timeout``.
        """
        if self._process is not None:
            return self
        argv = [
            sys.executable,
            "-P",  # not the cwd first on sys.path: a checkout there would shadow this package
            "-m",
            "fleet_local",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--port",
            "0",
        ]
        for name, value in self._flags.items():
            flag = f"--{name.replace('_', '-')}"
            if isinstance(value, bool):  # store_true flags take no value
                argv += [flag] if value else []
            elif value is not None:
                argv += [flag, str(value)]
        env = {**os.environ, API_KEY_ENV: self.api_key, "PYTHONUNBUFFERED": "1"}
        if self._model_api_key is not None:
            env[MODEL_API_KEY_ENV] = self._model_api_key
        # The jail probe (a jailed interpreter, ~0.1-1 s) runs while the server starts.
        probe = threading.Thread(target=_tell_about_jail, args=(self._allow_unjailed,), daemon=True)
        probe.start()
        self._process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        # Should this process die without stop() (SIGKILL, a crash), the server dies with it, and
        # its own guard then ends its browsers and verifier runs.
        guard_group(self._process.pid)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        ready = self._wait_ready()
        self.base_url, self.s3_url = ready["url"], ready.get("s3_url")
        probe.join()  # bounded: the probe has a timeout of its own
        return self

    def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def _wait_ready(self) -> dict[str, Any]:
        assert self._process is not None and self._process.stdout is not None
        result: dict[str, Any] = {}
        stdout = self._process.stdout

        def read() -> None:
            for line in stdout:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict) and event.get("event") == READY_EVENT:
                        result.update(event)
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self._startup_timeout)
        if not result:
            code = self._process.poll()
            self.stop()
            tail = "".join(self._stderr[-30:])
            state = f"exited with {code}" if code is not None else f"not ready after {self._startup_timeout}s"
            raise FleetError(f"local server {state}:\n{tail}")
        # Keep draining stdout so a chatty server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in stdout], daemon=True).start()
        return result

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and every process it started; remove a temporary data dir."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
        if process is not None:
            # Whatever the server left in its own group (the Playwright driver) ends here; its
            # browsers and verifier runs, in groups of their own, were ended by the server.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)
            release_group(process.pid)
            end_idle_watchdog()  # else it lives on until the script exits
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalFleet:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> LocalFleet:
        import anyio

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.stop)

    def _require_running(self) -> None:
        if not self.base_url:
            raise ConfigurationError("LocalFleet is not started: use `with LocalFleet() as local:`")

    def fleet(self, **kwargs: Any) -> Fleet:
        """A ``Fleet`` client whose every surface points at this server.

        Args:
            **kwargs: Passed to ``Fleet`` (``timeout``, ``retry``...).
        """
        from fleet_sdk import Fleet

        return Fleet(**{**self._client_settings(), **kwargs})

    def async_fleet(self, **kwargs: Any) -> AsyncFleet:
        """An ``AsyncFleet`` client whose every surface points at this server.

        Args:
            **kwargs: Passed to ``AsyncFleet``.
        """
        from fleet_sdk import AsyncFleet

        return AsyncFleet(**{**self._client_settings(), **kwargs})

    def _client_settings(self) -> dict[str, Any]:
        """Every surface of a client on this server: one process serves all URLs and screenshots.

        ``environ={}``: no ``FLEET_*`` variable of the caller's may move a surface elsewhere.
        """
        self._require_running()
        return {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "platform_url": self.base_url,
            "browser_url": self.base_url,
            "browser_api_key": self.api_key,
            "screenshot_store": self.screenshot_store(),
            "environ": {},
        }

    def screenshot_store(self) -> ScreenshotSink:
        """A screenshot store on this server's S3 endpoint, signed with its key.

        Objects are read back at ``<s3_url>/fleet-sessions-images/<key>``. A server started
        with ``s3=False`` gets a store that refuses every upload (screenshots keep their
        data URLs), never the production bucket.
        """
        from fleet_sdk.traces import ScreenshotStore

        self._require_running()
        if self.s3_url is None:
            return _NoScreenshotStore()
        return ScreenshotStore.for_endpoint(
            self.s3_url, aws_access_key_id=S3_ACCESS_KEY_ID, aws_secret_access_key=self.api_key
        )

    def inject_fault(
        self,
        path: str,
        *,
        mode: str = "status",
        status: int = 503,
        count: int = 1,
        method: str = "*",
        delay: float = 30.0,
        body: Mapping[str, Any] | None = None,
        when: str = "before",
    ) -> None:
        """Make the next ``count`` requests to ``path`` fail (server started with ``faults=True``).

        Args:
            path: Exact path or glob, e.g. ``/v1/env/instances`` or ``/instances/*/mcp*``.
            mode: ``status`` (answer ``status``), ``hang`` (wait ``delay`` then 504), ``drop`` (close).
            status: HTTP status for ``status`` mode (400-599).
            count: Number of requests to fail.
            method: HTTP method to match, or ``*``.
            delay: Seconds to hang.
            body: The JSON error body to answer in ``status`` mode, in any shape a real server
                sends (default: ``{"detail": ..., "code": "injected_fault", "retryable": true}``).
            when: ``before`` the request is handled, or ``after`` it was handled for real and
                its answer thrown away (a lost response).

        Raises:
            FleetError: The server refused the rule (faults off, or a bad field, named).
        """
        self._require_running()
        rule: dict[str, Any] = {
            "path": path,
            "mode": mode,
            "status": status,
            "count": count,
            "method": method,
            "delay": delay,
            "when": when,
        }
        if body is not None:
            rule["body"] = dict(body)
        self._admin("POST", json=rule)

    def fired_faults(self) -> list[tuple[str, str, str]]:
        """Every fault fired so far, oldest first, as ``(method, path, mode)``."""
        self._require_running()
        return [(m, p, mode) for m, p, mode in self._admin("GET")["fired"]]

    def clear_faults(self) -> None:
        """Disarm all faults."""
        self._require_running()
        self._admin("DELETE")

    def live_objects(self) -> dict[str, list[str]]:
        """The ids of the live instances, browser leases and open MCP sessions (``instances``,
        ``leases``, ``mcp_sessions``): what clients have left on the server. Needs ``faults=True``."""
        self._require_running()
        result: dict[str, list[str]] = self._admin("GET", path="/_admin/state")
        return result

    def _admin(self, method: str, path: str = "/_admin/faults", **kwargs: Any) -> Any:
        """One call to the fault admin API, with the server's key."""
        headers = {"Authorization": f"Bearer {self.api_key}"}
        url = f"{self.base_url}{path}"
        response = httpx.request(method, url, headers=headers, timeout=10, **kwargs)
        if response.status_code != 200:
            raise FleetError(f"fault admin API refused {method} ({response.status_code}): {response.text}")
        return response.json()


class _NoScreenshotStore:
    """The screenshot store of a local server without S3: every upload fails, nothing leaves."""

    def __repr__(self) -> str:
        return "_NoScreenshotStore()"

    def upload(self, key: str, data: bytes, mime: str) -> str:
        """Refuse (the server was started with ``s3=False``).

        Args:
            key: Object key.
            data: The image bytes.
            mime: The image MIME type.
        """
        raise ConfigurationError("the local server runs without its S3 endpoint (s3=False)")
