"""Attacks on the local server over loopback, each followed by a check that it still answers.

Every test plays an attacker: a verifier that walks frames through the keyless manager
endpoint, SQL that never ends, a zip bomb, a 300 MB body without a key, a lone surrogate,
integers past 64 bits, ids with a slash, a huge ``pass_k``, a reset racing a DELETE... and
asserts the refusal (status, ``code``, the field named) and that ``/health`` and a normal
query of an instance still answer afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import sqlite3
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _http import bearer, raw_async_client, raw_client
from _procs import thread_cpu_ticks
from _waits import PATIENCE, wait_until, wait_until_async

from fleet_local import LocalFleet, _episodes
from fleet_local._store import Store
from fleet_local.environments import registry
from fleet_local.sandbox import DENIED_PREFIX, jail_status
from fleet_sdk.protocol import MAX_JSON_DEPTH
from fleet_sdk.reports import Outcome, Source, build_report
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier, score_from_result

MAX_BODY = 8 * 1024 * 1024
RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    """A server of its own, with an 8 MiB body limit."""
    with LocalFleet(max_body_bytes=MAX_BODY) as local:
        yield local


@pytest.fixture
def api(server: LocalFleet) -> Iterator[httpx.Client]:
    """The attacker's plain HTTP client, holding the key (tests drop it where they mean to)."""
    with raw_client(server, timeout=60) as client:
        yield client


@pytest.fixture
def instance_id(api: httpx.Client) -> Iterator[str]:
    response = api.post("/v1/env/instances", json={"env_key": "orderdesk"})
    assert response.status_code == 200, response.text
    created = str(response.json()["instance_id"])
    yield created
    api.delete(f"/v1/env/instances/{created}")


def manager(instance: str) -> str:
    return f"/instances/{instance}/api/v1/env"


def assert_responsive(api: httpx.Client, instance: str) -> None:
    """The server still answers: the instance's health and a normal query."""
    health = api.get(f"{manager(instance)}/health")
    assert health.status_code == 200, health.text
    query = api.post(f"{manager(instance)}/resources/sqlite/current/query", json={"query": "SELECT 1 AS one"})
    assert query.status_code == 200, query.text
    assert query.json()["rows"] == [[1]]


def assert_refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    assert body["retryable"] is False
    return body


def named_fields(response: httpx.Response) -> list[list[Any]]:
    """The ``loc`` of every issue of a 422."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "validation_error" and body["retryable"] is False
    return [issue["loc"] for issue in body["detail"]]


def raw_json(api: httpx.Client, url: str, text: str | bytes | Iterator[bytes]) -> httpx.Response:
    """POST JSON text as written (``json=`` could not carry a lone surrogate or a NaN)."""
    return api.post(url, content=text, headers={"Content-Type": "application/json"})


def verifier_request(code: str, **overrides: Any) -> dict[str, Any]:
    return {
        "key": "attack",
        "sha256": bundle_sha256(code),
        "args": {},
        "function_name": "verify",
        "timeout": 20,
        "bundle": base64.b64encode(bundle_verifier(code)).decode(),
        **overrides,
    }


# ---------------------------------------------------------------- the verifier sandbox


FRAME_WALK = """
import os, sys

def verify(env):
    frame = sys._getframe()
    while frame is not None:
        policy = frame.f_locals.get("policy")
        if policy is not None:
            policy.check = lambda event, args: None
        frame = frame.f_back
    os.system("cat /proc/$PPID/environ > leaked")
    return 1
