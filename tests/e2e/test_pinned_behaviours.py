"""Behaviours that were present but only ever checked by hand, each pinned by a test.

A report imported with one key and read with another is a 404; a remote verifier whose
``execution_id`` comes back empty is logged (its trace cannot be linked); a platform evaluation's
poll stops at its deadline while the job still runs; screenshots upload with AWS credentials
found only in the environment; ``list_tools`` recovers from a 5xx.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import httpx
import pytest
from _serve import serving

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, EvaluationTimeoutError, RetryPolicy
from fleet_sdk.evaluation import evaluate_job
from fleet_sdk.mcp import MCPClient
from fleet_sdk.remote_verifier import run_remote
from fleet_sdk.reports import Outcome, Source, build_report
from fleet_sdk.traces import DEFAULT_BUCKET, ScreenshotStore

FAST = RetryPolicy(max_retries=3, backoff_base=0.05, backoff_max=0.2)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 13


def test_a_report_imported_with_one_key_is_404_with_another(tmp_path: Path) -> None:
    """Reports are scoped to the key that imported them (``--allow-any-key`` accepts both keys)."""
    envelope = build_report(
        run_id="scoped-1",
        source=Source(kind="client"),
        suite_name="suite",
        task_keys=["t1"],
        models=["local/scripted"],
        k=1,
        outcomes=[Outcome(task_key="t1", model="local/scripted", sample=0, status="passed", score=1.0)],
    )
    with serving(tmp_path, "--allow-any-key") as (ready, _):
        url = f"{ready['url']}/v1/evaluation_reports"

        def as_key(key: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {key}"}

        assert httpx.post(url, json=envelope.to_dict(), headers=as_key("owner-key")).status_code == 201
        assert httpx.get(f"{url}/scoped-1", headers=as_key("owner-key")).status_code == 200
        other = httpx.get(f"{url}/scoped-1", headers=as_key("another-key"))
        assert other.status_code == 404 and other.json()["code"] == "not_found"
        # The other key may import the same run id as its own report: no conflict across keys.
        assert httpx.post(url, json=envelope.to_dict(), headers=as_key("another-key")).status_code == 201


async def test_an_empty_execution_id_is_logged(local: LocalFleet, caplog: pytest.LogCaptureFixture) -> None:
    """The server's answer, with its ``execution_id`` blanked on the way back (a platform that
    answered so left every trace of a run unlinked, and nobody saw it)."""
    real = httpx.AsyncClient()

    async def blank_execution_id(request: httpx.Request) -> httpx.Response:
        answer = await real.send(request)
        body = await answer.aread()
        if request.url.path == "/v1/verifiers/execute" and answer.status_code == 200:
            body = json.dumps({**json.loads(body), "execution_id": ""}).encode()
        headers = [
            (k, v)
            for k, v in answer.headers.items()
            if k.lower() not in ("content-length", "content-encoding")
        ]
        return httpx.Response(answer.status_code, headers=headers, content=body)

    proxy = httpx.AsyncClient(transport=httpx.MockTransport(blank_execution_id))
    afleet = AsyncFleet(base_url=local.base_url, api_key=local.api_key, http_client=proxy, environ={})
    try:
        async with await afleet.make("orderdesk") as env:
            with caplog.at_level(logging.WARNING, logger="fleet_sdk.verifiers"):
                outcome = await run_remote(
                    afleet, "def verify(env):\n    return 1\n", key="no-id", instance_id=env.instance_id
                )
    finally:
        await afleet.close()
        await proxy.aclose()
        await real.aclose()
    assert outcome.score == 1.0 and not outcome.execution_id
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "verifier no-id returned no execution_id; its trace cannot be linked" in warnings


async def test_a_platform_evaluation_stops_polling_at_its_deadline(
    faulty_server: LocalFleet, faulty_afleet: AsyncFleet
) -> None:
    """The job's one instance hangs at creation, so the job runs on past the deadline; the poll
    loop (not the check before it) ends in ``EvaluationTimeoutError``."""
    faulty_server.inject_fault("/v1/env/instances", method="POST", mode="hang", delay=10, count=1)
    polls: list[object] = []
    with pytest.raises(EvaluationTimeoutError, match=r"still (pending|running)"):
        await evaluate_job(
            faulty_afleet,
            models=["local/scripted"],
            task_keys=["orderdesk-count-pending-orders"],
            deadline=1.5,
            poll_interval=0.1,
            on_progress=polls.append,
        )
    assert polls, "the deadline passed before the first poll: the poll loop was never cancelled"


def test_screenshots_upload_with_aws_credentials_only_in_the_environment(
    local: LocalFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No credential argument: boto3's chain finds the environment's, and they sign the upload."""
    assert local.s3_url is not None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", local.api_key)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    def store() -> ScreenshotStore:
        return ScreenshotStore(
            endpoint_url=local.s3_url,
            public_url_base=f"{local.s3_url}/{DEFAULT_BUCKET}",
            addressing_style="path",
        )

    data = PNG + uuid.uuid4().bytes
    url = store().upload(f"harness/screenshot/env-{uuid.uuid4().hex[:12]}.png", data, "image/png")
    assert httpx.get(url, trust_env=False).content == data
    # The environment's secret is what signed it: a wrong one is refused.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-key")
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match=r"403|Forbidden|SignatureDoesNotMatch|AccessDenied"):
        store().upload(f"harness/screenshot/env-{uuid.uuid4().hex[:12]}.png", data, "image/png")


async def test_list_tools_recovers_from_a_5xx(faulty_server: LocalFleet, faulty_afleet: AsyncFleet) -> None:
    async with await faulty_afleet.make("orderdesk") as env, httpx.AsyncClient() as http:
        client = MCPClient(env.mcp.endpoints, http_client=http, retry=FAST)
        before = len(faulty_server.fired_faults())
        faulty_server.inject_fault(f"/instances/{env.instance_id}/mcp", method="POST", status=503, count=1)
        tools = await client.list_tools()
        assert "list_orders" in {tool.name for tool in tools}
        assert len(faulty_server.fired_faults()) == before + 1
        await client.aclose()
