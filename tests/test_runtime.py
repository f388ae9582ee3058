"""The HTTP runtime: retries only when safe, deadlines, typed errors, auth,
request ids and redaction, for the sync and the async client alike."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC
from typing import Any

import httpx
import pydantic
import pytest

import fleet_sdk
from fleet_sdk import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    AsyncHTTPClient,
    AuthenticationError,
    BadRequestError,
    CallPolicy,
    ConflictError,
    EnvNotFoundError,
    HTTPClient,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RetryPolicy,
    Timeout,
    UnprocessableEntityError,
)
from fleet_sdk._runtime import _async, _sync

SECRET = "sk-live-0123456789abcdef"
BASE = "https://orchestrator.fleetai.com"

Handler = Callable[[httpx.Request], httpx.Response]


class Item(pydantic.BaseModel):
    id: str
    n: int


class Recorder:
    """A scripted server: answers the queued responses in order, records requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        # A fresh response each time: a response object is bound to one client's stream type.
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


@pytest.fixture(autouse=True)
def fast_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record backoff waits instead of sleeping."""
    waits: list[float] = []

    async def fake_async_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(_sync.time, "sleep", waits.append)
    monkeypatch.setattr(_async.anyio, "sleep", fake_async_sleep)
    return waits


def make_client(
    handler: Handler,
    *,
    is_async: bool,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    **kwargs: Any,
) -> HTTPClient | AsyncHTTPClient:
    kwargs.setdefault("api_key", SECRET)
    retry = retry or RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.05)
    kwargs["policy"] = CallPolicy(timeout=timeout, retry=retry)
    transport = httpx.MockTransport(handler)
    if is_async:
        return AsyncHTTPClient(BASE, http_client=httpx.AsyncClient(transport=transport), **kwargs)
    return HTTPClient(BASE, http_client=httpx.Client(transport=transport), **kwargs)


async def call(client: HTTPClient | AsyncHTTPClient, method: str, path: str = "/v1/items", **kw: Any) -> Any:
    """Run one request through either client, returning the raw response."""
    kw.setdefault("cast_to", Item)
    if isinstance(client, AsyncHTTPClient):
        return await client.request_raw(method, path, **kw)
    return client.request_raw(method, path, **kw)


ok = httpx.Response(200, json={"id": "a", "n": 1})


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        code, json=body if body is not None else {"detail": f"status {code}"}, headers=headers
    )


both = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


# -- retry rules -----------------------------------------------------------------------------


@both
async def test_post_without_idempotency_key_is_not_retried_after_503(is_async: bool) -> None:
    server = Recorder(status(503), ok)
    client = make_client(server, is_async=is_async)
    with pytest.raises(InternalServerError) as info:
        await call(client, "POST", body={"x": 1})
    assert info.value.status_code == 503
    assert len(server.requests) == 1


@both
async def test_post_with_idempotency_key_is_retried_with_the_same_key(is_async: bool) -> None:
    server = Recorder(status(503), ok)
    client = make_client(server, is_async=is_async)
    raw = await call(client, "POST", body={"x": 1}, options={"idempotency_key": "key-1"})
    assert raw.parse() == Item(id="a", n=1)
    assert raw.retries_taken == 1
    assert [r.headers["Idempotency-Key"] for r in server.requests] == ["key-1", "key-1"]
    assert [r.content for r in server.requests] == [b'{"x":1}', b'{"x":1}']


@both
@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE"])
@pytest.mark.parametrize("code", [408, 429, 502, 503, 504])
async def test_idempotent_methods_retry_transient_statuses(is_async: bool, method: str, code: int) -> None:
    server = Recorder(status(code), status(code), ok)
    client = make_client(server, is_async=is_async)
    raw = await call(client, method)
    assert raw.status_code == 200
    assert raw.retries_taken == 2
    assert len(server.requests) == 3


@both
@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 422, 500, 501])
async def test_non_transient_statuses_are_not_retried(is_async: bool, code: int) -> None:
    server = Recorder(status(code), ok)
    client = make_client(server, is_async=is_async)
    with pytest.raises(fleet_sdk.APIStatusError):
        await call(client, "GET")
    assert len(server.requests) == 1


@both
async def test_get_is_retried_after_connect_error_and_timeout(is_async: bool) -> None:
    server = Recorder(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ok)
    client = make_client(server, is_async=is_async)
    raw = await call(client, "GET")
    assert raw.retries_taken == 2


@both
async def test_unsupported_protocol_is_not_retried(is_async: bool) -> None:
    server = Recorder(httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'"), ok)
    client = make_client(server, is_async=is_async)
    with pytest.raises(APIConnectionError, match="unsupported protocol"):
        await call(client, "GET")
    assert len(server.requests) == 1


@both
async def test_post_connect_error_is_not_retried(is_async: bool) -> None:
    server = Recorder(httpx.ConnectError("refused"), ok)
    client = make_client(server, is_async=is_async)
    with pytest.raises(APIConnectionError) as info:
        await call(client, "POST", body={})
    assert not isinstance(info.value, APITimeoutError)
    assert len(server.requests) == 1


@both
async def test_timeouts_raise_api_timeout_error_after_retries(is_async: bool) -> None:
    server = Recorder(httpx.ReadTimeout("slow"))
    client = make_client(server, is_async=is_async, retry=RetryPolicy(max_retries=2, backoff_base=0.01))
    with pytest.raises(APITimeoutError):
        await call(client, "GET")
    assert len(server.requests) == 3


@both
async def test_retries_stop_at_max_retries(is_async: bool) -> None:
    server = Recorder(status(503))
    client = make_client(server, is_async=is_async)
    with pytest.raises(InternalServerError):
        await call(client, "GET", options={"max_retries": 1})
    assert len(server.requests) == 2


@both
async def test_backoff_grows_exponentially_with_jitter(is_async: bool, fast_sleep: list[float]) -> None:
    server = Recorder(status(503))
    policy = RetryPolicy(max_retries=4, backoff_base=1.0, backoff_max=100.0)
    client = make_client(server, is_async=is_async, retry=policy)
    with pytest.raises(InternalServerError):
        await call(client, "GET")
    assert len(fast_sleep) == 4
    for n, wait in enumerate(fast_sleep, start=1):
        ceiling = 2.0 ** (n - 1)
        assert ceiling / 2 <= wait <= ceiling


@both
async def test_retry_after_is_honoured_and_capped(is_async: bool, fast_sleep: list[float]) -> None:
    server = Recorder(
        status(429, headers={"Retry-After": "2"}), status(503, headers={"Retry-After": "999"}), ok
    )
    policy = RetryPolicy(max_retries=3, backoff_base=0.01, retry_after_cap=5.0)
    client = make_client(server, is_async=is_async, retry=policy)
    raw = await call(client, "GET")
    assert raw.retries_taken == 2
    assert fast_sleep == [2.0, 5.0]


@both
async def test_deadline_stops_retries(is_async: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that advances by each wait, so the deadline is exercised without real sleeping.
    clock = [1000.0]
    monkeypatch.setattr("fleet_sdk._runtime._policy.time.monotonic", lambda: clock[0])

    def advance(seconds: float) -> None:
        clock[0] += seconds

    async def advance_async(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(_sync.time, "sleep", advance)
    monkeypatch.setattr(_async.anyio, "sleep", advance_async)
    server = Recorder(status(503))
    policy = RetryPolicy(max_retries=50, backoff_base=1.0, backoff_max=1.0)
    client = make_client(server, is_async=is_async, retry=policy)
    with pytest.raises(InternalServerError):
        await call(client, "GET", options={"deadline": 5.0})
    assert clock[0] - 1000.0 <= 5.0
    assert 4 <= len(server.requests) <= 11  # waits of 0.5-1.0 s inside 5 s, never 51 attempts


@both
async def test_attempt_timeout_never_exceeds_time_left_and_connect_is_separate(is_async: bool) -> None:
    server = Recorder(ok)
    client = make_client(server, is_async=is_async, timeout=Timeout(total=60.0, connect=3.0))
    await call(client, "GET", options={"deadline": 10.0})
    timeout = server.requests[0].extensions["timeout"]
    assert timeout["connect"] == 3.0
    assert 9.0 < timeout["read"] <= 10.0


# -- errors ----------------------------------------------------------------------------------


@both
@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (500, InternalServerError),
        (503, InternalServerError),
    ],
)
async def test_error_class_is_chosen_by_status(is_async: bool, code: int, cls: type[Exception]) -> None:
    body = {"detail": "nope", "code": "some_code", "retryable": False}
    client = make_client(Recorder(status(code, body)), is_async=is_async)
    with pytest.raises(cls) as info:
        await call(client, "POST", options={"max_retries": 0})
    error = info.value
    assert type(error) is cls
    assert isinstance(error, fleet_sdk.APIStatusError)
    assert error.status_code == code
    assert error.body == body
    assert error.code == "some_code"
    assert error.retryable is False
    assert uuid.UUID(error.request_id or "").version == 4


@both
async def test_structured_body_code_refines_the_class_not_the_message(is_async: bool) -> None:
    by_code = status(404, {"detail": "whatever text", "code": "env_not_found"})
    client = make_client(Recorder(by_code), is_async=is_async)
    with pytest.raises(EnvNotFoundError):
        await call(client, "GET")
    # The same words in the message without the code do not change the class.
    by_text = status(404, {"detail": "env_key not found: env_not_found"})
    client = make_client(Recorder(by_text), is_async=is_async)
    with pytest.raises(NotFoundError) as info:
        await call(client, "GET")
    assert type(info.value) is NotFoundError


@both
async def test_validation_error_names_the_field(is_async: bool) -> None:
    body = {"detail": [{"loc": ["body", "env_key"], "msg": "Field required", "type": "missing"}]}
    client = make_client(Recorder(status(422, body)), is_async=is_async)
    with pytest.raises(UnprocessableEntityError) as info:
        await call(client, "POST")
    assert "env_key" in str(info.value)


@both
async def test_non_json_error_body_is_kept_as_text(is_async: bool) -> None:
    client = make_client(Recorder(httpx.Response(502, text="<html>Bad Gateway</html>")), is_async=is_async)
    with pytest.raises(InternalServerError) as info:
        await call(client, "POST")
    assert info.value.body == "<html>Bad Gateway</html>"
    assert info.value.code is None


@both
async def test_non_json_success_raises_response_validation_error(is_async: bool) -> None:
    page = httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"})
    client = make_client(Recorder(page), is_async=is_async)
    raw = await call(client, "GET")
    with pytest.raises(APIResponseValidationError) as info:
        raw.parse()
    assert "expected JSON" in str(info.value)
    assert "text/html" in str(info.value)


@both
async def test_wrong_shape_names_the_bad_field(is_async: bool) -> None:
    client = make_client(Recorder(httpx.Response(200, json={"id": "a", "n": "many"})), is_async=is_async)
    raw = await call(client, "GET")
    with pytest.raises(APIResponseValidationError) as info:
        raw.parse()
    assert "n:" in str(info.value)


@both
async def test_list_and_none_casts(is_async: bool) -> None:
    server = Recorder(
        httpx.Response(200, json=[{"id": "a", "n": 1}, {"id": "b", "n": 2}]), httpx.Response(204)
    )
    client = make_client(server, is_async=is_async)
    raw = await call(client, "GET", cast_to=list[Item])
    assert [item.id for item in raw.parse()] == ["a", "b"]
    raw = await call(client, "DELETE", cast_to=type(None))
    assert raw.parse() is None


# -- headers, ids, secrets -------------------------------------------------------------------


@both
async def test_bearer_auth_and_request_id_stable_across_retries(is_async: bool) -> None:
    server = Recorder(status(503), status(502), ok)
    client = make_client(server, is_async=is_async)
    raw = await call(client, "GET")
    ids = {r.headers["X-Request-ID"] for r in server.requests}
    assert len(server.requests) == 3
    assert len(ids) == 1
    assert raw.request_id in ids
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert all("X-API-Key" not in r.headers for r in server.requests)
    await call(client, "GET")
    assert server.requests[-1].headers["X-Request-ID"] not in ids


@both
async def test_no_auth_header_without_a_key(is_async: bool) -> None:
    server = Recorder(ok)
    client = make_client(
        server, is_async=is_async, api_key=None, default_headers={"X-Runner-Token": "tok-123456"}
    )
    await call(client, "GET")
    assert "Authorization" not in server.requests[0].headers
    assert server.requests[0].headers["X-Runner-Token"] == "tok-123456"


@both
async def test_path_params_are_quoted_and_none_query_dropped(is_async: bool) -> None:
    server = Recorder(ok)
    client = make_client(server, is_async=is_async)
    await call(
        client,
        "GET",
        "/v1/tasks/{task_key}",
        path_params={"task_key": "a/b c"},
        params={"env_key": "fira", "project_key": None, "task_keys": ["x", "y"]},
    )
    url = server.requests[0].url
    assert url.raw_path == b"/v1/tasks/a%2Fb%20c?env_key=fira&task_keys=x&task_keys=y"


@both
async def test_pydantic_body_omits_unset_fields_and_keeps_explicit_null(is_async: bool) -> None:
    class Req(pydantic.BaseModel):
        env_key: str
        region: str | None = None
        score: float | None = None

    server = Recorder(ok)
    client = make_client(server, is_async=is_async)
    await call(client, "POST", body=Req(env_key="fira"))
    assert server.requests[0].content == b'{"env_key":"fira"}'
    await call(client, "POST", body=Req(env_key="fira", score=None))
    assert server.requests[1].content == b'{"env_key":"fira","score":null}'


@both
async def test_secrets_never_in_repr_or_error_text(is_async: bool, caplog: pytest.LogCaptureFixture) -> None:
    # A server that echoes the Authorization header back in its error body.
    def echo(request: httpx.Request) -> httpx.Response:
        return status(503, {"detail": f"bad header {request.headers['Authorization']} / {SECRET}"})

    client = make_client(echo, is_async=is_async)
    assert SECRET not in repr(client)
    assert "<redacted>" in repr(client)
    caplog.set_level(logging.DEBUG, logger="fleet_sdk")
    with pytest.raises(InternalServerError) as info:
        await call(client, "GET", options={"max_retries": 1})
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)
    assert "Bearer <redacted>" in str(info.value)
    assert caplog.records, "a retry must be logged"
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_with_options_shares_the_pool_and_overrides() -> None:
    server = Recorder(status(503))
    base = make_client(server, is_async=False)
    assert isinstance(base, HTTPClient)
    quick = base.with_options(retry=RetryPolicy(max_retries=0))
    assert quick._client is base._client
    with pytest.raises(InternalServerError):
        quick.request("GET", "/v1/items", cast_to=Item)
    assert len(server.requests) == 1
    assert base.retry.max_retries == 3


def test_retry_after_http_date() -> None:
    from datetime import datetime, timedelta
    from email.utils import format_datetime

    from fleet_sdk._runtime._policy import parse_retry_after

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    wait = parse_retry_after(httpx.Response(503, headers={"Retry-After": when}))
    assert wait is not None and 25 <= wait <= 31
    assert parse_retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) is None