"""


def test_the_frame_walk_through_the_keyless_manager_endpoint_is_refused(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as keyless:
        response = keyless.post(
            f"{manager(instance_id)}/execute_verifier_function", json=verifier_request(FRAME_WALK)
        )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["success"] is False
    assert result["error"]["type"] == "PermissionError"  # the raised class, as the platform names it
    assert result["error"]["message"].startswith(f"PermissionError: {DENIED_PREFIX}: sys._getframe")
    assert_responsive(api, instance_id)


def test_a_verifier_cannot_read_the_server_state_or_its_key(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    code = (
        "import os\n"
        "def verify(env):\n"
        "    out = {'score': 1, 'env': dict(os.environ)}\n"
        f"    for path in ['/etc/passwd', {str(server.data_dir / 'fleet.db')!r}, '/proc/1/environ']:\n"
        "        try:\n"
        "            out[path] = open(path, 'rb').read(64).decode('latin-1')\n"
        "        except OSError as exc:\n"
        "            out[path] = type(exc).__name__ + ': ' + str(exc)\n"
        "    return out\n"
    )
    response = api.post(f"{manager(instance_id)}/execute_verifier_function", json=verifier_request(code))
    result = response.json()["result"]
    assert server.api_key not in json.dumps(result)
    assert not any(name.startswith(("FLEET", "AWS")) for name in result["env"])
    for path in ("/etc/passwd", str(server.data_dir / "fleet.db")):
        assert result[path].startswith("PermissionError"), result[path]
    assert_responsive(api, instance_id)


def test_a_large_verifier_result_keeps_its_score(api: httpx.Client, instance_id: str) -> None:
    code = "def verify(env):\n    return {'score': 0.5, 'blob': 'x' * (2 * 1024 * 1024)}\n"
    response = api.post(f"{manager(instance_id)}/execute_verifier_function", json=verifier_request(code))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["success"] is True
    assert len(json.dumps(result["result"])) <= 1024 * 1024
    assert score_from_result(result["result"]) == 0.5  # what the SDK reads from a remote run


# ---------------------------------------------------------------- SQL


def test_attach_of_the_server_database_and_fts3_tokenizer_are_refused(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    url = f"{manager(instance_id)}/resources/sqlite/current/query"
    for sql in (
        f"ATTACH DATABASE '{server.data_dir / 'fleet.db'}' AS s",
        "SELECT fts3_tokenizer('simple')",
    ):
        for read_only in (True, False):
            response = api.post(url, json={"query": sql, "read_only": read_only})
            assert response.status_code == 200, response.text
            assert response.json()["success"] is False
            assert "not authorized" in response.json()["error"]
    assert_responsive(api, instance_id)


RUNAWAY_TIMEOUT = 2.0
"""The SQL deadline of the server whose runaway statements are let run out."""


async def test_forty_runaway_queries_do_not_starve_the_server() -> None:
    """Probes sent while forty statements that never end run in SQLite are all answered.

    Regression: the runaways' 12 s deadline used to end this test too, and on a loaded machine
    the first probe was answered 1.5 s after the first runaway had been stopped. Here no deadline
    stops them (the server is killed at the end), so a probe that had to wait for them would
    never be answered.
    """
    async with LocalFleet(query_timeout=3600, s3=False) as server:
        assert server.pid is not None
        limits = httpx.Limits(max_connections=100)
        async with raw_async_client(server, timeout=PATIENCE, limits=limits) as client:
            created = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
            assert created.status_code == 200, created.text
            instance = created.json()["instance_id"]
            url = f"{manager(instance)}/resources/sqlite/current/query"
            before = thread_cpu_ticks(server.pid)
            runaway = [asyncio.ensure_future(client.post(url, json={"query": RUNAWAY})) for _ in range(40)]

            def burning() -> bool:
                """Whether forty of the server's threads (its event loop aside) are busy running SQL."""
                assert server.pid is not None
                now = thread_cpu_ticks(server.pid)
                busy = [t for t, used in now.items() if t != server.pid and used - before.get(t, 0) >= 5]
                return len(busy) >= 40

            await wait_until_async(burning, "the forty runaway statements run in SQLite")
            health = await client.get(f"{manager(instance)}/health")
            envs = await client.get("/v1/env/")
            query = await client.post(url, json={"query": "SELECT count(*) FROM orders"})
            other = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
            for name, response in (("health", health), ("envs", envs), ("query", query), ("create", other)):
                assert response.status_code == 200, (name, response.text)
            assert query.json()["success"] is True
            assert not [task for task in runaway if task.done()], "a runaway statement ended"
            os.kill(server.pid, signal.SIGKILL)  # rather than wait out their deadline
            await asyncio.gather(*runaway, return_exceptions=True)


