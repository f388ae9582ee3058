"""What the public Fleet SDK (``fleet-python``) really sends and reads, answered as production does.

``test_public_sdk.py`` shows its calls succeed; this file holds the behaviours that went wrong
once the server was driven the way its users drive it, one test per behaviour, each checking the
values the public SDK ends up with (see docs/wire-fidelity.md for how each was established):

* tasks carry their verifier, so ``load_tasks`` fills ``Task.verifier_sha`` and the task tooling
  keeps the verifier;
* ``complete_session`` sends a timestamp without a zone, which is read as UTC;
* ``Session.log`` posts raw history to ``/v1/traces/logs``;
* a create repeated with the same ``X-Request-ID`` answers 409 ``duplicate_request_id``, and
  the SDK's transport retry ends with the original instance;
* unknown environments, versions and regions are 400s the SDK turns into its typed errors;
* ``env.mcp.list_tools()`` posts a bare ``tools/list`` without a session;
* instances have ``action_log`` and ``cdp`` resources, tasks filter by ``team_id``, and the task
  tooling's seed and file-set URLs work.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3

# The public SDK is a pinned dev dependency (fleet-python): missing, the suite fails, never skips.
import fleet
import httpx
import pytest
from examples.task_bundle_editing import download_task, upload_task
from fleet.exceptions import FleetEnvironmentNotFoundError, FleetRegionError, FleetVersionNotFoundError

from fleet_local import LocalFleet

ENV_KEY = "orderdesk"
TASK_KEY = "orderdesk-count-pending-orders"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    # Faults on: the create-retry test makes the server lose one answer.
    with LocalFleet(api_key=f"public-sdk-{uuid.uuid4().hex[:8]}", faults=True) as local:
        yield local


@pytest.fixture()
def raw(server: LocalFleet) -> Iterator[httpx.Client]:
    """Our own view of the server, to check what the public SDK reports."""
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30
    ) as client:
        yield client


def public(server: LocalFleet, max_retries: int = 0) -> fleet.Fleet:
    return fleet.Fleet(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries, timeout=60)


def test_tasks_carry_their_verifier(server: LocalFleet, raw: httpx.Client) -> None:
    """Regression: ``TaskResponse.verifier`` was always null, so ``load_tasks`` left
    ``Task.verifier_sha`` empty and the download tool wrote task bundles without a verifier."""
    client = public(server)
    ours = {t["task_key"]: t for t in raw.get("/v1/tasks", params={"env_key": ENV_KEY}).json()["tasks"]}
    tasks = client.load_tasks(env_key=ENV_KEY)
    assert {t.key for t in tasks} == set(ours)
    for task in tasks:
        stored = ours[task.key]["verifier"]
        assert task.verifier_sha == stored["sha256"] and len(stored["sha256"]) == 64
        assert task.verifier_id == stored["verifier_id"] == ours[task.key]["verifier_id"]
        assert task.verifier_func == stored["code"] == ours[task.key]["verifier_code"]
        assert task.verifier is not None and task.verifier.key == task.key
    fetched = client.get_task(TASK_KEY)
    assert fetched.verifier is not None and fetched.verifier.code == ours[TASK_KEY]["verifier_code"]
    assert raw.get(f"/v1/verifiers/{fetched.verifier.verifier_id}").json()["code"] == fetched.verifier.code

    # The task tooling's download keeps the verifier, and a task read as JSON keeps its sha.
    bundle = download_task.to_bundle_json(fetched.model_dump())
    assert bundle["verifier"] == {"code": ours[TASK_KEY]["verifier_code"]}
    from_file = client.load_task_from_json(ours[TASK_KEY])
    assert (from_file.verifier_sha, from_file.verifier_func) == (
        fetched.verifier.sha256,
        fetched.verifier.code,
    )


def test_complete_session_with_a_timestamp_without_a_zone(server: LocalFleet, raw: httpx.Client) -> None:
    """Regression: ``complete_session`` sends ``datetime.now().isoformat()``; the 422 it got left
    every session of the public SDK ``running``."""
    client = public(server)
    job_id = client.trace_job("zone-less")
    started = client.create_session(
        model="m", task_key=TASK_KEY, job_id=job_id, started_at="2025-02-03T04:05:06"
    )
    before = dt.datetime.now()
    done = client.complete_session(started.session_id)
    assert (done.success, done.session_id, done.created_new_session) == (True, started.session_id, False)
    (session,) = client.list_job_sessions(job_id).tasks[0].sessions
    assert session.status == "completed"
    assert session.started_at is not None and dt.datetime.fromisoformat(session.started_at) == dt.datetime(
        2025, 2, 3, 4, 5, 6, tzinfo=dt.UTC
    )
    assert session.ended_at is not None
    ended = dt.datetime.fromisoformat(session.ended_at)
    assert ended.tzinfo is not None and ended.replace(tzinfo=None) >= before.replace(microsecond=0)


def test_session_log_in_the_model_apis_own_shapes(server: LocalFleet) -> None:
    """Regression: ``Session.log(history, response)`` got 422 asking for the Gemini shape and a
    ``job_id``; it sends whatever the model API uses and leaves normalization to the server."""
    client = public(server)
    job_id = client.trace_job("session-log")
    session = client.start_session(
        job_id=job_id, model="openai/gpt-x", task_key=TASK_KEY, config={"temperature": 0}
    )
    history: list[Any] = [
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": "How many orders are pending?"},
    ]
    completion = {
        "id": "chatcmpl-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "list_orders", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
    }
    first = session.log(history, completion)
    assert first.created_new_session and first.message_count == 3 and session.session_id == first.session_id
    history += [completion["choices"][0]["message"], {"role": "tool", "tool_call_id": "c1", "content": "[]"}]
    assert session.log(history, "None are pending.").message_count == 5  # only the new messages are sent
    # A Gemini agent's history (``Content.model_dump()``), logged into the same session; the
    # SDK sends only what follows the messages and the answer it logged before.
    history.append({"role": "assistant", "content": "None are pending."})
    gemini_user = {"role": "user", "parts": [{"text": "Thanks!", "inline_data": None, "function_call": None}]}
    gemini_answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Welcome."}]}}]}
    assert session.log([*history, gemini_user], gemini_answer).message_count == 7
    session.complete()

    transcript = client.get_session_transcript(session.session_id)
    assert [(m.role, m.content) for m in transcript.transcript] == [
        ("system", "You help with orders."),
        ("user", "How many orders are pending?"),
        ("assistant", None),
        ("tool", "[]"),
        ("assistant", "None are pending."),
        ("user", [{"type": "text", "text": "Thanks!"}]),
        ("assistant", [{"type": "text", "text": "Welcome."}]),
    ]
    assert transcript.transcript[2].tool_calls == completion["choices"][0]["message"]["tool_calls"]
    (summary,) = client.list_job_sessions(job_id).tasks[0].sessions
    assert (summary.session_id, summary.status, summary.model) == (session.session_id, "completed", "gpt-x")


def test_a_create_repeated_with_one_request_id_makes_one_instance(
    server: LocalFleet, raw: httpx.Client
) -> None:
    """Regression: two POSTs with one ``X-Request-ID`` made two instances. Production answers the
    repeat 409 ``duplicate_request_id``, and the public SDK's transport retry (after a lost
    answer) ends with the instance the first attempt made."""
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    body = {"env_key": ENV_KEY, "run_id": run_id}
    headers = {"X-Request-ID": str(uuid.uuid4())}
    first = raw.post("/v1/env/instances", json=body, headers=headers)
    repeat = raw.post("/v1/env/instances", json=body, headers=headers)
    assert first.status_code == 200 and repeat.status_code == 409
    detail = repeat.json()["detail"]
    assert (detail["error"], detail["instance_id"]) == ("duplicate_request_id", first.json()["instance_id"])
    assert [i["instance_id"] for i in raw.get("/v1/env/instances", params={"run_id": run_id}).json()] == [
        detail["instance_id"]
    ]

    # The server makes the instance, then its answer is lost (a 503): the SDK sends the create
    # again with the same X-Request-ID, gets the 409 and recovers the original.
    retried = f"run-{uuid.uuid4().hex[:8]}"
    fired = len(server.fired_faults())
    server.inject_fault("/v1/env/instances", method="POST", status=503, when="after")
    env = public(server, max_retries=2).make(ENV_KEY, run_id=retried)
    assert len(server.fired_faults()) == fired + 1
    made = raw.get("/v1/env/instances", params={"run_id": retried}).json()
    assert [i["instance_id"] for i in made] == [env.instance_id] and env.status == "running"
    env.close()
    raw.delete("/v1/env/instances/batch", params={"run_id": run_id})


def test_unknown_env_version_and_region_are_the_public_sdks_typed_errors(server: LocalFleet) -> None:
    """Regression: unknown env / version answered 404, which the public SDK retried four times
    (about 3 s) before an untyped error; an unsupported region was accepted."""
    client = public(server, max_retries=3)  # its default: a 404 would be retried
    began = time.monotonic()
    with pytest.raises(FleetEnvironmentNotFoundError) as env_error:
        client.make("no-such-env")
    assert env_error.value.env_key == "no-such-env"
    with pytest.raises(FleetVersionNotFoundError) as version_error:
        client.make(f"{ENV_KEY}:9.9.9")
    assert (version_error.value.version, version_error.value.env_key) == ("v9.9.9", ENV_KEY)
    with pytest.raises(FleetRegionError) as region_error:
        client.make(ENV_KEY, region="mars-1")
    assert region_error.value.region == "mars-1"
    assert region_error.value.supported_regions == client.list_regions()
    assert time.monotonic() - began < 2.0  # refused at once: no retry of a permanent error
    env = client.make(ENV_KEY, region=client.list_regions()[-1])  # a listed region is accepted
    assert env.region == client.list_regions()[-1]
    env.close()


async def test_mcp_without_a_session(server: LocalFleet) -> None:
    """Regression: ``env.mcp.list_tools()`` posts a bare ``tools/list`` (no ``initialize``, no
    session); the server answered 400 ``Missing session ID`` and the SDK returned ``[]``."""
    client = fleet.AsyncFleet(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    env = await client.make(ENV_KEY)
    try:
        tools = await env.mcp.list_tools()
        assert {"get_order", "list_orders", "add_order_note"} <= {t["name"] for t in tools}
        assert all(t["input_schema"]["type"] == "object" and t["description"] for t in tools)
        assert env.mcp.openai()["server_url"] == env.mcp.url == f"{env.urls.root}mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no_such_tool"}}
            refused = (await http.post(env.mcp.url, json=call)).json()
        assert refused["error"]["code"] == -32602  # an unknown tool, as the 2025-11-25 revision says
    finally:
        await env.close()


async def test_instance_resources(
    server: LocalFleet, raw: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: no ``cdp`` resource (``env.browser()`` raised ``KeyError: 'cdp'``), no
    ``action_log`` database, 404 for the task tooling's seed and file-set URLs, and
    ``load_tasks(team_id=...)`` ignored the filter."""
    from playwright.async_api import async_playwright

    client = fleet.AsyncFleet(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    env = await client.make(ENV_KEY)
    try:
        resources = {(r.resource.name, r.resource.type.value) for r in await env.resources()}
        assert {("action_log", "sqlite"), ("cdp", "cdp")} <= resources
        async with httpx.AsyncClient(timeout=30) as http:
            call = {"method": "tools/call", "params": {"name": "get_order", "arguments": {"order_id": 1012}}}
            await http.post(env.mcp.url, json={"jsonrpc": "2.0", "id": 1, **call})
        logged = await env.db("action_log").query("SELECT action_type, path, args FROM action_log")
        assert logged.rows == [["tool_call", "get_order", '{"order_id": 1012}']]

        browser = env.browser()
        cdp_url = await browser.cdp_url()
        assert cdp_url.startswith(server.base_url)
        async with async_playwright() as playwright:
            # The local server's CDP needs the key the SDK was made with (docs/threat-model.md).
            key = {"Authorization": f"Bearer {server.api_key}"}
            connected = await playwright.chromium.connect_over_cdp(cdp_url, headers=key)
            page = connected.contexts[0].pages[0]
            assert page.url == env.urls.root  # the instance's web UI
            await connected.close()
        assert (await browser.start(width=800, height=600)).cdp_browser_url == cdp_url
    finally:
        await env.close()
    lease = raw.get(f"/v1/browser/lease_{env.instance_id}").json()
    assert lease["status"] == "terminated"  # the browser died with the instance

    account = await client.account()
    assert len(await client.load_tasks(team_id=account.team_id)) == raw.get("/v1/tasks").json()["total"]
    assert await client.load_tasks(team_id=f"not-{account.team_id}") == []

    # The task tooling's data files: upload a seed archive, download it back, read a file set.
    monkeypatch.setenv("FLEET_BASE_URL", server.base_url)
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("seed data")
    data_key = f"data-{uuid.uuid4().hex[:8]}"
    uploaded = upload_task.upload_seed_tar(server.api_key, ENV_KEY, "v1.0.0", files, data_key)
    assert (uploaded["version"], uploaded["data_key"]) == ("v1", data_key)
    out = tmp_path / "out"
    assert download_task.download_seed_tar(
        server.api_key, {"data_id": data_key, "environment_id": ENV_KEY}, out
    )
    assert (out / "notes.txt").read_text() == "seed data"
    assert not download_task.download_file_set(server.api_key, {"key": "no-such-set"}, tmp_path / "none")
    s3 = boto3.client(  # a file set is put on the server's S3 endpoint by any client with its key
        "s3",
        endpoint_url=server.s3_url,
        region_name="us-east-1",
        aws_access_key_id="any",
        aws_secret_access_key=server.api_key,
    )
    set_key = f"set-{uuid.uuid4().hex[:8]}"
    s3.put_object(Bucket="fleet-task-data", Key=f"file-sets/{set_key}/a/b.json", Body=b'{"b": 1}')
    task = {"key": "t", "env_variables": {"TASK_KEY": set_key}}
    assert download_task.download_file_set(server.api_key, task, tmp_path / "set")
    assert json.loads((tmp_path / "set" / "a" / "b.json").read_text()) == {"b": 1}
