"""The one retry classifier: the structured ``retryable`` flag and ``code`` are read wherever
an orchestrator puts them, an explicit ``false`` is final, and each known transient message
(``TRANSIENT_MESSAGES``) is pinned by a case here."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fleet_sdk import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    CallPolicy,
    EnvNotFoundError,
    HTTPClient,
    InternalServerError,
    RetryPolicy,
)
from fleet_sdk._exceptions import read_error_body
from fleet_sdk._provisioning import is_transient_provisioning_error
from fleet_sdk._runtime import TRANSIENT_MESSAGES, is_transient

PLACEMENT = {"error": "seed_placement_failed", "message": "no host with the seed", "retryable": True}
# How the production orchestrator forwards a driver's error: verbatim JSON after a prefix.
FORWARDED = "Failed to create instance: DriverAPIError: Driver API returned 400: " + json.dumps(
    {"detail": PLACEMENT}
)


class Replies:
    """A transport answering a fixed list of responses, recording each request."""

    def __init__(self, *replies: httpx.Response) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.replies.pop(0)


def client(replies: Replies) -> HTTPClient:
    return HTTPClient(
        "https://orchestrator.fleetai.com",
        api_key="k",
        policy=CallPolicy(retry=RetryPolicy(max_retries=3, backoff_base=0.001, backoff_max=0.002)),
        http_client=httpx.Client(transport=httpx.MockTransport(replies)),
    )


def status_error(code: int, body: Any) -> APIStatusError:
    """The error the runtime raises for this answer (a POST without a key: never retried)."""
    answer = httpx.Response(code, content=body) if isinstance(body, str) else httpx.Response(code, json=body)
    with pytest.raises(APIStatusError) as raised:
        client(Replies(answer)).request("POST", "/v1/env/instances", cast_to=dict)
    return raised.value


# -- where the flag is found ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "retryable", "where", "code"),
    [
        ({"detail": "x", "code": "c", "retryable": True}, True, "body", "c"),
        ({"detail": PLACEMENT}, True, "body.detail", "seed_placement_failed"),
        ({"detail": FORWARDED}, True, "body.detail<json>.detail", "seed_placement_failed"),
        (
            {"detail": "Driver said " + json.dumps(PLACEMENT)},
            True,
            "body.detail<json>",
            "seed_placement_failed",
        ),
        # Not JSON at all: the raw text is searched the same way.
        ("upstream: " + json.dumps({"retryable": False}), False, "body<json>", None),
        ({"detail": "Instance health check failed"}, None, None, None),
        ({"detail": [{"loc": ["body", "x"], "msg": "bad", "type": "t"}]}, None, None, None),
        ({"detail": "a { brace that is not JSON {also not}"}, None, None, None),
    ],
)
def test_the_flag_and_code_are_found_where_the_orchestrator_puts_them(
    body: Any, retryable: bool | None, where: str | None, code: str | None
) -> None:
    fields = read_error_body(body)
    assert (fields.retryable, fields.retryable_at, fields.code) == (retryable, where, code)
    error = status_error(500, body)
    assert (error.retryable, error.retryable_at, error.code) == (retryable, where, code)


def test_the_first_flag_found_wins_so_an_outer_false_is_final() -> None:
    body = {"detail": FORWARDED, "retryable": False, "code": "create_failed"}
    error = status_error(500, body)
    assert (error.retryable, error.retryable_at, error.code) == (False, "body", "create_failed")
    assert not is_transient_provisioning_error(error)


def test_a_code_inside_detail_refines_the_error_class() -> None:
    error = status_error(404, {"detail": {"error": "env_not_found", "retryable": False}})
    assert isinstance(error, EnvNotFoundError)


def test_a_hostile_body_is_searched_within_bounds() -> None:
    # Thousands of unmatched braces, then a flag past the searched prefix: never found, quickly.
    body = {"detail": "{" * 50_000 + json.dumps({"retryable": True})}
    assert read_error_body(body).retryable is None
    deep: Any = {"retryable": True}
    for _ in range(20):
        deep = {"detail": deep}
    assert read_error_body(deep).retryable is None


# -- the classifier ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "for_any_call", "for_a_create"),
    [
        (APIConnectionError("refused", method="POST", url="u", request_id="r"), True, True),
        (status_error(500, {"detail": FORWARDED}), True, True),
        (status_error(400, {"detail": FORWARDED}), True, True),
        (status_error(400, {"detail": PLACEMENT}), True, True),
        (status_error(500, {"detail": "Instance health check failed"}), False, True),
        (status_error(500, {"detail": "internal"}), False, True),
        (status_error(501, {"detail": "not implemented"}), False, True),
        (status_error(429, {"detail": "burst cap"}), True, True),
        (status_error(408, {"detail": "slow"}), True, True),
        (status_error(503, {"detail": "x", "retryable": False}), False, False),
        (status_error(500, {"detail": {"error": "bad_image", "retryable": False}}), False, False),
        (status_error(500, {"detail": FORWARDED.replace("true", "false")}), False, False),
        (status_error(401, {"detail": "invalid API key"}), False, False),
        (status_error(404, {"detail": "env_key not found", "code": "env_not_found"}), False, False),
        (status_error(400, {"detail": "bad"}), False, False),
        (ValueError("not an API error"), False, False),
    ],
)
def test_transient_for_any_call_and_for_a_create(
    error: BaseException, for_any_call: bool, for_a_create: bool
) -> None:
    assert is_transient(error) is for_any_call
    assert is_transient_provisioning_error(error) is for_a_create


# Each entry of TRANSIENT_MESSAGES, as production sends it with no flag, on a status that
# would otherwise be permanent.
PINNED_MESSAGES = {
    "instance health check failed": {"detail": "Instance health check failed"},
    "too many in-flight": {"detail": "Too many in-flight instance creations for this team"},
}


def test_every_known_transient_message_is_pinned() -> None:
    assert set(PINNED_MESSAGES) == set(TRANSIENT_MESSAGES)


@pytest.mark.parametrize("message", sorted(PINNED_MESSAGES))
def test_a_known_transient_message_without_a_flag_is_transient(message: str) -> None:
    body = PINNED_MESSAGES[message]
    assert is_transient_provisioning_error(status_error(400, body))
    # An explicit flag still wins over the message.
    assert not is_transient_provisioning_error(status_error(400, {**body, "retryable": False}))
    # The messages are provisioning's last resort, not a rule for every call.
    assert not is_transient(status_error(400, body))


# -- the runtime uses the same classifier -----------------------------------------------------


def test_the_runtime_retries_a_safe_call_flagged_retryable_inside_detail() -> None:
    replies = Replies(httpx.Response(400, json={"detail": FORWARDED}), httpx.Response(200, json={}))
    raw = client(replies).request_raw("GET", "/v1/env/instances", cast_to=dict)
    assert (raw.status_code, raw.retries_taken, len(replies.requests)) == (200, 1, 2)


def test_the_runtime_does_not_retry_a_503_flagged_not_retryable() -> None:
    replies = Replies(
        httpx.Response(503, json={"detail": {"retryable": False}}), httpx.Response(200, json={})
    )
    with pytest.raises(InternalServerError) as info:
        client(replies).request("GET", "/v1/env/instances", cast_to=dict)
    assert (info.value.retryable, info.value.retryable_at) == (False, "body.detail")
    assert len(replies.requests) == 1


def test_the_runtime_does_not_retry_a_safe_get_by_a_provisioning_message() -> None:
    body = PINNED_MESSAGES["instance health check failed"]
    replies = Replies(httpx.Response(500, json=body), httpx.Response(200, json={}))
    with pytest.raises(InternalServerError):
        client(replies).request("GET", "/v1/env/instances", cast_to=dict)
    assert len(replies.requests) == 1


@pytest.mark.parametrize(("code", "cls"), [(400, BadRequestError), (401, AuthenticationError)])
def test_the_runtime_never_retries_an_unflagged_4xx(code: int, cls: type[APIStatusError]) -> None:
    replies = Replies(httpx.Response(code, json={"detail": "no"}), httpx.Response(200, json={}))
    with pytest.raises(cls):
        client(replies).request("GET", "/v1/env/instances", cast_to=dict)
    assert len(replies.requests) == 1