async def test_runaway_queries_are_stopped_at_the_deadline_and_the_server_answers_after() -> None:
    async with LocalFleet(query_timeout=RUNAWAY_TIMEOUT, s3=False) as server:
        limits = httpx.Limits(max_connections=100)
        async with raw_async_client(server, timeout=PATIENCE, limits=limits) as client:
            created = await client.post("/v1/env/instances", json={"env_key": "orderdesk"})
            assert created.status_code == 200, created.text
            instance = created.json()["instance_id"]
            url = f"{manager(instance)}/resources/sqlite/current/query"
            answers = await asyncio.gather(*(client.post(url, json={"query": RUNAWAY}) for _ in range(40)))
            for answer in answers:
                body = assert_refused(answer, 400, "query_timeout")
                assert f"{RUNAWAY_TIMEOUT:g}s" in body["detail"]
            # A 400 means the statement's worker thread returned: SQL cannot be abandoned while it
            # runs. So the instance answers again, a normal query included.
            health = await client.get(f"{manager(instance)}/health")
            query = await client.post(url, json={"query": "SELECT 1 AS one"})
            assert health.status_code == 200 and query.json()["rows"] == [[1]]


def test_sql_arguments_sqlite_cannot_bind_are_422(api: httpx.Client, instance_id: str) -> None:
    url = f"{manager(instance_id)}/resources/sqlite/current/query"
    huge = raw_json(api, url, b'{"query": "SELECT ?", "args": [1, 99999999999999999999999]}')
    assert named_fields(huge) == [["body", "args", 1]]
    surrogate = raw_json(api, url, b'{"query": "SELECT ?", "args": ["\\ud800"]}')
    assert named_fields(surrogate) == [["body", "args", 0]]
    assert_responsive(api, instance_id)


# ---------------------------------------------------------------- bundles


def zipped(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"verifier.py": b"#" * (64 * 1024 * 1024)}, "bytes uncompressed"),
        (
            {f"f{i}.py": b"" for i in range(65)} | {"verifier.py": b"def verify(env):\n    return 1\n"},
            "files",
        ),
    ],
    ids=["zip-bomb", "many-files"],
)
def test_bundles_are_limited_uncompressed_and_in_file_count(
    api: httpx.Client, instance_id: str, files: dict[str, bytes], why: str
) -> None:
    bundle = zipped(files)
    sha = hashlib.sha256(base64.b64decode(bundle)).hexdigest()
    body = verifier_request("def verify(env):\n    return 1\n", bundle=bundle, sha256=sha)
    response = api.post(f"{manager(instance_id)}/execute_verifier_function", json=body)
    assert why in assert_refused(response, 400, "bad_bundle")["detail"]
    assert_responsive(api, instance_id)


# ---------------------------------------------------------------- request bodies


