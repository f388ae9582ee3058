"""``fleet_sdk._retry.call_with_retries``: the one retry loop above the runtime, and its users' rules."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from fleet_sdk._retry import Deadline, RetryPolicy, call_with_retries
from fleet_sdk.policies import ChatCompletionsPolicy, ModelEndpoint, PolicyContext, PolicyError
from fleet_sdk.tasks import Task

NO_WAIT = RetryPolicy(max_retries=3, backoff_base=0.0, backoff_max=0.0)
log = logging.getLogger("fleet_sdk.test")


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://127.0.0.1:9/v1/x")


async def test_transient_failures_are_retried_until_success(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise httpx.ConnectError("refused", request=_request())
        return "ok"

    caplog.set_level(logging.WARNING, logger="fleet_sdk")
    result = await call_with_retries(flaky, what="flaky work", policy=NO_WAIT, deadline=Deadline(10), log=log)
    assert (result, calls) == ("ok", 3)
    retries = [r.getMessage() for r in caplog.records if "flaky work failed" in r.getMessage()]
    assert len(retries) == 2 and "retry 2/3" in retries[1]


async def test_a_permanent_failure_is_raised_at_once() -> None:
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("a bug, not a blip")

    with pytest.raises(ValueError, match="a bug"):
        await call_with_retries(broken, what="work", policy=NO_WAIT, deadline=Deadline(10), log=log)
    assert calls == 1


async def test_retries_stop_when_used_up_and_the_last_error_is_raised() -> None:
    calls = 0

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise httpx.ReadTimeout(f"attempt {calls}", request=_request())

    with pytest.raises(httpx.ReadTimeout, match="attempt 4"):
        await call_with_retries(down, what="work", policy=NO_WAIT, deadline=Deadline(10), log=log)
    assert calls == NO_WAIT.max_retries + 1


async def test_no_wait_runs_past_the_deadline() -> None:
    calls = 0
    patient = RetryPolicy(max_retries=10, backoff_base=5.0, backoff_max=5.0)

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused", request=_request())

    with pytest.raises(httpx.ConnectError):
        await call_with_retries(down, what="work", policy=patient, deadline=Deadline(1.0), log=log)
    assert calls == 1  # the first backoff (>= 2.5 s) would already end past the deadline


def _model_policy(replies: list[httpx.Response], seen: list[httpx.Request]) -> ChatCompletionsPolicy:
    task = Task(task_key="t", prompt="p", env_key="orderdesk")
    context = PolicyContext(episode_id="s", task=task, tools=(), max_steps=3)
    endpoint = ModelEndpoint("http://127.0.0.1:9/v1")
    policy = ChatCompletionsPolicy(context, model="openai/test", endpoint=endpoint, timeout=5.0)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies.pop(0)

    policy._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return policy


ANSWER: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}


async def test_model_policy_retries_a_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fleet_sdk.policies._MODEL_RETRY", NO_WAIT)
    seen: list[httpx.Request] = []
    policy = _model_policy(
        [httpx.Response(500, text="upstream hiccup"), httpx.Response(200, json=ANSWER)], seen
    )
    turn = await policy.next_turn([{"role": "user", "content": "hi"}])
    await policy.aclose()
    assert turn.content == "done" and len(seen) == 2


async def test_model_policy_does_not_retry_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fleet_sdk.policies._MODEL_RETRY", NO_WAIT)
    seen: list[httpx.Request] = []
    refusal = httpx.Response(400, json={"error": {"message": "bad tool schema"}})
    policy = _model_policy([refusal, httpx.Response(200, json=ANSWER)], seen)
    with pytest.raises(PolicyError, match="answered 400"):
        await policy.next_turn([{"role": "user", "content": "hi"}])
    await policy.aclose()
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("status", "body", "transient"),
    [
        (503, "busy", True),
        (500, '{"detail": "placement failed", "retryable": true}', True),  # the body's flag decides
        (503, '{"retryable": false}', False),
        (400, "bad request", False),
    ],
)
def test_mcp_reads_transience_with_the_one_classifier(status: int, body: str, transient: bool) -> None:
    from fleet_sdk._retry import is_transient_reply
    from fleet_sdk.mcp import MCPTransportError

    error = MCPTransportError(
        f"HTTP {status} from http://127.0.0.1:9/mcp: {body}", sent=True, status_code=status
    )
    assert error.transient is transient
    assert is_transient_reply(status, body) is transient