def raw_post(
    server: LocalFleet, path: str, headers: dict[str, str], body: bytes
) -> tuple[int, dict[str, Any]]:
    """POST over a bare socket, sending only ``body`` whatever Content-Length says; read the answer."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode() + body)
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < _length(reply):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    status = int(reply.split(b" ", 2)[1])
    return status, json.loads(reply.split(b"\r\n\r\n", 1)[1])


def _length(reply: bytes) -> int:
    for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 1


def test_a_300_mb_body_without_a_key_is_refused_before_it_is_read(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    # Only the first kilobyte is ever sent: the answer must not wait for the rest.
    status, body = raw_post(
        server, "/v1/env/instances", {"Content-Length": str(300 * 1024 * 1024)}, b"{" * 1024
    )
    assert status == 401 and body["code"] == "unauthorized"
    assert_responsive(api, instance_id)


def test_a_body_over_the_limit_is_413_even_with_the_key(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    headers = {**bearer(server), "Content-Length": str(300 * 1024 * 1024)}
    status, body = raw_post(server, "/v1/env/instances", headers, b"{" * 1024)
    assert status == 413 and body == {
        "detail": f"request body is larger than the server's limit of {MAX_BODY} bytes",
        "code": "payload_too_large",
        "retryable": False,
    }

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as it streams in
        for _ in range(MAX_BODY // 65536 + 2):
            yield b" " * 65536

    streamed = raw_json(api, "/v1/env/instances", chunks())
    assert_refused(streamed, 413, "payload_too_large")
    assert_responsive(api, instance_id)


def test_a_long_run_id_is_refused_and_never_listed(api: httpx.Client, instance_id: str) -> None:
    assert_refused(
        api.post("/v1/env/instances", json={"env_key": "orderdesk", "run_id": "r" * (50 * 1024 * 1024)}),
        413,
        "payload_too_large",
    )
    response = api.post("/v1/env/instances", json={"env_key": "orderdesk", "run_id": "r" * 256})
    assert named_fields(response) == [["body", "run_id"]]
    listing = api.get("/v1/env/instances")
    assert all(len(item.get("run_id") or "") <= 255 for item in listing.json())
    assert_responsive(api, instance_id)


# ---------------------------------------------------------------- bad values: 422 naming the field


def test_huge_integers_are_422_and_the_heartbeat_still_works(api: httpx.Client, instance_id: str) -> None:
    huge = b'{"env_key": "orderdesk", "ttl_seconds": 99999999999999999999999999}'
    assert named_fields(raw_json(api, "/v1/env/instances", huge)) == [["body", "ttl_seconds"]]
    longest = api.post("/v1/env/instances", json={"env_key": "orderdesk", "ttl_seconds": 2592000})
    assert longest.status_code == 200, longest.text
    created = longest.json()["instance_id"]
    try:
        heartbeat = api.post(f"/v1/env/instances/{created}/heartbeat", json={})
        assert heartbeat.status_code == 200, heartbeat.text
    finally:
        api.delete(f"/v1/env/instances/{created}")
    reset = raw_json(api, f"{manager(instance_id)}/reset", b'{"seed": 99999999999999999999999}')
    assert named_fields(reset) == [["body", "seed"]]
    assert_responsive(api, instance_id)


def ingest_body(**overrides: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": "hello"}],
        "job_id": "job-hostile",
        "task_key": "task-1",
        "model": "m",
        "metadata": {"score": 1.0},
        **overrides,
    }


def test_a_lone_surrogate_and_non_finite_scores_are_422(api: httpx.Client, instance_id: str) -> None:
    text = json.dumps(ingest_body()).replace('"hello"', '"\\ud800"')
    assert named_fields(raw_json(api, "/v1/sessions/ingest", text)) == [["body", "messages", 0, "content"]]
    for token in ("NaN", "Infinity", "-Infinity"):
        text = json.dumps(ingest_body()).replace("1.0", token)
        assert named_fields(raw_json(api, "/v1/sessions/ingest", text)) == [["body", "metadata", "score"]]
    # A key that is a lone surrogate is named, escaped, and the answer still encodes.
    text = json.dumps(ingest_body()).replace('"score"', '"\\udfff": 1, "score"')
    assert named_fields(raw_json(api, "/v1/sessions/ingest", text)) == [["body", "metadata", "\\udfff"]]
    good = api.post("/v1/sessions/ingest", json=ingest_body())
    assert good.status_code == 200
    transcript = api.get(f"/v1/sessions/{good.json()['session_id']}/transcript")
    assert transcript.status_code == 200, transcript.text
    assert_responsive(api, instance_id)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/tasks", {"task_key": "a/b", "prompt": "p", "env_key": "orderdesk"}, "task_key"),
        ("/v1/sessions/ingest", ingest_body(job_id="job/1"), "job_id"),
        ("/v1/sessions/ingest", ingest_body(session_id="s/1"), "session_id"),
        ("/v1/browser", {"ttl_seconds": 60, "lease_id": "a/b"}, "lease_id"),
        ("/v1/browser", {"ttl_seconds": 10**9}, "ttl_seconds"),
        ("/v1/jobs", {"models": ["local/reference"], "pass_k": 20000}, "pass_k"),
        ("/v1/jobs", {"models": ["local/reference"] * 101}, "models"),
    ],
)
def test_slashes_in_ids_and_unbounded_sizes_are_422(
    api: httpx.Client, instance_id: str, path: str, body: dict[str, Any], field: str
) -> None:
    assert named_fields(api.post(path, json=body)) == [["body", field]]
    assert_responsive(api, instance_id)


# ---------------------------------------------------------------- races and replays


async def test_reset_racing_delete_never_answers_500(server: LocalFleet, api: httpx.Client) -> None:
    created = api.post("/v1/env/instances", json={"env_key": "orderdesk"}).json()["instance_id"]
    async with raw_async_client(server, timeout=60) as client:
        resets = [client.post(f"{manager(created)}/reset", json={}) for _ in range(12)]
        deletes = [client.delete(f"/v1/env/instances/{created}") for _ in range(3)]
        answers = await asyncio.gather(*resets[:6], *deletes, *resets[6:])
    assert {a.status_code for a in answers} <= {200, 404, 409}, [
        a.text for a in answers if a.status_code >= 500
    ]
    assert [a.status_code for a in answers[6:9]].count(200) >= 1  # a DELETE went through
    assert api.get(f"/v1/env/instances/{created}").json()["status"] == "terminated"


async def test_snapshot_and_restore_racing_delete_never_answer_500(
    server: LocalFleet, api: httpx.Client
) -> None:
    created = api.post("/v1/env/instances", json={"env_key": "orderdesk"}).json()["instance_id"]
    path = f"/v1/env/instances/{created}"
    assert api.post(f"{path}/snapshot").status_code == 200  # a backup to restore
    headers = {"Authorization": f"Bearer {server.api_key}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as client:
        copies = [client.post(f"{path}/{op}", json={}) for _ in range(6) for op in ("snapshot", "restore")]
        deletes = [client.delete(path) for _ in range(3)]
        answers = await asyncio.gather(*copies[:6], *deletes, *copies[6:])
    assert {a.status_code for a in answers} <= {200, 404}, [a.text for a in answers if a.status_code >= 500]
    assert [a.status_code for a in answers[6:9]].count(200) >= 1  # a DELETE went through
    assert api.get(path).json()["status"] == "terminated"
    # No restore wrote a database behind the terminated instance.
    assert not list(server.data_dir.glob(f"**/{created}/current.db"))


def test_ingest_honours_idempotency_key(api: httpx.Client, instance_id: str) -> None:
    body = ingest_body(job_id=f"job-idem-{os.getpid()}")
    headers = {"Idempotency-Key": f"ingest-{os.getpid()}"}
    answers = [api.post("/v1/sessions/ingest", json=body, headers=headers) for _ in range(5)]
    assert {a.status_code for a in answers} == {200}
    assert len({a.json()["session_id"] for a in answers}) == 1
    sessions = api.get(f"/v1/sessions/job/{body['job_id']}").json()
    assert sessions["total_sessions"] == 1
    other = api.post("/v1/sessions/ingest", json=ingest_body(model="other"), headers=headers)
    assert_refused(other, 409, "idempotency_conflict")
    assert_responsive(api, instance_id)


# ---------------------------------------------------------------- restart and the jail's absence


def test_a_restart_removes_verifier_scratch_dirs(tmp_path: Path) -> None:
    stale = tmp_path / "verifier-scratch" / "fleet-verifier-left-by-kill-9"
    (stale / "work").mkdir(parents=True)
    with LocalFleet(tmp_path, s3=False):
        assert not stale.exists()


def test_a_restart_after_kill_9_releases_the_instances_of_interrupted_sessions(tmp_path: Path) -> None:
    with LocalFleet(tmp_path, s3=False) as local, local.fleet() as fleet:
        created = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
        assert local._process is not None
        local._process.kill()  # kill -9 in the middle of a job that was using the instance
        local._process.wait()
    store = Store(tmp_path / "fleet.db")
    try:
        store.put(_episodes.JOB_KIND, "job-killed", {"id": "job-killed", "status": "running"})
        # Incomplete documents, as a crash or an older server may leave them: the restart must
        # still end the session and release its instance, not stop on a record that no longer
        # validates (the settle pass reads the stored documents, not typed records).
        session = {"session_id": "sess-killed", "status": "running", "instance_id": created.instance_id}
        store.put(_episodes.SESSION_KIND, "sess-killed", session, parent="job-killed")
    finally:
        store.close()
    with LocalFleet(tmp_path, s3=False) as local, local.fleet() as fleet:
        again = fleet.api.control_plane.get_instance(created.instance_id)
        assert again.status == "terminated"
        assert not (tmp_path / "instances" / created.instance_id).exists()


def said(local: LocalFleet, text: str) -> bool:
    """Whether the server said ``text`` on stderr (waited for)."""
    return wait_until(lambda: any(text in line for line in local._stderr), f"the server said {text!r}")


def warned(local: LocalFleet) -> bool:
    """Whether the server said on stderr that the jail is unavailable."""
    return said(local, "verifier OS jail is unavailable")


def test_without_the_jail_the_server_warns_and_refuses_verifiers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    code = "def verify(env):\n    return 1\n"
    bundled = registry()["orderdesk"].tasks[0]["verifier_code"]
    with LocalFleet(s3=False) as local, local.fleet() as fleet:
        created = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
        url = f"{manager(created.instance_id)}/execute_verifier_function"
        with httpx.Client(base_url=local.base_url, timeout=60) as client:
            refused = client.post(url, json=verifier_request(code))
            shipped = client.post(url, json=verifier_request(bundled))
        body = assert_refused(refused, 503, "verifier_jail_unavailable")
        assert "bubblewrap" in body["detail"]
        assert shipped.status_code == 200, shipped.text  # the server's own code: trusted
        assert warned(local), "".join(local._stderr)


def test_without_the_jail_untrusted_code_never_runs_for_a_request_without_the_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--allow-unjailed-verifiers`` let anyone who knew an instance id run code under the
    audit hook alone through the keyless manager route, where it read the server's key and
    killed it. The flag is for trusted code: only requests bearing the key use it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    code = "def verify(env):\n    return 1\n"
    with LocalFleet(s3=False, allow_unjailed=True) as local, local.fleet() as fleet:
        created = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
        url = f"{manager(created.instance_id)}/execute_verifier_function"
        with httpx.Client(base_url=local.base_url, timeout=60) as client:
            keyless = client.post(url, json=verifier_request(code))
            keyed = client.post(url, json=verifier_request(code), headers=bearer(local))
            control = client.post(
                "/v1/verifiers/execute",
                json=verifier_request(code, args={"instance_id": created.instance_id}),
                headers=bearer(local),
            )
        body = assert_refused(keyless, 503, "verifier_jail_unavailable")
        assert "bearing the server's key" in body["detail"]
        for allowed in (keyed, control):
            assert allowed.status_code == 200 and allowed.json()["success"] is True, allowed.text
        assert said(local, "trusted code only"), "".join(local._stderr)


# ---------------------------------------------------------------- the jail's resources


def test_the_server_says_once_what_bounds_a_verifier_run(server: LocalFleet) -> None:
    """Where cgroups are not writable, what is and is not bounded is said at start."""
    assert said(server, "verifier jail (bubblewrap): bounded:"), "".join(server._stderr)
    lines = [line for line in server._stderr if "verifier jail (bubblewrap)" in line]
    assert len(lines) == 1 and "verifier runs at once" in lines[0]
    status = jail_status()
    if status.cgroup_parent is None:
        assert f"No cgroup per run: {status.cgroup_reason}" in lines[0]


def test_a_result_written_around_the_runner_is_not_stored(
    server: LocalFleet, api: httpx.Client, instance_id: str
) -> None:
    """A keyless verifier wrote a 40 MB result straight into its result file (found through its
    descriptors), past the 1 MiB cap; the server stored it. The result pipe is read with a cap."""
    code = (
        "import json, os\n"
        "def verify(env):\n"
        "    blob = json.dumps({'result': 'x' * (40 * 1024 * 1024), 'score': 1.0, 'error': None}).encode()\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            with os.fdopen(fd, 'wb', closefd=False) as channel:\n"
        "                channel.write(blob)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    with httpx.Client(base_url=server.base_url, timeout=60) as keyless:
        response = keyless.post(
            f"{manager(instance_id)}/execute_verifier_function", json=verifier_request(code)
        )
    assert response.status_code == 200, response.text[:500]
    assert len(response.content) < 2 * 1024 * 1024
    result = response.json()
    assert result["success"] is False and result["result"] is None
    assert "wrote a result larger than" in result["error"]["message"]
    assert_responsive(api, instance_id)


def test_runs_beyond_the_concurrency_cap_wait_then_get_503_with_retry_after() -> None:
    """Verifier runs had no server-wide cap. Past ``verifier_concurrency`` a run waits for a
    slot within its timeout, then answers 503 ``verifier_busy`` (nothing ran: safe to resend)."""
    slow = "import time\ndef verify(env):\n    time.sleep(8)\n    return 1\n"
    quick = "def verify(env):\n    return 1\n"
    with LocalFleet(s3=False, verifier_concurrency=1) as local, raw_client(local, timeout=60) as client:
        created = client.post("/v1/env/instances", json={"env_key": "orderdesk"}).json()["instance_id"]
        url = f"{manager(created)}/execute_verifier_function"
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            holder = pool.submit(client.post, url, json=verifier_request(slow))
            busy = None
            while not holder.done():  # bounded: the slow run ends within its 20 s timeout
                answer = client.post(url, json=verifier_request(quick, timeout=1))
                if answer.status_code == 503:
                    busy = answer
                    break
            held = holder.result()
    assert held.status_code == 200 and held.json()["success"] is True, held.text
    assert busy is not None, "the quick run never found the only slot taken"
    body = busy.json()
    assert body["code"] == "verifier_busy" and body["retryable"] is True
    assert busy.headers["Retry-After"] == "1"


# ---------------------------------------------------------------- round 2: bad values, never a 500

SURROGATE_RESULT = 'def verify(env):\n    return {"score": 1.0, "note": "x\\ud800y"}\n'
SURROGATE_ERROR = 'def verify(env):\n    raise ValueError("bad \\udc80 value")\n'


def test_a_lone_surrogate_in_a_verifier_result_or_error_is_stored_as_u_fffd(
    api: httpx.Client, instance_id: str
) -> None:
    """A verifier's result ``{"note": "x\\ud800y"}`` was stored as is: the run itself, and then
    the job's session list and the session's transcript, answered 500 on every read."""
    body = verifier_request(SURROGATE_RESULT, args={"instance_id": instance_id})
    ran = api.post("/v1/verifiers/execute", json=body)
    assert ran.status_code == 200, ran.text
    assert ran.json()["result"] == {"score": 1.0, "note": "x\ufffdy"}
    keyless = api.post(f"{manager(instance_id)}/execute_verifier_function", json=body)
    assert keyless.status_code == 200 and keyless.json()["result"]["note"] == "x\ufffdy"
    failed = api.post(
        f"{manager(instance_id)}/execute_verifier_function", json=verifier_request(SURROGATE_ERROR)
    )
    assert failed.status_code == 200 and failed.json()["success"] is False
    assert "bad \ufffd value" in failed.json()["error"]["message"]
    job = f"job-surrogate-{os.getpid()}"
    ingested = api.post(
        "/v1/sessions/ingest", json=ingest_body(job_id=job, verifier_execution_id=ran.json()["execution_id"])
    )
    assert ingested.status_code == 200, ingested.text
    sessions = api.get(f"/v1/sessions/job/{job}")
    assert sessions.status_code == 200, sessions.text
    transcript = api.get(f"/v1/sessions/{ingested.json()['session_id']}/transcript")
    assert transcript.status_code == 200, transcript.text
    assert transcript.json()["verifier_execution"]["result"]["note"] == "x\ufffdy"
    assert_responsive(api, instance_id)


def test_rows_stored_with_lone_surrogates_before_are_read_back(tmp_path: Path) -> None:
    """Rows written before the store replaced lone surrogates (json.dumps writes them as
    ``\\ud800`` escapes) must still be readable, not a 500 on every read."""
    Store(tmp_path / "fleet.db").close()  # the tables
    execution = {"success": True, "score": 1.0, "result": {"note": "x\ud800y"}, "stdout": "\udfff"}
    session = {
        "session_id": "sess-old",
        "source": "ingest",
        "job_id": "job-old",
        "task_key": "t",
        "model": "m",
        "status": "completed",
        "created_at": "2026-01-01T00:00:00+00:00",
        "step_count": 0,
        "verifier_execution": {**execution, "execution_time_ms": 1, "execution_id": "vexec-old"},
        "metadata": {"score": 1.0},
    }
    with contextlib.closing(sqlite3.connect(tmp_path / "fleet.db")) as db, db:
        db.execute(
            "INSERT INTO docs (kind, id, parent, created, doc) VALUES (?, ?, ?, 0, ?)",
            ("session", "sess-old", "job-old", json.dumps(session)),
        )
        db.execute(
            "INSERT INTO messages (session_id, seq, doc) VALUES ('sess-old', 0, ?)",
            (json.dumps({"role": "user", "content": "hi \ud800"}),),
        )
    with LocalFleet(tmp_path, s3=False) as local, raw_client(local) as client:
        listed = client.get("/v1/sessions/job/job-old")
        assert listed.status_code == 200, listed.text
        transcript = client.get("/v1/sessions/sess-old/transcript")
        assert transcript.status_code == 200, transcript.text
        assert transcript.json()["verifier_execution"]["result"] == {"note": "x\ufffdy"}
        assert transcript.json()["transcript"] == [{"role": "user", "content": "hi \ufffd"}]


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deep_json_is_422_on_every_route(server: LocalFleet, api: httpx.Client, instance_id: str) -> None:
    """A body nested 50,000 levels deep made /v1/evaluation_reports answer 500 (RecursionError
    in the JSON parser); nesting is now bounded before any route, whatever the route."""
    routes = [
        "/v1/evaluation_reports",
        "/v1/sessions/ingest",
        "/v1/env/instances",
        "/v1/jobs",
        f"{manager(instance_id)}/reset",
        f"{manager(instance_id)}/resources/sqlite/current/query",
        f"/instances/{instance_id}/mcp",
        "/v1/not-a-route",
    ]
    with httpx.Client(base_url=server.base_url, timeout=60) as keyless:
        for path in routes:
            client = keyless if path.startswith("/instances/") else api
            for depth in (50_000, MAX_JSON_DEPTH + 1):
                response = raw_json(client, path, deep_json(depth))
                assert response.status_code == 422, (path, depth, response.text)
                assert response.json()["detail"][0]["loc"][0] == "body"
    # Within the bound, free-form JSON is fine; one level more is named where it got too deep.
    metadata: dict[str, Any] = {"score": 1.0}
    inner = metadata
    for _ in range(MAX_JSON_DEPTH - 2):  # the body, metadata, then objects to the deepest level
        inner["x"] = {}
        inner = inner["x"]
    assert api.post("/v1/sessions/ingest", json=ingest_body(metadata=metadata)).status_code == 200
    inner["x"] = {}
    refused = api.post("/v1/sessions/ingest", json=ingest_body(metadata=metadata))
    assert named_fields(refused) == [["body", "metadata", *["x"] * (MAX_JSON_DEPTH - 1)]]
    assert_responsive(api, instance_id)


def test_a_json_body_sent_as_text_plain_is_422_on_every_route_that_reads_one(
    api: httpx.Client, instance_id: str
) -> None:
    """Ingest answered 500 (``'NoneType' object is not subscriptable``) to a JSON body sent as
    ``text/plain``: the request gate leaves a body it cannot read as JSON undecoded, and the
    route read it as if it had been checked. Every such route now answers 422 naming the body,
    as the routes with a FastAPI body parameter always did; reports keep their documented 415."""
    as_text = {"Content-Type": "text/plain"}
    for path, body in (
        ("/v1/sessions/ingest", ingest_body()),
        ("/v1/env/instances", {"env_key": "orderdesk"}),
        (f"{manager(instance_id)}/resources/sqlite/current/query", {"query": "SELECT 1"}),
    ):
        refused = api.post(path, content=json.dumps(body), headers=as_text)
        assert named_fields(refused) == [["body"]], (path, refused.text)
    report = api.post("/v1/evaluation_reports", content=b"{}", headers=as_text)
    assert report.status_code == 415 and report.json()["code"] == "unsupported_media_type"


def test_a_report_whose_summaries_contradict_its_results_is_422_naming_the_field(api: httpx.Client) -> None:
    """An imported report whose ``report`` summary said what its own ``results`` did not was
    stored and rendered as it came."""
    outcomes = [
        Outcome(task_key=f"t{i}", model="m", status="passed" if i % 2 else "failed", score=float(i % 2))
        for i in range(4)
    ]
    honest = build_report(
        run_id=f"forged-{os.getpid()}",
        source=Source(kind="client"),
        suite_name="s",
        task_keys=[f"t{i}" for i in range(4)],
        models=["m"],
        k=1,
        outcomes=outcomes,
    ).to_dict()
    forged = json.loads(json.dumps(honest))
    forged["report"]["models"][0]["passed"] = 4
    forged["report"]["models"][0]["failed"] = 0
    forged["report"]["models"][0]["pass_rate"] = 1.0
    refused = api.post("/v1/evaluation_reports", json=forged)
    assert named_fields(refused) == [["body", "report", "models", 0, "passed"]]
    assert "results give 2, not 4" in refused.json()["detail"][0]["msg"]
    flipped = json.loads(json.dumps(honest))
    flipped["report"]["results"][0].update(status="passed", score=1.0)
    assert named_fields(api.post("/v1/evaluation_reports", json=flipped))[0][:3] == [
        "body",
        "report",
        "models",
    ]
    # A k the results cannot fill is refused before anything is rebuilt from it.
    huge_k = json.loads(json.dumps(honest))
    huge_k["report"]["k"] = huge_k["suite"]["k"] = 10**12
    assert named_fields(api.post("/v1/evaluation_reports", json=huge_k)) == [["body", "report", "results"]]
    assert api.get(f"/v1/evaluation_reports/{honest['run_id']}").status_code == 404  # none was stored
    assert api.post("/v1/evaluation_reports", json=honest).status_code == 201
